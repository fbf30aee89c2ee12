package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"testing"

	"github.com/writhq/writ"
)

// TestAttemptsFromAnotherKey: over HTTP, on both stores, a step attempt
// on a run started with one agent's key, sent with another agent's key
// that may not act for it (naming the run's agent or not), is refused
// with 403 problem+json and writes nothing: no record, no run event. The
// run's own key, and a key that may act for its agent, are taken (issue
// 31; engine.TestAttemptsFromTheRunsKey is the same at the engine).
func TestAttemptsFromAnotherKey(t *testing.T) {
	serverOnEachStore(t, func(t *testing.T, _ string, storeArgs []string) { testAttemptsFromAnotherKey(t, storeArgs) })
}

func testAttemptsFromAnotherKey(t *testing.T, storeArgs []string) {
	ctx := context.Background()
	key := func(subject, roles string, flags ...string) string {
		t.Helper()
		args := append([]string{"keys", "create", "--tenant", "acme", "--subject", subject, "--role", roles, "--json"}, storeArgs...)
		out, err := exec.Command(writBinary, append(args, flags...)...).Output()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("writ keys create: %v\n%s", err, ee.Stderr)
		}
		var k struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(out, &k); err != nil {
			t.Fatalf("writ keys create --json printed %s (%v)", out, err)
		}
		return k.Token
	}
	ui, other := key("agt_ui", "agent"), key("agt_other", "agent")
	orch := key("orch", "agent", "--actor-type", "SERVICE", "--acts-for", "AGENT:agt_ui")
	auditorTok := key("auditor_olga", "auditor")
	srv := startServerArgs(t, append([]string{"--pack", "../../examples/storybook"}, storeArgs...)...)
	auditor := clientFor(srv.url, auditorTok)
	if _, err := clientFor(srv.url, ui).StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_k",
		Context: map[string]any{"component": "Button", "ticket": "UI-7"}}); err != nil {
		t.Fatal(err)
	}
	state := func() (records, events int) {
		t.Helper()
		page, err := auditor.Records(ctx, writ.RecordQuery{TenantID: "acme", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		run, err := auditor.Run(ctx, "acme", "run_k")
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Records), len(run.History)
	}
	attempt := func(actor writ.Actor) *writ.AttemptRequest {
		return &writ.AttemptRequest{TenantID: "acme", RunID: "run_k", StepID: "implement", Actor: actor, Result: map[string]any{"diff_summary": "primary color"}}
	}
	records, events := state()

	// With the claim: agt_other's key, naming the run's agent or not.
	for _, tc := range []struct {
		name  string
		actor writ.Actor
		want  string
	}{
		{"naming no actor", writ.Actor{}, "may not act on it"},
		{"naming agt_ui", writ.Actor{Type: writ.ActorAgent, ID: "agt_ui"}, "actor mismatch"},
	} {
		body, err := json.Marshal(map[string]any{"actor": tc.actor, "result": map[string]any{"diff_summary": "primary color"}})
		if err != nil {
			t.Fatal(err)
		}
		if tc.actor.ID == "" {
			body = []byte(`{"result": {"diff_summary": "primary color"}}`)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.url+"/v1/runs/run_k/steps/implement/attempts?tenant_id=acme", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+other)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var problem struct {
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		err = json.NewDecoder(resp.Body).Decode(&problem)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "application/problem+json" || err != nil || problem.Status != 403 || !bytes.Contains([]byte(problem.Detail), []byte(tc.want)) {
			t.Errorf("attempt with agt_other's key %s = %d %s %+v (%v), want 403 problem+json naming %q", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), problem, err, tc.want)
		}
		if v, err := clientFor(srv.url, other).SubmitAttempt(ctx, attempt(tc.actor)); writ.ErrorCode(err) != writ.EFORBIDDEN {
			t.Errorf("client attempt with agt_other's key %s = %+v, %v; want forbidden", tc.name, v, err)
		}
	}
	if r, e := state(); r != records || e != events {
		t.Errorf("refused attempts wrote %d records and %d run events", r-records, e-events)
	}

	// Without it: the orchestrator acting for agt_ui is taken.
	v, err := clientFor(srv.url, orch).SubmitAttempt(ctx, attempt(writ.Actor{Type: writ.ActorAgent, ID: "agt_ui"}))
	if err != nil || v.State != writ.VerdictAccepted {
		t.Fatalf("the orchestrator's attempt = %+v, %v; want accepted", v, err)
	}
	sr, err := auditor.Record(ctx, "acme", v.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if a := sr.Record.Actor; a.ID != "agt_ui" || a.ActedBy == nil || a.ActedBy.ID != "orch" || a.Provenance != writ.ProvenanceAuthenticated {
		t.Errorf("verdict record actor = %+v, want agt_ui acted for by orch, authenticated", a)
	}
}
