package replay_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/replay"
)

// TestExamplesReplayEqual runs every example request of every example
// pack through a real engine and replays every record it sealed.
func TestExamplesReplayEqual(t *testing.T) {
	packs, _ := filepath.Glob(example("*", "pack.yaml"))
	var requests int
	for _, pk := range packs {
		dir := filepath.Dir(pk)
		files, _ := filepath.Glob(filepath.Join(dir, "requests", "*.json"))
		if len(files) == 0 {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			h := newHarness(t, dir)
			for _, f := range files {
				h.check(t, readRequest(t, f))
				h.clk.Add(time.Second)
			}
			sum := replayTenant(t, h.store, "acme")
			if sum.Records != int64(len(files)+h.evidence) || sum.Equal != sum.Records {
				t.Errorf("replayed %d records, %d equal; want %d, all equal", sum.Records, sum.Equal, len(files)+h.evidence)
			}
		})
		requests += len(files)
	}
	if requests < 13 {
		t.Errorf("found %d example requests, want the refund and wf-2302 ones (13)", requests)
	}
}

// attempt reads an example attempt of the storybook pack.
func attempt(t *testing.T, run, step, file string) *writ.AttemptRequest {
	t.Helper()
	var a struct {
		Result    map[string]any       `json:"result"`
		ToolCalls []writ.ToolCallClaim `json:"tool_calls"`
	}
	readJSON(t, example("storybook", "attempts", file), &a)
	return &writ.AttemptRequest{TenantID: "acme", RunID: run, StepID: step, Actor: writ.Actor{Type: writ.ActorAgent, ID: "builder"}, Result: a.Result, ToolCalls: a.ToolCalls}
}

// TestStorybookRunsReplayEqual drives the storybook workflow through
// every kind of verdict (accepted, retry, aborted, accepted after an
// observed call) and replays every record: the verdicts and the check
// that made the call observed.
func TestStorybookRunsReplayEqual(t *testing.T) {
	h := storybookRuns(t, newHarness(t, example("storybook")))
	sum := replayTenant(t, h.store, "acme")
	if sum.Records != 8 || sum.Kinds[replay.KindStepVerdict] != 7 || sum.Kinds[replay.KindCheck] != 1 {
		t.Errorf("replayed %d records, kinds %v; want 8: 7 step verdicts and 1 check", sum.Records, sum.Kinds)
	}
}

// storybookRuns runs two storybook workflow runs on an engine under
// examples/storybook: one accepted once writ observed the browser call,
// one aborted when its retry budget ran out.
func storybookRuns(t *testing.T, h *harness) *harness {
	t.Helper()
	ctx := context.Background()
	submit := func(a *writ.AttemptRequest, want string) {
		t.Helper()
		v, err := h.eng.SubmitAttempt(ctx, a)
		if err != nil {
			t.Fatalf("SubmitAttempt(%s, %s): %v", a.RunID, a.StepID, err)
		}
		if v.State != want {
			t.Fatalf("SubmitAttempt(%s, %s) = %s, want %s", a.RunID, a.StepID, v.State, want)
		}
		h.clk.Add(5 * time.Second) // past any retry_after_ms of the contract (2 s ± 20 %)
	}
	for _, run := range []string{"run_ok", "run_abort"} {
		if _, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", RunID: run,
			Context: map[string]any{"component": "Button", "ticket": "UI-142"}}); err != nil {
			t.Fatal(err)
		}
		submit(attempt(t, run, "implement", "implement.json"), writ.VerdictAccepted)
		submit(attempt(t, run, "visual_check", "visual-check-missing-evidence.json"), writ.VerdictRetry)
	}
	// run_ok: the browser call goes through writ, and the step passes.
	h.check(t, &writ.CheckRequest{TenantID: "acme", Tool: "open_simple_browser",
		Arguments: map[string]any{"url": "http://localhost:6006/?path=/story/button--primary"},
		Actor:     writ.Actor{Type: writ.ActorAgent, ID: "builder"}, Workflow: &writ.WorkflowRef{RunID: "run_ok", StepID: "visual_check"}})
	submit(attempt(t, "run_ok", "visual_check", "visual-check-accepted.json"), writ.VerdictAccepted)
	// run_abort: the retry budget runs out.
	submit(attempt(t, "run_abort", "visual_check", "visual-check-missing-evidence.json"), writ.VerdictRetry)
	submit(attempt(t, "run_abort", "visual_check", "visual-check-missing-evidence.json"), writ.VerdictAborted)
	return h
}

// approvalFlow records the seed's refund approval story and more on an
// engine under examples/refund: a high-value refund asks, is approved,
// is redeemed, and the approval is presented again once used up;
// another is denied and presented; a third expires undecided.
func approvalFlow(t *testing.T, h *harness) *harness {
	t.Helper()
	ctx := context.Background()
	ask := func(amount float64) (*writ.CheckRequest, string) {
		t.Helper()
		req := refund(t, "refund-high-value-human-review")
		req.IdempotencyKey = ""
		req.Arguments["amount_inr"] = amount
		req.Outputs["refund_amount_inr"] = amount
		rc := h.check(t, req)
		if len(rc.Metadata.ApprovalIDs) != 1 {
			t.Fatalf("check of %v INR names approvals %v, want one", amount, rc.Metadata.ApprovalIDs)
		}
		h.clk.Add(time.Minute)
		return req, rc.Metadata.ApprovalIDs[0]
	}
	decide := func(id, decision string) {
		t.Helper()
		if _, err := h.eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: id, Decision: decision, Approver: "fin_lead_77", Reason: "checked the order history"}); err != nil {
			t.Fatalf("DecideApproval(%s, %s): %v", id, decision, err)
		}
		h.clk.Add(time.Minute)
	}
	present := func(req *writ.CheckRequest, id string, want writ.Outcome) {
		t.Helper()
		r := *req
		r.ApprovalIDs = []string{id}
		if rc := h.check(t, &r); rc.Outcome != want {
			t.Fatalf("check presenting %s = %s, want %s", id, rc.Outcome, want)
		}
		h.clk.Add(time.Minute)
	}
	approved, a1 := ask(15000)
	decide(a1, writ.ApprovalApproved)
	present(approved, a1, writ.OutcomeAllow)
	present(approved, a1, writ.OutcomeReplanRequired) // used up
	denied, a2 := ask(16000)
	decide(a2, writ.ApprovalDenied)
	present(denied, a2, writ.OutcomeGoalFailTerminal)
	expired, a3 := ask(17000)
	h.clk.Add(25 * time.Hour)
	present(expired, a3, writ.OutcomeReplanRequired)
	return h
}

// TestApprovalFlowReplaysEqual replays every record of the approval
// stories: the checks that asked, the approval and denial decisions, and
// the checks that presented approvals (redeemed, used up, denied,
// expired), each with its approvals as they stood before it.
func TestApprovalFlowReplaysEqual(t *testing.T) {
	h := approvalFlow(t, newHarness(t, example("refund")))
	sum := replayTenant(t, h.store, "acme")
	if sum.Records != int64(9+h.evidence) || sum.Kinds[replay.KindApprovalDecision] != 2 || sum.Kinds[replay.KindCheck] != 7 {
		t.Errorf("replayed %d records, kinds %v; want 9: 7 checks, 2 approval decisions, besides %d evidence records", sum.Records, sum.Kinds, h.evidence)
	}
	// The redeemed check carries its approval, and replays with it.
	page, err := h.store.Records(context.Background(), writ.RecordQuery{TenantID: "acme", DecisionKey: "support.refund.execute", Status: writ.StatusInFlight})
	if err != nil || len(page.Records) != 1 || len(page.Records[0].Record.Approvals) != 1 {
		t.Fatalf("allowed refund records = %v, %v; want one, with its approval", page, err)
	}
}

// TestRecordAndTrace replays one record by id and a trace by id.
func TestRecordAndTrace(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	req := refund(t, "refund-allow")
	req.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	rc := h.check(t, req)
	req2 := refund(t, "refund-high-value-human-review")
	req2.TraceID = req.TraceID
	h.check(t, req2)
	h.check(t, refund(t, "refund-fraud-terminal-review"))

	rp := replay.New(h.store, replay.Options{})
	res, err := rp.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil || res.Status != replay.StatusEqual || res.Kind != replay.KindCheck || res.Seq != int64(h.evidence)+1 {
		t.Errorf("Record(%s) = %+v, %v; want replay_equal, a check at seq %d (after the evidence on file)", rc.Metadata.RecordID, res, err, h.evidence+1)
	}
	if _, err := rp.Record(ctx, "other", rc.Metadata.RecordID); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Record of another tenant: %v, want not found", err)
	}
	rs, err := rp.Trace(ctx, "acme", req.TraceID)
	if err != nil || len(rs) != 2 || rs[0].Status != replay.StatusEqual || rs[1].Status != replay.StatusEqual {
		t.Errorf("Trace(%s) = %+v, %v; want 2 records, replay_equal", req.TraceID, rs, err)
	}
	if _, err := rp.Trace(ctx, "acme", "00000000000000000000000000000001"); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Trace of an unknown trace: %v, want not found", err)
	}
}

// whatIf replays record id under opts and returns the result.
func whatIf(t *testing.T, h *harness, id string, opts replay.Options) *replay.Result {
	t.Helper()
	res, err := replay.New(h.store, opts).Record(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestEachInputClassYieldsItsDiff changes one class of input at a time
// and checks that the replay names exactly that class, with the paths
// that changed.
func TestEachInputClassYieldsItsDiff(t *testing.T) {
	h := newHarness(t, example("refund"))
	id := h.check(t, refund(t, "refund-allow")).Metadata.RecordID
	lowered := compile(t, copyPack(t, example("refund"), "policies/returns.yaml", "when: args.amount_inr > 10000", "when: args.amount_inr > 4000"))
	tests := []struct {
		name      string
		opts      replay.Options
		wantClass string
		wantPaths []string // each must be among the differences
	}{
		{
			name: "evidence",
			opts: replay.Options{Request: func(r *writ.CheckRequest) {
				at := exampleClock.Add(-time.Minute)
				r.Evidence = append(r.Evidence, writ.Evidence{Kind: "order_note", ID: "note_1", Version: "2", TenantID: "acme", ObservedAt: &at})
			}},
			wantClass: replay.ClassEvidence,
			wantPaths: []string{"evidence_refs", "replay.evidence_snapshot_hash"},
		},
		{
			name:      "pack rule",
			opts:      replay.Options{Pack: lowered},
			wantClass: replay.ClassPolicy,
			wantPaths: []string{"outputs.outcome", "status", "lineage.pack_hash", "replay.compiled_context_hash"},
		},
		{
			name: "tool transcript",
			opts: replay.Options{Request: func(r *writ.CheckRequest) {
				r.ToolLineage = append(r.ToolLineage, writ.ToolLineage{ToolCallID: "tc_117", ToolResultID: "tr_117", ApprovalModeEffective: writ.ModeReadOnly})
			}},
			wantClass: replay.ClassToolTranscript,
			wantPaths: []string{"tool_lineage", "replay.tool_transcript_chain_hash"},
		},
		{
			name:      "scorecard",
			opts:      replay.Options{Request: func(r *writ.CheckRequest) { r.Scorecard["utility"] = 0.5 }},
			wantClass: replay.ClassScorecard,
			wantPaths: []string{"scorecard.utility"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := whatIf(t, h, id, tc.opts)
			if res.Status != replay.StatusDiff || !slices.Equal(res.Classes, []string{tc.wantClass}) {
				b, _ := json.MarshalIndent(res, "", "  ")
				t.Fatalf("replay = %s %v, want diff of exactly [%s]:\n%s", res.Status, res.Classes, tc.wantClass, b)
			}
			for _, p := range tc.wantPaths {
				if !slices.ContainsFunc(res.Differences, func(d replay.Difference) bool { return d.Path == p }) {
					t.Errorf("differences %+v lack path %s", res.Differences, p)
				}
			}
		})
	}
	// A what-if that changes nothing is equal.
	if res := whatIf(t, h, id, replay.Options{Request: func(*writ.CheckRequest) {}}); res.Status != replay.StatusEqual {
		t.Errorf("replay with a no-op change = %+v, want replay_equal", res)
	}
}

// TestTamperDetected changes stored bytes behind the store's back: each
// change is tamper_detected, and nothing else.
func TestTamperDetected(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		triggers []string
		tamper   func(t *testing.T, h *harness, db *sql.DB, rec *writ.StoredRecord)
		wantPath string
	}{
		{
			name:     "a byte of the stored envelope",
			triggers: []string{"envelopes_no_update"},
			tamper: func(t *testing.T, h *harness, db *sql.DB, rec *writ.StoredRecord) {
				flipEnvelope(t, db, rec.Record.Replay.ReplayPacketID, `"amount_inr":4200`, `"amount_inr":4201`)
			},
			wantPath: "replay.replay_packet_id",
		},
		{
			name:     "the stored envelope deleted",
			triggers: []string{"envelopes_no_delete"},
			tamper: func(t *testing.T, h *harness, db *sql.DB, rec *writ.StoredRecord) {
				mustExec(t, db, `DELETE FROM envelopes WHERE hash = ?`, rec.Record.Replay.ReplayPacketID)
			},
			wantPath: "replay.replay_packet_id",
		},
		{
			name:     "a byte of the stored record",
			triggers: []string{"records_no_update"},
			tamper: func(t *testing.T, h *harness, db *sql.DB, rec *writ.StoredRecord) {
				raw := bytes.Replace(rec.Raw, []byte(`"outcome":"allow"`), []byte(`"outcome":"allxw"`), 1)
				mustExec(t, db, `UPDATE records SET raw = ? WHERE record_id = ?`, raw, rec.Record.RecordID)
			},
			wantPath: "audit.record_hash",
		},
		{
			name:     "a byte of a pinned pack file",
			triggers: []string{"blobs_no_update"},
			tamper: func(t *testing.T, h *harness, db *sql.DB, rec *writ.StoredRecord) {
				var hash string
				if err := db.QueryRow(`SELECT hash FROM blobs WHERE kind = 'pack_file' AND CAST(data AS TEXT) LIKE '%R_HIGH_VALUE_REQUIRES_APPROVAL%'`).Scan(&hash); err != nil {
					t.Fatal(err)
				}
				flipBlob(t, db, hash, "args.amount_inr > 10000", "args.amount_inr > 99999")
			},
			wantPath: "lineage.pack_hash",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, example("refund"))
			id := h.check(t, refund(t, "refund-allow")).Metadata.RecordID
			rec, err := h.store.Record(ctx, "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, h, rawDB(t, h.dir, tc.triggers...), rec)
			res, err := replay.New(h.store, replay.Options{}).Record(ctx, "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != replay.StatusDiff || !slices.Equal(res.Classes, []string{replay.ClassTamper}) {
				b, _ := json.MarshalIndent(res, "", "  ")
				t.Fatalf("replay = %s %v, want diff of exactly [tamper_detected]:\n%s", res.Status, res.Classes, b)
			}
			if !slices.ContainsFunc(res.Differences, func(d replay.Difference) bool { return d.Path == tc.wantPath && d.Detail != "" }) {
				t.Errorf("differences %+v do not name %s", res.Differences, tc.wantPath)
			}
		})
	}
}

// TestTamperedRecordNamesWhatChanged: a record whose bytes changed shows
// where, every difference marked as tampering.
func TestTamperedRecordNamesWhatChanged(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	id := h.check(t, refund(t, "refund-high-value-human-review")).Metadata.RecordID
	rec, _ := h.store.Record(ctx, "acme", id)
	raw := bytes.Replace(rec.Raw, []byte(`"status":"ESCALATED"`), []byte(`"status":"DECIDED"`), 1)
	raw = bytes.Replace(raw, []byte(`"outcome":"replan_required"`), []byte(`"outcome":"allow"`), 1)
	mustExec(t, rawDB(t, h.dir, "records_no_update"), `UPDATE records SET raw = ? WHERE record_id = ?`, raw, id)
	res, err := replay.New(h.store, replay.Options{}).Record(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range res.Differences {
		if d.Class != replay.ClassTamper {
			t.Errorf("difference %+v is not tamper_detected", d)
		}
		paths = append(paths, d.Path)
	}
	if want := []string{"audit.record_hash", "outputs.outcome", "status"}; !slices.Equal(paths, want) {
		t.Errorf("paths = %v, want %v", paths, want)
	}
}

// TestMissingRunAndApprovalEvents: the events a record was decided on
// that the record does not pin by hash. An approval decision or a step
// verdict whose own event is gone is tamper_detected; a check that
// presented an approval whose events are gone decides otherwise, which
// is a changed decision.
func TestMissingRunAndApprovalEvents(t *testing.T) {
	ctx := context.Background()
	h := approvalFlow(t, newHarness(t, example("refund")))
	mustExec(t, rawDB(t, h.dir, "approval_events_no_delete"), `DELETE FROM approval_events`)
	got := map[string][]string{}
	_, err := replay.New(h.store, replay.Options{}).Tenant(ctx, "acme", func(r *replay.Result) error {
		got[r.Kind] = append(got[r.Kind], strings.TrimSpace(r.Status+" "+strings.Join(r.Classes, ",")))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		replay.KindApprovalDecision: {"diff tamper_detected", "diff tamper_detected"},
		// asked, redeemed, used up, asked, denied, asked, expired
		replay.KindCheck: {"replay_equal", "diff changed_policy", "replay_equal", "replay_equal", "diff changed_policy", "replay_equal", "replay_equal"},
	}
	for kind, w := range want {
		if !slices.Equal(got[kind], w) {
			t.Errorf("replays of %s records = %v, want %v", kind, got[kind], w)
		}
	}

	s := newHarness(t, example("storybook"))
	if _, err := s.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_1"}); err != nil {
		t.Fatal(err)
	}
	v, err := s.eng.SubmitAttempt(ctx, attempt(t, "run_1", "implement", "implement.json"))
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, rawDB(t, s.dir, "run_events_no_delete"), `DELETE FROM run_events WHERE kind = 'step_attempt'`)
	res, err := replay.New(s.store, replay.Options{}).Record(ctx, "acme", v.RecordID)
	if err != nil || !slices.Equal(res.Classes, []string{replay.ClassTamper}) || res.Differences[0].Input != "run run_1" {
		t.Errorf("replay of a verdict whose run event is gone = %+v, %v; want tamper_detected naming run run_1", res, err)
	}
}

func flipBlob(t *testing.T, db *sql.DB, hash, old, new string) {
	t.Helper()
	var data []byte
	if err := db.QueryRow(`SELECT data FROM blobs WHERE hash = ?`, hash).Scan(&data); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("blob %s does not hold %q", hash, old)
	}
	mustExec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, []byte(strings.Replace(string(data), old, new, 1)), hash)
}

// flipEnvelope edits the envelope kept with a record, found by its
// address.
func flipEnvelope(t *testing.T, db *sql.DB, hash, old, new string) {
	t.Helper()
	var data []byte
	if err := db.QueryRow(`SELECT data FROM envelopes WHERE hash = ?`, hash).Scan(&data); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("envelope %s does not hold %q", hash, old)
	}
	mustExec(t, db, `UPDATE envelopes SET data = ? WHERE hash = ?`, []byte(strings.Replace(string(data), old, new, 1)), hash)
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// TestRedactedValuesCannotBeReplayed: replay decides on the stored,
// redacted request. A rule that read a value redaction removed decides
// otherwise on replay, and replay says so (a changed policy decision)
// rather than pretend the decision was reproduced.
func TestRedactedValuesCannotBeReplayed(t *testing.T) {
	dir := copyPack(t, example("refund"), "policies/returns.yaml", "  - id: R_REPEAT_REFUND_WARNING", `  - id: R_TEST_CARD
    description: Test cards are flagged.
    when: has(args.card_number) && args.card_number.startsWith('4111')
    effect: warn
    reason:
      code: test_card
      message: This refund goes to a test card.

  - id: R_REPEAT_REFUND_WARNING`)
	h := newHarness(t, dir)
	rc := h.check(t, refund(t, "refund-allow"))
	if rc.Outcome != writ.OutcomeAllowWithWarning {
		t.Fatalf("live outcome = %s, want allow_with_warning (the rule read the card number)", rc.Outcome)
	}
	res := whatIf(t, h, rc.Metadata.RecordID, replay.Options{})
	if res.Status != replay.StatusDiff || !slices.Equal(res.Classes, []string{replay.ClassPolicy}) {
		t.Fatalf("replay = %+v, want a diff of changed_policy", res)
	}
	var outcome *replay.Difference
	for i, d := range res.Differences {
		if d.Path == "outputs.outcome" {
			outcome = &res.Differences[i]
		}
	}
	if outcome == nil || string(outcome.Recorded) != `"allow_with_warning"` || string(outcome.Replayed) != `"allow"` {
		t.Errorf("outputs.outcome difference = %+v, want allow_with_warning → allow", outcome)
	}
}

// TestPostgresReplaysEqual records the examples, the storybook runs and
// the approval stories in PostgreSQL, which keeps times to the
// microsecond, and replays every record equal.
func TestPostgresReplaysEqual(t *testing.T) {
	for _, name := range []string{"refund", "wf-2302"} {
		h := newHarnessOn(t, example(name), openPostgres(t))
		files, _ := filepath.Glob(example(name, "requests", "*.json"))
		for _, f := range files {
			h.check(t, readRequest(t, f))
			h.clk.Add(1234567 * time.Nanosecond)
		}
		if sum := replayTenant(t, h.store, "acme"); sum.Equal != int64(len(files)+h.evidence) {
			t.Errorf("%s: %d of %d records replayed equal", name, sum.Equal, len(files)+h.evidence)
		}
	}
	h := storybookRuns(t, newHarnessOn(t, example("storybook"), openPostgres(t)))
	if sum := replayTenant(t, h.store, "acme"); sum.Equal != 8 {
		t.Errorf("storybook: %d of 8 records replayed equal", sum.Equal)
	}
	h = newHarnessOn(t, example("refund"), openPostgres(t))
	h.clk.Add(987654321 * time.Nanosecond) // a clock finer than PostgreSQL's microseconds
	h = approvalFlow(t, h)
	if sum := replayTenant(t, h.store, "acme"); sum.Equal != int64(9+h.evidence) {
		t.Errorf("approvals: %d of %d records replayed equal", sum.Equal, 9+h.evidence)
	}
}
