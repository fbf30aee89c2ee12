package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// TestElicitedApproval: at a gate that allows it, the gateway asks the
// person at the client (MCP elicitation) to decide the approval; the
// answer is recorded as their approval decision and the call goes on
// (approved) or stays blocked (denied, declined, or a client that cannot
// be asked).
func TestElicitedApproval(t *testing.T) {
	for _, tc := range []struct {
		name, protocol string
		answer         *mcp.ElicitResult // nil: the client has no elicitation
		forwarded      bool
		approval       string // the approval request's state afterwards
	}{
		{"approved", protocols[0], &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "old file"}}, true, writ.ApprovalApproved},
		{"denied", protocols[0], &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "keep it"}}, false, writ.ApprovalDenied},
		{"declined", protocols[0], &mcp.ElicitResult{Action: "decline"}, false, writ.ApprovalPending},
		{"client cannot be asked", protocols[0], nil, false, writ.ApprovalPending},
		// The 2026-07-28 revision asks through input-required results,
		// which the gateway does not build: not asked.
		{"2026-07-28 session", protocols[1], &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "old file"}}, false, writ.ApprovalPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &files{}
			eng, st, pol := newEngine(t, packDir())
			cfg := &gateway.Config{Tenant: tenant, User: "owner@acme", Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs."}}}
			gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools, Gates: pol.Pack.Gates, Transport: up.connect})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(gw.Close)
			ct, sst := mcp.NewInMemoryTransports()
			ss, err := gw.Server().Connect(context.Background(), sst, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ss.Close() })
			opts := &mcp.ClientOptions{}
			asked := 0
			if tc.answer != nil {
				opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					if !strings.Contains(req.Params.Message, "owner@acme") || !strings.Contains(req.Params.Message, "fs.delete_file") {
						t.Errorf("elicitation message %q names neither the user nor the tool", req.Params.Message)
					}
					return tc.answer, nil
				}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: tc.protocol})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })

			res := call(t, cs, "fs.delete_file", map[string]any{"path": "/allowed/old.txt"})
			if forwarded := !res.IsError; forwarded != tc.forwarded {
				t.Fatalf("forwarded = %v (%q), want %v", forwarded, text(res), tc.forwarded)
			}
			if tc.answer != nil && tc.protocol == protocols[0] && asked != 1 {
				t.Errorf("asked %d times, want once", asked)
			}
			page, err := eng.Approvals(context.Background(), writ.ApprovalQuery{TenantID: tenant})
			if err != nil || len(page.Approvals) != 1 {
				t.Fatalf("approvals = %+v, %v", page, err)
			}
			a := page.Approvals[0]
			if a.State != tc.approval {
				t.Errorf("approval state = %s, want %s", a.State, tc.approval)
			}
			if tc.approval != writ.ApprovalPending && (a.Decision == nil || a.Decision.Approver != "owner@acme") {
				t.Errorf("approval decided by %+v, want owner@acme", a.Decision)
			}
			verifyLedger(t, &fixture{eng: eng, store: st, gw: gw, up: up})
		})
	}
}
