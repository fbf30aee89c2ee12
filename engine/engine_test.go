package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
)

func refundRequest(t testing.TB, name string) *writ.CheckRequest {
	return readRequest(t, example("refund", "requests", name+".json"))
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	first, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
	if err != nil {
		t.Fatal(err)
	}
	if again.DecisionID != first.DecisionID || again.Metadata.RecordID != first.Metadata.RecordID || again.Metadata.Repeated != writ.RepeatedIdempotent {
		t.Errorf("retry with the same idempotency key = %s/%s (%q), want %s/%s marked idempotent",
			again.DecisionID, again.Metadata.RecordID, again.Metadata.Repeated, first.DecisionID, first.Metadata.RecordID)
	}
	if n := h.count(t, "acme"); n != 1 {
		t.Errorf("records after an idempotent retry = %d, want 1", n)
	}

	changed := refundRequest(t, "refund-allow")
	changed.Arguments["amount_inr"] = 4300.0
	_, err = h.eng.Check(ctx, changed)
	if code := writ.ErrorCode(err); code != writ.ECONFLICT {
		t.Errorf("same idempotency key, other arguments: error code %q (%v), want %q", code, err, writ.ECONFLICT)
	}
	if n := h.count(t, "acme"); n != 1 {
		t.Errorf("records after a conflicting retry = %d, want 1", n)
	}

	other := refundRequest(t, "refund-allow")
	other.TenantID = "globex"
	other.Evidence[0].TenantID, other.Evidence[1].TenantID = "globex", "globex"
	rc, err := h.eng.Check(ctx, other)
	if err != nil || rc.Metadata.Repeated != "" {
		t.Errorf("same key in another tenant = %+v, %v; want a fresh decision", rc, err)
	}
}

func TestConcurrentIdempotentChecksWriteOneRecord(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	var wg sync.WaitGroup
	ids := make([]string, 16)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = rc.Metadata.RecordID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent idempotent checks answered records %v, want one", ids)
		}
	}
	if n := h.count(t, "acme"); n != 1 {
		t.Errorf("records = %d, want 1", n)
	}
}

func TestMustNotRetrySameAction(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	blocked, err := h.eng.Check(ctx, refundRequest(t, "refund-exceeds-order-goal-fail"))
	if err != nil {
		t.Fatal(err)
	}
	if !blocked.MustNotRetrySameAction || blocked.SafeToExecute {
		t.Fatalf("denied refund: must_not_retry=%v safe=%v, want true/false", blocked.MustNotRetrySameAction, blocked.SafeToExecute)
	}
	// The same action again, with only bookkeeping changed: the earlier decision comes back.
	retry := refundRequest(t, "refund-exceeds-order-goal-fail")
	retry.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	retry.ToolCallID = "tc_999"
	again, err := h.eng.Check(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if again.DecisionID != blocked.DecisionID || again.Metadata.Repeated != writ.RepeatedMustNotRetry {
		t.Errorf("unchanged retry of a blocked action = %s (%q), want %s marked must_not_retry", again.DecisionID, again.Metadata.Repeated, blocked.DecisionID)
	}
	if n := h.count(t, "acme"); n != 1 {
		t.Errorf("records = %d, want 1", n)
	}
	// must_not_retry binds the action, not the caller's bookkeeping: the
	// same action with other usage or another scorecard is still the
	// blocked action (issue 31).
	for name, edit := range map[string]func(*writ.CheckRequest){
		"more usage":      func(r *writ.CheckRequest) { r.Usage.Tokens += 500 },
		"less usage":      func(r *writ.CheckRequest) { r.Usage = &writ.Usage{} },
		"no usage":        func(r *writ.CheckRequest) { r.Usage = nil },
		"other scorecard": func(r *writ.CheckRequest) { r.Scorecard = map[string]float64{"policy": 1, "safety": 1} },
	} {
		req := refundRequest(t, "refund-exceeds-order-goal-fail")
		edit(req)
		rc, err := h.eng.Check(ctx, req)
		if err != nil || rc.SafeToExecute || rc.DecisionID != blocked.DecisionID || rc.Metadata.Repeated != writ.RepeatedMustNotRetry {
			t.Errorf("retry of the blocked action with %s = %+v (%v), want %s again, marked must_not_retry", name, rc, err, blocked.DecisionID)
		}
	}
	// A changed action is decided afresh.
	changed := refundRequest(t, "refund-exceeds-order-goal-fail")
	changed.Arguments["amount_inr"] = 4200.0
	changed.Outputs["refund_amount_inr"] = 4200.0
	rc, err := h.eng.Check(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != writ.OutcomeAllow || rc.Metadata.Repeated != "" {
		t.Errorf("changed action = %s (%q), want a fresh allow", rc.Outcome, rc.Metadata.Repeated)
	}
	// A replan is not blocked: the same request may be retried.
	replan, err := h.eng.Check(ctx, refundRequest(t, "refund-missing-idv-local-replan"))
	if err != nil {
		t.Fatal(err)
	}
	if replan.MustNotRetrySameAction {
		t.Errorf("local replan has must_not_retry_same_action = true")
	}
}

// failingStore fails every append, as a full disk or a lost database would.
type failingStore struct {
	ledger.Store
	mu      sync.Mutex
	appends int
}

func (f *failingStore) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	f.mu.Lock()
	f.appends++
	f.mu.Unlock()
	return errors.New("disk I/O error")
}

func TestFailClosedWhenTheRecordCannotBeCommitted(t *testing.T) {
	ctx := context.Background()
	var fs *failingStore
	h := newHarness(t, example("refund"), func(c *engine.Config) {
		fs = &failingStore{Store: c.Store}
		c.Store = fs
	})
	rc, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
	if writ.ErrorCode(err) != writ.EUNAVAILABLE {
		t.Fatalf("Check on a failing store: error %v, want EUNAVAILABLE", err)
	}
	if rc == nil || rc.SafeToExecute || rc.Disposition.DownstreamAllowed || !rc.Metadata.FailClosed || rc.Metadata.RecordID != "" {
		t.Fatalf("fail-closed receipt = %+v, want safe_to_execute false, fail_closed, no record id", rc)
	}
	if len(rc.Reasons) != 1 || rc.Reasons[0].Code != "record_not_committed" {
		t.Errorf("reasons = %+v, want record_not_committed", rc.Reasons)
	}
	if strings.Contains(err.Error(), "disk I/O") || strings.Contains(rc.Reasons[0].Message, "disk I/O") {
		t.Errorf("the internal cause leaked to the caller: %v / %s", err, rc.Reasons[0].Message)
	}
	if fs.appends == 0 {
		t.Error("the store was never asked to append")
	}
	if n := h.count(t, "acme"); n != 0 {
		t.Errorf("records = %d, want 0", n)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	tests := []struct {
		name  string
		edit  func(r *writ.CheckRequest)
		field string
	}{
		{"missing tenant", func(r *writ.CheckRequest) { r.TenantID = "" }, "tenant_id"},
		{"bad tenant", func(r *writ.CheckRequest) { r.TenantID = "a b" }, "tenant_id"},
		{"unknown decision key", func(r *writ.CheckRequest) { r.Tool = ""; r.DecisionKey = "support.refund.nope" }, "decision_key"},
		{"unknown tool", func(r *writ.CheckRequest) { r.Tool = "payments.nope" }, "tool"},
		{"tool and key disagree", func(r *writ.CheckRequest) { r.DecisionKey = "other.key" }, "decision_key"},
		{"no action", func(r *writ.CheckRequest) { r.Tool = ""; r.DecisionKey = "" }, "decision_key"},
		{"missing actor", func(r *writ.CheckRequest) { r.Actor = writ.Actor{} }, "actor.type"},
		{"bad actor type", func(r *writ.CheckRequest) { r.Actor.Type = "ROBOT" }, "actor.type"},
		{"evidence without kind", func(r *writ.CheckRequest) { r.Evidence[0].Kind = "" }, "evidence[0].kind"},
		{"bad trace id", func(r *writ.CheckRequest) { r.TraceID = "XYZ" }, "trace_id"},
		{"outputs break the schema", func(r *writ.CheckRequest) { r.Outputs["currency"] = "USD" }, "outputs.currency"},
		{"outputs missing a field", func(r *writ.CheckRequest) { delete(r.Outputs, "order_id") }, "outputs"},
		{"outputs set outcome", func(r *writ.CheckRequest) { r.Outputs["outcome"] = "approved" }, "outputs.outcome"},
		{"unknown approval mode", func(r *writ.CheckRequest) { r.ApprovalMode = "godmode" }, "approval_mode"},
		{"negative usage", func(r *writ.CheckRequest) { r.Usage.Tokens = -1 }, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := refundRequest(t, "refund-allow")
			req.IdempotencyKey = ""
			tt.edit(req)
			rc, err := h.eng.Check(ctx, req)
			if writ.ErrorCode(err) != writ.EINVALID || rc != nil {
				t.Fatalf("Check = %v, %v; want no receipt and EINVALID", rc, err)
			}
			var named bool
			for _, d := range writ.ErrorDetails(err) {
				named = named || strings.HasPrefix(d.Field, tt.field)
			}
			if !named {
				t.Errorf("error %v does not name field %s", err, tt.field)
			}
		})
	}
	if n := h.count(t, "acme"); n != 0 {
		t.Errorf("records after bad input = %d, want 0", n)
	}
}

func TestApprovalModeCeiling(t *testing.T) {
	h := newHarness(t, example("wf-2302"))
	req := readRequest(t, example("wf-2302", "requests", "wf-2302-allow.json"))
	req.ApprovalMode = writ.ModeDestructive
	rc, err := h.eng.Check(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != writ.OutcomeGoalFailTerminal || rc.Reasons[0].Code != "approval_mode_above_ceiling" {
		t.Errorf("check above the tool's ceiling = %s %+v, want goal_fail_terminal approval_mode_above_ceiling", rc.Outcome, rc.Reasons)
	}
}

func TestRedactionBeforeStorage(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	req := refundRequest(t, "refund-allow")
	req.Context["note"] = "customer read out card 4111 1111 1111 1111 on the call"
	rc, err := h.eng.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	envelope, err := h.store.Envelope(ctx, "acme", rec.Record.Audit.Seq, rec.Record.Replay.ReplayPacketID)
	if err != nil {
		t.Fatalf("the request envelope is not stored: %v", err)
	}
	receipt, err := h.store.Receipt(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"record": rec.Raw, "envelope": envelope, "receipt": receipt} {
		if strings.Contains(string(b), "4111") {
			t.Errorf("the stored %s holds the card number: %s", what, b)
		}
	}
	var env map[string]any
	if err := json.Unmarshal(envelope, &env); err != nil {
		t.Fatal(err)
	}
	args := env["arguments"].(map[string]any)
	if args["card_number"] != "[redacted:pan]" || args["order_id"] != "ord_881" {
		t.Errorf("envelope arguments = %v, want card_number redacted by rule pan and order_id kept", args)
	}
	if note := env["context"].(map[string]any)["note"]; note != "customer read out card [redacted:credit_card] on the call" {
		t.Errorf("envelope note = %q, want the pattern redacted", note)
	}
}

func TestConcurrentChecksKeepTheChain(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	var wg sync.WaitGroup
	const n = 200
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := refundRequest(t, "refund-allow")
			req.IdempotencyKey = fmt.Sprintf("ik_%d", i)
			// One customer each: the pack's velocity rule allows a
			// customer 3 refunds a day, and a denial repeated unchanged
			// is answered again without a record.
			req.SubjectIDs = []string{fmt.Sprintf("customer:cus_%d", i), "order:ord_881"}
			req.TenantID = []string{"acme", "globex"}[i%2]
			for j := range req.Evidence {
				req.Evidence[j].TenantID = req.TenantID
			}
			if _, err := h.eng.Check(ctx, req); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if a, g := h.count(t, "acme"), h.count(t, "globex"); a+g != n {
		t.Errorf("records = %d + %d, want %d", a, g, n)
	}
	h.verify(t)
}

func TestBindingsAreKeyed(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	req := refundRequest(t, "refund-allow")
	rc, err := h.eng.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := record.ArgumentsDigest(req.Arguments)
	redacted, _ := record.ArgumentsDigest(record.NewRedactor(nil).Map(map[string]any{"order_id": "ord_881", "amount_inr": 4200.0, "currency": "INR", "card_number": "[redacted:pan]"}))
	if rec.Record.Replay.ArgumentsDigest != redacted {
		t.Errorf("record arguments_digest = %s, want the digest of the redacted arguments %s", rec.Record.Replay.ArgumentsDigest, redacted)
	}
	priors, err := h.store.Priors(ctx, "acme", req.IdempotencyKey, ledger.BlockKey{})
	prior := priors.Idempotent
	if err != nil || prior == nil {
		t.Fatalf("Priors(idempotency key) = %v, %v", prior, err)
	}
	for _, d := range []string{rec.Record.Replay.ArgumentsDigest, prior.ArgsDigest} {
		if d == plain {
			t.Errorf("a stored digest is the plain hash of the unredacted arguments (%s), which can be reversed", d)
		}
	}
	if !strings.HasPrefix(prior.ArgsDigest, "hmac-sha256:") {
		t.Errorf("idempotency binding = %s, want a keyed hmac-sha256 digest", prior.ArgsDigest)
	}
}

func TestOversizedRequestIsRefused(t *testing.T) {
	h := newHarness(t, example("refund"))
	req := refundRequest(t, "refund-allow")
	req.Context["pad"] = strings.Repeat("x", 1<<20)
	rc, err := h.eng.Check(context.Background(), req)
	if rc != nil || writ.ErrorCode(err) != writ.ETOOLARGE {
		t.Errorf("Check(>1 MiB) = %v, %v; want ETOOLARGE", rc, err)
	}
	if n := h.count(t, "acme"); n != 0 {
		t.Errorf("records = %d, want 0", n)
	}
}

func TestRequestCannotLowerTheApprovalMode(t *testing.T) {
	h := newHarness(t, example("refund"))
	req := refundRequest(t, "refund-allow")
	req.ApprovalMode = writ.ModeReadOnly
	rc, err := h.eng.Check(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := h.eng.Record(context.Background(), "acme", rc.Metadata.RecordID)
	if rec.Record.ApprovalModeEffective != writ.ModeDestructive {
		t.Errorf("approval_mode_effective = %s, want the spec's destructive", rec.Record.ApprovalModeEffective)
	}
}

func TestCorrectionsSupersedeWithoutEditing(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	first, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := h.eng.Record(ctx, "acme", first.Metadata.RecordID)
	fix := refundRequest(t, "refund-allow")
	fix.IdempotencyKey = "ik_correction"
	fix.Supersedes = first.Metadata.RecordID
	rc, err := h.eng.Check(ctx, fix)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if rec.Record.Supersedes != first.Metadata.RecordID {
		t.Errorf("correction supersedes %q, want %q", rec.Record.Supersedes, first.Metadata.RecordID)
	}
	after, _ := h.eng.Record(ctx, "acme", first.Metadata.RecordID)
	if string(after.Raw) != string(before.Raw) {
		t.Error("the superseded record changed")
	}
	bad := refundRequest(t, "refund-allow")
	bad.IdempotencyKey = "ik_bad"
	bad.Supersedes = "dr_nope"
	if _, err := h.eng.Check(ctx, bad); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("superseding an unknown record = %v, want EINVALID", err)
	}
}

// stallingStore holds every append until release is closed, as a stalled
// disk or a commit waiting on a synchronous standby that is gone would.
type stallingStore struct {
	ledger.Store
	release chan struct{}
	entered chan struct{}
}

func (s *stallingStore) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.Append(ctx, entries, seal)
}

// A commit that outlives Config.CommitTimeout answers fail-closed
// (commit_timeout) instead of holding the check; the commit is not
// cancelled, and once it lands a retry with the same idempotency key gets
// the committed receipt.
func TestCommitTimeoutFailsClosed(t *testing.T) {
	ctx := context.Background()
	ss := &stallingStore{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	h := newHarness(t, example("refund"), func(c *engine.Config) {
		ss.Store = c.Store
		c.Store = ss
		c.CommitTimeout = 50 * time.Millisecond
	})
	req := refundRequest(t, "refund-allow")
	req.IdempotencyKey = "stalled-commit"
	rc, err := h.eng.Check(ctx, req)
	if writ.ErrorCode(err) != writ.EUNAVAILABLE {
		t.Fatalf("Check on a stalled store: error %v, want EUNAVAILABLE", err)
	}
	if rc == nil || rc.SafeToExecute || !rc.Metadata.FailClosed || rc.Metadata.RecordID != "" {
		t.Fatalf("receipt = %+v, want a fail-closed receipt without a record", rc)
	}
	if len(rc.Reasons) != 1 || rc.Reasons[0].Code != "commit_timeout" {
		t.Errorf("reasons = %+v, want commit_timeout", rc.Reasons)
	}
	<-ss.entered // the commit is under way, not abandoned
	close(ss.release)
	// The stalled commit lands; the same check again is answered from it.
	var again *writ.Receipt
	for range 200 {
		if again, err = h.eng.Check(ctx, req); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("retry after the commit landed: %v", err)
	}
	if !again.SafeToExecute || again.Metadata.Repeated != writ.RepeatedIdempotent {
		t.Errorf("retry = %s safe=%v repeated=%q, want the committed allow, repeated", again.Outcome, again.SafeToExecute, again.Metadata.Repeated)
	}
	if n := h.count(t, "acme"); n != 1 {
		t.Errorf("records = %d, want 1 (the stalled commit, landed once)", n)
	}
}
