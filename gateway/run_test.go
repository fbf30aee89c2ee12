package gateway_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// TestCallsObservedForARunStep: a call made through the gateway with a
// run and step in its _meta counts as observed (and executed) for that
// step, so the step's contract, which wants the browser opened through
// writ, accepts the attempt. The storybook example's contract.
func TestCallsObservedForARunStep(t *testing.T) {
	ctx := context.Background()
	eng, st, pol := newEngine(t, filepath.Join("..", "examples", "storybook"))
	browser := func(ctx context.Context, u gateway.Upstream) (mcp.Transport, error) {
		s := mcp.NewServer(&mcp.Implementation{Name: "browser", Version: "1"}, nil)
		type args struct {
			URL string `json:"url"`
		}
		mcp.AddTool(s, &mcp.Tool{Name: "open_simple_browser", Description: "Open a URL."}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "opened " + a.URL}}}, nil, nil
		})
		ct, stt := mcp.NewInMemoryTransports()
		if _, err := s.Connect(ctx, stt, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "browser"}}}
	gw, err := newGateway(ctx, gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools, Transport: browser})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	f := &fixture{eng: eng, store: st, gw: gw}
	cs := f.client(t, protocols[1])

	run, err := eng.StartRun(ctx, &writ.StartRunRequest{TenantID: tenant, WorkflowID: "ui.component.change", Context: map[string]any{"component": "Button", "ticket": "UI-1"}})
	if err != nil {
		t.Fatal(err)
	}
	actor := writ.Actor{Type: writ.ActorAgent, ID: "mcp-agent"}
	if _, err := eng.SubmitAttempt(ctx, &writ.AttemptRequest{TenantID: tenant, RunID: run.RunID, StepID: "implement", Actor: actor, Result: map[string]any{"diff_summary": "Primary button recoloured."}}); err != nil {
		t.Fatal(err)
	}
	url := "http://localhost:6006/?path=/story/button--primary"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_simple_browser", Arguments: map[string]any{"url": url},
		Meta: mcp.Meta{gateway.MetaRunID: run.RunID, gateway.MetaStepID: "visual_check"}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool = %v, %v", res, err)
	}
	v, err := eng.SubmitAttempt(ctx, &writ.AttemptRequest{TenantID: tenant, RunID: run.RunID, StepID: "visual_check", Actor: actor,
		Result: map[string]any{
			"visualVerification": map[string]any{"performed": true},
			"storybookInstance":  map[string]any{"url": url},
		},
		ToolCalls: []writ.ToolCallClaim{{Name: "open_simple_browser", Args: map[string]any{"url": url}}}})
	if err != nil {
		t.Fatal(err)
	}
	if v.State != writ.VerdictAccepted {
		var failed []string
		for _, c := range v.Checks {
			if !c.Passed {
				failed = append(failed, c.Kind+" "+c.Target+": "+c.Detail)
			}
		}
		t.Errorf("verdict = %s (%s), want accepted: the call through the gateway was observed", v.State, strings.Join(failed, ", "))
	}
}
