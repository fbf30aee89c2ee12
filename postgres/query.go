package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// Page sizes of Records.
const (
	DefaultLimit = ledger.DefaultPageSize
	MaxLimit     = ledger.MaxPageSize
)

// Record returns one record of the tenant exactly as sealed.
func (s *Store) Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT r.raw FROM record_ids x`+byID("r.raw")+`
		WHERE x.record_id = $1 AND x.tenant_id = $2`, recordID, tenantID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sqlkit.RecordNotFound(recordID)
	} else if err != nil {
		return nil, fmt.Errorf("postgres: read record: %w", err)
	}
	return ledger.ParseStored(raw)
}

// Receipt returns the receipt answered with a record of the tenant.
func (s *Store) Receipt(ctx context.Context, tenantID, recordID string) ([]byte, error) {
	var receipt []byte
	err := s.pool.QueryRow(ctx, `SELECT r.receipt FROM record_ids x`+byID("r.receipt")+`
		WHERE x.record_id = $1 AND x.tenant_id = $2`, recordID, tenantID).Scan(&receipt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sqlkit.RecordNotFound(recordID)
	} else if err != nil {
		return nil, fmt.Errorf("postgres: read receipt: %w", err)
	}
	if len(receipt) == 0 {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("record %q has no receipt", recordID)}
	}
	return receipt, nil
}

// Records lists the tenant's records matching q in chain order. Pages are
// cut by seq, so records appended while a client pages through appear on
// later pages and nothing is served twice.
func (s *Store) Records(ctx context.Context, q writ.RecordQuery) (*writ.RecordPage, error) {
	after, limit, err := sqlkit.PageQuery(q)
	if err != nil {
		return nil, err
	}
	floor, ceiling, err := s.timeBounds(ctx, q, after)
	if err != nil {
		return nil, err
	}
	if ceiling == 0 { // no record is before the end
		return &writ.RecordPage{}, nil
	}
	// One row more than the page tells whether another page follows.
	query, args := recordsQuery(q, after, limit+1, floor, ceiling)
	// Planned for these arguments each time, never a cached generic
	// plan: which index serves a time range depends on how many records
	// it holds (issue 38: a generic plan walked the chain for an hour's
	// range, 129 ms, where the time index took 1.4 ms).
	rows, err := s.pool.Query(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: query records: %w", err)
	}
	defer rows.Close()
	return sqlkit.ReadPage(rows, limit)
}

// timeFloorQuery selects the seq of the tenant's last time mark whose
// maximum is before a time: every record up to it is before that time.
// The arguments are the tenant and the time (Unix nanoseconds).
const timeFloorQuery = `SELECT seq FROM record_time_marks WHERE tenant_id = $1 AND max_ts_ns < $2 ORDER BY max_ts_ns DESC, seq DESC LIMIT 1`

// timeCeilingQuery selects the highest seq of a tenant at or below a seq
// (NULL: the head) of a record before a time (Unix nanoseconds), or 0,
// through the time lows (migration 0023, ledger.TimeCeiling).
const timeCeilingQuery = `SELECT writ_time_ceiling($1, $2, $3)`

// timeBoundsQuery selects, in one round trip, a range's time floor (0
// without a start, $2 NULL) and time ceiling (-1 without an end, $4
// NULL). The arguments are the tenant, the start, the seq the ceiling is
// at or below (NULL: the head) and the end.
const timeBoundsQuery = `SELECT coalesce((` + timeFloorQuery + `), 0),
	CASE WHEN $4::bigint IS NULL THEN -1 ELSE writ_time_ceiling($1, $3, $4) END`

// timeBounds returns the seq up to which every record of the tenant is
// before q.From (timeFloorQuery, ledger.TimeMarker; 0 without a From, or
// when no mark is before it), where the walk of a time range starts; and
// the highest seq (newest first: before the cursor after) of a record
// before q.To (writ_time_ceiling), or 0 when there is none, -1 without a
// To: every record after it is at or after the end, so a walk back of the
// range starts there, and a walk forward ends there, instead of at the
// chain's end.
func (s *Store) timeBounds(ctx context.Context, q writ.RecordQuery, after int64) (floor, ceiling int64, err error) {
	if q.From.IsZero() && q.To.IsZero() {
		return 0, -1, nil
	}
	var from, hi, to *int64
	if !q.From.IsZero() {
		ns := ledger.UnixNanos(q.From)
		from = &ns
	}
	if !q.To.IsZero() {
		ns := ledger.UnixNanos(q.To)
		to = &ns
	}
	if after > 0 && q.Newest {
		h := after - 1
		hi = &h
	}
	if err := s.pool.QueryRow(ctx, timeBoundsQuery, q.TenantID, from, hi, to).Scan(&floor, &ceiling); err != nil {
		return 0, 0, fmt.Errorf("postgres: query records: %w", err)
	}
	return floor, ceiling, nil
}

// recordsQuery builds the SQL of a record query: q's filters, records after
// seq after, at most limit rows in chain order; every record up to seq
// floor is before the time range (timeFloor), so the walk starts after it;
// with an end, every record after seq ceiling is at or after the end
// (timeCeiling), so the walk back starts there, or the walk forward ends
// there (-1: no ceiling).
func recordsQuery(q writ.RecordQuery, after int64, limit int, floor, ceiling int64) (string, []any) {
	args := []any{}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	// page bounds the page by the cursor's seq, order sorts it: chain
	// order, or newest first (the cursor then names the last seq served).
	page := func(t string) string {
		var b string
		switch {
		case !q.Newest:
			b = ` AND ` + t + `.seq > ` + arg(max(after, floor))
			if ceiling >= 0 {
				// The walk ends at the range's last record, not at the
				// chain's end.
				b += ` AND ` + t + `.seq <= ` + arg(ceiling)
			}
			return b
		case after > 0:
			b = ` AND ` + t + `.seq < ` + arg(after)
		}
		if ceiling >= 0 {
			b += ` AND ` + t + `.seq <= ` + arg(ceiling)
		}
		if floor > 0 {
			b += ` AND ` + t + `.seq > ` + arg(floor)
		}
		return b
	}
	order := func(t string) string {
		if q.Newest {
			return ` ORDER BY ` + t + `.seq DESC LIMIT ` + arg(limit)
		}
		return ` ORDER BY ` + t + `.seq LIMIT ` + arg(limit)
	}
	var filters, bounds strings.Builder
	if q.DecisionKeyPrefix != "" {
		// A range of records_decision_key_prefix (tenant_id,
		// decision_key COLLATE "C", seq): byte order, where every key
		// that begins with the prefix sorts from it to it followed by
		// the greatest code point.
		filters.WriteString(` AND r.decision_key COLLATE "C" >= ` + arg(q.DecisionKeyPrefix) + ` AND r.decision_key COLLATE "C" < ` + arg(sqlkit.PrefixEnd(q.DecisionKeyPrefix)))
	}
	if q.SubjectPrefix != "" {
		// A range of record_subjects_prefix (tenant_id, subject_id
		// COLLATE "C"), read once: a record with two matching subjects
		// is served once.
		filters.WriteString(` AND r.seq IN (SELECT p.seq FROM record_subjects p WHERE p.tenant_id = r.tenant_id AND p.subject_id COLLATE "C" >= ` +
			arg(q.SubjectPrefix) + ` AND p.subject_id COLLATE "C" < ` + arg(sqlkit.PrefixEnd(q.SubjectPrefix)) + `)`)
	}
	if q.DecisionKey != "" {
		filters.WriteString(` AND r.decision_key = ` + arg(q.DecisionKey))
	}
	if q.Status != "" {
		filters.WriteString(` AND r.status = ` + arg(string(q.Status)))
	}
	if q.Outcome != "" {
		// No index: the outcome is read from the jsonb copy of the
		// records the other filters leave.
		filters.WriteString(` AND r.doc -> 'outputs' ->> 'outcome' = ` + arg(string(q.Outcome)))
	}
	if q.TraceID != "" {
		filters.WriteString(` AND r.trace_id = ` + arg(q.TraceID))
	}
	if q.ApprovalMode != "" {
		// records_approval_mode (approval_mode_effective, tenant_id, seq).
		filters.WriteString(` AND r.approval_mode_effective = ` + arg(string(q.ApprovalMode)))
	}
	// record_terms' key (term, value, tenant_id, seq) serves a policy
	// decision or an approver in chain order.
	for _, t := range sqlkit.QueryTerms(q) {
		filters.WriteString(` AND r.seq IN (SELECT t.seq FROM record_terms t WHERE t.term = ` + arg(t.Term) +
			` AND t.value = ` + arg(t.Value) + ` AND t.tenant_id = r.tenant_id)`)
	}
	// ts_ns decides; the bounds on ts (the record's instant floored to the
	// microsecond, which the exact bounds imply) prune partitions.
	if !q.From.IsZero() {
		ns := ledger.UnixNanos(q.From)
		filters.WriteString(` AND r.ts_ns >= ` + arg(ns))
		bounds.WriteString(` AND {t}.ts >= ` + arg(microTime(ns)))
	}
	if !q.To.IsZero() {
		ns := ledger.UnixNanos(q.To)
		filters.WriteString(` AND r.ts_ns < ` + arg(ns))
		bounds.WriteString(` AND {t}.ts <= ` + arg(microTime(ns)))
	}
	if q.SubjectID != "" {
		// record_subjects' key (subject_id, tenant_id, seq) serves the
		// subject and the chain order at once; each of its rows then
		// looks up one record, in the one partition its ts names (the
		// LIMIT keeps the lookup a parameterized subquery). The lookup
		// names the tenant itself, not s.tenant_id, so the planner keeps
		// only the tenant's partition of records (migration 0024).
		tenant := arg(q.TenantID)
		return `SELECT s.seq, r.raw FROM record_subjects s
			CROSS JOIN LATERAL (SELECT r.raw FROM records r
				WHERE r.tenant_id = ` + tenant + ` AND r.seq = s.seq AND r.ts = s.ts` + filters.String() + ` LIMIT 1) r
			WHERE s.subject_id = ` + arg(q.SubjectID) + ` AND s.tenant_id = ` + tenant + page("s") +
			strings.ReplaceAll(bounds.String(), "{t}", "s") + order("s"), args
	}
	return `SELECT r.seq, r.raw FROM records r WHERE r.tenant_id = ` + arg(q.TenantID) + page("r") +
		filters.String() + strings.ReplaceAll(bounds.String(), "{t}", "r") + order("r"), args
}

// byID is the join from a record id to its record: a parameterized lookup
// in the one partition the record's ts names. (tenant_id, seq) is unique,
// so the LIMIT changes nothing but the plan.
func byID(cols string) string {
	return ` CROSS JOIN LATERAL (SELECT ` + cols + ` FROM records r
		WHERE r.tenant_id = x.tenant_id AND r.seq = x.seq AND r.ts = x.ts LIMIT 1) r`
}

// Priors reads the idempotency key's answer and the action's block in one
// statement, so a check makes one round trip to the database before it
// decides instead of two.
func (s *Store) Priors(ctx context.Context, tenantID, idempotencyKey string, block ledger.BlockKey) (ledger.Priors, error) {
	rows, err := s.pool.Query(ctx, `SELECT true, i.args_digest, i.record_id, r.receipt FROM idempotency i
		JOIN record_ids x ON x.record_id = i.record_id`+byID("r.receipt")+`
		WHERE $2 <> '' AND i.tenant_id = $1 AND i.key = $2
		UNION ALL
		SELECT false, '', b.record_id, r.receipt FROM blocks b
		JOIN record_ids x ON x.record_id = b.record_id`+byID("r.receipt")+`
		WHERE b.tenant_id = $1 AND b.decision_key = $3 AND b.args_digest = $4 AND b.pack_hash = $5`,
		tenantID, idempotencyKey, block.DecisionKey, block.ArgsDigest, block.PackHash)
	if err != nil {
		return ledger.Priors{}, fmt.Errorf("postgres: read idempotency key and block: %w", err)
	}
	defer rows.Close()
	var p ledger.Priors
	for rows.Next() {
		var (
			idempotent bool
			prior      ledger.Prior
		)
		if err := rows.Scan(&idempotent, &prior.ArgsDigest, &prior.RecordID, &prior.Receipt); err != nil {
			return ledger.Priors{}, fmt.Errorf("postgres: read idempotency key and block: %w", err)
		}
		if idempotent {
			p.Idempotent = &prior
		} else {
			prior.ArgsDigest = block.ArgsDigest
			p.Blocked = &prior
		}
	}
	if err := rows.Err(); err != nil {
		return ledger.Priors{}, fmt.Errorf("postgres: read idempotency key and block: %w", err)
	}
	return p, nil
}

// Blob returns a blob's data by its hash.
func (s *Store) Blob(ctx context.Context, hash string) ([]byte, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM blobs WHERE hash = $1`, hash).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("blob %q not found", hash)}
	} else if err != nil {
		return nil, fmt.Errorf("postgres: read blob: %w", err)
	}
	return data, nil
}

// Envelope returns the request envelope appended with a record; see
// ledger.Store.
func (s *Store) Envelope(ctx context.Context, tenantID string, seq int64, hash string) ([]byte, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM envelopes WHERE tenant_id = $1 AND seq = $2 AND hash = $3`, tenantID, seq, hash).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Blob(ctx, hash)
	} else if err != nil {
		return nil, fmt.Errorf("postgres: read envelope: %w", err)
	}
	return data, nil
}

// Head returns a tenant's durable chain head.
func (s *Store) Head(ctx context.Context, tenantID string) (ledger.Head, error) {
	var h ledger.Head
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM heads WHERE tenant_id = $1`, tenantID).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && h.Seq == 0) {
		return ledger.Head{}, nil
	} else if err != nil {
		return ledger.Head{}, fmt.Errorf("postgres: read head: %w", err)
	}
	return h, nil
}

// Tenants lists the tenants that have records: those whose chain head has
// moved past seq 0, which the first append of a tenant does in the same
// transaction as it inserts the head.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT tenant_id FROM heads WHERE seq > 0 ORDER BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list tenants: %w", err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: list tenants: %w", err)
	}
	return tenants, nil
}

// Chain returns up to limit raw records of a tenant with seq > after, in
// seq order.
func (s *Store) Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error) {
	if limit <= 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid limit", Details: []writ.Detail{{Field: "limit", Message: "must be positive"}}}
	}
	rows, err := s.pool.Query(ctx, `SELECT raw FROM records WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: read chain: %w", err)
	}
	raws, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (json.RawMessage, error) {
		var raw []byte
		err := row.Scan(&raw)
		return raw, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read chain: %w", err)
	}
	return raws, nil
}

// Report returns the answer of a decision's execution report, or nil.
func (s *Store) Report(ctx context.Context, tenantID, decisionID string) (*ledger.Prior, error) {
	var p ledger.Prior
	err := s.pool.QueryRow(ctx, `SELECT e.report_digest, e.record_id, r.receipt FROM execution_reports e
		JOIN record_ids x ON x.record_id = e.record_id`+byID("r.receipt")+`
		WHERE e.tenant_id = $1 AND e.decision_id = $2`, tenantID, decisionID).Scan(&p.ArgsDigest, &p.RecordID, &p.Receipt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("postgres: read execution report: %w", err)
	}
	return &p, nil
}

// DecisionRecords returns the tenant's records of one decision in chain
// order.
func (s *Store) DecisionRecords(ctx context.Context, tenantID, decisionID string) ([]writ.StoredRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.seq, r.raw FROM records r WHERE r.decision_id = $1 AND r.tenant_id = $2 ORDER BY r.seq LIMIT $3`,
		decisionID, tenantID, ledger.MaxStoryRecords)
	if err != nil {
		return nil, fmt.Errorf("postgres: query records of decision: %w", err)
	}
	defer rows.Close()
	page, err := sqlkit.ReadPage(rows, ledger.MaxStoryRecords)
	if err != nil {
		return nil, err
	}
	return page.Records, nil
}

// inFlightQuery selects a tenant's IN_FLIGHT records after a seq whose
// decision has no execution report, in chain order, at most a limit: the
// arguments are the tenant, the seq and the limit.
const inFlightQuery = `SELECT r.seq, r.raw FROM records r
	WHERE r.status = 'IN_FLIGHT' AND r.tenant_id = $1 AND r.seq > $2
	  AND NOT EXISTS (SELECT 1 FROM execution_reports e WHERE e.tenant_id = r.tenant_id AND e.decision_id = r.decision_id)
	ORDER BY r.seq LIMIT $3`

// InFlight returns the tenant's IN_FLIGHT records after seq whose decision
// has no execution report, in chain order.
func (s *Store) InFlight(ctx context.Context, tenantID string, after int64, limit int) ([]writ.StoredRecord, error) {
	rows, err := s.pool.Query(ctx, inFlightQuery, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: query records in flight: %w", err)
	}
	defer rows.Close()
	page, err := sqlkit.ReadPage(rows, limit)
	if err != nil {
		return nil, err
	}
	return page.Records, nil
}

// EvidenceRecords reads the tenant's evidence and evidence revocation
// records of the items named by id or content address, in one statement
// (ledger.EvidenceReader).
func (s *Store) EvidenceRecords(ctx context.Context, tenantID string, ids, addresses []string) ([]writ.StoredRecord, error) {
	if len(ids) == 0 && len(addresses) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		keys = append(keys, ledger.EvidenceClaim(id), ledger.EvidenceRevocationClaim(id))
	}
	if addresses == nil {
		addresses = []string{}
	}
	rows, err := s.pool.Query(ctx, `SELECT i.record_id, r.raw FROM idempotency i
		JOIN record_ids x ON x.record_id = i.record_id`+byID("r.raw")+`
		WHERE i.tenant_id = $1 AND i.key = ANY($2)
		UNION ALL
		SELECT k.record_id, r.raw FROM blocks k
		JOIN record_ids x ON x.record_id = k.record_id`+byID("r.raw")+`
		WHERE k.tenant_id = $1 AND k.decision_key IN ($3, $4) AND k.pack_hash = '' AND k.args_digest = ANY($5)`,
		tenantID, keys, ledger.EvidenceBlockKey, ledger.EvidenceRevocationBlockKey, addresses)
	if err != nil {
		return nil, fmt.Errorf("postgres: read evidence: %w", err)
	}
	defer rows.Close()
	var out []writ.StoredRecord
	seen := map[string]bool{}
	for rows.Next() {
		var (
			id  string
			raw []byte
		)
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, fmt.Errorf("postgres: read evidence: %w", err)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		sr, err := ledger.ParseStored(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, *sr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read evidence: %w", err)
	}
	return out, nil
}
