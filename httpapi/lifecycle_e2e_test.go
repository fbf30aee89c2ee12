package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/packtest"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/sqlite"
)

// TestLifecycleEndToEnd follows one refund decision over HTTP with the Go
// client: a 15,000 INR refund goes to human review; the agent waits; an
// approver approves; the wait returns an allow with the approval attached;
// the agent reports the refund executed; the decision's story reads
// ESCALATED, approval, IN_FLIGHT, CLOSED in chain order; the ledger
// verifies intact and every record replays equal. Then the bad inputs,
// each refused with nothing written.
func TestLifecycleEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join("..", "examples", "refund")
	// The examples' evidence was observed on 2026-05-09 before 09:31.
	start := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
	var ahead atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(ahead.Load())) }
	eng, st := newEngine(t, dir, now)
	srv := validated(t, httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Ledger: eng, Approvals: eng, Lifecycle: eng, Now: now})))
	t.Cleanup(srv.Close)
	c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(srv.Client()))
	var _ writ.Lifecycle = c

	read := func(name string) *writ.CheckRequest {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "requests", name))
		if err != nil {
			t.Fatal(err)
		}
		var req writ.CheckRequest
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		return &req
	}
	req := read("refund-high-value-human-review.json")
	blocked, err := c.Check(ctx, req)
	if err != nil || blocked.Disposition.Mode != writ.ModeHumanReview || len(blocked.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("Check(15,000 INR) = %+v, %v; want human_review with one approval request", blocked, err)
	}
	decisionID, approvalID := blocked.DecisionID, blocked.Metadata.ApprovalIDs[0]

	// The agent waits; the approver approves while it does.
	type answer struct {
		rc  *writ.Receipt
		err error
	}
	waited := make(chan answer, 1)
	go func() {
		rc, err := c.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: decisionID, Request: read("refund-high-value-human-review.json"), Wait: time.Minute})
		waited <- answer{rc, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for eng.Waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the resume never started waiting")
		}
		runtime.Gosched()
	}
	ahead.Store(int64(2 * time.Minute))
	if _, err := c.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: approvalID, Decision: writ.ApprovalApproved,
		Approver: "user_finance_lead_77", Reason: "Invoice checked; the customer is verified."}); err != nil {
		t.Fatalf("DecideApproval() error = %v", err)
	}
	a := <-waited
	if a.err != nil || a.rc.Outcome != writ.OutcomeAllow || !a.rc.SafeToExecute || a.rc.DecisionID != decisionID {
		t.Fatalf("Resume(wait) = %+v, %v; want allow for decision %s", a.rc, a.err, decisionID)
	}
	allowed := a.rc
	if allowed.Metadata.ExecutionReport != "required" || allowed.Metadata.ExpiresAt == nil || !allowed.Metadata.ExpiresAt.Equal(now().Add(15*time.Minute)) {
		t.Errorf("allow metadata = %+v; want a required execution report and an expiry 15m on", allowed.Metadata)
	}
	permit, err := c.Record(ctx, "acme", allowed.Metadata.RecordID)
	if err != nil || permit.Record.Status != writ.StatusInFlight || len(permit.Record.Approvals) != 1 || permit.Record.Supersedes != blocked.Metadata.RecordID {
		t.Fatalf("the allowed record = %+v, %v; want IN_FLIGHT with the approval, superseding the blocked record", permit, err)
	}

	// The refund ran; the agent reports it.
	report := &writ.ExecutionReport{TenantID: "acme", DecisionID: decisionID, Status: writ.ExecutionSucceeded, ToolResultID: "tr_121",
		ResultDigest: "sha256:" + string(bytes.Repeat([]byte("ab"), 32)), IdempotencyKey: "ik_2x9k4j7m1q8w0p3z", ReversalToken: "rv_refund_txn_q9"}
	ack, err := c.ReportExecution(ctx, report)
	if err != nil || ack.Status != writ.StatusClosed || ack.ReportedFor != permit.Record.RecordID || len(ack.Findings) != 0 || ack.Repeated != "" {
		t.Fatalf("ReportExecution() = %+v, %v; want CLOSED, for the permit, no finding", ack, err)
	}
	if again, err := c.ReportExecution(ctx, report); err != nil || again.RecordID != ack.RecordID || again.Repeated != writ.RepeatedIdempotent {
		t.Errorf("ReportExecution() again = %+v, %v; want the first acknowledgement, repeated", again, err)
	}
	rep, err := c.Record(ctx, "acme", ack.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	tl := rep.Record.ToolLineage
	if len(tl) != 1 || tl[0].ToolCallID != "tc_121" || tl[0].ToolResultID != "tr_121" || tl[0].IdempotencyKey != "ik_2x9k4j7m1q8w0p3z" ||
		tl[0].ReversalToken != "rv_refund_txn_q9" || tl[0].ApprovalModeEffective != writ.ModeDestructive {
		t.Errorf("the report's tool_lineage = %+v", tl)
	}

	story, err := c.Decision(ctx, "acme", decisionID)
	if err != nil {
		t.Fatalf("Decision() error = %v", err)
	}
	var got []string
	var seqs []int64
	for _, r := range story.Records {
		got = append(got, r.Kind+" "+string(r.Status))
		seqs = append(seqs, r.Seal.Seq)
	}
	want := []string{"check ESCALATED", "approval_decision DECIDED", "check IN_FLIGHT", "execution_report CLOSED"}
	if !slices.Equal(got, want) || !slices.IsSorted(seqs) {
		t.Errorf("the story = %q at seqs %v, want %q in chain order", got, seqs, want)
	}
	if s := story.State; s.Status != writ.StatusClosed || s.Execution != writ.ExecutionSucceeded || s.InFlight || s.PermitRecordID != permit.Record.RecordID {
		t.Errorf("the story's state = %+v", s)
	}
	if len(story.Approvals) != 1 || story.Approvals[0].ApprovalID != approvalID || story.Approvals[0].State != writ.ApprovalApproved {
		t.Errorf("the story's approvals = %+v", story.Approvals)
	}

	// Bad input: refused, and nothing written.
	terminal, err := c.Check(ctx, read("refund-account-frozen-goal-fail.json"))
	if err != nil || terminal.SafeToExecute {
		t.Fatalf("Check(frozen account) = %+v, %v", terminal, err)
	}
	head, _ := st.Head(ctx, "acme")
	evil := read("refund-high-value-human-review.json")
	evil.Evidence[0].TenantID = "globex"
	for _, tt := range []struct {
		name string
		call func() error
		code string
	}{
		{"an unknown decision", func() error {
			_, err := c.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: "dec_unknown", Status: writ.ExecutionSucceeded})
			return err
		}, writ.ENOTFOUND},
		{"another tenant's decision", func() error {
			_, err := c.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "globex", DecisionID: decisionID, Status: writ.ExecutionFailed})
			return err
		}, writ.ENOTFOUND},
		{"a blocked decision reported succeeded", func() error {
			_, err := c.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: terminal.DecisionID, Status: writ.ExecutionSucceeded})
			return err
		}, writ.ECONFLICT},
		{"a second, different report", func() error {
			r := *report
			r.Status, r.Error = writ.ExecutionFailed, &writ.ExecutionError{Code: "gateway_timeout"}
			_, err := c.ReportExecution(ctx, &r)
			return err
		}, writ.ECONFLICT},
		{"a malformed report", func() error {
			_, err := c.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: terminal.DecisionID, Status: "done", ResultDigest: "the whole payload"})
			return err
		}, writ.EINVALID},
		{"a resume with evidence of another tenant", func() error {
			_, err := c.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: decisionID, Request: evil})
			return err
		}, writ.EINVALID},
		{"a resume of a terminal decision", func() error {
			_, err := c.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: terminal.DecisionID, Request: read("refund-account-frozen-goal-fail.json")})
			return err
		}, writ.ECONFLICT},
	} {
		if err := tt.call(); writ.ErrorCode(err) != tt.code {
			t.Errorf("%s: error = %v, want code %s", tt.name, err, tt.code)
		}
	}
	if after, _ := st.Head(ctx, "acme"); after != head {
		t.Errorf("the bad inputs moved the chain from %+v to %+v; want nothing written", head, after)
	}

	rep2, err := verify.Verify(ctx, st, verify.VerifyOptions{Rules: verify.NewRules(pinned.NewPacks(st)), Hashes: st, Revocations: st})
	if err != nil || !rep2.Intact() {
		t.Fatalf("Verify() = %+v, %v; want intact", rep2, err)
	}
	sum, err := replay.New(st, replay.Options{}).Tenant(ctx, "acme", func(r *replay.Result) error {
		if r.Status != writ.ReplayEqual {
			t.Errorf("replay of %s (%s) = %s %v", r.RecordID, r.Kind, r.Status, r.Differences)
		}
		return nil
	})
	if err != nil || sum.Equal != sum.Records || sum.Kinds[replay.KindExecutionReport] != 1 {
		t.Errorf("replay summary = %+v, %v; want every record equal, one execution report", sum, err)
	}
}

// newEngine starts an engine on a fresh SQLite store with the pack in dir
// and the clock now; both are closed when the test ends.
func newEngine(tb testing.TB, dir string, now func() time.Time) (*engine.Engine, *sqlite.Store) {
	tb.Helper()
	st, err := sqlite.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	p, err := pack.Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		tb.Fatal(err)
	}
	eng, err := engine.New(context.Background(), engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32), Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	putOnFile(tb, eng, dir)
	return eng, st
}

// putOnFile puts the evidence the pack's tests keep on file (their
// evidence_store) in eng's store, submitted by each item's issuer as writ
// test does: the example requests cite it, and a refund accepts only
// evidence writ resolves.
func putOnFile(tb testing.TB, eng *engine.Engine, dir string) {
	tb.Helper()
	p, err := pack.Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	files, err := pack.LoadTests(dir, p)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range files {
		for _, te := range f.EvidenceStore {
			if _, err := packtest.StoreEvidence(context.Background(), eng, "acme", te); err != nil {
				tb.Fatalf("evidence %s on file: %v", te.ID, err)
			}
		}
	}
}
