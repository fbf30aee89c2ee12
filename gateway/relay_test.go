package gateway_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// asker is an upstream whose tools ask their client something mid-call:
// confirm asks the user (form elicitation), summarize asks the model
// (sampling). Both ask through input requests, which the SDK puts as an
// input-required result on 2026-07-28 and as a request of the server's
// own (elicitation/create, sampling/createMessage) on older revisions.
type asker struct{ revisions []string }

func (a asker) connect(ctx context.Context, _ gateway.Upstream) (mcp.Transport, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: a.revisions})
	s.AddTool(&mcp.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["q"].(*mcp.ElicitResult); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("confirmed: %s %v", r.Action, r.Content["name"])}}}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "Which name?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []any{"name"},
		}}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "summarize", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["s"].(*mcp.CreateMessageWithToolsResult); ok && len(r.Content) == 1 {
			t, _ := r.Content[0].(*mcp.TextContent)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled: " + t.Text}}}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"s": &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Summarize."}}}}}}, nil
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct, nil
}

// TestRelayedRequests: an upstream's question for the user and its
// sampling request, mid-call, reach the agent's client and the answer
// goes back, whichever revision the upstream speaks, when the agent's
// session is on 2025-11-25 and its client accepts them. On 2026-07-28
// agent sessions, or a client without the capability, they are refused:
// the upstream's call fails, and the agent's client is not asked. The
// answers are not approvals: no approval request exists afterwards.
func TestRelayedRequests(t *testing.T) {
	for _, upRev := range protocols {
		for _, agentRev := range protocols {
			for _, capable := range []bool{true, false} {
				t.Run(fmt.Sprintf("upstream %s, agent %s, capable %v", upRev, agentRev, capable), func(t *testing.T) {
					ctx := context.Background()
					eng, st, pol := newEngine(t, packDir())
					cfg := &gateway.Config{Tenant: tenant, User: "owner@acme", Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "asker", Prefix: "ask."}}}
					gw, err := newGateway(ctx, gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools, Gates: pol.Pack.Gates, Transport: asker{[]string{upRev}}.connect})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(gw.Close)
					ct, sst := mcp.NewInMemoryTransports()
					ss, err := gw.Server().Connect(ctx, sst, nil)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { ss.Close() })
					asked, sampled := 0, 0
					opts := &mcp.ClientOptions{}
					if capable {
						opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
							asked++
							if !strings.Contains(req.Params.Message, `The tool server "asker" asks`) || !strings.Contains(req.Params.Message, "Which name?") {
								t.Errorf("relayed message %q does not say the tool server asks", req.Params.Message)
							}
							return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
						}
						opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
							sampled++
							return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "short"}}, nil
						}
					}
					cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: agentRev})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { cs.Close() })

					relayed := capable && agentRev == protocols[0]
					confirm := call(t, cs, "ask.confirm", map[string]any{})
					summary := call(t, cs, "ask.summarize", map[string]any{})
					if relayed {
						if confirm.IsError || text(confirm) != "confirmed: accept ada" || asked != 1 {
							t.Errorf("confirm = %q (asked %d), want the relayed answer", text(confirm), asked)
						}
						if summary.IsError || text(summary) != "sampled: short" || sampled != 1 {
							t.Errorf("summarize = %q (sampled %d), want the relayed completion", text(summary), sampled)
						}
					} else {
						if !confirm.IsError || !summary.IsError || asked+sampled != 0 {
							t.Errorf("confirm = %q, summarize = %q (asked %d, sampled %d); want both failed and nothing asked", text(confirm), text(summary), asked, sampled)
						}
						// The upstream's session survives a refused relay.
						if again := call(t, cs, "ask.confirm", map[string]any{}); !strings.Contains(text(again), "refused") {
							t.Errorf("confirm again = %q, want the same refusal", text(again))
						}
					}
					if page, err := eng.Approvals(ctx, writ.ApprovalQuery{TenantID: tenant}); err != nil || len(page.Approvals) != 0 {
						t.Errorf("approvals = %+v, %v; a relayed answer approves nothing", page, err)
					}
					verifyLedger(t, &fixture{eng: eng, store: st, gw: gw, up: &files{}})
				})
			}
		}
	}
}

// TestNPMRelay: the real @modelcontextprotocol/server-everything asks
// its client (the gateway) a question mid-call; the gateway relays it to
// a 2025-11-25 agent session and the answer back. Skips without
// WRIT_MCP_NODE_MODULES, like TestNPMServers.
func TestNPMRelay(t *testing.T) {
	mods := os.Getenv("WRIT_MCP_NODE_MODULES")
	if mods == "" {
		t.Skip("WRIT_MCP_NODE_MODULES is not set (npm ci in gateway/e2e, then point it at node_modules)")
	}
	ctx := context.Background()
	server := filepath.Join(mods, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{
		{Name: "everything", Prefix: "ev.", Stdio: &gateway.StdioCommand{Command: "node", Args: []string{server, "stdio"}}},
	}}
	eng, st, pol := newEngine(t, filepath.Join("e2e", "pack"))
	gw, err := newGateway(ctx, gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	ct, sst := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(ctx, sst, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	asked := 0
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		if !strings.Contains(req.Params.Message, `The tool server "everything" asks`) {
			t.Errorf("relayed message %q does not say which tool server asks", req.Params.Message)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace"}}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocols[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res := call(t, cs, "ev.trigger-elicitation-request", map[string]any{})
	if res.IsError || asked != 1 || !strings.Contains(text(res), "Name: Ada Lovelace") {
		t.Errorf("trigger-elicitation-request = %q (asked %d), want the relayed answer", text(res), asked)
	}
	verifyLedger(t, &fixture{eng: eng, store: st, gw: gw, up: &files{}})
}
