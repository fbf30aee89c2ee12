package packtest

import (
	"context"

	"github.com/writhq/writ/ledger"
)

// onFile is a case's ledger with history aggregates on file: every value
// the engine reads of a seeded aggregate is what the temporary ledger
// holds plus the case's value, for every group, as if decisions before
// the case had contributed it. Contributions the case's own decisions
// make accumulate on top, in the real store.
//
// Inside Append the store checks that each value a decision read is
// still current (ledger.HistoryBatch.Fresh) against what it holds, so the
// offsets are taken off the entry's reads for the call and put back
// after; the record keeps the values the decision read, offsets included.
type onFile struct {
	ledger.Store
	offset map[string]float64 // by aggregate id
}

func (s *onFile) HistoryValues(ctx context.Context, tenantID string, reads []ledger.HistoryRead) ([]float64, error) {
	vals, err := s.Store.HistoryValues(ctx, tenantID, reads)
	if err != nil {
		return nil, err
	}
	for i, r := range reads {
		vals[i] += s.offset[r.Aggregate]
	}
	return vals, nil
}

func (s *onFile) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	shift := func(sign float64) {
		for _, e := range entries {
			for i := range e.HistoryReads {
				e.HistoryReads[i].Value += sign * s.offset[e.HistoryReads[i].Aggregate]
			}
		}
	}
	shift(-1)
	defer shift(1)
	return s.Store.Append(ctx, entries, seal)
}
