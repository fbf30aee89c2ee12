package engine_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger/verify"
)

func TestExecutionReportFindings(t *testing.T) {
	ctx := context.Background()
	clk := newClock(exampleClock)
	h := newHarness(t, example("refund"), withClock(clk))
	allowed, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
	if err != nil || !allowed.SafeToExecute {
		t.Fatalf("Check(refund-allow) = %+v, %v", allowed, err)
	}
	frozen, err := h.eng.Check(ctx, refundRequest(t, "refund-account-frozen-goal-fail"))
	if err != nil || frozen.SafeToExecute {
		t.Fatalf("Check(frozen) = %+v, %v", frozen, err)
	}

	// In flight until reported; listed, and past its expiry once the clock passes it.
	page, err := h.eng.InFlight(ctx, writ.InFlightQuery{TenantID: "acme"})
	if err != nil || len(page.Decisions) != 1 || page.Decisions[0].DecisionID != allowed.DecisionID || page.Decisions[0].Expired {
		t.Fatalf("InFlight() = %+v, %v; want the allowed refund, not expired", page, err)
	}
	if page, _ := h.eng.InFlight(ctx, writ.InFlightQuery{TenantID: "acme", ExpiredBy: clk.Now()}); len(page.Decisions) != 0 {
		t.Errorf("InFlight(expired by now) = %+v, want none before the expiry", page.Decisions)
	}
	clk.Add(16 * time.Minute)
	page, _ = h.eng.InFlight(ctx, writ.InFlightQuery{TenantID: "acme", ExpiredBy: clk.Now()})
	if len(page.Decisions) != 1 || !page.Decisions[0].Expired {
		t.Errorf("InFlight(expired by now) 16 minutes on = %+v, want the allowed refund, expired", page.Decisions)
	}

	late, err := h.eng.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: allowed.DecisionID, Status: writ.ExecutionSucceeded})
	if err != nil || len(late.Findings) != 1 || late.Findings[0].Code != writ.FindingReportedAfterExpiry {
		t.Errorf("a report after the expiry = %+v, %v; want the finding %s", late, err, writ.FindingReportedAfterExpiry)
	}
	if page, _ := h.eng.InFlight(ctx, writ.InFlightQuery{TenantID: "acme"}); len(page.Decisions) != 0 {
		t.Errorf("InFlight() after the report = %+v, want none", page.Decisions)
	}
	failed, err := h.eng.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: frozen.DecisionID, Status: writ.ExecutionFailed,
		Error: &writ.ExecutionError{Code: "account_frozen", Message: "the payment provider refused"}})
	if err != nil || len(failed.Findings) != 1 || failed.Findings[0].Code != writ.FindingNotPermitted {
		t.Errorf("a failed report of a refused decision = %+v, %v; want the finding %s", failed, err, writ.FindingNotPermitted)
	}
	h.verify(t)
}

func TestReportNotExecutedOfABlockedDecision(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	blocked, err := h.eng.Check(ctx, refundRequest(t, "refund-missing-idv-local-replan"))
	if err != nil || blocked.SafeToExecute {
		t.Fatalf("Check() = %+v, %v", blocked, err)
	}
	ack, err := h.eng.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: blocked.DecisionID, Status: writ.ExecutionNotExecuted})
	if err != nil || len(ack.Findings) != 0 || ack.ReportedFor != blocked.Metadata.RecordID {
		t.Errorf("ReportExecution(not_executed) of a blocked decision = %+v, %v; want recorded without findings", ack, err)
	}
	st, err := h.eng.Decision(ctx, "acme", blocked.DecisionID)
	if err != nil || st.State.Status != writ.StatusClosed || st.State.Execution != writ.ExecutionNotExecuted || st.State.InFlight {
		t.Errorf("Decision() = %+v, %v; want closed, not executed", st, err)
	}
}

func TestResumeWithEvidence(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	missing := refundRequest(t, "refund-missing-idv-local-replan")
	blocked, err := h.eng.Check(ctx, missing)
	if err != nil || blocked.Disposition.Mode != writ.ModeLocalReplan {
		t.Fatalf("Check(missing identity verification) = %+v, %v", blocked, err)
	}
	withIDV := refundRequest(t, "refund-missing-idv-local-replan")
	withIDV.Evidence = append(withIDV.Evidence, refundRequest(t, "refund-allow").Evidence...)
	rc, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: withIDV})
	if err != nil || !rc.SafeToExecute || rc.DecisionID != blocked.DecisionID {
		t.Fatalf("Resume(with the evidence) = %+v, %v; want an allow of the same decision", rc, err)
	}
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil || rec.Record.Supersedes != blocked.Metadata.RecordID {
		t.Errorf("the resumed record = %+v, %v; want it to supersede %s", rec, err, blocked.Metadata.RecordID)
	}
	// A decision that permits already is answered again; another action is refused.
	if again, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: withIDV}); err != nil || again.Metadata.RecordID != rc.Metadata.RecordID || again.Metadata.Repeated != writ.RepeatedIdempotent {
		t.Errorf("Resume() of a permitted decision = %+v, %v; want its receipt, repeated", again, err)
	}
	second, err := h.eng.Check(ctx, refundRequest(t, "refund-stale-idv-local-replan"))
	if err != nil || second.SafeToExecute {
		t.Fatalf("Check(stale) = %+v, %v", second, err)
	}
	other := refundRequest(t, "refund-stale-idv-local-replan")
	other.Arguments["amount_inr"] = 1.0
	if _, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: second.DecisionID, Request: other}); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("Resume() with other arguments: error = %v, want %s", err, writ.EINVALID)
	}
	h.verify(t)
}

func TestResumeWaitsInVain(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	blocked, err := h.eng.Check(ctx, refundRequest(t, "refund-high-value-human-review"))
	if err != nil || len(blocked.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("Check() = %+v, %v", blocked, err)
	}
	head, _ := h.store.Head(ctx, "acme")
	rc, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refundRequest(t, "refund-high-value-human-review"), Wait: 50 * time.Millisecond})
	if err != nil || rc.Metadata.Repeated != writ.RepeatedStillWaiting || rc.Metadata.RecordID != blocked.Metadata.RecordID {
		t.Errorf("Resume(wait, nothing decided) = %+v, %v; want the blocked receipt, still waiting", rc, err)
	}
	if after, _ := h.store.Head(ctx, "acme"); after != head {
		t.Errorf("a wait in vain wrote records: head %+v -> %+v", head, after)
	}
	if n := h.eng.Waiting(); n != 0 {
		t.Errorf("Waiting() after the wait = %d, want 0", n)
	}
}

// TestDeniedApprovalResumesTerminally: a waiting resume whose approval is
// denied comes back denied, and the decision ends.
func TestDeniedApprovalResumesTerminally(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	blocked, err := h.eng.Check(ctx, refundRequest(t, "refund-high-value-human-review"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: blocked.Metadata.ApprovalIDs[0], Decision: writ.ApprovalDenied, Approver: "user_finance_lead_77", Reason: "The invoice does not match."}); err != nil {
		t.Fatal(err)
	}
	rc, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refundRequest(t, "refund-high-value-human-review"), Wait: time.Minute})
	if err != nil || rc.Outcome != writ.OutcomeGoalFailTerminal || rc.DecisionID != blocked.DecisionID {
		t.Fatalf("Resume() after a denial = %+v, %v; want goal_fail_terminal for the same decision", rc, err)
	}
	if _, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refundRequest(t, "refund-high-value-human-review")}); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("Resume() of a terminal decision: error = %v, want %s", err, writ.ECONFLICT)
	}
}

// TestToolCallsExecuted: a contract that wants the browser call executed
// rejects the step while the allowed call is unreported, and accepts it
// once the call is reported succeeded; the verdict is part of the call's
// decision story.
func TestToolCallsExecuted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("storybook"))); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "workflows", "component-change.yaml")
	b, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "          observed: true\n", "          executed: true\n", 1))
	if err := os.WriteFile(wf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	clk := newClock(exampleClock)
	h := newHarness(t, dir, withClock(clk))
	actor := writ.Actor{Type: writ.ActorAgent, ID: "agt_frontend"}
	if _, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_1", Context: map[string]any{"component": "Button", "ticket": "UI-142"}}); err != nil {
		t.Fatal(err)
	}
	attempt := func(step, file string) *writ.StepVerdict {
		t.Helper()
		req := &writ.AttemptRequest{TenantID: "acme", RunID: "run_1", StepID: step, Actor: actor, Result: map[string]any{}}
		data, err := os.ReadFile(filepath.Join(dir, "attempts", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, req); err != nil {
			t.Fatal(err)
		}
		v, err := h.eng.SubmitAttempt(ctx, req)
		if err != nil {
			t.Fatalf("SubmitAttempt(%s) = %v", step, err)
		}
		clk.Add(time.Duration(v.RetryAfterMS+1) * time.Millisecond)
		return v
	}
	attempt("implement", "implement.json")
	rc, err := h.eng.Check(ctx, &writ.CheckRequest{TenantID: "acme", Tool: "open_simple_browser", Actor: actor,
		Arguments: map[string]any{"url": "http://localhost:6006/?path=/story/button--primary"},
		Workflow:  &writ.WorkflowRef{WorkflowID: "ui.component.change", RunID: "run_1", StepID: "visual_check"}})
	if err != nil || !rc.SafeToExecute {
		t.Fatalf("Check(open_simple_browser) = %+v, %v", rc, err)
	}
	if v := attempt("visual_check", "visual-check-accepted.json"); v.State != writ.VerdictRetry {
		t.Fatalf("the attempt before the call is reported = %s, want retry (the call is allowed, not executed)", v.State)
	}
	if _, err := h.eng.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: rc.DecisionID, Status: writ.ExecutionSucceeded}); err != nil {
		t.Fatal(err)
	}
	v := attempt("visual_check", "visual-check-accepted.json")
	if v.State != writ.VerdictAccepted {
		t.Fatalf("the attempt after the report = %+v, want accepted", v)
	}
	st, err := h.eng.Decision(ctx, "acme", rc.DecisionID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range st.Records {
		kinds = append(kinds, r.Kind)
	}
	if got := strings.Join(kinds, ","); got != "check,step_verdict,execution_report,step_verdict" {
		t.Errorf("the call's story = %s, want in chain order the check, the verdict that retried, the report and the verdict that accepted", got)
	}
	h.verify(t)
}

// TestResumeWakesOnAnotherServersApproval: two engines share one store,
// as two servers share a PostgreSQL database. A resume waits on the
// first; the approval is decided on the second; the first engine's sweep
// finds it and the resume comes back allowed.
func TestResumeWakesOnAnotherServersApproval(t *testing.T) {
	ctx := context.Background()
	here := newHarness(t, example("refund"), func(cfg *engine.Config) { cfg.ResumeSweep = 10 * time.Millisecond })
	there, err := engine.New(ctx, engine.Config{Policy: compile(t, example("refund")), Store: here.store, BindingKey: testBindingKey,
		Now: func() time.Time { return exampleClock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { there.Close() })
	blocked, err := here.eng.Check(ctx, refundRequest(t, "refund-high-value-human-review"))
	if err != nil || len(blocked.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("Check() = %+v, %v", blocked, err)
	}
	done := make(chan *writ.Receipt, 1)
	go func() {
		rc, err := here.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refundRequest(t, "refund-high-value-human-review"), Wait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- rc
	}()
	deadline := time.Now().Add(10 * time.Second)
	for here.eng.Waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the resume never started waiting")
		}
		runtime.Gosched()
	}
	if _, err := there.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: blocked.Metadata.ApprovalIDs[0], Decision: writ.ApprovalApproved,
		Approver: "user_finance_lead_77", Reason: "checked"}); err != nil {
		t.Fatal(err)
	}
	select {
	case rc := <-done:
		if rc == nil || !rc.SafeToExecute || rc.DecisionID != blocked.DecisionID {
			t.Errorf("Resume() = %+v, want an allow of the same decision", rc)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the resume did not wake within 30s of an approval decided on the other engine")
	}
}

// TestStopWaitingEndsWaits: a server shutting down ends its resumes'
// waits at once, with the blocked receipt again.
func TestStopWaitingEndsWaits(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	blocked, err := h.eng.Check(ctx, refundRequest(t, "refund-high-value-human-review"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *writ.Receipt, 1)
	go func() {
		rc, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refundRequest(t, "refund-high-value-human-review"), Wait: writ.MaxResumeWait})
		if err != nil {
			t.Error(err)
		}
		done <- rc
	}()
	deadline := time.Now().Add(10 * time.Second)
	for h.eng.Waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the resume never started waiting")
		}
		runtime.Gosched()
	}
	h.eng.StopWaiting()
	select {
	case rc := <-done:
		if rc == nil || rc.Metadata.Repeated != writ.RepeatedStillWaiting {
			t.Errorf("Resume() after StopWaiting = %+v, want the blocked receipt, still waiting", rc)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("StopWaiting did not end the wait")
	}
	if rc, err := h.eng.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refundRequest(t, "refund-high-value-human-review"), Wait: time.Minute}); err != nil || rc.Metadata.Repeated != writ.RepeatedStillWaiting {
		t.Errorf("Resume() after StopWaiting = %+v, %v; want it answered at once, still waiting", rc, err)
	}
}

// TestTamperedAcknowledgementIsNotServed: an execution report's stored
// acknowledgement edited behind writ's back (triggers dropped) is not
// answered to the same report again, and the decision's story refuses
// to show it; writ ledger verify names it.
func TestTamperedAcknowledgementIsNotServed(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	allowed, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
	if err != nil || !allowed.SafeToExecute {
		t.Fatalf("Check() = %+v, %v", allowed, err)
	}
	report := &writ.ExecutionReport{TenantID: "acme", DecisionID: allowed.DecisionID, Status: writ.ExecutionFailed, Error: &writ.ExecutionError{Code: "provider_down"}}
	ack, err := h.eng.ReportExecution(ctx, report)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(h.dir, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TRIGGER records_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE records SET receipt = replace(receipt, '"failed"', '"succeeded"') WHERE record_id = ?`, ack.RecordID); err != nil {
		t.Fatal(err)
	}
	if again, err := h.eng.ReportExecution(ctx, report); writ.ErrorCode(err) != writ.EINTERNAL {
		t.Errorf("the same report again over a tampered acknowledgement = %+v, %v; want it refused (%s)", again, err, writ.EINTERNAL)
	}
	if _, err := h.eng.Decision(ctx, "acme", allowed.DecisionID); writ.ErrorCode(err) != writ.EINTERNAL {
		t.Errorf("Decision() over a tampered acknowledgement: error = %v, want %s", err, writ.EINTERNAL)
	}
	findings, err := verify.VerifyStored(ctx, h.store, exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, f := range findings {
		named = named || f.RecordID == ack.RecordID
	}
	if !named {
		t.Errorf("VerifyStored() = %+v; want a finding naming %s", findings, ack.RecordID)
	}
}
