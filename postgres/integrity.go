package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ/ledger"
)

// ScanReceipts returns the tenant's records with their receipts and
// envelopes; see
// verify.StoredSource.
func (s *Store) ScanReceipts(ctx context.Context, tenantID string, after int64, limit int) ([]ledger.StoredReceipt, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.seq, r.raw, r.receipt, e.hash, e.data FROM records r
		LEFT JOIN envelopes e ON e.tenant_id = r.tenant_id AND e.seq = r.seq
		WHERE r.tenant_id = $1 AND r.seq > $2 ORDER BY r.seq LIMIT $3`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: scan receipts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.StoredReceipt, error) {
		var r ledger.StoredReceipt
		var raw []byte
		var envHash *string
		err := row.Scan(&r.Seq, &raw, &r.Receipt, &envHash, &r.Envelope)
		r.Record = raw
		if envHash != nil {
			r.EnvelopeHash = *envHash
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: scan receipts: %w", err)
	}
	return out, nil
}

// ScanRunEvents returns the tenant's run events in (run_id, seq) order;
// see verify.StoredSource.
func (s *Store) ScanRunEvents(ctx context.Context, tenantID, afterRun string, afterSeq int64, limit int) ([]ledger.RunEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, seq, kind, step_id, record_id, at_ns, data FROM run_events
		WHERE tenant_id = $1 AND (run_id, seq) > ($2, $3) ORDER BY run_id, seq LIMIT $4`, tenantID, afterRun, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: scan run events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.RunEvent, error) {
		ev := ledger.RunEvent{TenantID: tenantID}
		var at int64
		var data []byte
		err := row.Scan(&ev.RunID, &ev.Seq, &ev.Kind, &ev.StepID, &ev.RecordID, &at, &data)
		ev.At, ev.Data = time.Unix(0, at).UTC(), data
		return ev, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: scan run events: %w", err)
	}
	return out, nil
}

// ScanBlobs returns blobs in hash order; see verify.StoredSource.
func (s *Store) ScanBlobs(ctx context.Context, after string, limit int) ([]ledger.Blob, error) {
	rows, err := s.pool.Query(ctx, `SELECT hash, kind, data FROM blobs WHERE hash > $1 ORDER BY hash LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: scan blobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Blob, error) {
		var b ledger.Blob
		err := row.Scan(&b.Hash, &b.Kind, &b.Data)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: scan blobs: %w", err)
	}
	return out, nil
}

// ScanApprovalIndex returns the tenant's approval requests' index
// columns in approval id order; see verify.StoredSource.
func (s *Store) ScanApprovalIndex(ctx context.Context, tenantID, after string, limit int) ([]ledger.ApprovalIndex, error) {
	rows, err := s.pool.Query(ctx, `SELECT approval_id, gate_id, decision_key, binding_digest, allowance, record_id, created_ns, expires_ns
		FROM approval_requests WHERE tenant_id = $1 AND approval_id COLLATE "C" > $2 ORDER BY approval_id COLLATE "C" LIMIT $3`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: scan approval index: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.ApprovalIndex, error) {
		var ix ledger.ApprovalIndex
		err := row.Scan(&ix.ApprovalID, &ix.GateID, &ix.DecisionKey, &ix.BindingDigest, &ix.Allowance, &ix.RecordID, &ix.CreatedNS, &ix.ExpiresNS)
		return ix, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: scan approval index: %w", err)
	}
	return out, nil
}

// ScanClaims returns the tenant's index rows of one kind in primary-key
// order; see verify.StoredSource.
func (s *Store) ScanClaims(ctx context.Context, tenantID, kind string, after *ledger.ClaimRow, limit int) ([]ledger.ClaimRow, error) {
	var q string
	args := []any{tenantID}
	switch kind {
	case ledger.ClaimIdempotency:
		q = `SELECT key, args_digest, '', record_id FROM idempotency WHERE tenant_id = $1`
		if after != nil {
			q, args = q+` AND key > $2`, append(args, after.Idempotency.Key)
		}
		q += ` ORDER BY key`
	case ledger.ClaimBlock:
		q = `SELECT decision_key, args_digest, pack_hash, record_id FROM blocks WHERE tenant_id = $1`
		if after != nil {
			b := after.Block
			q, args = q+` AND (decision_key, args_digest, pack_hash) > ($2, $3, $4)`, append(args, b.DecisionKey, b.ArgsDigest, b.PackHash)
		}
		q += ` ORDER BY decision_key, args_digest, pack_hash`
	case ledger.ClaimReport:
		q = `SELECT decision_id, report_digest, '', record_id FROM execution_reports WHERE tenant_id = $1`
		if after != nil {
			q, args = q+` AND decision_id > $2`, append(args, after.Report.DecisionID)
		}
		q += ` ORDER BY decision_id`
	default:
		return nil, fmt.Errorf("postgres: scan claims: unknown kind %q", kind)
	}
	rows, err := s.pool.Query(ctx, q+fmt.Sprintf(` LIMIT $%d`, len(args)+1), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: scan %s claims: %w", kind, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.ClaimRow, error) {
		var a, b, c, recordID string
		err := row.Scan(&a, &b, &c, &recordID)
		return ledger.NewClaimRow(kind, a, b, c, recordID), err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: scan %s claims: %w", kind, err)
	}
	return out, nil
}
