package ledger

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// storedReads answers Settle's reads from maps, as a store would from its
// tables, and counts them.
type storedReads struct {
	reports, claims map[string]*Prior
	values          map[int][]float64
	pending         map[string][]Contribution
	tallies         map[string]*ApprovalTally
	reads           map[string]int
	fail            error
}

func (r *storedReads) count(what, tenant, key string) error {
	if r.reads == nil {
		r.reads = map[string]int{}
	}
	r.reads[what+" "+tenant+"/"+key]++
	return r.fail
}

func (r *storedReads) Report(_ context.Context, t, d string) (*Prior, error) {
	return r.reports[t+"/"+d], r.count("report", t, d)
}

func (r *storedReads) Claim(_ context.Context, t, k string) (*Prior, error) {
	return r.claims[t+"/"+k], r.count("claim", t, k)
}

func (r *storedReads) HistoryValues(_ context.Context, i int, e *Entry) ([]float64, error) {
	return r.values[i], r.count("history", e.Record.TenantID, e.Record.RecordID)
}

func (r *storedReads) Pending(_ context.Context, t, d string) ([]Contribution, error) {
	return r.pending[t+"/"+d], r.count("pending", t, d)
}

func (r *storedReads) Tally(_ context.Context, t, id string) (*ApprovalTally, error) {
	return r.tallies[t+"/"+id], r.count("tally", t, id)
}

func TestSettle(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(id string) *Entry {
		return &Entry{Record: &writ.Record{TenantID: "t1", RecordID: id, DecisionID: "d-" + id}, Receipt: []byte(`{"r":"` + id + `"}`)}
	}
	stored := &Prior{ArgsDigest: "report-1", RecordID: "old-report"}
	claimed := &Prior{ArgsDigest: "args-0", RecordID: "old-claim"}
	read := HistoryRead{Aggregate: "spend", Group: "s1", Since: at.Add(-time.Hour), Value: 5}

	var es []*Entry
	add := func(id string, f func(*Entry)) int {
		e := entry(id)
		f(e)
		es = append(es, e)
		return len(es) - 1
	}
	reported := add("r1", func(e *Entry) { e.Report = &ReportClaim{DecisionID: "dx", ReportDigest: "report-2"} })
	oldKey := add("c0", func(e *Entry) { e.Idempotency = &IdempotencyClaim{Key: "k0", ArgsDigest: "args-x"} })
	firstKey := add("c1", func(e *Entry) { e.Idempotency = &IdempotencyClaim{Key: "k1", ArgsDigest: "args-1"} })
	againKey := add("c2", func(e *Entry) { e.Idempotency = &IdempotencyClaim{Key: "k1", ArgsDigest: "args-2"} })
	fresh := add("h1", func(e *Entry) {
		e.HistoryReads = []HistoryRead{read}
		e.Contributions = []Contribution{{Aggregate: "spend", Group: "s1", At: at, Amount: 2}}
		e.PendingContributions = []Contribution{{Aggregate: "spent", Group: "s1", At: at, Amount: 3}}
	})
	stale := add("h2", func(e *Entry) { e.HistoryReads = []HistoryRead{read} }) // 5 read, 7 now
	refreshed := add("h3", func(e *Entry) { r := read; r.Value = 7; e.HistoryReads = []HistoryRead{r} })
	executes := add("x1", func(e *Entry) { e.Executes = "d-h1" })
	unknown := add("a0", func(e *Entry) {
		e.ApprovalEvent = &ApprovalEvent{TenantID: "t1", ApprovalID: "nope", Event: writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Seq: 9, RecordID: "stale"}}
	})
	opens := add("a1", func(e *Entry) {
		e.NewApprovals = []NewApproval{{Request: &writ.ApprovalRequest{TenantID: "t1", ApprovalID: "ap", Allowance: 1}}}
	})
	approves := add("a2", func(e *Entry) {
		e.ApprovalEvent = &ApprovalEvent{TenantID: "t1", ApprovalID: "ap", Event: writ.ApprovalEvent{Kind: writ.ApprovalEventApproved}}
	})
	decidedAgain := add("a3", func(e *Entry) {
		e.ApprovalEvent = &ApprovalEvent{TenantID: "t1", ApprovalID: "ap", Event: writ.ApprovalEvent{Kind: writ.ApprovalEventDenied}}
	})

	r := &storedReads{
		reports: map[string]*Prior{"t1/dx": stored},
		claims:  map[string]*Prior{"t1/k0": claimed},
		values:  map[int][]float64{fresh: {5}, stale: {5}, refreshed: {5}},
		pending: map[string][]Contribution{"t1/d-h1": {{Aggregate: "spent", Group: "s1", At: at, Amount: 99}}},
	}
	got, err := Settle(context.Background(), es, r)
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if want := []int{firstKey, fresh, refreshed, executes, opens, approves}; !slices.Equal(got.Appended, want) {
		t.Errorf("Settle(...).Appended = %v, want %v", got.Appended, want)
	}
	for i, want := range map[int]*Prior{reported: stored, oldKey: claimed} {
		if got.Priors[i] != want {
			t.Errorf("Settle(...).Priors[%d] = %+v, want %+v", i, got.Priors[i], want)
		}
	}
	if p := got.Priors[againKey]; p == nil || p.RecordID != "c1" || p.ArgsDigest != "args-1" || string(p.Receipt) != `{"r":"c1"}` {
		t.Errorf("Settle(...).Priors[%d] = %+v, want the batch's first claim of k1 (record c1)", againKey, p)
	}
	for i, want := range map[int]string{stale: RefusedHistory, unknown: RefusedUnknown, decidedAgain: RefusedDecided} {
		if got.Refused[i] != want {
			t.Errorf("Settle(...).Refused[%d] = %q, want %q", i, got.Refused[i], want)
		}
	}
	if ev := es[unknown].ApprovalEvent.Event; ev.Seq != 0 || ev.RecordID != "" {
		t.Errorf("refused approval event kept Seq %d and RecordID %q, want them cleared", ev.Seq, ev.RecordID)
	}
	if ev := es[approves].ApprovalEvent.Event; ev.Seq != 1 || ev.RecordID != "a2" {
		t.Errorf("appended approval event has Seq %d and RecordID %q, want 1 and a2", ev.Seq, ev.RecordID)
	}
	// Executing d-h1 adds what h1, earlier in the batch, left pending,
	// not what the store held before.
	if ex := got.Executed[executes]; len(ex) != 1 || ex[0].Amount != 3 {
		t.Errorf("Settle(...).Executed[%d] = %+v, want h1's pending contribution of 3", executes, ex)
	}
	for k, n := range r.reads {
		if n != 1 {
			t.Errorf("Settle read %s %d times, want once", k, n)
		}
	}

	for _, e := range es {
		e.Raw = []byte("from an earlier attempt")
	}
	raws := make([][]byte, len(es))
	raws[fresh] = []byte("sealed")
	got.Answer(es, raws)
	if string(es[fresh].Raw) != "sealed" || es[stale].Raw != nil || es[stale].Refused != RefusedHistory || es[oldKey].Prior != claimed {
		t.Errorf("Answer set fresh %q, stale %q/%q, oldKey %+v", es[fresh].Raw, es[stale].Raw, es[stale].Refused, es[oldKey].Prior)
	}
}

func TestSettleReadError(t *testing.T) {
	boom := errors.New("boom")
	e := &Entry{Record: &writ.Record{TenantID: "t1", RecordID: "r1"}, Idempotency: &IdempotencyClaim{Key: "k"}}
	if _, err := Settle(context.Background(), []*Entry{e}, &storedReads{fail: boom}); !errors.Is(err, boom) {
		t.Errorf("Settle with a failing read = %v, want %v", err, boom)
	}
}
