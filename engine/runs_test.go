package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/sqlite"
)

func attemptReq(run, step string, result map[string]any, calls ...writ.ToolCallClaim) *writ.AttemptRequest {
	return &writ.AttemptRequest{TenantID: "acme", RunID: run, StepID: step, Actor: writ.Actor{Type: writ.ActorAgent, ID: "agt_ui"}, Result: result, ToolCalls: calls}
}

var (
	goodResult = map[string]any{
		"visualVerification": map[string]any{"performed": true},
		"storybookInstance":  map[string]any{"url": "http://localhost:6006/?path=/story/button"},
	}
	badResult     = map[string]any{"visualVerification": map[string]any{"performed": false}, "success": true}
	claimedBrowse = writ.ToolCallClaim{Name: "open_simple_browser", Args: map[string]any{"url": "http://localhost:6006"}}
)

func startStorybookRun(t *testing.T, h *harness) string {
	t.Helper()
	ctx := context.Background()
	r, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_1", Context: map[string]any{"component": "Button", "ticket": "UI-7"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.CurrentStep != "implement" || r.Status != writ.RunActive {
		t.Fatalf("new run = %+v", r)
	}
	v, err := h.eng.SubmitAttempt(ctx, attemptReq("run_1", "implement", map[string]any{"diff_summary": "primary color"}))
	if err != nil {
		t.Fatal(err)
	}
	if v.State != writ.VerdictAccepted || v.NextStep != "visual_check" {
		t.Fatalf("implement verdict = %+v", v)
	}
	return r.RunID
}

// observe makes writ see the browser call for the run's step, as a
// boundary check carrying the run and step ids.
func observe(t *testing.T, h *harness, run, step string) {
	t.Helper()
	rc, err := h.eng.Check(context.Background(), &writ.CheckRequest{
		TenantID: "acme", Tool: "open_simple_browser", Arguments: map[string]any{"url": "http://localhost:6006"},
		Actor: writ.Actor{Type: writ.ActorAgent, ID: "agt_ui"}, Workflow: &writ.WorkflowRef{RunID: run, StepID: step},
	})
	if err != nil || !rc.SafeToExecute {
		t.Fatalf("Check(open_simple_browser) = %+v, %v", rc, err)
	}
}

func TestStepAcceptedOnObservedEvidence(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("storybook"))
	run := startStorybookRun(t, h)
	observe(t, h, run, "visual_check")
	v, err := h.eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", goodResult, claimedBrowse))
	if err != nil {
		t.Fatal(err)
	}
	if v.State != writ.VerdictAccepted || v.NextStep != "done" || len(v.Failed) != 0 {
		t.Fatalf("verdict = %+v, want accepted, next done", v)
	}
	if r, _ := h.eng.Run(ctx, "acme", run); r.Status != writ.RunCompleted {
		t.Errorf("run status = %s after reaching the terminal step, want completed", r.Status)
	}
	rec, err := h.eng.Record(ctx, "acme", v.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Record.Status != writ.StatusDecided || rec.Record.DecisionKey != "workflow:ui.component.change/visual_check" {
		t.Errorf("verdict record = %s %s", rec.Record.Status, rec.Record.DecisionKey)
	}
	h.verify(t)
}

func TestClaimedCallIsNotObserved(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("storybook"))
	run := startStorybookRun(t, h)
	v, err := h.eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", goodResult, claimedBrowse))
	if err != nil {
		t.Fatal(err)
	}
	if v.State != writ.VerdictRetry || len(v.Failed) != 1 || v.Failed[0].Target != "open_simple_browser" || !strings.Contains(v.Failed[0].Detail, "claimed") {
		t.Fatalf("verdict = %+v, want a retry because the browser call was only claimed", v)
	}
	rec, err := h.eng.Record(ctx, "acme", v.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Record.Status != writ.StatusDeferred || !strings.Contains(string(rec.Raw), "tool_call:open_simple_browser") || !strings.Contains(string(rec.Raw), `"verdict":"reject"`) {
		t.Errorf("record does not say why: %s", rec.Raw)
	}
}

func TestRetriesSurviveARestart(t *testing.T) {
	ctx := context.Background()
	pol := compile(t, example("storybook"))
	dir := t.TempDir()
	seed := byte(3)
	clk := newClock(exampleClock)
	open := func() (*engine.Engine, *sqlite.Store) {
		seed++ // a restarted process draws fresh ids
		st, err := sqlite.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: testBindingKey, Now: clk.Now, Random: newSeededReader(seed)})
		if err != nil {
			t.Fatal(err)
		}
		return eng, st
	}
	eng, st := open()
	h := &harness{eng: eng, store: st, dir: dir}
	run := startStorybookRun(t, h)
	for i, wantLeft := range []int{2, 1} {
		v, err := eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", badResult))
		if err != nil {
			t.Fatal(err)
		}
		if v.State != writ.VerdictRetry || v.AttemptsUsed != i+1 || v.AttemptsLeft != wantLeft || v.RetryPrompt != "Return missing screenshots and validation details." {
			t.Fatalf("attempt %d verdict = %+v", i+1, v)
		}
		clk.Add(time.Duration(v.RetryAfterMS) * time.Millisecond) // the backoff, exactly
	}
	eng.Close()
	st.Close()

	eng, st = open()
	defer st.Close()
	defer eng.Close()
	r, err := eng.Run(ctx, "acme", run)
	if err != nil || r.CurrentStep != "visual_check" || r.Status != writ.RunActive {
		t.Fatalf("run after restart = %+v, %v", r, err)
	}
	v, err := eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", badResult))
	if err != nil {
		t.Fatal(err)
	}
	if v.AttemptsUsed != 3 || v.AttemptsLeft != 0 || v.State != writ.VerdictAborted {
		t.Fatalf("third attempt after restart = %+v, want the last attempt, aborted", v)
	}
	if r, _ := eng.Run(ctx, "acme", run); r.Status != writ.RunAborted {
		t.Errorf("run status = %s, want aborted", r.Status)
	}
}

func TestBadAttemptsWriteNothing(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("storybook"))
	run := startStorybookRun(t, h)
	before := h.count(t, "acme")
	events := func() int {
		r, err := h.eng.Run(ctx, "acme", run)
		if err != nil {
			t.Fatal(err)
		}
		return len(r.History)
	}
	n := events()
	tests := []struct {
		name string
		req  *writ.AttemptRequest
		code string
	}{
		{"unknown run", attemptReq("run_nope", "visual_check", goodResult), writ.ENOTFOUND},
		{"unknown step", attemptReq(run, "deploy", goodResult), writ.EINVALID},
		{"out of order", attemptReq(run, "done", goodResult), writ.ECONFLICT},
		{"no payload", attemptReq(run, "visual_check", nil), writ.EINVALID},
		{"no actor", &writ.AttemptRequest{TenantID: "acme", RunID: run, StepID: "visual_check", Result: goodResult}, writ.EINVALID},
		{"another tenant", &writ.AttemptRequest{TenantID: "globex", RunID: run, StepID: "visual_check", Actor: writ.Actor{Type: "AGENT", ID: "a"}, Result: goodResult}, writ.ENOTFOUND},
	}
	for _, tt := range tests {
		if _, err := h.eng.SubmitAttempt(ctx, tt.req); writ.ErrorCode(err) != tt.code {
			t.Errorf("%s: SubmitAttempt = %v, want %s", tt.name, err, tt.code)
		}
	}
	if _, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", Context: map[string]any{"colour": "red"}}); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("StartRun(undeclared context) = %v, want EINVALID", err)
	}
	if _, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "nope"}); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("StartRun(unknown workflow) = %v, want EINVALID", err)
	}
	if got := h.count(t, "acme"); got != before {
		t.Errorf("records = %d after bad attempts, want %d", got, before)
	}
	if got := events(); got != n {
		t.Errorf("run events = %d after bad attempts, want %d", got, n)
	}
}

// TestEarlyAttemptRefused: an attempt before the last retry verdict's
// retry_after is refused, counts nothing and writes nothing; once the
// backoff has passed, the attempt counts.
func TestEarlyAttemptRefused(t *testing.T) {
	ctx := context.Background()
	clk := newClock(exampleClock)
	h := newHarness(t, example("storybook"), withClock(clk))
	run := startStorybookRun(t, h)
	v, err := h.eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", badResult))
	if err != nil || v.State != writ.VerdictRetry || v.RetryAfterMS <= 0 {
		t.Fatalf("first attempt = %+v, %v; want a retry with a backoff", v, err)
	}
	before := h.count(t, "acme")
	clk.Add(time.Duration(v.RetryAfterMS-1) * time.Millisecond)
	_, err = h.eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", badResult))
	if writ.ErrorCode(err) != writ.ECONFLICT || !strings.Contains(err.Error(), "retry_after_ms") {
		t.Fatalf("attempt 1 ms early: %v, want a conflict naming retry_after_ms", err)
	}
	if n := h.count(t, "acme"); n != before {
		t.Errorf("an early attempt wrote %d records", n-before)
	}
	clk.Add(time.Millisecond)
	v, err = h.eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", badResult))
	if err != nil || v.AttemptsUsed != 2 {
		t.Fatalf("attempt at retry_after = %+v, %v; want it counted as the second", v, err)
	}
}
