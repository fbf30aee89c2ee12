package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/sqlite"
)

// clock is a test clock that tests move forward.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func withClock(c *clock) func(*engine.Config) {
	return func(cfg *engine.Config) { cfg.Now = c.Now }
}

func highValue(t testing.TB) *writ.CheckRequest {
	req := refundRequest(t, "refund-high-value-human-review")
	req.IdempotencyKey = "" // each check below is a new decision
	return req
}

// askApproval runs the high-value check and returns its receipt and the
// approval request it points to.
func askApproval(t *testing.T, h *harness, req *writ.CheckRequest) (*writ.Receipt, *writ.ApprovalRequest) {
	t.Helper()
	ctx := context.Background()
	rc, err := h.eng.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Disposition.Mode != writ.ModeHumanReview || rc.SafeToExecute || len(rc.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("receipt = %s/%s safe=%v approvals %v; want human_review naming one approval", rc.Outcome, rc.Disposition.Mode, rc.SafeToExecute, rc.Metadata.ApprovalIDs)
	}
	a, err := h.eng.Approval(ctx, req.TenantID, rc.Metadata.ApprovalIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	return rc, a
}

func decideApproval(t *testing.T, h *harness, id, decision, approver string) *writ.ApprovalRequest {
	t.Helper()
	a, err := h.eng.DecideApproval(context.Background(), &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: id, Decision: decision, Approver: approver, Reason: "checked the order history"})
	if err != nil {
		t.Fatalf("DecideApproval(%s, %s): %v", id, decision, err)
	}
	return a
}

func retryWith(t *testing.T, h *harness, req *writ.CheckRequest, id string) *writ.Receipt {
	t.Helper()
	r := *req
	r.ApprovalIDs = []string{id}
	rc, err := h.eng.Check(context.Background(), &r)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func reasonCodes(rc *writ.Receipt) string {
	var s []string
	for _, r := range rc.Reasons {
		s = append(s, r.Code+": "+r.Message)
	}
	return strings.Join(s, " | ")
}

// TestApprovalEndToEnd is the seed's refund: a high-value refund asks for
// finance approval, a finance lead approves, and the retry is allowed with
// the approval in its record.
func TestApprovalEndToEnd(t *testing.T) {
	ctx := context.Background()
	clk := newClock(exampleClock)
	h := newHarness(t, example("refund"), withClock(clk))
	req := highValue(t)
	rc, a := askApproval(t, h, req)

	if a.State != writ.ApprovalPending || a.GateID != "GATE_FINANCE_APPROVAL" || a.Terminal || a.TargetHint != "finance_approvers" || a.Allowance != 1 {
		t.Errorf("approval request = %+v", a)
	}
	if a.RecordID != rc.Metadata.RecordID || a.DecisionID != rc.DecisionID || a.RequestedBy.ActorID != "agt_support" || a.RequestedBy.DelegatedUserID != "usr_771" {
		t.Errorf("approval request does not name its check: %+v", a)
	}
	if !a.ExpiresAt.Equal(clk.Now().Add(24 * time.Hour)) {
		t.Errorf("expires_at = %s, want the gate's 24h ttl after %s", a.ExpiresAt, clk.Now())
	}
	asked, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if asked.Record.Status != writ.StatusEscalated {
		t.Errorf("record of the asking check: status %s, want ESCALATED (a pending approval exists)", asked.Record.Status)
	}
	want := writ.ApprovalBinding{DecisionKey: "support.refund.execute", EvidenceSnapshotHash: asked.Record.Replay.EvidenceSnapshotHash, BundleRevisions: []string{"POLICY_RETURNS_V1@1.0.0"}}
	if a.Binding.DecisionKey != want.DecisionKey || a.Binding.EvidenceSnapshotHash != want.EvidenceSnapshotHash || strings.Join(a.Binding.BundleRevisions, ",") != "POLICY_RETURNS_V1@1.0.0" || !strings.HasPrefix(a.Binding.ArgumentsDigest, "hmac-sha256:") {
		t.Errorf("binding = %+v, want %+v with a keyed arguments digest", a.Binding, want)
	}
	var pointed bool
	for _, c := range rc.ResumeContract.ResumeWhenConditions {
		pointed = pointed || (c.Kind == writ.ConditionApproval && c.GateID == "GATE_FINANCE_APPROVAL" && c.ApprovalID == a.ApprovalID)
	}
	if !pointed || rc.Routing.TargetHint != "finance_approvers" {
		t.Errorf("receipt does not point to %s: resume_when %+v, target %q", a.ApprovalID, rc.ResumeContract.ResumeWhenConditions, rc.Routing.TargetHint)
	}

	// Asking again for the same action points to the same request.
	clk.Add(time.Minute)
	again, _ := askApproval(t, h, req)
	if again.Metadata.ApprovalIDs[0] != a.ApprovalID {
		t.Errorf("a second check of the same action asked again (%s), want it pointed to %s", again.Metadata.ApprovalIDs[0], a.ApprovalID)
	}
	// Presenting the still-pending request says so.
	if rc := retryWith(t, h, req, a.ApprovalID); rc.SafeToExecute || !strings.Contains(reasonCodes(rc), "approval_pending") {
		t.Errorf("retry with a pending approval: safe=%v reasons %s", rc.SafeToExecute, reasonCodes(rc))
	}

	clk.Add(10 * time.Minute)
	decidedAt := clk.Now()
	got := decideApproval(t, h, a.ApprovalID, writ.ApprovalApproved, "user_finance_lead_77")
	if got.State != writ.ApprovalApproved || got.Decision.Approver != "user_finance_lead_77" || !got.Decision.At.Equal(decidedAt) || got.Decision.RecordID == "" {
		t.Fatalf("after approval: %+v %+v", got, got.Decision)
	}
	arec, err := h.eng.Record(ctx, "acme", got.Decision.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if r := arec.Record; r.DecisionKey != "approval:GATE_FINANCE_APPROVAL" || r.Status != writ.StatusDecided || r.Actor.Type != writ.ActorHuman ||
		r.Actor.ID != "user_finance_lead_77" || len(r.Approvals) != 1 || r.Outputs["approval_id"] != a.ApprovalID || r.Outputs["for_record"] != rc.Metadata.RecordID {
		t.Errorf("approval record = %s", arec.Raw)
	}

	clk.Add(time.Minute)
	allowed := retryWith(t, h, req, a.ApprovalID)
	if !allowed.SafeToExecute || allowed.Outcome != writ.OutcomeAllow {
		t.Fatalf("retry with the approval = %s safe=%v: %s", allowed.Outcome, allowed.SafeToExecute, reasonCodes(allowed))
	}
	rec, err := h.eng.Record(ctx, "acme", allowed.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Record.Approvals) != 1 {
		t.Fatalf("allowed record approvals = %+v, want one", rec.Record.Approvals)
	}
	ap := rec.Record.Approvals[0]
	if ap.GateID != "GATE_FINANCE_APPROVAL" || ap.Approver != "user_finance_lead_77" || ap.ApprovalModeEffective != writ.ModeDestructive ||
		ap.EvidenceSnapshotHash != rec.Record.Replay.EvidenceSnapshotHash || !ap.DecidedAt.Equal(decidedAt) {
		t.Errorf("record approval = %+v", ap)
	}
	// The refund spec requires an execution report: the permit is in
	// flight until it comes.
	if rec.Record.Status != writ.StatusInFlight {
		t.Errorf("allowed record status = %s, want IN_FLIGHT", rec.Record.Status)
	}
	used, err := h.eng.Approval(ctx, "acme", a.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if used.Uses != 1 || used.Events[len(used.Events)-1].Kind != writ.ApprovalEventRedeemed || used.Events[len(used.Events)-1].RecordID != allowed.Metadata.RecordID {
		t.Errorf("after redemption: uses %d, events %+v", used.Uses, used.Events)
	}

	// The allowance is one check.
	if rc := retryWith(t, h, req, a.ApprovalID); rc.SafeToExecute || !strings.Contains(reasonCodes(rc), "already used 1 of 1") {
		t.Errorf("second redemption: safe=%v reasons %s", rc.SafeToExecute, reasonCodes(rc))
	}
	h.verify(t)
}

func TestApprovalStaleBindings(t *testing.T) {
	clk := newClock(exampleClock)
	h := newHarness(t, example("refund"), withClock(clk))
	req := highValue(t)
	_, a := askApproval(t, h, req)
	decideApproval(t, h, a.ApprovalID, writ.ApprovalApproved, "user_finance_lead_77")

	changedArgs := highValue(t)
	changedArgs.Arguments["amount_inr"] = 16000.0
	changedArgs.Outputs["refund_amount_inr"] = 16000.0
	// Another identity verification of the customer, as good as the one
	// approved on, but another fact.
	verifyCustomers(t, h.eng, "acme", exampleClock, "cus_77")
	changedEvidence := highValue(t)
	changedEvidence.Evidence[0] = writ.Evidence{Kind: "identity_verification", ID: idvOf("cus_77", exampleClock)}

	for _, tt := range []struct {
		name string
		req  *writ.CheckRequest
		want string
	}{
		{"arguments", changedArgs, "the action's arguments changed"},
		{"evidence", changedEvidence, "the evidence changed since it was approved"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := retryWith(t, h, tt.req, a.ApprovalID)
			if rc.SafeToExecute || rc.Disposition.Mode != writ.ModeHumanReview || !strings.Contains(reasonCodes(rc), "approval_stale: Approval "+a.ApprovalID+" no longer applies: "+tt.want) {
				t.Errorf("safe=%v mode %s reasons %s", rc.SafeToExecute, rc.Disposition.Mode, reasonCodes(rc))
			}
			if len(rc.Metadata.ApprovalIDs) != 1 || rc.Metadata.ApprovalIDs[0] == a.ApprovalID {
				t.Errorf("a stale approval must lead to a new request, got %v", rc.Metadata.ApprovalIDs)
			}
		})
	}

	t.Run("expired", func(t *testing.T) {
		clk.Add(25 * time.Hour)
		rc := retryWith(t, h, req, a.ApprovalID)
		if rc.SafeToExecute || !strings.Contains(reasonCodes(rc), "approval_stale: Approval "+a.ApprovalID+" expired at") {
			t.Errorf("safe=%v reasons %s", rc.SafeToExecute, reasonCodes(rc))
		}
	})
	h.verify(t)
}

// TestApprovalStaleUnderNewBundleRevision: an approval given under one
// revision of the policy bundle does not carry over to the next.
func TestApprovalStaleUnderNewBundleRevision(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := newClock(exampleClock)
	start := func(packDir string, seed byte) *harness {
		eng, err := engine.New(context.Background(), engine.Config{Policy: compile(t, packDir), Store: st, BindingKey: testBindingKey, Now: clk.Now, Random: newSeededReader(seed)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return &harness{eng: eng, store: st}
	}
	h := start(dir, 7)
	storeOnFile(t, h.eng, dir)
	req := highValue(t)
	_, a := askApproval(t, h, req)
	decideApproval(t, h, a.ApprovalID, writ.ApprovalApproved, "user_finance_lead_77")

	path := filepath.Join(dir, "policies", "returns.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "version: 1.0.0", "version: 1.1.0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	h2 := start(dir, 8)
	rc := retryWith(t, h2, req, a.ApprovalID)
	if rc.SafeToExecute || !strings.Contains(reasonCodes(rc), "bundle POLICY_RETURNS_V1 changed from 1.0.0 to 1.1.0") {
		t.Errorf("safe=%v reasons %s", rc.SafeToExecute, reasonCodes(rc))
	}
}

func TestApprovalDenied(t *testing.T) {
	h := newHarness(t, example("refund"), withClock(newClock(exampleClock)))
	req := highValue(t)
	_, a := askApproval(t, h, req)
	denied := decideApproval(t, h, a.ApprovalID, writ.ApprovalDenied, "user_finance_lead_77")
	rec, err := h.eng.Record(context.Background(), "acme", denied.Decision.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Record.Status != writ.StatusRejected || len(rec.Record.Approvals) != 0 {
		t.Errorf("denial record: status %s approvals %+v", rec.Record.Status, rec.Record.Approvals)
	}
	for i := 0; i < 2; i++ {
		rc := retryWith(t, h, req, a.ApprovalID)
		if rc.SafeToExecute || rc.Outcome != writ.OutcomeGoalFailTerminal || !strings.Contains(reasonCodes(rc), "approval_denied") {
			t.Errorf("retry %d after a denial: %s safe=%v reasons %s", i, rc.Outcome, rc.SafeToExecute, reasonCodes(rc))
		}
	}
	h.verify(t)
}

func TestDecideApprovalRefusals(t *testing.T) {
	ctx := context.Background()
	clk := newClock(exampleClock)
	h := newHarness(t, example("refund"), withClock(clk))
	_, a := askApproval(t, h, highValue(t))
	count := h.count(t, "acme")

	// The key acts for the agent the check names (acts_for), so the
	// action is the same one.
	mine := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_agent", Subject: "svc_support", Roles: []writ.Role{writ.RoleAgent}, ActorType: writ.ActorService, ActsFor: []string{"AGENT:agt_support"}})
	rc, err := h.eng.Check(mine, highValue(t)) // same action: points to the same request, asked by the key this time
	if err != nil || rc.Metadata.ApprovalIDs[0] != a.ApprovalID {
		t.Fatalf("check = %v, %v", rc, err)
	}
	_, b := askApproval(t, h, func() *writ.CheckRequest {
		r := highValue(t)
		r.Arguments["amount_inr"] = 12000.0
		r.Outputs["refund_amount_inr"] = 12000.0
		return r
	}())
	keyed, err := h.eng.Check(mine, func() *writ.CheckRequest {
		r := highValue(t)
		r.Arguments["amount_inr"] = 13000.0
		r.Outputs["refund_amount_inr"] = 13000.0
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	count = h.count(t, "acme")

	tests := []struct {
		name string
		ctx  context.Context
		req  writ.DecideApprovalRequest
		code string
	}{
		{"the checking agent", ctx, writ.DecideApprovalRequest{ApprovalID: a.ApprovalID, Approver: "agt_support"}, writ.EFORBIDDEN},
		{"the delegating user", ctx, writ.DecideApprovalRequest{ApprovalID: a.ApprovalID, Approver: "usr_771"}, writ.EFORBIDDEN},
		{"the requesting key's subject", writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_other", Subject: "svc_support", Roles: []writ.Role{writ.RoleApprover}}),
			writ.DecideApprovalRequest{ApprovalID: keyed.Metadata.ApprovalIDs[0]}, writ.EFORBIDDEN},
		{"the requesting key", writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_agent", Subject: "someone_else", Roles: []writ.Role{writ.RoleApprover}}),
			writ.DecideApprovalRequest{ApprovalID: keyed.Metadata.ApprovalIDs[0]}, writ.EFORBIDDEN},
		{"approver differs from the key's subject", writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_x", Subject: "fin", Roles: []writ.Role{writ.RoleApprover}}),
			writ.DecideApprovalRequest{ApprovalID: b.ApprovalID, Approver: "someone"}, writ.EINVALID},
		{"no approver without a key", ctx, writ.DecideApprovalRequest{ApprovalID: b.ApprovalID}, writ.EINVALID},
		{"no reason", ctx, writ.DecideApprovalRequest{ApprovalID: b.ApprovalID, Approver: "fin", Reason: " "}, writ.EINVALID},
		{"bad decision", ctx, writ.DecideApprovalRequest{ApprovalID: b.ApprovalID, Approver: "fin", Decision: "maybe"}, writ.EINVALID},
		{"unknown id", ctx, writ.DecideApprovalRequest{ApprovalID: "apr_nope", Approver: "fin"}, writ.ENOTFOUND},
		{"another tenant's id", ctx, writ.DecideApprovalRequest{TenantID: "globex", ApprovalID: b.ApprovalID, Approver: "fin"}, writ.ENOTFOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.req
			if r.TenantID == "" {
				r.TenantID = "acme"
			}
			if r.Decision == "" {
				r.Decision = writ.ApprovalApproved
			}
			if r.Reason == "" {
				r.Reason = "looks fine"
			}
			_, err := h.eng.DecideApproval(tt.ctx, &r)
			if code := writ.ErrorCode(err); code != tt.code {
				t.Errorf("error %v (code %q), want %q", err, code, tt.code)
			}
			if n := h.count(t, "acme"); n != count {
				t.Errorf("a refused decision wrote records: %d → %d", count, n)
			}
		})
	}

	// The requester may withdraw (deny) their own request.
	decideApproval(t, h, a.ApprovalID, writ.ApprovalDenied, "agt_support")
	_, err = h.eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: a.ApprovalID, Decision: writ.ApprovalApproved, Approver: "fin", Reason: "x"})
	if writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("deciding twice: %v, want a conflict", err)
	}
	clk.Add(25 * time.Hour)
	_, err = h.eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: b.ApprovalID, Decision: writ.ApprovalApproved, Approver: "fin", Reason: "x"})
	if writ.ErrorCode(err) != writ.ECONFLICT || !strings.Contains(err.Error(), "expired") {
		t.Errorf("deciding an expired request: %v, want a conflict saying it expired", err)
	}
	// A check cannot present another tenant's approval.
	other := highValue(t)
	other.TenantID = "globex"
	other.ApprovalIDs = []string{b.ApprovalID}
	if _, err := h.eng.Check(ctx, other); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("presenting another tenant's approval: %v, want invalid", err)
	}
	h.verify(t)
}

func TestEscalationLandsInTheQueueTerminal(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"), withClock(newClock(exampleClock)))
	rc, err := h.eng.Check(ctx, refundRequest(t, "refund-fraud-terminal-review"))
	if err != nil {
		t.Fatal(err)
	}
	if !rc.HumanReviewTerminal || len(rc.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("escalation receipt: terminal %v approvals %v", rc.HumanReviewTerminal, rc.Metadata.ApprovalIDs)
	}
	page, err := h.eng.Approvals(ctx, writ.ApprovalQuery{TenantID: "acme", State: writ.ApprovalPending})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Approvals) != 1 || !page.Approvals[0].Terminal || page.Approvals[0].GateID != "escalation:fraud_signal_high" || page.Approvals[0].TargetHint != "fraud_review" {
		t.Fatalf("queue = %+v", page.Approvals)
	}
	decideApproval(t, h, page.Approvals[0].ApprovalID, writ.ApprovalApproved, "fraud_analyst_3")
	h.verify(t)
}

// TestConcurrentRedemptionsAllowOnce: many checks presenting one
// single-use approval at once; exactly one is allowed.
func TestConcurrentRedemptionsAllowOnce(t *testing.T) {
	h := newHarness(t, example("refund"), withClock(newClock(exampleClock)))
	req := highValue(t)
	_, a := askApproval(t, h, req)
	decideApproval(t, h, a.ApprovalID, writ.ApprovalApproved, "user_finance_lead_77")
	var wg sync.WaitGroup
	var allowed atomic.Int32
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := *req
			r.ApprovalIDs = []string{a.ApprovalID}
			rc, err := h.eng.Check(context.Background(), &r)
			if err != nil {
				t.Error(err)
				return
			}
			if rc.SafeToExecute {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 1 {
		t.Errorf("%d concurrent redemptions of a single-use approval were allowed, want 1", n)
	}
	got, err := h.eng.Approval(context.Background(), "acme", a.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Uses != 1 {
		t.Errorf("uses = %d, want 1", got.Uses)
	}
	h.verify(t)
}
