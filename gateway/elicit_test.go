package gateway_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
	"github.com/writhq/writ/pack"
)

// TestElicitedApproval: at a gate that allows it, the gateway asks the
// person at the client (MCP elicitation) to decide the approval; the
// answer is recorded as their approval decision and the call goes on
// (approved) or stays blocked (denied, declined, or a client that cannot
// be asked).
func TestElicitedApproval(t *testing.T) {
	type answer struct {
		name      string
		result    *mcp.ElicitResult // nil: the client has no elicitation
		forwarded bool
		approval  string // the approval request's state afterwards
	}
	answers := []answer{
		{"approved", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "old file"}}, true, writ.ApprovalApproved},
		{"denied", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "keep it"}}, false, writ.ApprovalDenied},
		{"declined", &mcp.ElicitResult{Action: "decline"}, false, writ.ApprovalPending},
		{"no decision", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "maybe", "reason": "?"}}, false, writ.ApprovalPending},
		{"client cannot be asked", nil, false, writ.ApprovalPending},
	}
	type tcase struct {
		answer
		name, protocol string
	}
	var cases []tcase
	// 2025-11-25 asks with elicitation/create; 2026-07-28 with an
	// input-required result the SDK's client fulfils and retries.
	for _, p := range protocols {
		for _, a := range answers {
			if a.name == "no decision" && p == protocols[1] {
				continue // the SDK's client checks the answer against the schema first
			}
			cases = append(cases, tcase{a, p + "/" + a.name, p})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := &files{}
			eng, st, pol := newEngine(t, packDir())
			cfg := &gateway.Config{Tenant: tenant, User: "owner@acme", Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs."}}}
			redaction := []*pack.RedactionRule{{ID: "secret", Fields: []string{"content"}}}
			gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools, Gates: pol.Pack.Gates, Redaction: redaction, Transport: up.connect})
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
			if tc.result != nil {
				opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					msg := req.Params.Message
					for _, want := range []string{"owner@acme", "fs.delete_file", "Why: Deleting /allowed/old.txt needs a person's approval.", `Arguments: {"content":"[redacted:secret]","path":"/allowed/old.txt"}`} {
						if !strings.Contains(msg, want) {
							t.Errorf("elicitation message %q lacks %q", msg, want)
						}
					}
					if strings.Contains(msg, "s3cr3t") {
						t.Errorf("elicitation message %q shows a redacted argument", msg)
					}
					return tc.result, nil
				}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: tc.protocol})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })

			res := call(t, cs, "fs.delete_file", map[string]any{"path": "/allowed/old.txt", "content": "s3cr3t"})
			if forwarded := !res.IsError; forwarded != tc.forwarded {
				t.Fatalf("forwarded = %v (%q), want %v", forwarded, text(res), tc.forwarded)
			}
			if tc.result != nil && asked != 1 {
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

// TestInputRequiredState: on 2026-07-28 the approval question comes back
// as an input-required result with a signed, single-use requestState.
// A state that was altered, that is presented with another call, or that
// was answered already is refused: nothing is decided or forwarded. Only
// the state as issued, with this call, records the user's answer.
func TestInputRequiredState(t *testing.T) {
	ctx := context.Background()
	up := &files{}
	eng, st, pol := newEngine(t, packDir())
	cfg := &gateway.Config{Tenant: tenant, User: "owner@acme", Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs."}}}
	gw, err := newGateway(ctx, gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools, Gates: pol.Pack.Gates, Transport: up.connect})
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
	// The retry loop is driven by hand: the SDK's own would answer at once.
	opts := &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("the gateway sent elicitation/create on a 2026-07-28 session")
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocols[1]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	args := map[string]any{"path": "/allowed/old.txt"}
	first := call(t, cs, "fs.delete_file", args)
	q, _ := first.InputRequests["io.github.writhq/approval"].(*mcp.ElicitParams)
	if !first.NeedsInput() || q == nil || first.RequestState == "" || len(first.Content) != 0 {
		t.Fatalf("first call: NeedsInput %v, input requests %+v, state %q, content %q; want the approval question", first.NeedsInput(), first.InputRequests, first.RequestState, text(first))
	}
	if !strings.Contains(q.Message, "owner@acme") || !strings.Contains(q.Message, "fs.delete_file") {
		t.Errorf("question %q names neither the user nor the tool", q.Message)
	}
	approve := mcp.InputResponseMap{"io.github.writhq/approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "old file"}}}
	body, sig, _ := strings.Cut(first.RequestState, ".")
	flip := func(s string) string {
		if s[0] == 'A' {
			return "B" + s[1:]
		}
		return "A" + s[1:]
	}
	// spare flips an unused low bit of the last character of the base64
	// text of a 32-byte signature, which lenient decoding ignores.
	spare := func(s string) string {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		return s[:len(s)-1] + string(alphabet[strings.IndexByte(alphabet, s[len(s)-1])^1])
	}
	retry := func(args map[string]any, state string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.delete_file", Arguments: args, InputResponses: approve, RequestState: state})
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		return res
	}
	pending := func(want string) {
		t.Helper()
		page, err := eng.Approvals(ctx, writ.ApprovalQuery{TenantID: tenant})
		if err != nil || len(page.Approvals) != 1 {
			t.Fatalf("approvals = %+v, %v", page, err)
		}
		if a := page.Approvals[0]; a.State != want || (want == writ.ApprovalApproved && (a.Decision == nil || a.Decision.Approver != "owner@acme")) {
			t.Fatalf("approval = %s by %+v, want %s", a.State, a.Decision, want)
		}
	}
	for _, tc := range []struct {
		name, state string
		args        map[string]any
		refusal     string
	}{
		{"altered state", flip(body) + "." + sig, args, "altered"},
		{"forged signature", body + "." + flip(sig), args, "altered"},
		{"not a state", "approve-please", args, "altered"},
		{"line break in the state", body[:8] + "\n" + body[8:] + "." + sig, args, "altered"},
		{"spare bits set", body + "." + spare(sig), args, "altered"},
		{"another call", first.RequestState, map[string]any{"path": "/allowed/other.txt"}, "another call"},
	} {
		res := retry(tc.args, tc.state)
		if !res.IsError || res.NeedsInput() || !strings.Contains(text(res), "requestState refused") || !strings.Contains(text(res), tc.refusal) {
			t.Errorf("%s: %q, want a refusal saying %q", tc.name, text(res), tc.refusal)
		}
		pending(writ.ApprovalPending)
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("%d calls forwarded before the answer", n)
	}

	if res := retry(args, first.RequestState); res.IsError || res.NeedsInput() {
		t.Fatalf("answered retry: %q (needs input %v), want the tool's result", text(res), res.NeedsInput())
	}
	pending(writ.ApprovalApproved)
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("%d calls forwarded, want 1", n)
	}
	if res := retry(args, first.RequestState); !res.IsError || !strings.Contains(text(res), "answered already") {
		t.Errorf("replayed state: %q, want a refusal", text(res))
	}
	if n := up.calls.Load(); n != 1 {
		t.Errorf("%d calls forwarded after the replay, want 1", n)
	}
	verifyLedger(t, &fixture{eng: eng, store: st, gw: gw, up: up})
}

// TestWarnsWhenUserIsActor: a configured user who is also the actor (or
// its delegated user) could never approve its own calls; the gateway
// warns when it starts.
func TestWarnsWhenUserIsActor(t *testing.T) {
	for _, actor := range []*gateway.ActorConfig{{ID: "owner@acme"}, {ID: "agent", DelegatedUserID: "owner@acme"}, {ID: "agent"}} {
		up := &files{}
		eng, _, pol := newEngine(t, packDir())
		var logs bytes.Buffer
		cfg := &gateway.Config{Tenant: tenant, User: "owner@acme", Actor: actor, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs."}}}
		gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools, Gates: pol.Pack.Gates, Transport: up.connect, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		gw.Close()
		warned := strings.Contains(logs.String(), "the configuration's user is its actor")
		if want := actor.ID == "owner@acme" || actor.DelegatedUserID == "owner@acme"; warned != want {
			t.Errorf("actor %+v: warned = %v, want %v\n%s", actor, warned, want, logs.String())
		}
	}
}
