package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
)

// idvUpstreamEnv, set in a child's environment, makes the test binary an
// MCP server over stdio with an identity check and a refund (the tools
// of examples/refund).
const idvUpstreamEnv = "WRIT_TEST_MCP_IDV_UPSTREAM"

// runTestIDVUpstream serves the identity check and the refund over stdio
// and exits, when the test binary was started as that upstream.
func runTestIDVUpstream() {
	if os.Getenv(idvUpstreamEnv) != "1" {
		return
	}
	type args struct {
		CustomerID string  `json:"customer_id"`
		OrderID    string  `json:"order_id,omitempty"`
		AmountINR  float64 `json:"amount_inr,omitempty"`
		Currency   string  `json:"currency,omitempty"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "test-idv", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "check_identity", Description: "Verify a customer's identity."}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return nil, map[string]any{"customer_id": a.CustomerID, "verified": true, "method": "otp"}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "issue_refund", Description: "Issue a refund."}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded " + a.OrderID}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestGatewayRemoteCapturesEvidence: writ gateway --server --listen in
// front of a real writ serve with API keys. The agent's calls are
// checked with its own key, but the evidence the identity check returns
// is stored with the gateway's own key: with the gateway role, the item
// is observed and the refund is allowed on it; without it, writ serve
// refuses the item (the agent's key could not store it either), the
// gateway says so, and the refund stays refused.
func TestGatewayRemoteCapturesEvidence(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join("..", "..", "examples", "refund")
	up := "      command: " + strconvQuote(self) + "\n      env: {" + idvUpstreamEnv + ": \"1\"}\n"
	config := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(config, []byte("upstreams:\n  - name: idv\n    prefix: idv.\n    stdio:\n"+up+"  - name: payments\n    prefix: payments.\n    stdio:\n"+up), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ownRoles string
		allowed  bool
	}{
		{"agent,gateway", true},
		{"agent,issuer", false},
	} {
		t.Run(tc.ownRoles, func(t *testing.T) {
			data := t.TempDir()
			agent, _ := keyFor(t, data, "acme", "agent-7", "agent")
			own, _ := keyFor(t, data, "acme", "the-gateway", tc.ownRoles)
			auditor, _ := keyFor(t, data, "acme", "audrey", "auditor")
			srv := startServer(t, data, pack)
			gp := startGateway(t, []string{"WRIT_API_KEY=" + own}, "--config", config, "--pack", pack, "--server", srv.url, "--listen", "127.0.0.1:0")
			ctx := context.Background()
			c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gp.url, HTTPClient: &http.Client{Transport: bearer{agent}}, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, gp.stderr)
			}
			defer cs.Close()
			callTool := func(name string, args map[string]any) *mcp.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("CallTool(%s): %v\n%s", name, err, gp.stderr)
				}
				return res
			}
			refund := map[string]any{"customer_id": "cus_77", "order_id": "ord_881", "amount_inr": 4200, "currency": "INR"}
			if res := callTool("payments.issue_refund", refund); !res.IsError || !strings.Contains(textOf(res), "missing_identity_verification") {
				t.Fatalf("refund before the identity check = %q, want refused (missing_identity_verification)", textOf(res))
			}
			if res := callTool("idv.check_identity", map[string]any{"customer_id": "cus_77"}); res.IsError {
				t.Fatalf("identity check = %q", textOf(res))
			}
			res := callTool("payments.issue_refund", refund)
			if !tc.allowed {
				if !res.IsError || !strings.Contains(textOf(res), "missing_identity_verification") {
					t.Errorf("refund with the gateway's key lacking the gateway role = %q, want refused", textOf(res))
				}
				if !strings.Contains(gp.stderr.String(), "could not be stored") || !strings.Contains(gp.stderr.String(), "no gateway role") {
					t.Errorf("the gateway did not say why nothing was captured:\n%s", gp.stderr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("refund after the identity check = %q\n%s", textOf(res), gp.stderr)
			}
			// The record (checked with the agent's key) cites the item the
			// gateway's key stored, observed.
			api := clientFor(srv.url, auditor)
			recordID, _ := res.Meta["io.github.writhq/record_id"].(string)
			rec, err := api.Record(ctx, "acme", recordID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Record.Actor.ID != "agent-7" || len(rec.Record.EvidenceRefs) != 1 {
				t.Fatalf("refund record: actor %s, evidence_refs %v; want agent-7 citing one item", rec.Record.Actor.ID, rec.Record.EvidenceRefs)
			}
			id, addr, _ := strings.Cut(strings.TrimPrefix(rec.Record.EvidenceRefs[0], "identity_verification:"), "#")
			se, err := api.Evidence(ctx, "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			if se.Provenance != writ.ProvenanceObserved || se.ContentAddress != addr || se.Item.Issuer != "the-gateway" || se.Observation == nil || se.Observation.Tool != "idv.check_identity" {
				t.Errorf("captured item = %+v, want observed, issued by the gateway's key, from idv.check_identity", se)
			}
		})
	}
}
