package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
)

// Transcript returns the records of the entries of the tenant's tool
// transcript run with seq below before (all when before is 0), in chain
// order, through record_terms' key (ledger.TranscriptReader).
func (s *Store) Transcript(ctx context.Context, tenantID, run string, before int64) ([]writ.StoredRecord, error) {
	return s.transcript(ctx, tenantID, run, before, false)
}

// TranscriptHead returns the record of the latest entry of the tenant's
// tool transcript run with seq below before (of all when before is 0), or
// nil (ledger.TranscriptReader).
func (s *Store) TranscriptHead(ctx context.Context, tenantID, run string, before int64) (*writ.StoredRecord, error) {
	recs, err := s.transcript(ctx, tenantID, run, before, true)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	return &recs[0], nil
}

// transcript reads the entries of a transcript run below before: all of
// them in chain order, or only the latest.
func (s *Store) transcript(ctx context.Context, tenantID, run string, before int64, latest bool) ([]writ.StoredRecord, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	query, limit := `SELECT x.seq, r.raw FROM record_terms x`+byID("r.raw")+`
		WHERE x.term = $2 AND x.value = $3 AND x.tenant_id = $1 AND x.seq < $4
		ORDER BY x.seq`, math.MaxInt
	if latest {
		query, limit = query+" DESC LIMIT 1", 1
	}
	rows, err := s.pool.Query(ctx, query, tenantID, sqlkit.TermTranscript, run, before)
	if err != nil {
		return nil, fmt.Errorf("postgres: read transcript: %w", err)
	}
	defer rows.Close()
	page, err := sqlkit.ReadPage(rows, limit)
	if err != nil {
		return nil, err
	}
	return page.Records, nil
}
