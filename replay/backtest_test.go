package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/replay"
)

// refundHistory records refunds of the given amounts, then a high-value
// refund that asks for approval, its approval, and its redemption. It
// returns the record ids of the amounts, in order.
func refundHistory(t *testing.T, h *harness, amounts ...float64) []string {
	t.Helper()
	var ids []string
	customers := []string{"customer:cus_77"}
	for i := range amounts {
		customers = append(customers, fmt.Sprintf("customer:cus_%d", i))
	}
	h.verify(t, customers...)
	for i, a := range amounts {
		req := refund(t, "refund-allow")
		req.IdempotencyKey = ""
		// One customer each: the example allows 3 refunds per customer a day.
		req.SubjectIDs = []string{fmt.Sprintf("customer:cus_%d", i), "order:ord_881"}
		req.Evidence[0] = writ.Evidence{Kind: "identity_verification", ID: "idv_" + req.SubjectIDs[0]}
		req.Arguments["amount_inr"], req.Outputs["refund_amount_inr"] = a, a
		ids = append(ids, h.check(t, req).Metadata.RecordID)
		h.clk.Add(time.Minute)
	}
	req := refund(t, "refund-high-value-human-review")
	req.IdempotencyKey = ""
	req.Evidence[0] = writ.Evidence{Kind: "identity_verification", ID: "idv_customer:cus_77"}
	rc := h.check(t, req)
	h.clk.Add(time.Minute)
	if _, err := h.eng.DecideApproval(context.Background(), &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: rc.Metadata.ApprovalIDs[0],
		Decision: writ.ApprovalApproved, Approver: "fin_lead_77", Reason: "a loyal customer"}); err != nil {
		t.Fatal(err)
	}
	h.clk.Add(time.Minute)
	req.ApprovalIDs = rc.Metadata.ApprovalIDs
	if rc := h.check(t, req); rc.Outcome != writ.OutcomeAllow {
		t.Fatalf("redeeming check = %s, want allow", rc.Outcome)
	}
	return ids
}

// lowerThreshold is examples/refund with the approval threshold of
// R_HIGH_VALUE_REQUIRES_APPROVAL lowered from 10,000 to 5,000 INR.
func lowerThreshold(t *testing.T) string {
	return copyPack(t, example("refund"), "policies/returns.yaml", "when: args.amount_inr > 10000", "when: args.amount_inr > 5000")
}

func transitions(rep *replay.BacktestReport) map[string]*replay.Transition {
	out := map[string]*replay.Transition{}
	for _, tr := range rep.Transitions {
		out[tr.From+" → "+tr.To] = tr
	}
	return out
}

// TestBacktestLowerApprovalThreshold: refunds between 5,000 and 10,000 INR
// that were allowed would now need approval, and the report says which
// rule is responsible. The redeemed approval still holds under the
// candidate (same bundle version, same binding).
func TestBacktestLowerApprovalThreshold(t *testing.T) {
	h := newHarness(t, example("refund"))
	ids := refundHistory(t, h, 4200, 6000, 7500, 9999)
	rep, err := replay.Backtest(context.Background(), h.store, replay.BacktestOptions{TenantID: "acme", Candidate: compile(t, lowerThreshold(t))})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	// Besides the evidence records (skipped: they decide nothing).
	if rep.Records != 7+h.evidence || rep.Decided != 6 || rep.Changed != 3 || rep.Skipped[replay.KindApprovalDecision] != 1 || rep.Skipped[replay.KindEvidence] != h.evidence || len(rep.Findings) != 0 || rep.Excluded != 0 {
		t.Fatalf("report = %s\nwant 7 records, 6 decided, 3 changed, 1 approval decision skipped, no findings, besides %d evidence records skipped", b, h.evidence)
	}
	tr := transitions(rep)
	up := tr["allow → replan_required"]
	if up == nil || up.Count != 3 || !slices.Equal(up.Examples, ids[1:]) {
		t.Fatalf("allow → replan_required = %+v, want the 6,000, 7,500 and 9,999 INR refunds %v\n%s", up, ids[1:], b)
	}
	if want := map[string]int{"POLICY_RETURNS_V1@1.0.0:R_HIGH_VALUE_REQUIRES_APPROVAL": 3}; !maps.Equal(up.RulesFired, want) || len(up.RulesCleared) != 0 {
		t.Errorf("rules of allow → replan_required: fired %v cleared %v, want fired %v", up.RulesFired, up.RulesCleared, want)
	}
	if same := tr["allow → allow"]; same == nil || same.Count != 2 || same.Examples[0] != ids[0] || same.RulesFired != nil {
		t.Errorf("allow → allow = %+v, want the 4,200 INR refund and the redeemed one", same)
	}
	if same := tr["replan_required → replan_required"]; same == nil || same.Count != 1 {
		t.Errorf("replan_required → replan_required = %+v, want the check that asked for approval", same)
	}
	if rep.Transitions[0] != up {
		t.Errorf("first transition = %+v, want the changed one first", rep.Transitions[0])
	}

	// The other way round: the current pack as a candidate over a history
	// decided under the lower threshold clears the rule.
	low := newHarness(t, lowerThreshold(t))
	refundHistory(t, low, 7000)
	rep, err = replay.Backtest(context.Background(), low.store, replay.BacktestOptions{TenantID: "acme", Candidate: compile(t, example("refund"))})
	if err != nil {
		t.Fatal(err)
	}
	down := transitions(rep)["replan_required → allow"]
	if down == nil || down.Count != 1 || down.RulesCleared["POLICY_RETURNS_V1@1.0.0:R_HIGH_VALUE_REQUIRES_APPROVAL"] != 1 {
		b, _ := json.MarshalIndent(rep, "", "  ")
		t.Errorf("backtest of the 10,000 INR threshold over a 5,000 INR history: %s\nwant replan_required → allow clearing R_HIGH_VALUE_REQUIRES_APPROVAL", b)
	}
}

// TestBacktestReadsVerifiedHistoryOnly: a record whose bytes changed, and
// one whose envelope changed, are reported and not used.
func TestBacktestReadsVerifiedHistoryOnly(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	ids := refundHistory(t, h, 4200, 6000, 7500, 9999)
	rec, _ := h.store.Record(ctx, "acme", ids[1])
	mustExec(t, rawDB(t, h.dir, "records_no_update"), `UPDATE records SET raw = ? WHERE record_id = ?`,
		bytes.Replace(rec.Raw, []byte(`"refund_amount_inr":6000`), []byte(`"refund_amount_inr":6001`), 1), ids[1])
	rec, _ = h.store.Record(ctx, "acme", ids[2])
	flipEnvelope(t, rawDB(t, h.dir, "envelopes_no_update"), rec.Record.Replay.ReplayPacketID, `"amount_inr":7500`, `"amount_inr":7501`)
	// A record that is no longer JSON at all cannot even be placed in
	// the window; verification names it.
	rec, _ = h.store.Record(ctx, "acme", ids[0])
	mustExec(t, rawDB(t, h.dir), `UPDATE records SET raw = ? WHERE record_id = ?`, rec.Raw[:len(rec.Raw)-10], ids[0])

	rep, err := replay.Backtest(ctx, h.store, replay.BacktestOptions{TenantID: "acme", Candidate: compile(t, lowerThreshold(t))})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if rep.Records != 6+h.evidence || rep.Excluded != 2 || rep.Decided != 3 {
		t.Fatalf("report = %s\nwant 6 records, 2 excluded, 3 decided, besides %d evidence records", b, h.evidence)
	}
	named, bySeq := map[string]string{}, map[int64][]string{}
	for _, f := range rep.Findings {
		named[f.RecordID], bySeq[f.Seq] = f.Kind, append(bySeq[f.Seq], f.Kind)
	}
	// The record that no longer parses (the first refund, after the
	// evidence records) is named by its seq only.
	first := int64(h.evidence) + 1
	if !slices.Contains(bySeq[first], verify.FindingHashMismatch) || named[ids[1]] != verify.FindingHashMismatch || named[ids[2]] != replay.ClassTamper {
		t.Errorf("findings = %+v, want hash_mismatch for seq %d and %s, tamper_detected for %s", rep.Findings, first, ids[1], ids[2])
	}
	if up := transitions(rep)["allow → replan_required"]; up == nil || up.Count != 1 || up.Examples[0] != ids[3] {
		t.Errorf("allow → replan_required = %+v, want only the 9,999 INR refund", up)
	}
}

// TestBacktestWindow: --from, --to and --decision-key bound the records.
func TestBacktestWindow(t *testing.T) {
	h := newHarness(t, example("refund"))
	refundHistory(t, h, 4200, 6000, 7500, 9999)
	cand := compile(t, lowerThreshold(t))
	tests := []struct {
		name        string
		opts        replay.BacktestOptions
		records     int
		changed     int
		wantSkipped int
	}{
		{"from the third refund", replay.BacktestOptions{From: exampleClock.Add(2 * time.Minute)}, 5, 2, 1},
		// The evidence on file and the customers' verifications came first.
		{"before the third refund", replay.BacktestOptions{To: exampleClock.Add(2 * time.Minute)}, 2 + h.evidence, 1, 0},
		{"refunds only", replay.BacktestOptions{DecisionKey: "support.refund.execute"}, 6, 3, 0},
		{"another decision key", replay.BacktestOptions{DecisionKey: "approval:GATE_FINANCE_APPROVAL"}, 1, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.TenantID, tc.opts.Candidate = "acme", cand
			rep, err := replay.Backtest(context.Background(), h.store, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Records != tc.records || rep.Changed != tc.changed || rep.Skipped[replay.KindApprovalDecision] != tc.wantSkipped {
				b, _ := json.MarshalIndent(rep, "", "  ")
				t.Errorf("report = %s\nwant %d records, %d changed, %d skipped", b, tc.records, tc.changed, tc.wantSkipped)
			}
		})
	}
}

// TestBacktestUnknownDecisionKey: a candidate that no longer defines a
// recorded request's tool reports it as an error transition.
func TestBacktestUnknownDecisionKey(t *testing.T) {
	h := newHarness(t, example("refund"))
	refundHistory(t, h, 4200)
	rep, err := replay.Backtest(context.Background(), h.store, replay.BacktestOptions{TenantID: "acme", Candidate: compile(t, example("wf-2302"))})
	if err != nil {
		t.Fatal(err)
	}
	tr := transitions(rep)
	if e := tr["allow → error"]; e == nil || e.Count != 2 || len(e.Errors) != 2 {
		b, _ := json.MarshalIndent(rep, "", "  ")
		t.Errorf("report = %s\nwant allow → error twice, with the reasons", b)
	}
}
