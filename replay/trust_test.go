package replay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/sqlite"
)

// TestTrustMatrix: one row per claim the agent can forge that writ
// meters or observes (usage, tool calls, step result, an omitted field),
// each decided with the claim and without it, in SQLite and PostgreSQL.
// A claim never moves a decision from blocked to allowed, and every
// record replays equal (issue 31). The identity rows (actor, delegated
// user) are the credential's and tested with it.
func TestTrustMatrix(t *testing.T) {
	for _, store := range []struct {
		name string
		open func(t *testing.T) ledger.Store
	}{
		{"sqlite", func(t *testing.T) ledger.Store {
			st, err := sqlite.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"postgres", func(t *testing.T) ledger.Store { return openPostgres(t) }},
	} {
		t.Run(store.name, func(t *testing.T) {
			h := newHarnessOn(t, filepath.Join("testdata", "trust"), store.open(t))
			trustMatrix(t, h)
			if sum := replayTenant(t, h.store, "acme"); sum.Equal != sum.Records || sum.Records == 0 {
				t.Errorf("%d of %d records replayed equal", sum.Equal, sum.Records)
			}
		})
	}
}

// decision is what one row decided: allowed is a receipt safe to execute
// or a verdict that accepts; a refusal is not allowed.
type decision struct {
	allowed bool
	what    string
}

func trustMatrix(t *testing.T, h *harness) {
	ctx := context.Background()
	actor := writ.Actor{Type: writ.ActorAgent, ID: "agt_1"}
	n := 0
	update := func(session string, u *writ.Usage) *writ.CheckRequest {
		n++
		return &writ.CheckRequest{TenantID: "acme", Tool: "records.update", Arguments: map[string]any{"n": float64(n)}, Actor: actor,
			InputsRefs: &writ.InputsRefs{Session: session}, Usage: u}
	}
	check := func(req *writ.CheckRequest) decision {
		t.Helper()
		rc, err := h.eng.Check(ctx, req)
		if err != nil {
			return decision{false, "refused: " + err.Error()}
		}
		return decision{rc.SafeToExecute, fmt.Sprintf("%s %s %v", rc.DecisionID, rc.Outcome, rc.Reasons)}
	}
	run := 0
	// attempt starts a run of trust.flow, gets it to step (the draft
	// accepted on an observed call when step is submit), and submits a.
	attempt := func(step string, a *writ.AttemptRequest, observe bool) decision {
		t.Helper()
		run++
		id := fmt.Sprintf("run_%d", run)
		if _, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "trust.flow", RunID: id}); err != nil {
			t.Fatal(err)
		}
		if observe || step == "submit" {
			h.check(t, &writ.CheckRequest{TenantID: "acme", Tool: "open_simple_browser", Arguments: map[string]any{"url": "http://localhost:6006"}, Actor: actor,
				Workflow: &writ.WorkflowRef{RunID: id, StepID: "draft"}})
		}
		if step == "submit" {
			v, err := h.eng.SubmitAttempt(ctx, &writ.AttemptRequest{TenantID: "acme", RunID: id, StepID: "draft", Actor: actor, Result: map[string]any{"performed": true}})
			if err != nil || v.State != writ.VerdictAccepted {
				t.Fatalf("draft with an observed call = %+v, %v; want accepted", v, err)
			}
		}
		a.TenantID, a.RunID, a.StepID, a.Actor = "acme", id, step, actor
		v, err := h.eng.SubmitAttempt(ctx, a)
		if err != nil {
			return decision{false, "refused: " + err.Error()}
		}
		accepted := v.State == writ.VerdictAccepted || v.State == writ.VerdictAcceptedWithWarnings
		return decision{accepted, fmt.Sprintf("%s claimed %q %v", v.State, v.ClaimedCalls, v.Failed)}
	}

	// Two calls fill sess_a's budget of 2; a third is over it.
	for range 2 {
		if d := check(update("sess_a", nil)); !d.allowed {
			t.Fatalf("call within sess_a's budget: %s", d.what)
		}
	}
	blockedThird := update("sess_a", nil)
	rows := []struct {
		name                  string
		without, with         func() decision
		wantWithout, wantWith bool
		wantIn                string // in the decision with the claim
	}{
		{
			name:    "usage: a lower usage than writ counted",
			without: func() decision { return check(blockedThird) },
			with:    func() decision { return check(update("sess_a", &writ.Usage{ToolCalls: 1})) },
			wantIn:  "writ counted 3 in this session; the caller reported 1",
		},
		{
			name:    "usage: the blocked action re-sent with lower usage (must_not_retry)",
			without: func() decision { return check(blockedThird) },
			with: func() decision {
				again := *blockedThird
				again.Usage = &writ.Usage{}
				again.Scorecard = map[string]float64{"policy": 1}
				return check(&again)
			},
			wantIn: "budget_exceeded",
		},
		{
			name:    "usage: a higher usage than writ counted",
			without: func() decision { return check(update("sess_b", nil)) }, wantWithout: true,
			with:   func() decision { return check(update("sess_b", &writ.Usage{ToolCalls: 9})) },
			wantIn: "used 9",
		},
		{
			name:    "omitted field: usage left out over the budget",
			without: func() decision { return check(update("sess_a", &writ.Usage{ToolCalls: 3})) },
			with:    func() decision { return check(update("sess_a", nil)) },
			wantIn:  "goal_fail_terminal",
		},
		{
			name: "tool calls: a required call merely claimed",
			without: func() decision {
				return attempt("draft", &writ.AttemptRequest{Result: map[string]any{"performed": true}}, false)
			},
			with: func() decision {
				return attempt("draft", &writ.AttemptRequest{Result: map[string]any{"performed": true}, ToolCalls: []writ.ToolCallClaim{{Name: "open_simple_browser", Args: map[string]any{"url": "http://localhost:6006"}}}}, false)
			},
			wantIn: `claimed ["open_simple_browser"]`,
		},
		{
			name: "tool calls: a required call observed",
			without: func() decision {
				return attempt("draft", &writ.AttemptRequest{Result: map[string]any{"performed": true}}, true)
			},
			with: func() decision {
				return attempt("draft", &writ.AttemptRequest{Result: map[string]any{"performed": true}, ToolCalls: []writ.ToolCallClaim{{Name: "open_simple_browser", Args: map[string]any{"url": "http://localhost:6006"}}}}, true)
			},
			wantWithout: true, wantWith: true, wantIn: "claimed []",
		},
		{
			name: "step result: a mutating step's result claims success",
			without: func() decision {
				return attempt("submit", &writ.AttemptRequest{Result: map[string]any{"performed": false}}, false)
			},
			with: func() decision {
				return attempt("submit", &writ.AttemptRequest{Result: map[string]any{"performed": true, "success": true}}, false)
			},
			wantIn: "is mutating and has no verification contract",
		},
		{
			name: "omitted field: a browser_submit step without verification, performed: false",
			without: func() decision {
				return attempt("submit", &writ.AttemptRequest{Result: map[string]any{"performed": false}, ToolCalls: []writ.ToolCallClaim{{Name: "submit_form"}}}, false)
			},
			with: func() decision {
				return attempt("submit", &writ.AttemptRequest{Result: map[string]any{"performed": false}}, false)
			},
			wantIn: "browser_submit",
		},
	}
	for _, row := range rows {
		without, with := row.without(), row.with()
		if without.allowed != row.wantWithout || with.allowed != row.wantWith {
			t.Errorf("%s: without the claim allowed=%v (%s), with it allowed=%v (%s); want %v, %v", row.name, without.allowed, without.what, with.allowed, with.what, row.wantWithout, row.wantWith)
		}
		if !without.allowed && with.allowed {
			t.Errorf("%s: the claim moved a blocked decision to allowed (%s → %s)", row.name, without.what, with.what)
		}
		if !strings.Contains(with.what, row.wantIn) {
			t.Errorf("%s: with the claim: %s; want it to say %q", row.name, with.what, row.wantIn)
		}
	}
}
