package engine_test

import (
	"context"
	"testing"

	"github.com/writhq/writ"
)

// TestAttemptsFromTheRunsKey: a run started with an API key takes step
// attempts only from that key, another key of its principal, or a key
// that may act for it (issue 31); another agent's key is refused, and
// nothing is written. The run says who started it, and the verdict's
// record names the attempt's authenticated actor.
func TestAttemptsFromTheRunsKey(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("storybook"))
	ui := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_ui", Subject: "agt_ui", Roles: []writ.Role{writ.RoleAgent}})
	other := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_other", Subject: "agt_other", Roles: []writ.Role{writ.RoleAgent}})
	orch := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_orch", Subject: "orch", ActorType: writ.ActorService, ActsFor: []string{"AGENT:agt_ui"}, Roles: []writ.Role{writ.RoleAgent}})
	r, err := h.eng.StartRun(ui, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_k", Context: map[string]any{"component": "Button", "ticket": "UI-7"}})
	if err != nil {
		t.Fatal(err)
	}
	if by := r.StartedBy; by == nil || by.ID != "agt_ui" || by.KeyID != "key_ui" || by.Provenance != writ.ProvenanceAuthenticated {
		t.Fatalf("run started_by = %+v, want agt_ui with key_ui, authenticated", by)
	}
	implement := func() *writ.AttemptRequest {
		req := attemptReq("run_k", "implement", map[string]any{"diff_summary": "primary color"})
		req.Actor = writ.Actor{}
		return req
	}
	n := h.count(t, "acme")
	// With the claim (another agent's key, naming the run's agent or not): refused.
	if _, err := h.eng.SubmitAttempt(other, implement()); writ.ErrorCode(err) != writ.EFORBIDDEN {
		t.Errorf("attempt with another agent's key = %v, want forbidden", err)
	}
	forged := implement()
	forged.Actor = writ.Actor{Type: writ.ActorAgent, ID: "agt_ui"}
	if _, err := h.eng.SubmitAttempt(other, forged); writ.ErrorCode(err) != writ.EFORBIDDEN {
		t.Errorf("attempt with another agent's key naming agt_ui = %v, want forbidden", err)
	}
	if got := h.count(t, "acme"); got != n {
		t.Errorf("refused attempts wrote %d records", got-n)
	}
	run, err := h.eng.Run(ctx, "acme", "run_k")
	if err != nil || len(run.History) != 1 {
		t.Fatalf("run after refused attempts = %+v, %v; want its start only", run, err)
	}
	// Without it: the orchestrator acting for agt_ui is taken.
	acted := implement()
	acted.Actor = writ.Actor{Type: writ.ActorAgent, ID: "agt_ui"}
	v, err := h.eng.SubmitAttempt(orch, acted)
	if err != nil || v.State != writ.VerdictAccepted {
		t.Fatalf("the orchestrator's attempt = %+v, %v; want accepted", v, err)
	}
	sr, err := h.eng.Record(ctx, "acme", v.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if a := sr.Record.Actor; a.ID != "agt_ui" || a.KeyID != "key_orch" || a.ActedBy == nil || a.ActedBy.ID != "orch" || a.Provenance != writ.ProvenanceAuthenticated {
		t.Errorf("verdict record actor = %+v, want agt_ui acted for by orch with key_orch", a)
	}
}
