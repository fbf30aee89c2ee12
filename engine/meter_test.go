package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/policy"
)

// TestMeteredToolCalls: the refund spec's tool_calls budget (20) counts
// the checks writ allowed in the session, whatever usage the caller
// sends; the caller's figure can raise the count, never lower it, and the
// record keeps both (issue 31).
func TestMeteredToolCalls(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	check := func(req *writ.CheckRequest) *writ.Receipt {
		t.Helper()
		rc, err := h.eng.Check(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	// One customer per refund, so that the velocity rule stays quiet.
	session := func(n int, sess string, u *writ.Usage) *writ.CheckRequest {
		verifyCustomers(t, h.eng, "acme", exampleClock, fmt.Sprintf("cus_%s_%d", sess, n))
		req := refund(t, "acme", fmt.Sprintf("cus_%s_%d", sess, n), n, exampleClock)
		req.IdempotencyKey = fmt.Sprintf("ik_%s_%d", sess, n)
		req.InputsRefs.Session = sess
		req.Usage = u
		return req
	}
	for n := 1; n <= 20; n++ {
		if rc := check(session(n, "sess_a", nil)); rc.Outcome != writ.OutcomeAllow {
			t.Fatalf("refund %d of sess_a without usage = %s %+v, want allow (within the budget of 20)", n, rc.Outcome, rc.Reasons)
		}
	}
	for i, tc := range []struct {
		name  string
		usage *writ.Usage
	}{
		{"usage omitted", nil},
		{"usage zero", &writ.Usage{}},
		{"usage below writ's count", &writ.Usage{ToolCalls: 3}},
		{"usage above writ's count", &writ.Usage{ToolCalls: 40}},
	} {
		// Each its own refund: the same one again would be the blocked
		// action, answered under must_not_retry.
		rc := check(session(21+i, "sess_a", tc.usage))
		if rc.SafeToExecute || rc.Outcome != writ.OutcomeGoalFailTerminal || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "budget_exceeded" {
			t.Errorf("21st refund of sess_a, %s = %s %+v, want goal_fail_terminal budget_exceeded", tc.name, rc.Outcome, rc.Reasons)
			continue
		}
		rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
		if err != nil {
			t.Fatal(err)
		}
		m := rec.Record.MeteredUsage
		if m == nil || m.ToolCalls != 21 || m.Provenance != writ.ProvenanceObserved {
			t.Errorf("21st refund of sess_a, %s: metered_usage = %+v, want 21 observed", tc.name, m)
		}
		if got, want := rec.Record.BudgetUsage, tc.usage; (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("21st refund of sess_a, %s: budget_usage = %+v, want the caller's %+v", tc.name, got, want)
		}
		want := "writ counted 21 in this session"
		if !strings.Contains(rc.Reasons[0].Message, want) {
			t.Errorf("21st refund of sess_a, %s: reason %q, want it to say %q", tc.name, rc.Reasons[0].Message, want)
		}
	}
	// Another session has its own count; there the caller's figure can
	// still exceed the budget on its own.
	if rc := check(session(1, "sess_b", nil)); rc.Outcome != writ.OutcomeAllow {
		t.Errorf("first refund of sess_b = %s %+v, want allow", rc.Outcome, rc.Reasons)
	}
	if rc := check(session(2, "sess_b", &writ.Usage{ToolCalls: 21})); rc.Outcome != writ.OutcomeGoalFailTerminal {
		t.Errorf("refund of sess_b claiming 21 calls = %s, want goal_fail_terminal (a claim can raise the count)", rc.Outcome)
	}
	// Blocked checks are not tool calls writ allowed: sess_b counts 1.
	rc := check(session(3, "sess_b", nil))
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != writ.OutcomeAllow || rec.Record.MeteredUsage == nil || rec.Record.MeteredUsage.ToolCalls != 2 {
		t.Errorf("third refund of sess_b = %s, metered %+v; want allow with 2 tool calls counted", rc.Outcome, rec.Record.MeteredUsage)
	}
	if hv := rec.Record.History; len(hv) != 2 || hv[1].Name != policy.MeterToolCalls || hv[1].Group != "sess_b" || hv[1].Value != 1 {
		t.Errorf("third refund of sess_b pins history %+v, want %s = 1 for sess_b", hv, policy.MeterToolCalls)
	}
	replayAll(t, h, "acme")
}

// refundWithActorBudget is the refund example with an actor_tool_calls
// budget of limit over 24h beside its session budget.
func refundWithActorBudget(t *testing.T, limit int) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "specs", "refund-execute.yaml")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(b), "  tool_calls: 20\n", fmt.Sprintf("  tool_calls: 20\n  actor_tool_calls: %d\n  actor_window: 24h\n", limit), 1)
	if out == string(b) {
		t.Fatal("the refund spec has no tool_calls budget to extend")
	}
	if err := os.WriteFile(spec, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSessionHole: no omitted or renamed session moves a check from
// blocked to allowed. A check with a tool_calls budget that names no
// session and no run is refused (budget_unmetered) rather than counted
// on the caller's figure; an actor_tool_calls budget counts the actor's
// allowed checks whatever sessions they named, so a fresh session name
// resets nothing it counts (issue 31).
func TestSessionHole(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, refundWithActorBudget(t, 3))
	check := func(req *writ.CheckRequest) (*writ.Receipt, *writ.Record) {
		t.Helper()
		rc, err := h.eng.Check(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
		if err != nil {
			t.Fatal(err)
		}
		return rc, &rec.Record
	}
	n := 0
	in := func(sess string) *writ.CheckRequest {
		n++
		verifyCustomers(t, h.eng, "acme", exampleClock, fmt.Sprintf("cus_%d", n))
		req := refund(t, "acme", fmt.Sprintf("cus_%d", n), n, exampleClock)
		req.InputsRefs.Session = sess
		return req
	}

	// Omitted: no session, no run.
	rc, rec := check(in(""))
	if rc.SafeToExecute || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "budget_unmetered" || len(rc.SafeNextSteps) == 0 || rc.SafeNextSteps[0].Code != "NAME_SESSION" {
		t.Errorf("check with no session = %s %+v %+v, want blocked: budget_unmetered, NAME_SESSION", rc.Outcome, rc.Reasons, rc.SafeNextSteps)
	}
	if !slices.ContainsFunc(rec.History, func(v writ.HistoryValue) bool { return v.Name == policy.MeterNoSession }) {
		t.Errorf("record of the check with no session pins %+v, want %s", rec.History, policy.MeterNoSession)
	}
	// Named: three fresh sessions, one check each; the actor's budget of
	// 3 counts all of them, and the fourth, in a fresh session again, is
	// refused.
	for i := 1; i <= 3; i++ {
		rc, rec := check(in(fmt.Sprintf("sess_fresh_%d", i)))
		if !rc.SafeToExecute {
			t.Fatalf("check %d in a fresh session = %s %+v, want allow", i, rc.Outcome, rc.Reasons)
		}
		if m := rec.MeteredUsage; m == nil || m.ActorToolCalls != int64(i) || m.ToolCalls != 1 || m.Provenance != writ.ProvenanceObserved {
			t.Errorf("check %d: metered_usage = %+v, want %d for the actor and 1 in the session, observed", i, m, i)
		}
	}
	rc, rec = check(in("sess_fresh_4"))
	if rc.SafeToExecute || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "budget_exceeded" || !strings.Contains(rc.Reasons[0].Message, "Budget actor_tool_calls exceeded: used 4, allowed 3.") {
		t.Errorf("fourth check in a fresh session = %s %+v, want blocked: actor_tool_calls exceeded", rc.Outcome, rc.Reasons)
	}
	if m := rec.MeteredUsage; m == nil || m.ActorToolCalls != 4 {
		t.Errorf("fourth check: metered_usage = %+v, want 4 for the actor", m)
	}
	// Neither a claimed usage of zero nor leaving the session out again
	// lets it through; another actor has its own count.
	req := in("sess_fresh_5")
	req.Usage = &writ.Usage{}
	if rc, _ := check(req); rc.SafeToExecute {
		t.Errorf("fifth check claiming no usage = %s, want blocked", rc.Outcome)
	}
	if rc, _ := check(in("")); rc.SafeToExecute {
		t.Errorf("check with no session after the budget = %s, want blocked", rc.Outcome)
	}
	req = in("sess_fresh_6")
	req.Actor.ID = "agt_other"
	if rc, _ := check(req); !rc.SafeToExecute {
		t.Errorf("another actor's first check = %s %+v, want allow", rc.Outcome, rc.Reasons)
	}
	replayAll(t, h, "acme")
}
