package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// Transcript returns the records of the entries of the tenant's tool
// transcript run with seq below before (all when before is 0), in chain
// order, through record_terms' key (term, value, tenant_id, seq)
// (ledger.TranscriptReader).
func (s *Store) Transcript(ctx context.Context, tenantID, run string, before int64) ([]writ.StoredRecord, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, `SELECT x.seq, r.raw FROM record_terms x`+byID("r.raw")+`
		WHERE x.term = $2 AND x.value = $3 AND x.tenant_id = $1 AND x.seq < $4
		ORDER BY x.seq`, tenantID, ledger.TermTranscript, run, before)
	if err != nil {
		return nil, fmt.Errorf("postgres: read transcript: %w", err)
	}
	defer rows.Close()
	page, err := ledger.ReadPage(rows, math.MaxInt)
	if err != nil {
		return nil, err
	}
	return page.Records, nil
}

// TranscriptHead returns the record of the latest entry of the tenant's
// tool transcript run with seq below before (of all when before is 0), or
// nil (ledger.TranscriptReader).
func (s *Store) TranscriptHead(ctx context.Context, tenantID, run string, before int64) (*writ.StoredRecord, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, `SELECT x.seq, r.raw FROM record_terms x`+byID("r.raw")+`
		WHERE x.term = $2 AND x.value = $3 AND x.tenant_id = $1 AND x.seq < $4
		ORDER BY x.seq DESC LIMIT 1`, tenantID, ledger.TermTranscript, run, before)
	if err != nil {
		return nil, fmt.Errorf("postgres: read transcript head: %w", err)
	}
	defer rows.Close()
	page, err := ledger.ReadPage(rows, 1)
	if err != nil {
		return nil, err
	}
	if len(page.Records) == 0 {
		return nil, nil
	}
	return &page.Records[0], nil
}
