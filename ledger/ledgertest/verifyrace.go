package ledgertest

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
)

// appendsWhileRead is a store whose chain grows while verification reads
// it: once the chain has been read, the next read of the head first
// appends another record, as a commit does that lands while verify runs
// (after a kill -9 on PostgreSQL, the commit a dying server sent).
type appendsWhileRead struct {
	ledger.Store
	tenant  string
	next    int
	read    atomic.Bool // the chain has been read since the last append
	appends atomic.Int32
}

func (s *appendsWhileRead) Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error) {
	s.read.Store(true)
	return s.Store.Chain(ctx, tenantID, after, limit)
}

func (s *appendsWhileRead) Head(ctx context.Context, tenantID string) (ledger.Head, error) {
	if tenantID == s.tenant && s.read.Swap(false) {
		if err := s.Store.Append(ctx, entries(NewRecord(s.tenant, s.next)), ledger.Seal); err != nil {
			return ledger.Head{}, err
		}
		s.next++
		s.appends.Add(1)
	}
	return s.Store.Head(ctx, tenantID)
}

// testVerifyWhileAppending checks that a record committed while
// verification reads the chain is not reported missing: verification
// holds the chain to the head read before it and the head read after it.
func testVerifyWhileAppending(t *testing.T, st ledger.Store) {
	mustAppend(t, st, entries(records("acme", 1, 5)...)...)
	src := &appendsWhileRead{Store: st, tenant: "acme", next: 6}
	findings, n, err := verify.VerifyChains(t.Context(), src)
	if err != nil {
		t.Fatalf("VerifyChains() = %v", err)
	}
	if src.appends.Load() == 0 {
		t.Fatal("no record was appended while the chain was read: the test proves nothing")
	}
	for _, f := range findings {
		t.Errorf("VerifyChains() finding while appending: %+v", f)
	}
	if n < 5 {
		t.Errorf("VerifyChains() checked %d records, want at least 5", n)
	}
	// The records appended meanwhile are all there, and verify as a whole.
	wantNoFindings(t, st, 5+int64(src.appends.Load()))
}
