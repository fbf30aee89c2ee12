package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

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
	err := s.reads.record.QueryRowContext(ctx, recordID, tenantID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sqlkit.RecordNotFound(recordID)
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read record: %w", err)
	}
	return ledger.ParseStored(raw)
}

// Receipt returns the receipt answered with a record of the tenant.
func (s *Store) Receipt(ctx context.Context, tenantID, recordID string) ([]byte, error) {
	var receipt []byte
	err := s.reads.receipt.QueryRowContext(ctx, recordID, tenantID).Scan(&receipt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sqlkit.RecordNotFound(recordID)
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read receipt: %w", err)
	}
	if len(receipt) == 0 {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("record %q has no receipt", recordID)}
	}
	return receipt, nil
}

// Records lists the tenant's records matching q in chain order (newest
// first with q.Newest). Pages are cut by seq, so records appended while a
// client pages through appear on later pages (in chain order) or not at
// all (newest first), and nothing is served twice.
func (s *Store) Records(ctx context.Context, q writ.RecordQuery) (*writ.RecordPage, error) {
	after, limit, err := sqlkit.PageQuery(q)
	if err != nil {
		return nil, err
	}
	byTime, err := s.narrowTimeRange(ctx, q)
	if err != nil {
		return nil, err
	}
	floor, err := s.timeFloor(ctx, q)
	if err != nil {
		return nil, err
	}
	prefix, err := s.prefixRange(ctx, q)
	if err != nil {
		return nil, err
	}
	ceiling := int64(-1)
	if !q.To.IsZero() && !byTime {
		if ceiling, err = s.timeCeiling(ctx, q, after); err != nil {
			return nil, err
		}
		if ceiling == 0 { // no record is before the end
			return &writ.RecordPage{}, nil
		}
	}
	// One row more than the page tells whether another page follows.
	query, args := recordsQuery(q, after, limit+1, byTime, prefix, floor, ceiling)
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query records: %w", err)
	}
	defer rows.Close()
	return sqlkit.ReadPage(rows, limit)
}

// narrowRange is the most records a time range may hold for Records to
// read it through the time index and sort it by seq; a wider range is
// read in chain order, where its records are dense enough that a page
// fills quickly.
var narrowRange = 10000 // a variable so that tests can take every route

// narrowTimeRange reports whether q is a time range (from, to) with no
// other indexed filter that holds at most narrowRange records of the
// tenant: then the time index serves it. The chain order alone would walk
// every record before the range (issue 38: from=now-30s over 78k records
// took 138 ms). Counting stops at narrowRange+1 index entries, so the
// probe costs at most that.
//
// A range with no end (from alone) is never read through the time index:
// its walk starts at the time floor (timeFloor), and the records after it
// are the range's, but for those of a clock stepped back.
func (s *Store) narrowTimeRange(ctx context.Context, q writ.RecordQuery) (bool, error) {
	if q.To.IsZero() || q.SubjectID != "" || q.DecisionKey != "" || q.Status != "" || q.TraceID != "" ||
		q.DecisionKeyPrefix != "" || q.SubjectPrefix != "" || q.ApprovalMode != "" || len(sqlkit.QueryTerms(q)) > 0 {
		return false, nil
	}
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.From.IsZero() {
		from = ledger.UnixNanos(q.From)
	}
	if !q.To.IsZero() {
		to = ledger.UnixNanos(q.To)
	}
	var n int
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM records INDEXED BY records_ts
		WHERE tenant_id = ? AND ts >= ? AND ts < ? LIMIT ?)`, q.TenantID, from, to, narrowRange+1).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("sqlite: query records: %w", err)
	}
	return n <= narrowRange, nil
}

// timeFloorQuery selects the seq of the tenant's last time mark whose
// maximum is before a time: every record up to it is before that time.
// The arguments are the tenant and the time (Unix nanoseconds).
const timeFloorQuery = `SELECT seq FROM record_time_marks WHERE tenant_id = ? AND max_ts < ? ORDER BY max_ts DESC, seq DESC LIMIT 1`

// timeFloor returns the seq up to which every record of the tenant is
// before q.From, from the time marks (ledger.TimeMarker); 0 without a
// From, or when no mark is before it. The walk of a time range starts
// after it, not at the chain's beginning.
func (s *Store) timeFloor(ctx context.Context, q writ.RecordQuery) (int64, error) {
	if q.From.IsZero() {
		return 0, nil
	}
	var seq int64
	err := s.read.QueryRowContext(ctx, timeFloorQuery, q.TenantID, ledger.UnixNanos(q.From)).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sqlite: query records: %w", err)
	}
	return seq, nil
}

// Time ceiling queries (ledger.TimeCeiling): the highest seq in a range
// (lo, hi] of the tenant's records whose time is before a time, or of its
// time lows of a level whose minimum is. The arguments are the tenant,
// (the level,) lo, hi and the time (Unix nanoseconds). Unary + keeps
// records_ts out: the range is at most 16 records of the chain.
const (
	ceilingRecordQuery = `SELECT seq FROM records WHERE tenant_id = ? AND seq > ? AND seq <= ? AND +ts < ? ORDER BY seq DESC LIMIT 1`
	ceilingLowQuery    = `SELECT seq FROM record_time_lows WHERE tenant_id = ? AND level = ? AND seq > ? AND seq <= ? AND min_ts < ? ORDER BY seq DESC LIMIT 1`
)

// timeCeiling returns the highest seq of the tenant (newest first: before
// the cursor after) of a record before q.To, from the time lows, or 0
// when there is none: every record after it is at or after the end, so
// a walk back of the range starts there, and a walk forward ends there,
// instead of at the chain's end.
func (s *Store) timeCeiling(ctx context.Context, q writ.RecordQuery, after int64) (int64, error) {
	hi := after - 1
	if after <= 0 || !q.Newest {
		h, err := s.Head(ctx, q.TenantID)
		if err != nil {
			return 0, err
		}
		hi = h.Seq
	}
	to := ledger.UnixNanos(q.To)
	seq, err := ledger.TimeCeiling(hi, func(level int, lo, hi int64) (int64, error) {
		var seq int64
		var err error
		if level == 0 {
			err = s.read.QueryRowContext(ctx, ceilingRecordQuery, q.TenantID, lo, hi, to).Scan(&seq)
		} else {
			err = s.read.QueryRowContext(ctx, ceilingLowQuery, q.TenantID, level, lo, hi, to).Scan(&seq)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return seq, err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: query records: %w", err)
	}
	return seq, nil
}

// prefixRoute is how Records reads a prefix search.
type prefixRoute int

const (
	// prefixNone: no prefix, or an exact filter with an index leads.
	prefixNone prefixRoute = iota
	// prefixByKey reads the decision key prefix's range of
	// records_decision_key and sorts it by seq.
	prefixByKey
	// prefixBySubject reads the subject prefix's range of
	// record_subjects and sorts it by seq.
	prefixBySubject
	// prefixWalk walks the chain in order and keeps the records that
	// match, using no prefix index.
	prefixWalk
)

// prefixRange probes how q's prefix search is best read. A prefix that
// matches at most narrowRange records of the tenant is read through its
// index and sorted by seq; when every prefix q gives matches more, the
// chain is walked in order (newest first or oldest first), which fills a
// page quickly instead of sorting the whole range (issue 36: 2.4 s for
// a prefix matching 100,000 records, newest first). Counting stops at
// narrowRange+1 index entries.
func (s *Store) prefixRange(ctx context.Context, q writ.RecordQuery) (prefixRoute, error) {
	if q.DecisionKeyPrefix == "" && q.SubjectPrefix == "" || exactFilter(q) {
		return prefixNone, nil
	}
	count := func(query, prefix string) (int, error) {
		var n int
		err := s.read.QueryRowContext(ctx, query, q.TenantID, prefix, sqlkit.PrefixEnd(prefix), narrowRange+1).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("sqlite: query records: %w", err)
		}
		return n, nil
	}
	if q.DecisionKeyPrefix != "" {
		n, err := count(`SELECT count(*) FROM (SELECT 1 FROM records INDEXED BY records_decision_key
			WHERE tenant_id = ? AND decision_key >= ? AND decision_key < ? LIMIT ?)`, q.DecisionKeyPrefix)
		if err != nil || n <= narrowRange {
			return prefixByKey, err
		}
	}
	if q.SubjectPrefix != "" {
		n, err := count(`SELECT count(*) FROM (SELECT 1 FROM record_subjects
			WHERE tenant_id = ? AND subject_id >= ? AND subject_id < ? LIMIT ?)`, q.SubjectPrefix)
		if err != nil || n <= narrowRange {
			return prefixBySubject, err
		}
	}
	return prefixWalk, nil
}

// exactFilter reports whether q has a filter of one value that an index
// serves in chain order.
func exactFilter(q writ.RecordQuery) bool {
	return q.SubjectID != "" || q.DecisionKey != "" || q.Status != "" || q.TraceID != "" ||
		q.ApprovalMode != "" || len(sqlkit.QueryTerms(q)) > 0
}

// recordsQuery builds the SQL of a record query: q's filters, records after
// seq after, at most limit rows in chain order. byTime reads the records
// through the time index (narrowTimeRange); prefix says how a prefix
// search is read (prefixRange); every record up to seq floor is before the
// time range (timeFloor), so the walk starts after it; with an end, every
// record after seq ceiling is at or after the end (timeCeiling), so the
// walk back starts there, or the walk forward ends there (-1: no
// ceiling).
func recordsQuery(q writ.RecordQuery, after int64, limit int, byTime bool, prefix prefixRoute, floor, ceiling int64) (string, []any) {
	var sb strings.Builder
	args := []any{}
	order := "r.seq"
	switch {
	case q.SubjectID != "":
		// record_subjects' key (tenant_id, subject_id, seq) serves the
		// subject and the chain order at once. CROSS JOIN keeps it the
		// outer loop: left to itself, the planner walked the tenant's
		// whole chain, looking each record's subject up.
		sb.WriteString(`SELECT r.seq, r.raw FROM record_subjects s CROSS JOIN records r` +
			` ON r.tenant_id = s.tenant_id AND r.seq = s.seq` +
			` WHERE s.tenant_id = ? AND s.subject_id = ? AND r.tenant_id = ?`)
		args = append(args, q.TenantID, q.SubjectID, q.TenantID)
		order = "s.seq"
	case byTime:
		sb.WriteString(`SELECT r.seq, r.raw FROM records r INDEXED BY records_ts WHERE r.tenant_id = ?`)
		args = append(args, q.TenantID)
	case prefix == prefixByKey:
		sb.WriteString(`SELECT r.seq, r.raw FROM records r INDEXED BY records_decision_key WHERE r.tenant_id = ?`)
		args = append(args, q.TenantID)
	default:
		sb.WriteString(`SELECT r.seq, r.raw FROM records r WHERE r.tenant_id = ?`)
		args = append(args, q.TenantID)
	}
	switch {
	case !q.Newest:
		sb.WriteString(` AND ` + order + ` > ?`)
		args = append(args, max(after, floor))
		if ceiling >= 0 {
			// The walk ends at the range's last record, not at the
			// chain's end.
			sb.WriteString(` AND ` + order + ` <= ?`)
			args = append(args, ceiling)
		}
	case after > 0:
		// Newest first, the cursor names the last seq served.
		sb.WriteString(` AND ` + order + ` < ?`)
		args = append(args, after)
		fallthrough
	default:
		// Newest first with an end (to) and no ceiling (a narrow range,
		// read through the time index), the planner's choice stays its
		// own: a seq bound here turned it from the time index and a
		// sort to a walk back from the chain's end (a day in the middle
		// of 1,000,000 records: 4.8 s).
		if ceiling >= 0 {
			sb.WriteString(` AND ` + order + ` <= ?`)
			args = append(args, ceiling)
		}
		if floor > 0 && (q.To.IsZero() || ceiling >= 0) {
			sb.WriteString(` AND ` + order + ` > ?`)
			args = append(args, floor)
		}
	}
	// Unary + keeps a column's index out of the plan: a wide prefix is
	// a filter of the chain walk, not an index range.
	unindexed := ""
	if prefix == prefixWalk {
		unindexed = "+"
	}
	if q.DecisionKeyPrefix != "" {
		// A range of records_decision_key (tenant_id, decision_key,
		// seq): every key that begins with the prefix sorts, byte by
		// byte, from it to it followed by the greatest code point.
		sb.WriteString(` AND ` + unindexed + `r.decision_key >= ? AND ` + unindexed + `r.decision_key < ?`)
		args = append(args, q.DecisionKeyPrefix, sqlkit.PrefixEnd(q.DecisionKeyPrefix))
	}
	if q.SubjectPrefix != "" {
		// A range of record_subjects' key (tenant_id, subject_id, seq),
		// read once into a list of seqs (not once per record: the
		// subquery names the tenant rather than r's): a record with two
		// matching subjects is served once. Read in seq order, the list
		// leads the plan; walking the chain, it is a membership test.
		sb.WriteString(` AND ` + unindexed + `r.seq IN (SELECT p.seq FROM record_subjects p WHERE p.tenant_id = ? AND p.subject_id >= ? AND p.subject_id < ?)`)
		args = append(args, q.TenantID, q.SubjectPrefix, sqlkit.PrefixEnd(q.SubjectPrefix))
	}
	if q.DecisionKey != "" {
		sb.WriteString(` AND r.decision_key = ?`)
		args = append(args, q.DecisionKey)
	}
	if q.Status != "" {
		sb.WriteString(` AND r.status = ?`)
		args = append(args, string(q.Status))
	}
	if q.Outcome != "" {
		// No index: the outcome is read from the sealed bytes of the
		// records the other filters leave (raw is a BLOB, which
		// json_extract would take for JSONB, hence the cast).
		sb.WriteString(` AND json_extract(CAST(r.raw AS TEXT), '$.outputs.outcome') = ?`)
		args = append(args, string(q.Outcome))
	}
	if q.TraceID != "" {
		sb.WriteString(` AND r.trace_id = ?`)
		args = append(args, q.TraceID)
	}
	if q.ApprovalMode != "" {
		// records_approval_mode (tenant_id, approval_mode, seq).
		sb.WriteString(` AND r.approval_mode = ?`)
		args = append(args, string(q.ApprovalMode))
	}
	// record_terms' key (tenant_id, term, value, seq) serves a policy
	// decision or an approver in chain order.
	for _, t := range sqlkit.QueryTerms(q) {
		sb.WriteString(` AND r.seq IN (SELECT t.seq FROM record_terms t WHERE t.tenant_id = ? AND t.term = ? AND t.value = ?)`)
		args = append(args, q.TenantID, t.Term, t.Value)
	}
	// With a ceiling, the time is a filter of the walk back from it, not
	// a range of records_ts.
	ts := "r.ts"
	if ceiling >= 0 {
		ts = "+r.ts"
	}
	if !q.From.IsZero() {
		sb.WriteString(` AND ` + ts + ` >= ?`)
		args = append(args, ledger.UnixNanos(q.From))
	}
	if !q.To.IsZero() {
		sb.WriteString(` AND ` + ts + ` < ?`)
		args = append(args, ledger.UnixNanos(q.To))
	}
	if q.Newest {
		sb.WriteString(` ORDER BY ` + order + ` DESC LIMIT ?`)
	} else {
		sb.WriteString(` ORDER BY ` + order + ` LIMIT ?`)
	}
	args = append(args, limit)
	return sb.String(), args
}

// idempotent returns the first answer under a tenant's idempotency key, or
// nil if the key is unclaimed.
func (s *Store) idempotent(ctx context.Context, tenantID, key string) (*ledger.Prior, error) {
	var p ledger.Prior
	err := s.reads.idempotent.QueryRowContext(ctx, tenantID, key).Scan(&p.ArgsDigest, &p.RecordID, &p.Receipt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read idempotency key: %w", err)
	}
	return &p, nil
}

// blocked returns the first answer for a blocked action of the tenant, or
// nil if the action is not blocked.
func (s *Store) blocked(ctx context.Context, tenantID string, key ledger.BlockKey) (*ledger.Prior, error) {
	p := ledger.Prior{ArgsDigest: key.ArgsDigest}
	err := s.reads.blocked.QueryRowContext(ctx, tenantID, key.DecisionKey, key.ArgsDigest, key.PackHash).Scan(&p.RecordID, &p.Receipt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read block: %w", err)
	}
	return &p, nil
}

// Priors reads the idempotency key's answer and the action's block with
// two prepared point reads: in process, a second read costs no round trip.
func (s *Store) Priors(ctx context.Context, tenantID, idempotencyKey string, block ledger.BlockKey) (ledger.Priors, error) {
	var p ledger.Priors
	var err error
	if idempotencyKey != "" {
		if p.Idempotent, err = s.idempotent(ctx, tenantID, idempotencyKey); err != nil {
			return ledger.Priors{}, err
		}
	}
	if p.Blocked, err = s.blocked(ctx, tenantID, block); err != nil {
		return ledger.Priors{}, err
	}
	return p, nil
}

// Blob returns a blob's data by its hash.
func (s *Store) Blob(ctx context.Context, hash string) ([]byte, error) {
	var data []byte
	err := s.read.QueryRowContext(ctx, `SELECT data FROM blobs WHERE hash = ?`, hash).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("blob %q not found", hash)}
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read blob: %w", err)
	}
	return data, nil
}

// Envelope returns the request envelope appended with a record; see
// ledger.Store.
func (s *Store) Envelope(ctx context.Context, tenantID string, seq int64, hash string) ([]byte, error) {
	var data []byte
	err := s.read.QueryRowContext(ctx, `SELECT data FROM envelopes WHERE tenant_id = ? AND seq = ? AND hash = ?`, tenantID, seq, hash).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return s.Blob(ctx, hash)
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read envelope: %w", err)
	}
	return data, nil
}

// Head returns a tenant's durable chain head.
func (s *Store) Head(ctx context.Context, tenantID string) (ledger.Head, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.heads[tenantID]; ok {
		return h, nil
	}
	var h ledger.Head
	err := s.read.QueryRowContext(ctx, `SELECT seq, hash FROM heads WHERE tenant_id = ?`, tenantID).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		// Not cached: probing unknown tenants must not grow the cache.
		return ledger.Head{}, nil
	} else if err != nil {
		return ledger.Head{}, fmt.Errorf("sqlite: read head: %w", err)
	}
	// s.mu keeps appends out, so what was just read is the durable head.
	s.heads[tenantID] = h
	return h, nil
}

// Tenants lists the tenants that have records: those with a chain head,
// which the first append of a tenant creates in the same transaction.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT tenant_id FROM heads ORDER BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tenants: %w", err)
	}
	defer rows.Close()
	var tenants []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("sqlite: list tenants: %w", err)
		}
		tenants = append(tenants, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list tenants: %w", err)
	}
	return tenants, nil
}

// Chain returns up to limit raw records of a tenant with seq > after, in
// seq order.
func (s *Store) Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error) {
	if limit <= 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid limit", Details: []writ.Detail{{Field: "limit", Message: "must be positive"}}}
	}
	rows, err := s.read.QueryContext(ctx, `SELECT raw FROM records WHERE tenant_id = ? AND seq > ? ORDER BY seq LIMIT ?`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read chain: %w", err)
	}
	defer rows.Close()
	var raws []json.RawMessage
	// Verification reads whole chains through here: the records of a page
	// are copied into shared blocks rather than one allocation each.
	var block []byte
	for rows.Next() {
		var raw sql.RawBytes
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("sqlite: read chain: %w", err)
		}
		if len(raw) > cap(block)-len(block) {
			block = make([]byte, 0, max(chainBlock, len(raw)))
		}
		at := len(block)
		block = append(block, raw...)
		// Capped, so that appending to one record cannot overwrite the next.
		raws = append(raws, block[at:len(block):len(block)])
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read chain: %w", err)
	}
	return raws, nil
}

// chainBlock is the size of the blocks Chain copies records into: a few
// dozen records, so that a caller keeping one record keeps little else.
const chainBlock = 256 << 10

// readStmts are the point reads of the check path, prepared once: the
// engine looks up idempotency keys and blocked actions on every check, and
// parsing their SQL each time cost more than running it.
type readStmts struct {
	idempotent, blocked, record, receipt, treeHash *sql.Stmt
	// apiKey runs on every authenticated request.
	apiKey *sql.Stmt
	// report and decisionRecords run on every execution report (the MCP
	// gateway sends one after each allowed call).
	report, decisionRecords *sql.Stmt
	// transcript and transcriptHead run on every check in a run or
	// session (its transcript's head) and every execution report.
	transcript, transcriptHead *sql.Stmt
}

func (r *readStmts) prepare(db *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&r.idempotent, `SELECT i.args_digest, i.record_id, r.receipt FROM idempotency i
			JOIN records r ON r.record_id = i.record_id AND r.tenant_id = i.tenant_id
			WHERE i.tenant_id = ? AND i.key = ?`},
		{&r.blocked, `SELECT b.record_id, r.receipt FROM blocks b
			JOIN records r ON r.record_id = b.record_id AND r.tenant_id = b.tenant_id
			WHERE b.tenant_id = ? AND b.decision_key = ? AND b.args_digest = ? AND b.pack_hash = ?`},
		{&r.record, `SELECT raw FROM records WHERE record_id = ? AND tenant_id = ?`},
		{&r.receipt, `SELECT receipt FROM records WHERE record_id = ? AND tenant_id = ?`},
		{&r.treeHash, `SELECT hash FROM tree_hashes WHERE tenant_id = ? AND idx = ?`},
		{&r.apiKey, keyColumns + ` WHERE k.key_id = ?`},
		{&r.report, reportQuery},
		{&r.decisionRecords, `SELECT seq, raw FROM records WHERE tenant_id = ? AND decision_id = ? ORDER BY seq LIMIT ?`},
		{&r.transcript, transcriptQuery},
		{&r.transcriptHead, transcriptQuery + ` DESC LIMIT 1`},
	} {
		st, err := db.Prepare(p.sql)
		if err != nil {
			r.close()
			return fmt.Errorf("sqlite: prepare read: %w", err)
		}
		*p.stmt = st
	}
	return nil
}

func (r *readStmts) close() {
	for _, st := range []*sql.Stmt{r.idempotent, r.blocked, r.record, r.receipt, r.treeHash, r.apiKey, r.report, r.decisionRecords, r.transcript, r.transcriptHead} {
		if st != nil {
			st.Close()
		}
	}
}

// reportQuery reads the answer of a decision's execution report.
const reportQuery = `SELECT x.report_digest, x.record_id, r.receipt FROM execution_reports x
	JOIN records r ON r.record_id = x.record_id AND r.tenant_id = x.tenant_id
	WHERE x.tenant_id = ? AND x.decision_id = ?`

// scanPrior scans an earlier answer (digest, record id, receipt), or nil
// when there is none.
func scanPrior(row *sql.Row) (*ledger.Prior, error) {
	var p ledger.Prior
	err := row.Scan(&p.ArgsDigest, &p.RecordID, &p.Receipt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &p, nil
}

// Report returns the answer of a decision's execution report, or nil.
func (s *Store) Report(ctx context.Context, tenantID, decisionID string) (*ledger.Prior, error) {
	p, err := scanPrior(s.reads.report.QueryRowContext(ctx, tenantID, decisionID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: read execution report: %w", err)
	}
	return p, nil
}

// DecisionRecords returns the tenant's records of one decision in chain
// order.
func (s *Store) DecisionRecords(ctx context.Context, tenantID, decisionID string) ([]writ.StoredRecord, error) {
	rows, err := s.reads.decisionRecords.QueryContext(ctx, tenantID, decisionID, ledger.MaxStoryRecords)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query records of decision: %w", err)
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
	WHERE r.tenant_id = ? AND r.status = 'IN_FLIGHT' AND r.seq > ?
	  AND NOT EXISTS (SELECT 1 FROM execution_reports x WHERE x.tenant_id = r.tenant_id AND x.decision_id = r.decision_id)
	ORDER BY r.seq LIMIT ?`

// InFlight returns the tenant's IN_FLIGHT records after seq whose decision
// has no execution report, in chain order.
func (s *Store) InFlight(ctx context.Context, tenantID string, after int64, limit int) ([]writ.StoredRecord, error) {
	rows, err := s.read.QueryContext(ctx, inFlightQuery, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query records in flight: %w", err)
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
	args := make([]any, 0, 4+2*len(ids)+len(addresses))
	args = append(args, tenantID)
	for _, id := range ids {
		args = append(args, ledger.EvidenceClaim(id), ledger.EvidenceRevocationClaim(id))
	}
	args = append(args, tenantID, ledger.EvidenceBlockKey, ledger.EvidenceRevocationBlockKey)
	for _, a := range addresses {
		args = append(args, a)
	}
	var (
		rows *sql.Rows
		err  error
	)
	if st, perr := s.evidenceStmt(len(ids), len(addresses)); perr != nil {
		return nil, perr
	} else if st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = s.read.QueryContext(ctx, evidenceSQL(len(ids), len(addresses)), args...)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read evidence: %w", err)
	}
	defer rows.Close()
	return scanEvidence(rows)
}

// evidenceSQL reads the evidence and revocation records of n ids (by
// their idempotency claims) and m content addresses (by their blocks).
func evidenceSQL(n, m int) string {
	var b strings.Builder
	b.WriteString(`SELECT r.raw FROM idempotency i JOIN records r ON r.record_id = i.record_id AND r.tenant_id = i.tenant_id
		WHERE i.tenant_id = ? AND i.key IN (''`)
	b.WriteString(strings.Repeat(", ?, ?", n))
	b.WriteString(`) UNION ALL SELECT r.raw FROM blocks k JOIN records r ON r.record_id = k.record_id AND r.tenant_id = k.tenant_id
		WHERE k.tenant_id = ? AND k.decision_key IN (?, ?) AND k.pack_hash = '' AND k.args_digest IN (''`)
	b.WriteString(strings.Repeat(", ?", m))
	b.WriteString(")")
	return b.String()
}

// maxEvidenceStmt is the most ids, and the most addresses, a check's
// evidence read has a prepared statement for; a larger read (rare: a
// check cites a handful of items) is parsed each time.
const maxEvidenceStmt = 8

// evidenceStmt returns the prepared evidence read of n ids and m
// addresses, preparing it on first use, or nil for a read larger than
// maxEvidenceStmt either way. Parsing the statement was most of what
// resolving a check's evidence cost (BenchmarkCheckStorage's profile).
func (s *Store) evidenceStmt(n, m int) (*sql.Stmt, error) {
	if n > maxEvidenceStmt || m > maxEvidenceStmt {
		return nil, nil
	}
	key := n*(maxEvidenceStmt+1) + m
	s.evMu.Lock()
	defer s.evMu.Unlock()
	if st := s.evStmts[key]; st != nil {
		return st, nil
	}
	st, err := s.read.Prepare(evidenceSQL(n, m))
	if err != nil {
		return nil, fmt.Errorf("sqlite: prepare evidence read: %w", err)
	}
	s.evStmts[key] = st
	return st, nil
}

func scanEvidence(rows *sql.Rows) ([]writ.StoredRecord, error) {
	var out []writ.StoredRecord
	seen := map[string]bool{}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("sqlite: read evidence: %w", err)
		}
		sr, err := ledger.ParseStored(raw)
		if err != nil {
			return nil, err
		}
		if !seen[sr.Record.RecordID] {
			seen[sr.Record.RecordID] = true
			out = append(out, *sr)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read evidence: %w", err)
	}
	return out, nil
}
