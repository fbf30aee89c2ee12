package engine_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/sqlite"
)

// errStoreDown is a read failure of hookedStore.
var errStoreDown = errors.New("the store is down")

// hookedStore is the harness's SQLite store with hooks run before some
// of its reads: a hook that returns an error fails the read with it.
type hookedStore struct {
	*sqlite.Store
	mu       sync.Mutex
	history  func(ctx context.Context) error
	priors   func() error
	record   func() error
	runStart func() error // RunStart and RunEvents
	runAll   func() error // RunEvents only
	approval func() error
}

// hook returns the hook *f under the lock (hooks are set while checks run).
func (s *hookedStore) hook(f *func() error) error {
	s.mu.Lock()
	h := *f
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	return h()
}

func (s *hookedStore) set(f *func() error, h func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*f = h
}

func (s *hookedStore) HistoryValues(ctx context.Context, tenantID string, reads []ledger.HistoryRead) ([]float64, error) {
	s.mu.Lock()
	h := s.history
	s.mu.Unlock()
	if h != nil {
		if err := h(ctx); err != nil {
			return nil, err
		}
	}
	return s.Store.HistoryValues(ctx, tenantID, reads)
}

func (s *hookedStore) Priors(ctx context.Context, tenantID, key string, block ledger.BlockKey) (ledger.Priors, error) {
	if err := s.hook(&s.priors); err != nil {
		return ledger.Priors{}, err
	}
	return s.Store.Priors(ctx, tenantID, key, block)
}

func (s *hookedStore) Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error) {
	if err := s.hook(&s.record); err != nil {
		return nil, err
	}
	return s.Store.Record(ctx, tenantID, recordID)
}

func (s *hookedStore) RunStart(ctx context.Context, tenantID, runID string) (*ledger.RunEvent, error) {
	if err := s.hook(&s.runStart); err != nil {
		return nil, err
	}
	return s.Store.RunStart(ctx, tenantID, runID)
}

func (s *hookedStore) RunEvents(ctx context.Context, tenantID, runID string) ([]ledger.RunEvent, error) {
	if err := s.hook(&s.runStart); err != nil {
		return nil, err
	}
	if err := s.hook(&s.runAll); err != nil {
		return nil, err
	}
	return s.Store.RunEvents(ctx, tenantID, runID)
}

func (s *hookedStore) Approval(ctx context.Context, tenantID, approvalID string, now time.Time) (*writ.ApprovalRequest, error) {
	if err := s.hook(&s.approval); err != nil {
		return nil, err
	}
	return s.Store.Approval(ctx, tenantID, approvalID, now)
}

// newHookedHarness is newHarness with the engine on a hookedStore.
func newHookedHarness(t *testing.T, packDir string, opts ...func(*engine.Config)) (*harness, *hookedStore) {
	t.Helper()
	var hs *hookedStore
	h := newHarness(t, packDir, append([]func(*engine.Config){func(c *engine.Config) {
		hs = &hookedStore{Store: c.Store.(*sqlite.Store)}
		c.Store = hs
	}}, opts...)...)
	return h, hs
}

// TestShadowHistoryReadUnderTheCheckContext: the shadow pack's history
// read runs under the check's context, so a store that stalls it lets go
// when the caller's deadline passes. The store here stalls the second
// read of the check (the shadow's, after the enforced pack's): it ends
// the caller's context, as a deadline would, and waits for the context
// it was given to end.
func TestShadowHistoryReadUnderTheCheckContext(t *testing.T) {
	h, hs := newHookedHarness(t, example("refund"), func(c *engine.Config) { c.Shadow = compile(t, example("refund")) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reads int
	var shadowSawEnd bool
	hs.history = func(rctx context.Context) error {
		if reads++; reads == 2 {
			cancel()
			// rctx ends with the caller's context only if it derives from it.
			shadowSawEnd = rctx.Err() != nil
			return rctx.Err()
		}
		return nil
	}
	h.eng.Check(ctx, refund(t, "acme", "cus_1", 1, exampleClock))
	if reads != 2 {
		t.Fatalf("the check read history %d times, want 2 (the enforced pack's and the shadow's)", reads)
	}
	if !shadowSawEnd {
		t.Error("the shadow pack's history read did not end with the check's context: a stalled store holds the check past its deadline")
	}
}

// TestFailClosedReceiptsCarryTheTraceID: a check without a trace id gets
// one, and a receipt that fails closed carries it too, whichever read
// failed.
func TestFailClosedReceiptsCarryTheTraceID(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*hookedStore)
		req  func(*writ.CheckRequest)
	}{
		{"priors", func(s *hookedStore) { s.set(&s.priors, func() error { return errStoreDown }) }, func(*writ.CheckRequest) {}},
		{"superseded record", func(s *hookedStore) { s.set(&s.record, func() error { return errStoreDown }) }, func(r *writ.CheckRequest) { r.Supersedes = "dr_x" }},
		{"earlier answer", func(s *hookedStore) { s.set(&s.record, func() error { return errStoreDown }) }, func(*writ.CheckRequest) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, hs := newHookedHarness(t, example("refund"))
			ctx := context.Background()
			req := refundRequest(t, "refund-allow")
			req.TraceID = ""
			tc.req(req)
			if tc.name == "earlier answer" {
				// The idempotent retry reads the record of the first answer.
				if _, err := h.eng.Check(ctx, refundRequest(t, "refund-allow")); err != nil {
					t.Fatal(err)
				}
			}
			tc.fail(hs)
			rc, err := h.eng.Check(ctx, req)
			if writ.ErrorCode(err) != writ.EUNAVAILABLE || rc == nil || !rc.Metadata.FailClosed {
				t.Fatalf("Check = %+v, %v; want a fail-closed receipt and EUNAVAILABLE", rc, err)
			}
			if !writ.ValidTraceID(rc.Metadata.TraceID) {
				t.Errorf("fail-closed receipt's trace id = %q, want the one the check was given", rc.Metadata.TraceID)
			}
		})
	}
}

// TestIDsDrawnWhole: ids and trace ids are drawn with io.ReadFull, so a
// random source that returns fewer bytes than asked (as io.Reader may)
// gives the same ids as one that fills each read.
func TestIDsDrawnWhole(t *testing.T) {
	ctx := context.Background()
	whole := newHarness(t, example("refund"))
	short := newHarness(t, example("refund"), func(c *engine.Config) { c.Random = iotest.OneByteReader(newSeededReader(1)) })
	for _, h := range []*harness{whole, short} {
		req := refundRequest(t, "refund-allow")
		req.TraceID = ""
		rc, err := h.eng.Check(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if h == whole {
			continue
		}
		want, _ := whole.eng.Check(ctx, refundRequest(t, "refund-allow")) // the idempotent answer
		if rc.DecisionID != want.DecisionID || rc.Metadata.RecordID != want.Metadata.RecordID || rc.Metadata.TraceID != want.Metadata.TraceID {
			t.Errorf("ids from a one-byte reader = %s %s %s, want %s %s %s", rc.DecisionID, rc.Metadata.RecordID, rc.Metadata.TraceID,
				want.DecisionID, want.Metadata.RecordID, want.Metadata.TraceID)
		}
	}
}

// TestObservedCallReadFailsClosed: a check of a run's step is recorded
// with the run's call_observed event; if the run cannot be read, the
// check fails closed instead of allowing the call unobserved. Only the
// run's first event is read, not the whole run.
func TestObservedCallReadFailsClosed(t *testing.T) {
	ctx := context.Background()
	h, hs := newHookedHarness(t, example("storybook"))
	run := startStorybookRun(t, h)
	browse := func() *writ.CheckRequest {
		return &writ.CheckRequest{
			TenantID: "acme", Tool: "open_simple_browser", Arguments: map[string]any{"url": "http://localhost:6006"},
			Actor: writ.Actor{Type: writ.ActorAgent, ID: "agt_ui"}, Workflow: &writ.WorkflowRef{RunID: run, StepID: "visual_check"},
		}
	}

	hs.set(&hs.runStart, func() error { return errStoreDown })
	rc, err := h.eng.Check(ctx, browse())
	if writ.ErrorCode(err) != writ.EUNAVAILABLE || rc == nil || rc.SafeToExecute {
		t.Errorf("Check with the run unreadable = %+v, %v; want a fail-closed receipt and EUNAVAILABLE", rc, err)
	}

	// The whole run's events are not needed: a check reads the start.
	hs.set(&hs.runStart, nil)
	hs.set(&hs.runAll, func() error { return errStoreDown })
	rc, err = h.eng.Check(ctx, browse())
	if err != nil || !rc.SafeToExecute {
		t.Fatalf("Check with only the run's start readable = %+v, %v; want allowed", rc, err)
	}
	hs.set(&hs.runAll, nil)
	v, err := h.eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", goodResult, claimedBrowse))
	if err != nil {
		t.Fatal(err)
	}
	if v.State != writ.VerdictAccepted {
		t.Errorf("verdict = %+v, want accepted on the observed call", v)
	}
}

// TestApprovalDecidedWhenTheReReadFails: once an approval's decision is
// durable, the decided hook (the webhook) is told and the decision is
// answered even if reading the approval back fails; a retry would
// otherwise be refused as already decided.
func TestApprovalDecidedWhenTheReReadFails(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var told []*writ.ApprovalRequest
	h, hs := newHookedHarness(t, example("refund"), func(c *engine.Config) {
		c.AnnounceDecided = func(a *writ.ApprovalRequest) { mu.Lock(); told = append(told, a); mu.Unlock() }
	})
	blocked, err := h.eng.Check(ctx, refundRequest(t, "refund-high-value-human-review"))
	if err != nil || len(blocked.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("Check = %+v, %v; want one approval asked for", blocked, err)
	}
	id := blocked.Metadata.ApprovalIDs[0]
	// The decision reads the approval once before it appends; every read
	// after fails.
	var reads int
	hs.set(&hs.approval, func() error {
		if reads++; reads > 1 {
			return errStoreDown
		}
		return nil
	})
	a, err := h.eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: id, Decision: writ.ApprovalApproved, Approver: "user_finance_lead_77", Reason: "Invoice matches."})
	if err != nil || a == nil || a.State != writ.ApprovalApproved || a.Decision == nil || a.Decision.Approver != "user_finance_lead_77" || a.Decision.RecordID == "" {
		t.Errorf("DecideApproval = %+v, %v; want the approval, approved", a, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || told[0].ApprovalID != id || told[0].State != writ.ApprovalApproved {
		t.Errorf("the decided hook was told %+v, want the approval, approved, once", told)
	}
	hs.set(&hs.approval, nil)
	stored, err := h.eng.Approval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if a != nil && a.Decision != nil && (stored.Decision == nil || stored.Decision.RecordID != a.Decision.RecordID || !stored.Decision.At.Equal(a.Decision.At) ||
		!stored.Decision.ValidUntil.Equal(a.Decision.ValidUntil) || stored.Uses != a.Uses || len(stored.Events) != len(a.Events)) {
		t.Errorf("answered %+v, but the store has %+v", a, stored)
	}
}

// ledgerOnly is a store wrapper with the ledger's methods only, as
// packtest's history wrapper is: it keeps API keys underneath, but does
// not say so.
type ledgerOnly struct{ ledger.Store }

// TestCheckpointsStateRevocationsWhateverTheStore: a checkpoint states
// the tenant's API key revocations; an engine whose store does not hand
// them over explicitly must not sign checkpoints stating there are none.
// It refuses to start (fail closed), or its checkpoints state them.
func TestCheckpointsStateRevocationsWhateverTheStore(t *testing.T) {
	ctx := context.Background()
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), exampleClock.Add(-time.Hour), "cp"); err != nil {
		t.Fatal(err)
	}
	keys := func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) }
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _, err := auth.NewKey("acme", "someone", []writ.Role{writ.RoleAgent}, exampleClock.Add(-time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Config{Policy: compile(t, example("refund")), Store: ledgerOnly{st}, BindingKey: testBindingKey,
		Now: func() time.Time { return exampleClock }, Random: newSeededReader(1), Keys: keys})
	if err != nil {
		if !strings.Contains(err.Error(), "revocation") {
			t.Errorf("engine.New refused the store with %v, want an error saying it cannot state revocations", err)
		}
		return
	}
	defer eng.Close()
	if _, err := eng.Check(ctx, refund(t, "acme", "cus_1", 1, exampleClock)); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAPIKey(ctx, key.ID, exampleClock); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Check(ctx, refund(t, "acme", "cus_1", 2, exampleClock)); err != nil {
		t.Fatal(err)
	}
	cp, err := eng.IssueCheckpoint(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	text, _, _ := strings.Cut(cp.Note, "\n\n")
	got, err := ledger.CheckpointRevocations(text + "\n")
	if err != nil {
		t.Fatal(err)
	}
	keysNow, err := st.APIKeys(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if want := ledger.RevocationsBefore(keysNow, cp.TreeSize); got != want || want.Count != 1 {
		t.Errorf("the checkpoint of size %d states %v of acme's revocations, want %v", cp.TreeSize, got, want)
	}
}
