package ledgertest

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// reportOf returns an entry of the execution report of decision rec:
// a record of the same decision, claiming its one report with digest.
func reportOf(rec *writ.Record, n int, digest string) *ledger.Entry {
	r := NewRecord(rec.TenantID, n)
	r.DecisionID, r.Status, r.DecisionKey = rec.DecisionID, writ.StatusClosed, "execution:"+rec.DecisionKey
	e := NewEntry(r)
	e.Receipt = []byte(`{"record_id":"` + r.RecordID + `"}`)
	e.Report = &ledger.ReportClaim{DecisionID: rec.DecisionID, ReportDigest: digest}
	return e
}

var (
	digestA = "sha256:" + strings.Repeat("aa", 32)
	digestB = "sha256:" + strings.Repeat("bb", 32)
)

// testLifecycle holds what a decision's lifecycle needs from a store: its
// records found by decision id in chain order, one execution report per
// decision (the first wins, across transactions and within a batch, and
// nothing of the loser is written), and the permits in flight until their
// reports come, per tenant.
func testLifecycle(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	permit := NewRecord("acme", 1)
	permit.Status = writ.StatusInFlight
	other := NewRecord("acme", 2)
	other.Status = writ.StatusInFlight
	mustAppend(t, st, NewEntry(permit), NewEntry(other), NewEntry(NewRecord("globex", 1)))

	first := reportOf(permit, 3, digestA)
	mustAppend(t, st, first)
	if first.Prior != nil || first.Raw == nil {
		t.Fatalf("the first report: Prior %s, Raw %d bytes; want it appended", fmtPrior(first.Prior), len(first.Raw))
	}
	want := &ledger.Prior{ArgsDigest: digestA, Receipt: first.Receipt, RecordID: first.Record.RecordID}
	got, err := st.Report(ctx, "acme", permit.DecisionID)
	if err != nil || !samePrior(got, want) {
		t.Errorf("Report(acme, %s) = %s, %v; want %s", permit.DecisionID, fmtPrior(got), err, fmtPrior(want))
	}
	if got, err := st.Report(ctx, "globex", permit.DecisionID); err != nil || got != nil {
		t.Errorf("Report(globex, acme's decision) = %s, %v; want none", fmtPrior(got), err)
	}

	// A second report, in a later transaction or twice in one batch, is
	// answered with the first and writes nothing.
	head, _ := st.Head(ctx, "acme")
	second := reportOf(permit, 4, digestB)
	mustAppend(t, st, second)
	if !samePrior(second.Prior, want) || second.Raw != nil {
		t.Errorf("a second report: Prior %s, Raw %d bytes; want the first report's answer and nothing written", fmtPrior(second.Prior), len(second.Raw))
	}
	a, b := reportOf(other, 5, digestA), reportOf(other, 6, digestB)
	mustAppend(t, st, a, b)
	if a.Prior != nil || a.Raw == nil || b.Prior == nil || b.Prior.RecordID != a.Record.RecordID || b.Raw != nil {
		t.Errorf("two reports of one decision in one batch: a.Prior %s, b.Prior %s; want a appended and b answered with it", fmtPrior(a.Prior), fmtPrior(b.Prior))
	}
	if after, _ := st.Head(ctx, "acme"); after.Seq != head.Seq+1 {
		t.Errorf("head moved from %d to %d, want one record more (the batch's first report)", head.Seq, after.Seq)
	}

	// A decision's records, in chain order, of its own tenant only.
	recs, err := st.DecisionRecords(ctx, "acme", permit.DecisionID)
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.Record.RecordID)
	}
	if wantIDs := []string{permit.RecordID, first.Record.RecordID}; err != nil || !slices.Equal(ids, wantIDs) {
		t.Errorf("DecisionRecords(acme, %s) = %q, %v; want %q", permit.DecisionID, ids, err, wantIDs)
	}
	if recs, err := st.DecisionRecords(ctx, "globex", permit.DecisionID); err != nil || len(recs) != 0 {
		t.Errorf("DecisionRecords(globex, acme's decision) = %d records, %v; want none", len(recs), err)
	}

	// Both permits are reported now: nothing is in flight. A new one is.
	if recs, err := st.InFlight(ctx, "acme", 0, 10); err != nil || len(recs) != 0 {
		t.Errorf("InFlight(acme) after both reports = %d records, %v; want none", len(recs), err)
	}
	open := NewRecord("acme", 7)
	open.Status = writ.StatusInFlight
	mustAppend(t, st, NewEntry(open))
	recs, err = st.InFlight(ctx, "acme", 0, 10)
	if err != nil || len(recs) != 1 || recs[0].Record.RecordID != open.RecordID {
		t.Errorf("InFlight(acme) = %d records, %v; want only %s", len(recs), err, open.RecordID)
	}
	if recs, err := st.InFlight(ctx, "acme", recs[0].Record.Audit.Seq, 10); err != nil || len(recs) != 0 {
		t.Errorf("InFlight(acme) after the last one = %d records, %v; want none", len(recs), err)
	}
	if recs, err := st.InFlight(ctx, "globex", 0, 10); err != nil || len(recs) != 0 {
		t.Errorf("InFlight(globex) = %d records, %v; want none", len(recs), err)
	}
	wantNoFindings(t, st, 6) // acme's 5 and globex's 1
}

// testReportRace reports one decision from many goroutines at once, each
// with its own report: exactly one is appended, and every other is
// answered with it.
func testReportRace(t *testing.T, st ledger.Store) {
	permit := NewRecord("acme", 1)
	permit.Status = writ.StatusInFlight
	mustAppend(t, st, NewEntry(permit))
	const n = 16
	es := make([]*ledger.Entry, n)
	var wg sync.WaitGroup
	for i := range es {
		es[i] = reportOf(permit, 10+i, "sha256:"+strings.Repeat(string("0123456789abcdef"[i]), 64))
		wg.Go(func() {
			if err := st.Append(t.Context(), []*ledger.Entry{es[i]}, ledger.Seal); err != nil {
				t.Errorf("Append(report %d) = %v", i, err)
			}
		})
	}
	wg.Wait()
	var won []*ledger.Entry
	for _, e := range es {
		if e.Raw != nil {
			won = append(won, e)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent reports were appended, want exactly 1", len(won), n)
	}
	for _, e := range es {
		if e != won[0] && (e.Prior == nil || e.Prior.RecordID != won[0].Record.RecordID) {
			t.Errorf("a losing report's Prior = %s, want the winner %s", fmtPrior(e.Prior), won[0].Record.RecordID)
		}
	}
	wantNoFindings(t, st, 2)
}
