package engine_test

import (
	"context"
	"fmt"
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
