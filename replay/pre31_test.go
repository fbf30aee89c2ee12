package replay_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/sqlite"
)

// TestPre31RecordsReplayEqual: records decided before issue 31 (a
// session's calls not metered, a claimed tool call accepted, a mutating
// step accepted without a contract and without a workflow policies file)
// replay equal under today's code, which decides the same inputs
// differently (see testdata/pre31/README.md).
func TestPre31RecordsReplayEqual(t *testing.T) {
	dir := t.TempDir()
	src, err := os.Open(filepath.Join("testdata", "pre31", "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(dir, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sum := replayTenant(t, st, "acme")
	if sum.Records != 5 || sum.Equal != 5 {
		t.Errorf("replayed %d records, %d equal; want 5 equal", sum.Records, sum.Equal)
	}

	// The same inputs, decided today.
	h := newHarness(t, filepath.Join("testdata", "pre31", "pack"))
	ctx := context.Background()
	actor := writ.Actor{Type: writ.ActorAgent, ID: "agt_1"}
	var third *writ.Receipt
	for i := 1; i <= 3; i++ {
		third = h.check(t, &writ.CheckRequest{TenantID: "acme", Tool: "records.update", Arguments: map[string]any{"n": float64(i)}, Actor: actor,
			InputsRefs: &writ.InputsRefs{Session: "sess_1"}, Usage: &writ.Usage{ToolCalls: 1}})
	}
	if third.SafeToExecute || third.Outcome != writ.OutcomeGoalFailTerminal {
		t.Errorf("third check of sess_1 today = %s, want goal_fail_terminal: writ counts 3 calls against the budget of 2", third.Outcome)
	}
	if _, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "pre31.flow", RunID: "run_1"}); err != nil {
		t.Fatal(err)
	}
	v, err := h.eng.SubmitAttempt(ctx, &writ.AttemptRequest{TenantID: "acme", RunID: "run_1", StepID: "draft", Actor: actor,
		Result: map[string]any{"performed": false}, ToolCalls: []writ.ToolCallClaim{{Name: "open_simple_browser"}}})
	if err != nil || v.State != writ.VerdictAborted || len(v.ClaimedCalls) != 1 {
		t.Errorf("draft on a claimed call today = %+v, %v; want aborted, listing the claimed call", v, err)
	}
	if sum := replayTenant(t, h.store, "acme"); sum.Equal != sum.Records {
		t.Errorf("today's records: %d of %d replayed equal", sum.Equal, sum.Records)
	}
}

// TestPreSessionRecordReplaysEqual: a check with a tool_calls budget
// that named no session and no run, decided (allowed, on the caller's
// figure) before writ refused such checks, replays equal; today the same
// check is refused (budget_unmetered), pins writ.no_session, and its
// record replays equal too (see testdata/pre31session/README.md).
func TestPreSessionRecordReplaysEqual(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "pre31session", "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "writ.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if sum := replayTenant(t, st, "acme"); sum.Records != 1 || sum.Equal != 1 {
		t.Errorf("replayed %d records, %d equal; want 1 equal", sum.Records, sum.Equal)
	}

	h := newHarness(t, filepath.Join("testdata", "pre31", "pack"))
	rc := h.check(t, &writ.CheckRequest{TenantID: "acme", Tool: "records.update", Arguments: map[string]any{"n": float64(1)},
		Actor: writ.Actor{Type: writ.ActorAgent, ID: "agt_1"}, Usage: &writ.Usage{ToolCalls: 1}})
	if rc.SafeToExecute || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "budget_unmetered" {
		t.Errorf("the same check today = %s %+v, want blocked with budget_unmetered", rc.Outcome, rc.Reasons)
	}
	rec, err := h.eng.Record(context.Background(), "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if hv := rec.Record.History; len(hv) != 1 || hv[0].Name != "writ.no_session" {
		t.Errorf("today's record pins history %+v, want writ.no_session", hv)
	}
	if sum := replayTenant(t, h.store, "acme"); sum.Equal != sum.Records || sum.Records != 1 {
		t.Errorf("today's records: %d of %d replayed equal", sum.Equal, sum.Records)
	}
}
