// Package ledgertest is the conformance suite of ledger.Store. Every store
// (the embedded SQLite store, the PostgreSQL store) runs it in one line:
//
//	func TestConformance(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T) ledger.Store { return openStore(t) })
//	}
//
// The suite checks the contract written on ledger.Store against real
// storage: sealed bytes kept verbatim, linear per-tenant chains under
// concurrent group commit, idempotency and block claims, content-addressed
// blobs, record queries and their pagination, tenant isolation, that a
// failed append leaves nothing behind, approval requests and the guard on
// their events, API keys, shadow decisions, and the scans that verify
// what is stored beside the records (verify.StoredSource). It must never
// depend on how a store lays out its data: only the ledger.Store methods
// are used. RunTamper is the one exception: a store's test hands it a
// Tamperer that edits its tables behind writ's back.
package ledgertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/record"
)

// Run runs the conformance suite. Each subtest calls open for a fresh, empty
// store and closes it when the subtest ends; open must not close it.
func Run(t *testing.T, open func(t *testing.T) ledger.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st ledger.Store)
	}{
		{"AppendReadBack", testAppendReadBack},
		{"RawBytesKeptVerbatim", testRawBytesKeptVerbatim},
		{"Chain", testChain},
		{"ConcurrentAppender", testConcurrentAppender},
		{"IdempotencyAcrossTransactions", testIdempotencyAcrossTransactions},
		{"IdempotencyWithinBatch", testIdempotencyWithinBatch},
		{"IdempotencyPerTenant", testIdempotencyPerTenant},
		{"Blocks", testBlocks},
		{"Blobs", testBlobs},
		{"Envelopes", testEnvelopes},
		{"RecordsQuery", testRecordsQuery},
		{"RecordsLimits", testRecordsLimits},
		{"RecordsEnds", testRecordsEnds},
		{"RecordsInvalidCursor", testRecordsInvalidCursor},
		{"TenantIsolation", testTenantIsolation},
		{"SealFailureLeavesNothing", testSealFailureLeavesNothing},
		{"Tenants", testTenants},
		{"VerifyWhileAppending", testVerifyWhileAppending},
		{"Tree", testTree},
		{"Checkpoints", testCheckpoints},
		{"Runs", testRuns},
		{"Approvals", testApprovals},
		{"PendingApprovalsPastDecided", testPendingPastDecided},
		{"ApprovalValidation", testApprovalValidation},
		{"APIKeys", testAPIKeys},
		{"Revocations", testRevocations},
		{"Shadow", testShadow},
		{"Lifecycle", testLifecycle},
		{"ReportRace", testReportRace},
		{"History", testHistory},
		{"HistoryRace", testHistoryRace},
		{"HistoryExecuted", testHistoryExecuted},
		{"Stored", testStored},
		{"Params", testParams},
		{"Cosignatures", testCosignatures},
		{"Classified", testClassified},
		{"Transcripts", testTranscripts},
		{"CrossRecordFindings", testCrossRecordFindings},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			closeAtEnd(t, st)
			tc.fn(t, st)
		})
	}
}

// closeAtEnd closes a store the suite opened when the test ends.
func closeAtEnd(t *testing.T, st ledger.Store) {
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
}

// sealRecorder seals with ledger.Seal and remembers the exact bytes it
// returned for each record, so the suite can compare what the store serves
// with what the SealFunc handed it.
type sealRecorder struct {
	mu     sync.Mutex
	sealed map[string][]byte
}

func newSealRecorder() *sealRecorder {
	return &sealRecorder{sealed: make(map[string][]byte)}
}

func (s *sealRecorder) seal(prev ledger.Head, e *ledger.Entry) ([]byte, error) {
	raw, err := ledger.Seal(prev, e)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.sealed[e.Record.RecordID] = bytes.Clone(raw)
	s.mu.Unlock()
	return raw, nil
}

func (s *sealRecorder) raw(recordID string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sealed[recordID]
}

// mustAppend appends entries in one transaction with ledger.Seal.
// revocationSource returns st as the API keys verification checks
// checkpoints' revocations against, which every store must keep.
func revocationSource(t *testing.T, st ledger.Store) verify.RevocationSource {
	t.Helper()
	rs, ok := st.(verify.RevocationSource)
	if !ok {
		t.Fatalf("the store (%T) keeps no API keys", st)
	}
	return rs
}

// checkpointStore returns st as a ledger.CheckpointStore, which every
// store that signs checkpoints must be.
func checkpointStore(t *testing.T, st ledger.Store) ledger.CheckpointStore {
	t.Helper()
	cs, ok := st.(ledger.CheckpointStore)
	if !ok {
		t.Fatalf("the store (%T) is no ledger.CheckpointStore: it lists no API keys, so it cannot sign checkpoints", st)
	}
	return cs
}

func mustAppend(t *testing.T, st ledger.Store, entries ...*ledger.Entry) {
	t.Helper()
	if err := st.Append(t.Context(), entries, ledger.Seal); err != nil {
		t.Fatalf("Append(%d entries) = %v", len(entries), err)
	}
}

// entries returns one entry per record.
func entries(recs ...*writ.Record) []*ledger.Entry {
	es := make([]*ledger.Entry, len(recs))
	for i, r := range recs {
		es[i] = NewEntry(r)
	}
	return es
}

// records returns NewRecord(tenant, n) for n in [from, from+count).
func records(tenant string, from, count int) []*writ.Record {
	recs := make([]*writ.Record, count)
	for i := range recs {
		recs[i] = NewRecord(tenant, from+i)
	}
	return recs
}

// wantCode fails the test unless err is an application error with code.
func wantCode(t *testing.T, call string, err error, code string) {
	t.Helper()
	if got := writ.ErrorCode(err); got != code {
		t.Errorf("%s: error code %q (err %v), want %q", call, got, err, code)
	}
}

// wantNoFindings verifies every chain and fails on any finding or on a
// record count other than want.
func wantNoFindings(t *testing.T, st ledger.Store, want int64) {
	t.Helper()
	findings, n, err := verify.VerifyChains(t.Context(), st)
	if err != nil {
		t.Fatalf("VerifyChains() = %v", err)
	}
	for _, f := range findings {
		t.Errorf("VerifyChains() finding: %+v", f)
	}
	if n != want {
		t.Errorf("VerifyChains() checked %d records, want %d", n, want)
	}
}

func samePrior(got, want *ledger.Prior) bool {
	if got == nil || want == nil {
		return got == want
	}
	return got.ArgsDigest == want.ArgsDigest && got.RecordID == want.RecordID && bytes.Equal(got.Receipt, want.Receipt)
}

// idempotent and blocked ask Store.Priors one of its two questions each.
func idempotent(ctx context.Context, st ledger.Store, tenantID, key string) (*ledger.Prior, error) {
	p, err := st.Priors(ctx, tenantID, key, ledger.BlockKey{})
	return p.Idempotent, err
}

func blocked(ctx context.Context, st ledger.Store, tenantID string, key ledger.BlockKey) (*ledger.Prior, error) {
	p, err := st.Priors(ctx, tenantID, "", key)
	return p.Blocked, err
}

func fmtPrior(p *ledger.Prior) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{ArgsDigest:%s RecordID:%s Receipt:%d bytes}", p.ArgsDigest, p.RecordID, len(p.Receipt))
}

func testAppendReadBack(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	seals := newSealRecorder()
	es := entries(records("acme", 1, 5)...)
	if err := st.Append(ctx, es, seals.seal); err != nil {
		t.Fatalf("Append(5 entries) = %v", err)
	}
	for i, e := range es {
		id := e.Record.RecordID
		sealed := seals.raw(id)
		if sealed == nil {
			t.Fatalf("the SealFunc was not called for entry %d (%s)", i, id)
		}
		if !bytes.Equal(e.Raw, sealed) {
			t.Errorf("after Append, entry %d Raw = %s, want the sealed bytes %s", i, e.Raw, sealed)
		}
		if e.Prior != nil {
			t.Errorf("after Append, entry %d Prior = %s, want nil", i, fmtPrior(e.Prior))
		}

		got, err := st.Record(ctx, "acme", id)
		if err != nil {
			t.Fatalf("Record(acme, %s) = %v", id, err)
		}
		if !bytes.Equal(got.Raw, sealed) {
			t.Errorf("Record(acme, %s).Raw = %s, want the sealed bytes %s", id, got.Raw, sealed)
		}
		// The parsed record must say exactly what the bytes say.
		canon, err := record.Canonical(got.Record)
		if err != nil {
			t.Fatalf("Canonical(Record(acme, %s).Record) = %v", id, err)
		}
		if !bytes.Equal(canon, sealed) {
			t.Errorf("Record(acme, %s).Record re-encodes to %s, want %s", id, canon, sealed)
		}
		if got.Record.RecordID != id || got.Record.Audit.Seq != int64(i+1) {
			t.Errorf("Record(acme, %s).Record has record_id %s and seq %d, want %s and %d", id, got.Record.RecordID, got.Record.Audit.Seq, id, i+1)
		}

		rcpt, err := st.Receipt(ctx, "acme", id)
		if err != nil {
			t.Fatalf("Receipt(acme, %s) = %v", id, err)
		}
		if !bytes.Equal(rcpt, e.Receipt) {
			t.Errorf("Receipt(acme, %s) = %s, want %s", id, rcpt, e.Receipt)
		}
	}

	chain, err := st.Chain(ctx, "acme", 0, 100)
	if err != nil {
		t.Fatalf("Chain(acme, 0, 100) = %v", err)
	}
	if len(chain) != len(es) {
		t.Fatalf("Chain(acme, 0, 100) returned %d records, want %d", len(chain), len(es))
	}
	for i, raw := range chain {
		if want := seals.raw(es[i].Record.RecordID); !bytes.Equal(raw, want) {
			t.Errorf("Chain(acme, 0, 100)[%d] = %s, want the sealed bytes %s", i, raw, want)
		}
	}
}

// testRawBytesKeptVerbatim seals records into indented JSON, which differs
// from anything a store would produce by re-encoding: a store that
// normalises what it keeps (a jsonb column, say) fails here.
func testRawBytesKeptVerbatim(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	indent := func(prev ledger.Head, e *ledger.Entry) ([]byte, error) {
		raw, err := ledger.Seal(prev, e)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "\t"); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	es := entries(records("acme", 1, 3)...)
	// Receipts too are kept as given, spaces and key order included.
	es[0].Receipt = []byte(`{ "receipt_type": "verifiedx_decision_receipt",  "outcome": "allow" }`)
	if err := st.Append(ctx, es, indent); err != nil {
		t.Fatalf("Append(3 entries, indenting SealFunc) = %v", err)
	}
	for _, e := range es {
		got, err := st.Record(ctx, "acme", e.Record.RecordID)
		if err != nil {
			t.Fatalf("Record(acme, %s) = %v", e.Record.RecordID, err)
		}
		if !bytes.Equal(got.Raw, e.Raw) || !bytes.Contains(got.Raw, []byte("\n\t\"audit\"")) {
			t.Errorf("Record(acme, %s).Raw = %s, want the indented sealed bytes %s", e.Record.RecordID, got.Raw, e.Raw)
		}
		rcpt, err := st.Receipt(ctx, "acme", e.Record.RecordID)
		if err != nil {
			t.Fatalf("Receipt(acme, %s) = %v", e.Record.RecordID, err)
		}
		if !bytes.Equal(rcpt, e.Receipt) {
			t.Errorf("Receipt(acme, %s) = %s, want %s", e.Record.RecordID, rcpt, e.Receipt)
		}
	}
	// Verification reads seals from the exact stored bytes, so these
	// indented records do not verify; that they come back byte for byte
	// is what this test is about.
}

func testChain(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	// Interleave two tenants in the same transactions: each keeps its own
	// numbering.
	const n = 12
	want := map[string][]*ledger.Entry{}
	for batch := range 4 {
		var es []*ledger.Entry
		for i := range n / 4 {
			for _, tenant := range []string{"acme", "globex"} {
				e := NewEntry(NewRecord(tenant, batch*(n/4)+i+1))
				es = append(es, e)
				want[tenant] = append(want[tenant], e)
			}
		}
		mustAppend(t, st, es...)
	}

	for _, tenant := range []string{"acme", "globex"} {
		chain, err := st.Chain(ctx, tenant, 0, 1000)
		if err != nil {
			t.Fatalf("Chain(%s, 0, 1000) = %v", tenant, err)
		}
		if len(chain) != n {
			t.Fatalf("Chain(%s, 0, 1000) returned %d records, want %d", tenant, len(chain), n)
		}
		prevHash := writ.GenesisHash
		for i, raw := range chain {
			link, err := record.CheckHash(raw)
			if err != nil {
				t.Fatalf("Chain(%s, 0, 1000)[%d]: %v", tenant, i, err)
			}
			if link.Seq != int64(i+1) || link.PrevHash != prevHash {
				t.Errorf("Chain(%s, 0, 1000)[%d] has seq %d and prev_hash %s, want %d and %s", tenant, i, link.Seq, link.PrevHash, i+1, prevHash)
			}
			if !bytes.Equal(raw, want[tenant][i].Raw) {
				t.Errorf("Chain(%s, 0, 1000)[%d] = %s, want %s", tenant, i, raw, want[tenant][i].Raw)
			}
			prevHash = link.RecordHash
		}

		head, err := st.Head(ctx, tenant)
		if err != nil {
			t.Fatalf("Head(%s) = %v", tenant, err)
		}
		if wantHead := (ledger.Head{Seq: n, Hash: prevHash}); head != wantHead {
			t.Errorf("Head(%s) = %+v, want %+v", tenant, head, wantHead)
		}

		// after and limit select a window of the chain.
		page, err := st.Chain(ctx, tenant, 4, 3)
		if err != nil {
			t.Fatalf("Chain(%s, 4, 3) = %v", tenant, err)
		}
		var seqs []int64
		for _, raw := range page {
			l, _ := record.ParseLink(raw)
			seqs = append(seqs, l.Seq)
		}
		if !slices.Equal(seqs, []int64{5, 6, 7}) {
			t.Errorf("Chain(%s, 4, 3) returned seqs %v, want [5 6 7]", tenant, seqs)
		}
		page, err = st.Chain(ctx, tenant, n, 10)
		if err != nil || len(page) != 0 {
			t.Errorf("Chain(%s, %d, 10) = %d records, %v; want 0 records, nil", tenant, n, len(page), err)
		}
	}

	head, err := st.Head(ctx, "initech")
	if err != nil || head != (ledger.Head{}) {
		t.Errorf("Head(initech) of a tenant without records = %+v, %v; want the zero Head, nil", head, err)
	}
	chain, err := st.Chain(ctx, "initech", 0, 10)
	if err != nil || len(chain) != 0 {
		t.Errorf("Chain(initech, 0, 10) = %d records, %v; want 0 records, nil", len(chain), err)
	}
	wantNoFindings(t, st, 2*n)
}

func testConcurrentAppender(t *testing.T, st ledger.Store) {
	const writers, perWriter = 8, 200
	tenants := []string{"acme", "globex"}
	app := ledger.NewAppender(st, ledger.AppenderConfig{})
	var wg sync.WaitGroup
	appended := make([][]*ledger.Entry, writers)
	for w := range writers {
		wg.Go(func() {
			tenant := tenants[w%len(tenants)]
			for i := range perWriter {
				e := NewEntry(NewRecord(tenant, w*perWriter+i))
				// The engine canonicalizes outside the commit path; the
				// store must hand the entry to the SealFunc as it is.
				var err error
				if e.Presealed, err = record.Preseal(e.Record); err != nil {
					t.Errorf("writer %d: Preseal(%s) = %v", w, e.Record.RecordID, err)
					return
				}
				if err := app.Append(context.Background(), e); err != nil {
					t.Errorf("writer %d: Appender.Append(%s) = %v", w, e.Record.RecordID, err)
					return
				}
				appended[w] = append(appended[w], e)
			}
		})
	}
	wg.Wait()
	if err := app.Close(); err != nil {
		t.Fatalf("Appender.Close() = %v", err)
	}
	if t.Failed() {
		return
	}

	ctx := t.Context()
	for ti, tenant := range tenants {
		wantIDs := map[string]bool{}
		for w := ti; w < writers; w += len(tenants) {
			for _, e := range appended[w] {
				wantIDs[e.Record.RecordID] = true
			}
		}
		chain, err := st.Chain(ctx, tenant, 0, 1000)
		if err != nil {
			t.Fatalf("Chain(%s, 0, 1000) = %v", tenant, err)
		}
		if len(chain) != len(wantIDs) {
			t.Errorf("Chain(%s, 0, 1000) returned %d records, want %d", tenant, len(chain), len(wantIDs))
		}
		for i, raw := range chain {
			var r writ.Record
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatalf("Chain(%s, 0, 1000)[%d]: %v", tenant, i, err)
			}
			if r.Audit.Seq != int64(i+1) {
				t.Fatalf("Chain(%s, 0, 1000)[%d] has seq %d, want %d (no repeated or skipped seq)", tenant, i, r.Audit.Seq, i+1)
			}
			if !wantIDs[r.RecordID] {
				t.Errorf("Chain(%s, 0, 1000)[%d] is %s, not one of the records appended to %s, or a repeat", tenant, i, r.RecordID, tenant)
			}
			delete(wantIDs, r.RecordID)
		}
		head, err := st.Head(ctx, tenant)
		if err != nil || head.Seq != int64(len(chain)) {
			t.Errorf("Head(%s) = %+v, %v; want seq %d", tenant, head, err, len(chain))
		}
	}
	wantNoFindings(t, st, writers*perWriter)
}

func testIdempotencyAcrossTransactions(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	first := NewEntry(NewRecord("acme", 1))
	first.Idempotency = &ledger.IdempotencyClaim{Key: "refund-o-00001", ArgsDigest: first.Record.Replay.ArgumentsDigest}
	mustAppend(t, st, first)
	want := &ledger.Prior{ArgsDigest: first.Idempotency.ArgsDigest, Receipt: first.Receipt, RecordID: first.Record.RecordID}
	headBefore, err := st.Head(ctx, "acme")
	if err != nil {
		t.Fatalf("Head(acme) = %v", err)
	}

	// A retry with the same key (here with different arguments, which the
	// engine turns into a conflict) is answered from the first claim, and
	// an entry behind it in the batch takes the very next seq.
	retry := NewEntry(NewRecord("acme", 2))
	retry.Idempotency = &ledger.IdempotencyClaim{Key: "refund-o-00001", ArgsDigest: "sha256:" + strings.Repeat("ab", 32)}
	next := NewEntry(NewRecord("acme", 3))
	mustAppend(t, st, retry, next)

	if !samePrior(retry.Prior, want) {
		t.Errorf("after Append(retry), retry.Prior = %s, want %s", fmtPrior(retry.Prior), fmtPrior(want))
	}
	if retry.Raw != nil {
		t.Errorf("after Append(retry), retry.Raw = %s, want nil (not appended)", retry.Raw)
	}
	if _, err := st.Record(ctx, "acme", retry.Record.RecordID); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Record(acme, %s) of the retried entry = %v, want ENOTFOUND", retry.Record.RecordID, err)
	}
	l, err := record.ParseLink(next.Raw)
	if err != nil || l.Seq != headBefore.Seq+1 || l.PrevHash != headBefore.Hash {
		t.Errorf("the entry after the retry was sealed at seq %d after %s (%v), want seq %d after %s (no seq consumed)", l.Seq, l.PrevHash, err, headBefore.Seq+1, headBefore.Hash)
	}

	got, err := idempotent(ctx, st, "acme", "refund-o-00001")
	if err != nil || !samePrior(got, want) {
		t.Errorf("Idempotent(acme, refund-o-00001) = %s, %v; want %s, nil", fmtPrior(got), err, fmtPrior(want))
	}
	got, err = idempotent(ctx, st, "acme", "refund-o-99999")
	if err != nil || got != nil {
		t.Errorf("Idempotent(acme, refund-o-99999) of an unclaimed key = %s, %v; want <nil>, nil", fmtPrior(got), err)
	}
	wantNoFindings(t, st, 2)
}

func testIdempotencyWithinBatch(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	a := NewEntry(NewRecord("acme", 1))
	a.Idempotency = &ledger.IdempotencyClaim{Key: "k-1", ArgsDigest: a.Record.Replay.ArgumentsDigest}
	b := NewEntry(NewRecord("acme", 2))
	b.Idempotency = &ledger.IdempotencyClaim{Key: "k-1", ArgsDigest: a.Record.Replay.ArgumentsDigest}
	c := NewEntry(NewRecord("acme", 3))
	c.Idempotency = &ledger.IdempotencyClaim{Key: "k-2", ArgsDigest: c.Record.Replay.ArgumentsDigest}
	mustAppend(t, st, a, b, c)

	want := &ledger.Prior{ArgsDigest: a.Idempotency.ArgsDigest, Receipt: a.Receipt, RecordID: a.Record.RecordID}
	if a.Prior != nil || a.Raw == nil {
		t.Errorf("after Append(a, b, c), a.Prior = %s and a.Raw has %d bytes, want a appended", fmtPrior(a.Prior), len(a.Raw))
	}
	if !samePrior(b.Prior, want) || b.Raw != nil {
		t.Errorf("after Append(a, b, c), b.Prior = %s and b.Raw has %d bytes, want Prior %s and no Raw", fmtPrior(b.Prior), len(b.Raw), fmtPrior(want))
	}
	if c.Prior != nil {
		t.Errorf("after Append(a, b, c), c.Prior = %s, want nil (its own key)", fmtPrior(c.Prior))
	}
	if l, _ := record.ParseLink(c.Raw); l.Seq != 2 {
		t.Errorf("after Append(a, b, c), c was sealed at seq %d, want 2", l.Seq)
	}
	for key, want := range map[string]*ledger.Prior{
		"k-1": want,
		"k-2": {ArgsDigest: c.Idempotency.ArgsDigest, Receipt: c.Receipt, RecordID: c.Record.RecordID},
	} {
		got, err := idempotent(ctx, st, "acme", key)
		if err != nil || !samePrior(got, want) {
			t.Errorf("Idempotent(acme, %s) = %s, %v; want %s, nil", key, fmtPrior(got), err, fmtPrior(want))
		}
	}
	wantNoFindings(t, st, 2)
}

func testIdempotencyPerTenant(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	a := NewEntry(NewRecord("acme", 1))
	a.Idempotency = &ledger.IdempotencyClaim{Key: "shared-key", ArgsDigest: a.Record.Replay.ArgumentsDigest}
	mustAppend(t, st, a)
	g := NewEntry(NewRecord("globex", 1))
	g.Idempotency = &ledger.IdempotencyClaim{Key: "shared-key", ArgsDigest: g.Record.Replay.ArgumentsDigest}
	mustAppend(t, st, g)

	if g.Prior != nil || g.Raw == nil {
		t.Errorf("globex's claim of a key acme holds: Prior = %s, Raw %d bytes; want appended", fmtPrior(g.Prior), len(g.Raw))
	}
	for _, e := range []*ledger.Entry{a, g} {
		tenant := e.Record.TenantID
		want := &ledger.Prior{ArgsDigest: e.Idempotency.ArgsDigest, Receipt: e.Receipt, RecordID: e.Record.RecordID}
		got, err := idempotent(ctx, st, tenant, "shared-key")
		if err != nil || !samePrior(got, want) {
			t.Errorf("Idempotent(%s, shared-key) = %s, %v; want %s, nil", tenant, fmtPrior(got), err, fmtPrior(want))
		}
	}
	got, err := idempotent(ctx, st, "initech", "shared-key")
	if err != nil || got != nil {
		t.Errorf("Idempotent(initech, shared-key) = %s, %v; want <nil>, nil", fmtPrior(got), err)
	}
}

func testBlocks(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	key := ledger.BlockKey{DecisionKey: "payments.refund", ArgsDigest: "sha256:" + strings.Repeat("1f", 32), PackHash: "sha256:" + strings.Repeat("2e", 32)}

	// Blocks do not stop appends: every entry is appended and the first
	// one to name the key keeps it, whether it came in an earlier
	// transaction or earlier in the same batch.
	first := NewEntry(NewRecord("acme", 1))
	first.Block = &key
	first.Idempotency = &ledger.IdempotencyClaim{Key: "k-blocked", ArgsDigest: "sha256:" + strings.Repeat("5b", 32)}
	mustAppend(t, st, first)
	second := NewEntry(NewRecord("acme", 2))
	second.Block = &key
	otherKey := key
	otherKey.ArgsDigest = "sha256:" + strings.Repeat("3d", 32)
	third := NewEntry(NewRecord("acme", 3))
	third.Block = &otherKey
	fourth := NewEntry(NewRecord("acme", 4))
	fourth.Block = &otherKey
	mustAppend(t, st, second, third, fourth)
	for _, e := range []*ledger.Entry{first, second, third, fourth} {
		if e.Raw == nil || e.Prior != nil {
			t.Errorf("blocked entry %s: Raw %d bytes, Prior %s; want appended", e.Record.RecordID, len(e.Raw), fmtPrior(e.Prior))
		}
	}

	pack2 := key
	pack2.PackHash = "sha256:" + strings.Repeat("4c", 32)
	tests := []struct {
		tenant string
		key    ledger.BlockKey
		want   *ledger.Prior
	}{
		{"acme", key, &ledger.Prior{ArgsDigest: key.ArgsDigest, Receipt: first.Receipt, RecordID: first.Record.RecordID}},
		{"acme", otherKey, &ledger.Prior{ArgsDigest: otherKey.ArgsDigest, Receipt: third.Receipt, RecordID: third.Record.RecordID}},
		{"acme", pack2, nil},
		{"acme", ledger.BlockKey{DecisionKey: "payments.payout", ArgsDigest: key.ArgsDigest, PackHash: key.PackHash}, nil},
		{"globex", key, nil},
	}
	claimed := &ledger.Prior{ArgsDigest: first.Idempotency.ArgsDigest, Receipt: first.Receipt, RecordID: first.Record.RecordID}
	for _, tc := range tests {
		got, err := blocked(ctx, st, tc.tenant, tc.key)
		if err != nil || !samePrior(got, tc.want) {
			t.Errorf("Blocked(%s, %+v) = %s, %v; want %s, nil", tc.tenant, tc.key, fmtPrior(got), err, fmtPrior(tc.want))
		}
		// Priors answers both questions at once, each as when asked alone.
		for _, ik := range []string{"", "k-blocked", "k-unclaimed"} {
			var wantIdem *ledger.Prior
			if ik == "k-blocked" && tc.tenant == "acme" {
				wantIdem = claimed
			}
			p, err := st.Priors(ctx, tc.tenant, ik, tc.key)
			if err != nil || !samePrior(p.Idempotent, wantIdem) || !samePrior(p.Blocked, tc.want) {
				t.Errorf("Priors(%s, %q, %+v) = {%s, %s}, %v; want {%s, %s}, nil", tc.tenant, ik, tc.key,
					fmtPrior(p.Idempotent), fmtPrior(p.Blocked), err, fmtPrior(wantIdem), fmtPrior(tc.want))
			}
		}
	}

	// The same key in another tenant is that tenant's own.
	g := NewEntry(NewRecord("globex", 1))
	g.Block = &key
	mustAppend(t, st, g)
	want := &ledger.Prior{ArgsDigest: key.ArgsDigest, Receipt: g.Receipt, RecordID: g.Record.RecordID}
	got, err := blocked(ctx, st, "globex", key)
	if err != nil || !samePrior(got, want) {
		t.Errorf("Blocked(globex, %+v) = %s, %v; want %s, nil", key, fmtPrior(got), err, fmtPrior(want))
	}
}

func testBlobs(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	envelope := NewBlob("envelope", []byte(`{"tenant_id":"acme","tool":"refund","arguments":{"order_id":"o-00001"}}`))
	manifest := NewBlob("pack_manifest", []byte(`{"name":"acme-payments","version":"2025.03.1"}`))
	if err := st.PutBlobs(ctx, []ledger.Blob{envelope, manifest}); err != nil {
		t.Fatalf("PutBlobs(envelope, manifest) = %v", err)
	}
	// Insert if absent: storing a blob again, alone or beside new ones, is
	// not an error.
	packFile := NewBlob("pack_file", []byte("rules:\n  - id: refund_under_limit\n"))
	if err := st.PutBlobs(ctx, []ledger.Blob{envelope, packFile, envelope}); err != nil {
		t.Fatalf("PutBlobs(envelope, pack_file, envelope) again = %v", err)
	}
	if err := st.PutBlobs(ctx, nil); err != nil {
		t.Errorf("PutBlobs(nil) = %v", err)
	}

	// Blobs travel with entries too, and may repeat ones already stored.
	attached := NewBlob("envelope", []byte(`{"tenant_id":"acme","tool":"refund","arguments":{"order_id":"o-00002"}}`))
	e := NewEntry(NewRecord("acme", 2))
	e.Blobs = []ledger.Blob{attached, manifest}
	e2 := NewEntry(NewRecord("acme", 3))
	e2.Blobs = []ledger.Blob{attached}
	mustAppend(t, st, e, e2)

	for _, b := range []ledger.Blob{envelope, manifest, packFile, attached} {
		got, err := st.Blob(ctx, b.Hash)
		if err != nil || !bytes.Equal(got, b.Data) {
			t.Errorf("Blob(%s) = %q, %v; want %q, nil", b.Hash, got, err, b.Data)
		}
	}
	missing := record.Digest([]byte("never stored"))
	_, err := st.Blob(ctx, missing)
	wantCode(t, fmt.Sprintf("Blob(%s)", missing), err, writ.ENOTFOUND)
}

func testEnvelopes(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	withEnvelope := func(tenant string, n int, env string) *ledger.Entry {
		rec := NewRecord(tenant, n)
		rec.Replay.ReplayPacketID = record.Digest([]byte(env))
		e := NewEntry(rec)
		e.Envelope = []byte(env)
		return e
	}
	a1 := withEnvelope("acme", 1, `{"tenant_id":"acme","tool":"refund","arguments":{"order_id":"o-00001"}}`)
	// The same bytes again: each record keeps its own copy.
	a2 := withEnvelope("acme", 2, `{"tenant_id":"acme","tool":"refund","arguments":{"order_id":"o-00001"}}`)
	// Before envelopes were kept with records, they were blobs: the
	// lookup by record finds those too.
	legacy := NewBlob("envelope", []byte(`{"tenant_id":"acme","tool":"refund","arguments":{"order_id":"o-00003"}}`))
	r3 := NewRecord("acme", 3)
	r3.Replay.ReplayPacketID = legacy.Hash
	a3 := NewEntry(r3)
	a3.Blobs = []ledger.Blob{legacy}
	g1 := withEnvelope("globex", 1, `{"tenant_id":"globex","tool":"refund"}`)
	mustAppend(t, st, a1, a2, a3, g1)

	for _, tc := range []struct {
		tenant string
		seq    int64
		hash   string
		want   []byte
	}{
		{"acme", 1, a1.Record.Replay.ReplayPacketID, a1.Envelope},
		{"acme", 2, a2.Record.Replay.ReplayPacketID, a2.Envelope},
		{"acme", 3, legacy.Hash, legacy.Data},
		{"globex", 1, g1.Record.Replay.ReplayPacketID, g1.Envelope},
	} {
		got, err := st.Envelope(ctx, tc.tenant, tc.seq, tc.hash)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("Envelope(%s, %d, %s) = %q, %v; want %q, nil", tc.tenant, tc.seq, tc.hash, got, err, tc.want)
		}
	}
	// An envelope is found only with its own record and its own address.
	for _, tc := range []struct {
		tenant string
		seq    int64
		hash   string
	}{
		{"globex", 1, a1.Record.Replay.ReplayPacketID}, // another tenant's record
		{"acme", 4, a1.Record.Replay.ReplayPacketID},   // no such record
		{"acme", 1, g1.Record.Replay.ReplayPacketID},   // another address
	} {
		_, err := st.Envelope(ctx, tc.tenant, tc.seq, tc.hash)
		wantCode(t, fmt.Sprintf("Envelope(%s, %d, %s)", tc.tenant, tc.seq, tc.hash), err, writ.ENOTFOUND)
	}
	// Envelopes kept with records are not content-addressed blobs.
	_, err := st.Blob(ctx, a1.Record.Replay.ReplayPacketID)
	wantCode(t, "Blob(an envelope kept with its record)", err, writ.ENOTFOUND)

	// An envelope that is not the one its record pins is refused, and
	// nothing of the batch is written.
	bad := withEnvelope("acme", 4, `{"tenant_id":"acme","tool":"refund"}`)
	bad.Envelope = []byte(`{"tenant_id":"acme","tool":"payout"}`)
	err = st.Append(ctx, []*ledger.Entry{withEnvelope("acme", 4, `{"x":1}`), bad}, ledger.Seal)
	wantCode(t, "Append(an envelope its record does not pin)", err, writ.EINVALID)
	if h, err := st.Head(ctx, "acme"); err != nil || h.Seq != 3 {
		t.Errorf("Head(acme) after a refused batch = %+v, %v; want seq 3", h, err)
	}
}

// queryFixture appends a varied set of records to acme (and a few to
// globex, with the same keys, subjects and traces) and returns acme's
// records in chain order.
func queryFixture(t *testing.T, st ledger.Store) []*writ.Record {
	keys := []string{"payments.refund", "payments.payout", "crm.email_customer"}
	statuses := []writ.Status{writ.StatusDecided, writ.StatusRejected, writ.StatusEscalated, writ.StatusDeferred}
	modes := []writ.ApprovalMode{writ.ModeNetwork, writ.ModeReadOnly, writ.ModeDestructive}
	build := func(tenant string, count int) []*writ.Record {
		recs := records(tenant, 1, count)
		for i, r := range recs {
			r.DecisionKey = keys[i%len(keys)]
			r.Status = statuses[i%len(statuses)]
			// Every fifth record has no outcome, as approval decisions
			// and execution reports have none.
			outputs := maps.Clone(r.Outputs)
			if outputs == nil {
				outputs = map[string]any{}
			}
			delete(outputs, "outcome")
			if i%5 < len(writ.Outcomes) {
				outputs["outcome"] = string(writ.Outcomes[i%5])
			}
			r.Outputs = outputs
			// Timestamps are not in chain order, so ordering by time
			// instead of seq shows.
			r.Timestamp = baseTime.Add(time.Duration((i*7)%count) * time.Minute)
			// The seed's other query keys: approval modes, a rule that
			// denies every fourth record beside the one that always
			// allows (listed twice in one record), and approvers, one
			// of whom signs some records twice.
			r.ApprovalModeEffective = modes[i%len(modes)]
			if i%4 == 1 {
				deny := writ.PolicyDecision{PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny", BundleID: "refunds@3", RuleIDs: []string{"R_LIMIT"}, Verdict: "deny"}
				r.PolicyDecisions = append(slices.Clone(r.PolicyDecisions), deny, deny)
			}
			// Every seventh record's scorecard failed its spec's pass
			// mark; every third of the others passed it or has none.
			switch {
			case i%7 == 3:
				r.Scorecard = map[string]float64{"safety": 1, "utility": 0.5}
				r.ScorecardFailed = []string{"utility"}
			case i%3 == 0:
				r.Scorecard = map[string]float64{"safety": 1, "utility": 0.9}
			}
			switch i % 6 {
			case 2:
				r.Approvals = []writ.Approval{{GateID: "g_refund", Approver: "user:ops-lead", ApprovalModeEffective: r.ApprovalModeEffective, DecidedAt: r.Timestamp}}
			case 5:
				r.Approvals = []writ.Approval{
					{GateID: "g_refund", Approver: "user:cfo", ApprovalModeEffective: r.ApprovalModeEffective, DecidedAt: r.Timestamp},
					{GateID: "g_refund_2", Approver: "user:cfo", ApprovalModeEffective: r.ApprovalModeEffective, DecidedAt: r.Timestamp},
				}
			}
		}
		return recs
	}
	acme := build("acme", 40)
	globex := build("globex", 10)
	mustAppend(t, st, entries(acme[:25]...)...)
	mustAppend(t, st, entries(append(globex, acme[25:]...)...)...)
	return acme
}

// RecordsQuery runs the conformance test of Records' filters alone, for a
// store to run again with its query routes changed (a store that reads a
// query differently by how many records match).
func RecordsQuery(t *testing.T, st ledger.Store) { testRecordsQuery(t, st) }

func testRecordsQuery(t *testing.T, st ledger.Store) {
	acme := queryFixture(t, st)
	at := func(i int) time.Time { return acme[i].Timestamp }
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name  string
		q     writ.RecordQuery
		match func(r *writ.Record) bool
	}{
		{"all", writ.RecordQuery{}, func(*writ.Record) bool { return true }},
		{"decision key", writ.RecordQuery{DecisionKey: "payments.payout"},
			func(r *writ.Record) bool { return r.DecisionKey == "payments.payout" }},
		{"status", writ.RecordQuery{Status: writ.StatusEscalated},
			func(r *writ.Record) bool { return r.Status == writ.StatusEscalated }},
		{"outcome", writ.RecordQuery{Outcome: writ.OutcomeReplanRequired},
			func(r *writ.Record) bool { return r.Outputs["outcome"] == "replan_required" }},
		{"outcome and key", writ.RecordQuery{Outcome: writ.OutcomeAllow, DecisionKey: "payments.refund"},
			func(r *writ.Record) bool {
				return r.Outputs["outcome"] == "allow" && r.DecisionKey == "payments.refund"
			}},
		{"shared subject", writ.RecordQuery{SubjectID: "customer:c-003"},
			func(r *writ.Record) bool { return slices.Contains(r.SubjectIDs, "customer:c-003") }},
		{"one record's subject", writ.RecordQuery{SubjectID: "order:o-00017"},
			func(r *writ.Record) bool { return slices.Contains(r.SubjectIDs, "order:o-00017") }},
		{"trace", writ.RecordQuery{TraceID: acme[4].TraceID},
			func(r *writ.Record) bool { return r.TraceID == acme[4].TraceID }},
		{"from is inclusive", writ.RecordQuery{From: at(10)},
			func(r *writ.Record) bool { return !r.Timestamp.Before(at(10)) }},
		{"to is exclusive", writ.RecordQuery{To: at(10)},
			func(r *writ.Record) bool { return r.Timestamp.Before(at(10)) }},
		{"from and to in another zone", writ.RecordQuery{From: at(3).In(paris), To: at(30).In(paris)},
			func(r *writ.Record) bool { return !r.Timestamp.Before(at(3)) && r.Timestamp.Before(at(30)) }},
		{"key and status", writ.RecordQuery{DecisionKey: "payments.refund", Status: writ.StatusDecided},
			func(r *writ.Record) bool { return r.DecisionKey == "payments.refund" && r.Status == writ.StatusDecided }},
		{"key, subject and from", writ.RecordQuery{DecisionKey: "crm.email_customer", SubjectID: "customer:c-005", From: at(5)},
			func(r *writ.Record) bool {
				return r.DecisionKey == "crm.email_customer" && slices.Contains(r.SubjectIDs, "customer:c-005") && !r.Timestamp.Before(at(5))
			}},
		{"every filter", writ.RecordQuery{DecisionKey: acme[4].DecisionKey, Status: acme[4].Status, SubjectID: acme[4].SubjectIDs[0], TraceID: acme[4].TraceID, From: at(4), To: at(4).Add(time.Nanosecond)},
			func(r *writ.Record) bool { return r.RecordID == acme[4].RecordID }},
		{"no match", writ.RecordQuery{DecisionKey: "no.such.key"}, func(*writ.Record) bool { return false }},
		{"decision key prefix", writ.RecordQuery{DecisionKeyPrefix: "payments."},
			func(r *writ.Record) bool { return strings.HasPrefix(r.DecisionKey, "payments.") }},
		{"decision key prefix, a whole key", writ.RecordQuery{DecisionKeyPrefix: "payments.refund"},
			func(r *writ.Record) bool { return strings.HasPrefix(r.DecisionKey, "payments.refund") }},
		{"decision key prefix, case-sensitive", writ.RecordQuery{DecisionKeyPrefix: "Payments."}, func(*writ.Record) bool { return false }},
		{"decision key prefix past every key", writ.RecordQuery{DecisionKeyPrefix: "payments.refundz"}, func(*writ.Record) bool { return false }},
		{"subject prefix", writ.RecordQuery{SubjectPrefix: "customer:c-001"},
			func(r *writ.Record) bool { return hasSubjectPrefix(r, "customer:c-001") }},
		{"subject prefix of a few", writ.RecordQuery{SubjectPrefix: "order:o-0001"},
			func(r *writ.Record) bool { return hasSubjectPrefix(r, "order:o-0001") }},
		{"key prefix, subject prefix and status", writ.RecordQuery{DecisionKeyPrefix: "crm.", SubjectPrefix: "customer:", Status: writ.StatusDecided},
			func(r *writ.Record) bool {
				return strings.HasPrefix(r.DecisionKey, "crm.") && hasSubjectPrefix(r, "customer:") && r.Status == writ.StatusDecided
			}},
		{"empty window", writ.RecordQuery{From: at(10), To: at(10)}, func(*writ.Record) bool { return false }},
		{"approval mode", writ.RecordQuery{ApprovalMode: writ.ModeDestructive},
			func(r *writ.Record) bool { return r.ApprovalModeEffective == writ.ModeDestructive }},
		{"policy decision", writ.RecordQuery{PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny"},
			func(r *writ.Record) bool { return hasPolicyDecision(r, "pd:refunds@3:R_LIMIT:deny") }},
		{"policy decision every record has", writ.RecordQuery{PolicyDecisionID: "pd_refund_limit_v3"},
			func(r *writ.Record) bool { return hasPolicyDecision(r, "pd_refund_limit_v3") }},
		{"approver", writ.RecordQuery{Approver: "user:ops-lead"},
			func(r *writ.Record) bool { return hasApprover(r, "user:ops-lead") }},
		{"approver of two approvals in a record", writ.RecordQuery{Approver: "user:cfo"},
			func(r *writ.Record) bool { return hasApprover(r, "user:cfo") }},
		{"approver, case-sensitive", writ.RecordQuery{Approver: "user:CFO"}, func(*writ.Record) bool { return false }},
		{"policy decision, approver and approval mode", writ.RecordQuery{PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny", Approver: "user:cfo", ApprovalMode: writ.ModeDestructive},
			func(r *writ.Record) bool {
				return hasPolicyDecision(r, "pd:refunds@3:R_LIMIT:deny") && hasApprover(r, "user:cfo") && r.ApprovalModeEffective == writ.ModeDestructive
			}},
		{"scorecard failed", writ.RecordQuery{Scorecard: writ.ScorecardFailedQuery},
			func(r *writ.Record) bool { return len(r.ScorecardFailed) > 0 }},
		{"scorecard failed and status", writ.RecordQuery{Scorecard: writ.ScorecardFailedQuery, Status: writ.StatusEscalated},
			func(r *writ.Record) bool { return len(r.ScorecardFailed) > 0 && r.Status == writ.StatusEscalated }},
		{"policy decision, key prefix and subject prefix", writ.RecordQuery{PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny", DecisionKeyPrefix: "payments.", SubjectPrefix: "customer:c-00"},
			func(r *writ.Record) bool {
				return hasPolicyDecision(r, "pd:refunds@3:R_LIMIT:deny") && strings.HasPrefix(r.DecisionKey, "payments.") && hasSubjectPrefix(r, "customer:c-00")
			}},
	}
	for _, tc := range tests {
		var want []string
		for _, r := range acme {
			if tc.match(r) {
				want = append(want, r.RecordID)
			}
		}
		if tc.name == "every filter" && len(want) != 1 {
			t.Fatalf("fixture: %q matches %d records, want 1", tc.name, len(want))
		}
		if strings.HasPrefix(tc.name, "outcome") && (len(want) == 0 || len(want) == len(acme)) {
			t.Fatalf("fixture: %q matches %d of %d records; the filter would prove nothing", tc.name, len(want), len(acme))
		}
		if (strings.Contains(tc.name, "prefix") || strings.HasPrefix(tc.name, "approv") || strings.HasPrefix(tc.name, "policy decision") || strings.HasPrefix(tc.name, "scorecard")) &&
			!strings.Contains(tc.name, "case") && !strings.Contains(tc.name, "past") && !strings.Contains(tc.name, "every record") && (len(want) == 0 || len(want) == len(acme)) {
			t.Fatalf("fixture: %q matches %d of %d records; the filter would prove nothing", tc.name, len(want), len(acme))
		}
		newest := slices.Clone(want)
		slices.Reverse(newest)
		for _, limit := range []int{1000, 3} {
			q := tc.q
			q.TenantID = "acme"
			q.Limit = limit
			got := allPages(t, st, q)
			if !slices.Equal(got, want) {
				t.Errorf("%s: Records(%s) pages = %v, want %v", tc.name, fmtQuery(q), got, want)
			}
			// Newest first: the same records, the other way round.
			q.Newest = true
			if got := allPages(t, st, q); !slices.Equal(got, newest) {
				t.Errorf("%s: Records(%s) pages = %v, want %v", tc.name, fmtQuery(q), got, newest)
			}
		}
	}

	// Every start and end of a range, at a record's time and just after
	// it: the records' times are not in chain order, so a walk that began
	// at the first record of the range's time (rather than after the last
	// record all of whose predecessors are before it: the time marks, see
	// ledger.TimeMarker) would miss records.
	for i := range acme {
		for _, from := range []time.Time{at(i), at(i).Add(time.Nanosecond)} {
			for _, to := range []time.Time{{}, at((i + 13) % len(acme))} {
				var want []string
				for _, r := range acme {
					if !r.Timestamp.Before(from) && (to.IsZero() || r.Timestamp.Before(to)) {
						want = append(want, r.RecordID)
					}
				}
				q := writ.RecordQuery{TenantID: "acme", From: from, To: to, Limit: 4}
				if got := allPages(t, st, q); !slices.Equal(got, want) {
					t.Errorf("Records(%s) pages = %v, want %v", fmtQuery(q), got, want)
				}
				slices.Reverse(want)
				q.Newest = true
				if got := allPages(t, st, q); !slices.Equal(got, want) {
					t.Errorf("Records(%s) pages = %v, want %v", fmtQuery(q), got, want)
				}
			}
		}
	}

	for _, bad := range []writ.RecordQuery{{TenantID: "acme", Outcome: "permit"}, {TenantID: "acme", ApprovalMode: "network_write"}} {
		if _, err := st.Records(t.Context(), bad); writ.ErrorCode(err) != writ.EINVALID {
			t.Errorf("Records(%s) = %v, want EINVALID", fmtQuery(bad), err)
		}
	}

	q := writ.RecordQuery{TenantID: "umbrella", Limit: 10}
	if got := allPages(t, st, q); len(got) != 0 {
		t.Errorf("Records(%s) of a tenant without records = %v, want none", fmtQuery(q), got)
	}
}

// allPages follows NextCursor to the end and returns the record ids in the
// order served, failing on a page larger than the limit, a repeated record,
// a record of another tenant or a record that does not parse as its bytes.
func allPages(t *testing.T, st ledger.Store, q writ.RecordQuery) []string {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("Records(%s): more than 1000 pages; the cursor does not advance", fmtQuery(q))
		}
		page, err := st.Records(t.Context(), q)
		if err != nil {
			t.Fatalf("Records(%s) = %v", fmtQuery(q), err)
		}
		if len(page.Records) > q.Limit {
			t.Errorf("Records(%s) returned %d records, more than the limit", fmtQuery(q), len(page.Records))
		}
		if len(page.Records) == 0 && page.NextCursor != "" {
			t.Errorf("Records(%s) returned an empty page with a next cursor", fmtQuery(q))
		}
		for _, sr := range page.Records {
			r := sr.Record
			if seen[r.RecordID] {
				t.Errorf("Records(%s) served %s again", fmtQuery(q), r.RecordID)
			}
			seen[r.RecordID] = true
			if r.TenantID != q.TenantID {
				t.Errorf("Records(%s) served %s of tenant %q", fmtQuery(q), r.RecordID, r.TenantID)
			}
			var parsed writ.Record
			if err := json.Unmarshal(sr.Raw, &parsed); err != nil || parsed.RecordID != r.RecordID || parsed.Audit != r.Audit {
				t.Errorf("Records(%s): record %s does not match its raw bytes (%v)", fmtQuery(q), r.RecordID, err)
			}
			ids = append(ids, r.RecordID)
		}
		if page.NextCursor == "" {
			return ids
		}
		q.Cursor = page.NextCursor
	}
}

func hasPolicyDecision(r *writ.Record, id string) bool {
	return slices.ContainsFunc(r.PolicyDecisions, func(p writ.PolicyDecision) bool { return p.PolicyDecisionID == id })
}

func hasApprover(r *writ.Record, approver string) bool {
	return slices.ContainsFunc(r.Approvals, func(a writ.Approval) bool { return a.Approver == approver })
}

func hasSubjectPrefix(r *writ.Record, prefix string) bool {
	return slices.ContainsFunc(r.SubjectIDs, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func fmtQuery(q writ.RecordQuery) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("tenant", q.TenantID)
	add("key", q.DecisionKey)
	add("status", string(q.Status))
	add("outcome", string(q.Outcome))
	add("subject", q.SubjectID)
	add("trace", q.TraceID)
	add("key_prefix", q.DecisionKeyPrefix)
	add("subject_prefix", q.SubjectPrefix)
	add("approval_mode", string(q.ApprovalMode))
	add("policy_decision", q.PolicyDecisionID)
	add("approver", q.Approver)
	add("refers_to", q.RefersTo)
	add("scorecard", q.Scorecard)
	if q.Newest {
		add("order", "newest")
	}
	if !q.From.IsZero() {
		add("from", q.From.Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		add("to", q.To.Format(time.RFC3339Nano))
	}
	add("limit", fmt.Sprint(q.Limit))
	if q.Cursor != "" {
		add("cursor", "…")
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func testRecordsLimits(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	const n = 1005
	var all []string
	for from := 1; from <= n; from += 201 {
		recs := records("acme", from, min(201, n-from+1))
		mustAppend(t, st, entries(recs...)...)
		for _, r := range recs {
			all = append(all, r.RecordID)
		}
	}
	ids := func(p *writ.RecordPage) []string {
		var s []string
		for _, r := range p.Records {
			s = append(s, r.Record.RecordID)
		}
		return s
	}

	q := writ.RecordQuery{TenantID: "acme"}
	page, err := st.Records(ctx, q)
	if err != nil {
		t.Fatalf("Records(%s) = %v", fmtQuery(q), err)
	}
	if got := ids(page); !slices.Equal(got, all[:100]) || page.NextCursor == "" {
		t.Errorf("Records(%s) = %d records (cursor %q), want the first 100 (the default limit) and a next cursor", fmtQuery(q), len(got), page.NextCursor)
	}

	q.Limit = 5000
	page, err = st.Records(ctx, q)
	if err != nil {
		t.Fatalf("Records(%s) = %v", fmtQuery(q), err)
	}
	if got := ids(page); !slices.Equal(got, all[:1000]) || page.NextCursor == "" {
		t.Fatalf("Records(%s) = %d records (cursor %q), want the first 1000 (the maximum limit) and a next cursor", fmtQuery(q), len(got), page.NextCursor)
	}
	q.Cursor = page.NextCursor
	page, err = st.Records(ctx, q)
	if err != nil {
		t.Fatalf("Records(%s) = %v", fmtQuery(q), err)
	}
	if got := ids(page); !slices.Equal(got, all[1000:]) || page.NextCursor != "" {
		t.Errorf("Records(%s) second page = %v (cursor %q), want %v and no cursor", fmtQuery(q), got, page.NextCursor, all[1000:])
	}

	// A last page that is exactly full has no next cursor either.
	q = writ.RecordQuery{TenantID: "acme", Limit: 5, Cursor: ""}
	q.SubjectID = "customer:c-004" // n%10 == 4: 101 records
	got := allPages(t, st, q)
	q.Limit = 101
	page, err = st.Records(ctx, q)
	if err != nil {
		t.Fatalf("Records(%s) = %v", fmtQuery(q), err)
	}
	if len(page.Records) != 101 || page.NextCursor != "" || !slices.Equal(ids(page), got) {
		t.Errorf("Records(%s) = %d records, cursor %q; want the %d records of the paged walk and no cursor", fmtQuery(q), len(page.Records), page.NextCursor, len(got))
	}
}

func testRecordsInvalidCursor(t *testing.T, st ledger.Store) {
	mustAppend(t, st, entries(records("acme", 1, 3)...)...)
	for _, cursor := range []string{"!!!not-a-cursor!!!", "%zz", "\x00\x01\x02", "not a cursor at all"} {
		q := writ.RecordQuery{TenantID: "acme", Cursor: cursor}
		_, err := st.Records(t.Context(), q)
		wantCode(t, fmt.Sprintf("Records(cursor %q)", cursor), err, writ.EINVALID)
	}
}

func testTenantIsolation(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	a := NewEntry(NewRecord("acme", 1))
	g := NewEntry(NewRecord("globex", 1))
	mustAppend(t, st, a, g)
	aID := a.Record.RecordID
	missing := NewRecord("acme", 999).RecordID

	// Another tenant's record and a record that does not exist must be
	// indistinguishable: same code, same message but for the id.
	redact := func(err error, id string) string {
		return strings.ReplaceAll(writ.ErrorMessage(err), id, "<id>")
	}
	calls := []struct {
		name string
		call func(tenant, id string) error
	}{
		{"Record", func(tenant, id string) error { _, err := st.Record(ctx, tenant, id); return err }},
		{"Receipt", func(tenant, id string) error { _, err := st.Receipt(ctx, tenant, id); return err }},
	}
	for _, c := range calls {
		other := c.call("globex", aID)
		absent := c.call("globex", missing)
		wantCode(t, fmt.Sprintf("%s(globex, %s) of acme's record", c.name, aID), other, writ.ENOTFOUND)
		wantCode(t, fmt.Sprintf("%s(globex, %s) of a missing record", c.name, missing), absent, writ.ENOTFOUND)
		if o, m := redact(other, aID), redact(absent, missing); o != m {
			t.Errorf("%s(globex, …) says %q for another tenant's record and %q for a missing one; want the same", c.name, o, m)
		}
		if err := c.call("acme", aID); err != nil {
			t.Errorf("%s(acme, %s) = %v", c.name, aID, err)
		}
	}

	for _, tenant := range []string{"acme", "globex"} {
		q := writ.RecordQuery{TenantID: tenant, Limit: 10}
		if got := allPages(t, st, q); len(got) != 1 {
			t.Errorf("Records(%s) = %v, want only %s's one record", fmtQuery(q), got, tenant)
		}
		chain, err := st.Chain(ctx, tenant, 0, 10)
		if err != nil || len(chain) != 1 {
			t.Errorf("Chain(%s, 0, 10) = %d records, %v; want 1", tenant, len(chain), err)
		}
	}
}

func testSealFailureLeavesNothing(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	mustAppend(t, st, NewEntry(NewRecord("acme", 1)))
	headBefore, err := st.Head(ctx, "acme")
	if err != nil {
		t.Fatalf("Head(acme) = %v", err)
	}

	// A batch touching two tenants, with every kind of side row, fails at
	// its last entry.
	blob := NewBlob("envelope", []byte(`{"tenant_id":"acme","tool":"refund","arguments":{"order_id":"o-00002"}}`))
	block := ledger.BlockKey{DecisionKey: "payments.refund", ArgsDigest: "sha256:" + strings.Repeat("5b", 32), PackHash: "sha256:" + strings.Repeat("6a", 32)}
	batch := entries(NewRecord("acme", 2), NewRecord("globex", 1), NewRecord("acme", 3))
	batch[0].Blobs = []ledger.Blob{blob}
	batch[0].Idempotency = &ledger.IdempotencyClaim{Key: "k-fail", ArgsDigest: batch[0].Record.Replay.ArgumentsDigest}
	batch[1].Block = &block
	batch[1].Idempotency = &ledger.IdempotencyClaim{Key: "k-fail", ArgsDigest: batch[1].Record.Replay.ArgumentsDigest}
	failing := batch[2].Record.RecordID
	errSeal := errors.New("signer unavailable")
	seal := func(prev ledger.Head, e *ledger.Entry) ([]byte, error) {
		if e.Record.RecordID == failing {
			return nil, errSeal
		}
		return ledger.Seal(prev, e)
	}
	if err := st.Append(ctx, batch, seal); err == nil {
		t.Fatal("Append(batch whose last seal fails) = nil, want an error")
	}

	for _, tenant := range []string{"acme", "globex"} {
		want := ledger.Head{}
		if tenant == "acme" {
			want = headBefore
		}
		if got, err := st.Head(ctx, tenant); err != nil || got != want {
			t.Errorf("after the failed Append, Head(%s) = %+v, %v; want %+v", tenant, got, err, want)
		}
	}
	for _, e := range batch {
		if _, err := st.Record(ctx, e.Record.TenantID, e.Record.RecordID); writ.ErrorCode(err) != writ.ENOTFOUND {
			t.Errorf("after the failed Append, Record(%s, %s) = %v, want ENOTFOUND", e.Record.TenantID, e.Record.RecordID, err)
		}
	}
	for _, tenant := range []string{"acme", "globex"} {
		if p, err := idempotent(ctx, st, tenant, "k-fail"); err != nil || p != nil {
			t.Errorf("after the failed Append, Idempotent(%s, k-fail) = %s, %v; want <nil>, nil", tenant, fmtPrior(p), err)
		}
	}
	if p, err := blocked(ctx, st, "globex", block); err != nil || p != nil {
		t.Errorf("after the failed Append, Blocked(globex, %+v) = %s, %v; want <nil>, nil", block, fmtPrior(p), err)
	}
	_, err = st.Blob(ctx, blob.Hash)
	wantCode(t, fmt.Sprintf("after the failed Append, Blob(%s)", blob.Hash), err, writ.ENOTFOUND)
	if got := allPages(t, st, writ.RecordQuery{TenantID: "acme", Limit: 10}); len(got) != 1 {
		t.Errorf("after the failed Append, acme has records %v, want only the first", got)
	}
	tenants, err := st.Tenants(ctx)
	if err != nil || !slices.Equal(tenants, []string{"acme"}) {
		t.Errorf("after the failed Append, Tenants() = %v, %v; want [acme]", tenants, err)
	}

	// The store must not remember the heads of the failed batch: the
	// chains continue from what is durable.
	retry := entries(NewRecord("acme", 2), NewRecord("globex", 1))
	mustAppend(t, st, retry...)
	for i, want := range []ledger.Head{{Seq: 2, Hash: headBefore.Hash}, {Seq: 1, Hash: writ.GenesisHash}} {
		l, err := record.ParseLink(retry[i].Raw)
		if err != nil || l.Seq != want.Seq || l.PrevHash != want.Hash {
			t.Errorf("after the failed Append, the next %s record was sealed at seq %d after %s (%v), want seq %d after %s",
				retry[i].Record.TenantID, l.Seq, l.PrevHash, err, want.Seq, want.Hash)
		}
	}
	wantNoFindings(t, st, 3)
}

func testTenants(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	got, err := st.Tenants(ctx)
	if err != nil || len(got) != 0 {
		t.Errorf("Tenants() of an empty store = %v, %v; want none", got, err)
	}
	mustAppend(t, st, entries(NewRecord("globex", 1), NewRecord("acme", 1), NewRecord("acme", 2))...)
	mustAppend(t, st, NewEntry(NewRecord("initech", 1)))
	// Blobs are not a tenant's records.
	if err := st.PutBlobs(ctx, []ledger.Blob{NewBlob("pack_file", []byte("name: umbrella"))}); err != nil {
		t.Fatalf("PutBlobs() = %v", err)
	}
	got, err = st.Tenants(ctx)
	slices.Sort(got)
	if want := []string{"acme", "globex", "initech"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Tenants() = %v, %v; want %v (in any order)", got, err, want)
	}
}
