package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/writhq/writ"
)

// An approval is opened only when it can help (issue 39's wasted-approval
// case): a high-value refund without identity verification is sent back to
// fetch the verification first, and no approval request is opened, so an
// approver never approves a binding that the missing evidence will change.
// Once the evidence is attached, the same refund asks for its approval, and
// that approval, once given, redeems.
func TestApprovalOpenedOnlyWhenItCanHelp(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	withIDV := highValue(t)
	noIDV := highValue(t)
	noIDV.Evidence = nil

	rc, err := h.eng.Check(ctx, noIDV)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Disposition.Mode != writ.ModeLocalReplan || len(rc.Metadata.ApprovalIDs) != 0 {
		t.Fatalf("Check(no identity verification) = %s/%s, approvals %v; want local_replan and no approval", rc.Outcome, rc.Disposition.Mode, rc.Metadata.ApprovalIDs)
	}
	var codes, steps []string
	for _, r := range rc.Reasons {
		codes = append(codes, r.Code)
	}
	for _, s := range rc.SafeNextSteps {
		steps = append(steps, s.Code)
	}
	if want := []string{"missing_identity_verification", "high_value_refund", "approval_deferred"}; !slices.Equal(codes, want) {
		t.Errorf("reasons = %v, want %v", codes, want)
	}
	if want := []string{"VERIFY_IDENTITY"}; !slices.Equal(steps, want) {
		t.Errorf("safe_next_steps = %v, want %v (what must change first; no approval step)", steps, want)
	}
	for _, c := range rc.ResumeContract.ResumeWhenConditions {
		if c.Kind == writ.ConditionApproval {
			t.Errorf("resume_when waits on an approval nobody was asked for: %+v", c)
		}
	}
	page, err := h.eng.Approvals(ctx, writ.ApprovalQuery{TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Approvals) != 0 {
		t.Fatalf("approval requests after the blocked check = %d, want 0", len(page.Approvals))
	}

	_, a := askApproval(t, h, withIDV)
	decideApproval(t, h, a.ApprovalID, writ.ApprovalApproved, "finance_lead_1")
	rc = retryWith(t, h, withIDV, a.ApprovalID)
	if !rc.SafeToExecute {
		t.Fatalf("retry with the approval = %s: %s; want allowed", rc.Outcome, reasonCodes(rc))
	}
	h.verify(t)
}

// A denied refund's safe next steps are only the deny's own (issue 39's
// deny-lists-approval case): asking finance to approve cannot change it.
func TestDeniedRefundListsNoApprovalStep(t *testing.T) {
	h := newHarness(t, example("refund"))
	rc, err := h.eng.Check(context.Background(), refundRequest(t, "refund-exceeds-order-goal-fail"))
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != writ.OutcomeGoalFailTerminal {
		t.Fatalf("outcome = %s, want goal_fail_terminal", rc.Outcome)
	}
	for _, s := range rc.SafeNextSteps {
		if s.Code != "REFUND_AT_MOST_ORDER_TOTAL" {
			t.Errorf("safe_next_steps has %s, which cannot change a deny", s.Code)
		}
	}
	if len(rc.Metadata.ApprovalIDs) != 0 {
		t.Errorf("a deny opened approvals %v", rc.Metadata.ApprovalIDs)
	}
}

// A conditional evidence requirement through the engine: a refund at or
// under 5000 INR needs no identity verification, a larger one does, and
// the ledger verifies the allowed one that carries none.
func TestConditionalEvidenceRequirement(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "specs", "refund-execute.yaml")
	spec, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spec = bytes.Replace(spec, []byte("  - kind: identity_verification\n"), []byte("  - kind: identity_verification\n    when: args.amount_inr > 5000\n"), 1)
	if err := os.WriteFile(path, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir)
	ctx := context.Background()
	small := refundRequest(t, "refund-missing-idv-local-replan")
	rc, err := h.eng.Check(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	if !rc.SafeToExecute {
		t.Errorf("Check(4200 INR, no verification) = %s: %s; want allowed (the requirement's when does not hold)", rc.Outcome, reasonCodes(rc))
	}
	large := refundRequest(t, "refund-missing-idv-local-replan")
	large.IdempotencyKey = ""
	large.Arguments["amount_inr"] = 6000.0
	rc, err = h.eng.Check(ctx, large)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Disposition.Mode != writ.ModeLocalReplan || len(rc.Reasons) == 0 || rc.Reasons[0].Code != "missing_identity_verification" {
		t.Errorf("Check(6000 INR, no verification) = %s/%s: %s; want local_replan for missing_identity_verification", rc.Outcome, rc.Disposition.Mode, reasonCodes(rc))
	}
	h.verify(t)
}
