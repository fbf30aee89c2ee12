package gateway

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
)

// What the fuzz tests of package gateway_test (fuzz_test.go) reach
// inside the package: they run on the gateways and upstreams its other
// tests build.

// SealState is sealState.
func (g *Gateway) SealState(creq *writ.CheckRequest, approvalID, decisionID string) (string, error) {
	return g.sealState(creq, approvalID, decisionID)
}

// OpenState is openState; it returns the ids the state was sealed with.
func (g *Gateway) OpenState(creq *writ.CheckRequest, state string) (approvalID, decisionID string, err error) {
	st, err := g.openState(creq, state)
	if err != nil {
		return "", "", err
	}
	return st.ApprovalID, st.DecisionID, nil
}

// CheckRequest is what call makes of a tools/call of the tool name
// before it decides: the check request and the arguments to forward,
// or the refusal. An unknown tool is an error too.
func (g *Gateway) CheckRequest(name string, req *mcp.CallToolRequest, callID string) (*writ.CheckRequest, json.RawMessage, error) {
	r := g.route(name)
	if r == nil {
		return nil, nil, fmt.Errorf("unknown tool %q", name)
	}
	caller, err := g.caller(req)
	if err != nil {
		return nil, nil, err
	}
	return checkRequest(r, caller, req.Params, callID)
}

var (
	UpstreamMeta    = upstreamMeta
	ReservedMeta    = reservedMeta
	DecodeForSchema = decodeForSchema
)

// CallTimeoutOf and ConnectTimeoutOf are the time limits the gateway
// applies to u.
func CallTimeoutOf(u Upstream) time.Duration    { return u.callTimeout() }
func ConnectTimeoutOf(u Upstream) time.Duration { return u.connectTimeout() }

// SetDrainTime sets how long a stdio session whose input ended waits for
// the answers under way, and returns a func that restores it.
func SetDrainTime(d time.Duration) func() {
	old := drainTime
	drainTime = d
	return func() { drainTime = old }
}
