package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/writhq/writ/ledger"
)

// ScanReceipts returns the tenant's records with their receipts and
// envelopes; see
// verify.StoredSource.
func (s *Store) ScanReceipts(ctx context.Context, tenantID string, after int64, limit int) ([]ledger.StoredReceipt, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT r.seq, r.raw, r.receipt, e.hash, e.data FROM records r
		LEFT JOIN envelopes e ON e.tenant_id = r.tenant_id AND e.seq = r.seq
		WHERE r.tenant_id = ? AND r.seq > ? ORDER BY r.seq LIMIT ?`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: scan receipts: %w", err)
	}
	defer rows.Close()
	var out []ledger.StoredReceipt
	for rows.Next() {
		var r ledger.StoredReceipt
		var raw []byte
		var envHash sql.NullString
		if err := rows.Scan(&r.Seq, &raw, &r.Receipt, &envHash, &r.Envelope); err != nil {
			return nil, fmt.Errorf("sqlite: scan receipts: %w", err)
		}
		r.Record, r.EnvelopeHash = raw, envHash.String
		out = append(out, r)
	}
	return out, rows.Err()
}

// ScanRunEvents returns the tenant's run events in (run_id, seq) order;
// see verify.StoredSource.
func (s *Store) ScanRunEvents(ctx context.Context, tenantID, afterRun string, afterSeq int64, limit int) ([]ledger.RunEvent, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT run_id, seq, kind, step_id, record_id, at_ns, data FROM run_events
		WHERE tenant_id = ? AND (run_id, seq) > (?, ?) ORDER BY run_id, seq LIMIT ?`, tenantID, afterRun, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: scan run events: %w", err)
	}
	defer rows.Close()
	var out []ledger.RunEvent
	for rows.Next() {
		ev := ledger.RunEvent{TenantID: tenantID}
		var at int64
		var data []byte
		if err := rows.Scan(&ev.RunID, &ev.Seq, &ev.Kind, &ev.StepID, &ev.RecordID, &at, &data); err != nil {
			return nil, fmt.Errorf("sqlite: scan run events: %w", err)
		}
		ev.At, ev.Data = time.Unix(0, at).UTC(), data
		out = append(out, ev)
	}
	return out, rows.Err()
}

// ScanBlobs returns blobs in hash order; see verify.StoredSource.
func (s *Store) ScanBlobs(ctx context.Context, after string, limit int) ([]ledger.Blob, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT hash, kind, data FROM blobs WHERE hash > ? ORDER BY hash LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: scan blobs: %w", err)
	}
	defer rows.Close()
	var out []ledger.Blob
	for rows.Next() {
		var b ledger.Blob
		if err := rows.Scan(&b.Hash, &b.Kind, &b.Data); err != nil {
			return nil, fmt.Errorf("sqlite: scan blobs: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// ScanApprovalIndex returns the tenant's approval requests' index
// columns in approval id order; see verify.StoredSource.
func (s *Store) ScanApprovalIndex(ctx context.Context, tenantID, after string, limit int) ([]ledger.ApprovalIndex, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT approval_id, gate_id, decision_key, binding_digest, allowance, record_id, created_ns, expires_ns
		FROM approval_requests WHERE tenant_id = ? AND approval_id > ? ORDER BY approval_id LIMIT ?`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: scan approval index: %w", err)
	}
	defer rows.Close()
	var out []ledger.ApprovalIndex
	for rows.Next() {
		var ix ledger.ApprovalIndex
		if err := rows.Scan(&ix.ApprovalID, &ix.GateID, &ix.DecisionKey, &ix.BindingDigest, &ix.Allowance, &ix.RecordID, &ix.CreatedNS, &ix.ExpiresNS); err != nil {
			return nil, fmt.Errorf("sqlite: scan approval index: %w", err)
		}
		out = append(out, ix)
	}
	return out, rows.Err()
}

// ScanClaims returns the tenant's index rows of one kind in primary-key
// order; see verify.StoredSource.
func (s *Store) ScanClaims(ctx context.Context, tenantID, kind string, after *ledger.ClaimRow, limit int) ([]ledger.ClaimRow, error) {
	var q string
	args := []any{tenantID}
	switch kind {
	case ledger.ClaimIdempotency:
		q = `SELECT key, args_digest, '', record_id FROM idempotency WHERE tenant_id = ?`
		if after != nil {
			q, args = q+` AND key > ?`, append(args, after.Idempotency.Key)
		}
		q += ` ORDER BY key`
	case ledger.ClaimBlock:
		q = `SELECT decision_key, args_digest, pack_hash, record_id FROM blocks WHERE tenant_id = ?`
		if after != nil {
			b := after.Block
			q, args = q+` AND (decision_key, args_digest, pack_hash) > (?, ?, ?)`, append(args, b.DecisionKey, b.ArgsDigest, b.PackHash)
		}
		q += ` ORDER BY decision_key, args_digest, pack_hash`
	case ledger.ClaimReport:
		q = `SELECT decision_id, report_digest, '', record_id FROM execution_reports WHERE tenant_id = ?`
		if after != nil {
			q, args = q+` AND decision_id > ?`, append(args, after.Report.DecisionID)
		}
		q += ` ORDER BY decision_id`
	default:
		return nil, fmt.Errorf("sqlite: scan claims: unknown kind %q", kind)
	}
	rows, err := s.read.QueryContext(ctx, q+` LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: scan %s claims: %w", kind, err)
	}
	defer rows.Close()
	var out []ledger.ClaimRow
	for rows.Next() {
		var a, b, c, recordID string
		if err := rows.Scan(&a, &b, &c, &recordID); err != nil {
			return nil, fmt.Errorf("sqlite: scan %s claims: %w", kind, err)
		}
		out = append(out, ledger.NewClaimRow(kind, a, b, c, recordID))
	}
	return out, rows.Err()
}
