package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/writhq/writ/ledger"
)

// History aggregates (see ledger/history.go and migration 0007): a value
// is one indexed range read of a group's contributions in its window.

const (
	histSumSQL = `SELECT coalesce(sum(amount), 0) FROM history_contributions
		WHERE tenant_id = ? AND aggregate = ? AND group_key = ? AND at_ns > ?`
	histAsOfSQL = `SELECT coalesce(sum(amount), 0) FROM history_contributions
		WHERE tenant_id = ? AND aggregate = ? AND group_key = ? AND at_ns > ? AND seq < ?`
	histAddSQL = `INSERT INTO history_contributions (tenant_id, aggregate, group_key, at_ns, amount, seq, record_id)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	histPendAddSQL = `INSERT INTO history_pending (tenant_id, decision_id, aggregate, group_key, at_ns, amount, usage_dim, seq, record_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// The pending contributions of a decision's last record that stored any.
	histPendReadSQL = `SELECT aggregate, group_key, at_ns, amount, usage_dim FROM history_pending
		WHERE tenant_id = ?1 AND decision_id = ?2
		AND seq = (SELECT max(seq) FROM history_pending WHERE tenant_id = ?1 AND decision_id = ?2)
		ORDER BY rowid`
)

// maxSumsAtOnce is the most history reads one statement sums (see
// sumsSQL); a check with more reads runs more statements.
const maxSumsAtOnce = 4

// sumsSQL is one statement that sums n reads, each a scalar subquery of
// histSumSQL's (its parameters ?1 to ?4 the first read's, ?5 to ?8 the
// second's...): a check's reads (a pack's aggregates and writ's
// tool-call meter) cost one statement, not one each.
func sumsSQL(n int) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		p := 4 * i
		fmt.Fprintf(&b, `(SELECT coalesce(sum(amount), 0) FROM history_contributions
		WHERE tenant_id = ?%d AND aggregate = ?%d AND group_key = ?%d AND at_ns > ?%d)`, p+1, p+2, p+3, p+4)
	}
	return b.String()
}

// histStmts are the history statements: sumW and add on the write
// connection (inside Append), sumR and asOf on the read pool. sumsW and
// sumsR sum 2 to maxSumsAtOnce reads at once (sumsW[n-2] sums n).
type histStmts struct {
	sumW, add, pendAdd, pendRead, sumR, asOf *sql.Stmt
	sumsW, sumsR                             [maxSumsAtOnce - 1]*sql.Stmt
}

func (h *histStmts) prepare(write, read *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		db   *sql.DB
		sql  string
	}{{&h.sumW, write, histSumSQL}, {&h.add, write, histAddSQL}, {&h.pendAdd, write, histPendAddSQL}, {&h.pendRead, write, histPendReadSQL},
		{&h.sumR, read, histSumSQL}, {&h.asOf, read, histAsOfSQL}} {
		st, err := p.db.Prepare(p.sql)
		if err != nil {
			h.close()
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		*p.stmt = st
	}
	for i := range h.sumsW {
		q := sumsSQL(i + 2)
		var err error
		if h.sumsW[i], err = write.Prepare(q); err == nil {
			h.sumsR[i], err = read.Prepare(q)
		}
		if err != nil {
			h.close()
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
	}
	return nil
}

func (h *histStmts) close() {
	sts := append([]*sql.Stmt{h.sumW, h.add, h.pendAdd, h.pendRead, h.sumR, h.asOf}, h.sumsW[:]...)
	for _, st := range append(sts, h.sumsR[:]...) {
		if st != nil {
			st.Close()
		}
	}
}

// HistoryValues returns the current value of each read (see
// ledger.HistoryStore).
func (s *Store) HistoryValues(ctx context.Context, tenantID string, reads []ledger.HistoryRead) ([]float64, error) {
	return historySums(ctx, s.hist.sumR, s.hist.sumsR[:], tenantID, reads)
}

// HistoryAsOf returns a read's value counting only records before seq.
func (s *Store) HistoryAsOf(ctx context.Context, tenantID string, r ledger.HistoryRead, seq int64) (float64, error) {
	var v float64
	if err := s.hist.asOf.QueryRowContext(ctx, tenantID, r.Aggregate, r.Group, r.Since.UnixNano(), seq).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlite: read history %s: %w", r.Aggregate, err)
	}
	return v, nil
}

// historySums sums reads with one statement for each maxSumsAtOnce of
// them: one (the single sum) when there is one read, sums[n-2] when
// there are n.
func historySums(ctx context.Context, one *sql.Stmt, sums []*sql.Stmt, tenantID string, reads []ledger.HistoryRead) ([]float64, error) {
	out := make([]float64, len(reads))
	for len(reads) > 0 {
		n := min(len(reads), maxSumsAtOnce)
		st := one
		if n > 1 {
			st = sums[n-2]
		}
		args := make([]any, 0, 4*n)
		dest := make([]any, n)
		for i, r := range reads[:n] {
			args = append(args, tenantID, r.Aggregate, r.Group, r.Since.UnixNano())
			dest[i] = &out[len(out)-len(reads)+i]
		}
		if err := st.QueryRowContext(ctx, args...).Scan(dest...); err != nil {
			return nil, fmt.Errorf("sqlite: read history %s: %w", reads[0].Aggregate, err)
		}
		reads = reads[n:]
	}
	return out, nil
}

// histTx is the history work of one append transaction.
type histTx struct {
	sum, add, pendAdd, pendRead *sql.Stmt
	// sums are the statements summing several reads (histStmts.sumsW),
	// bound to the transaction when an entry first needs one.
	sums, sumsW []*sql.Stmt
	tx          *sql.Tx
}

func (s *Store) histTx(ctx context.Context, tx *sql.Tx) *histTx {
	return &histTx{sum: tx.StmtContext(ctx, s.hist.sumW), add: tx.StmtContext(ctx, s.hist.add),
		pendAdd: tx.StmtContext(ctx, s.hist.pendAdd), pendRead: tx.StmtContext(ctx, s.hist.pendRead),
		sums: make([]*sql.Stmt, len(s.hist.sumsW)), sumsW: s.hist.sumsW[:], tx: tx}
}

func (h *histTx) close() {
	for _, st := range append([]*sql.Stmt{h.sum, h.add, h.pendAdd, h.pendRead}, h.sums...) {
		if st != nil {
			st.Close()
		}
	}
}

// values returns the stored value of each of e's history reads, for
// ledger.Settle.
func (h *histTx) values(ctx context.Context, e *ledger.Entry) ([]float64, error) {
	for rest := len(e.HistoryReads); rest > 0; rest -= maxSumsAtOnce {
		if n := min(rest, maxSumsAtOnce); n > 1 && h.sums[n-2] == nil {
			h.sums[n-2] = h.tx.StmtContext(ctx, h.sumsW[n-2])
		}
	}
	return historySums(ctx, h.sum, h.sums, e.Record.TenantID, e.HistoryReads)
}

// pending returns the pending contributions of a decision (those of its
// last record that stored any), for ledger.Settle.
func (h *histTx) pending(ctx context.Context, tenantID, decisionID string) ([]ledger.Contribution, error) {
	rows, err := h.pendRead.QueryContext(ctx, tenantID, decisionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read pending history of decision %s: %w", decisionID, err)
	}
	defer rows.Close()
	var stored []ledger.Contribution
	for rows.Next() {
		var c ledger.Contribution
		var at int64
		if err := rows.Scan(&c.Aggregate, &c.Group, &at, &c.Amount, &c.Usage); err != nil {
			return nil, fmt.Errorf("sqlite: read pending history of decision %s: %w", decisionID, err)
		}
		c.At = time.Unix(0, at).UTC()
		stored = append(stored, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read pending history of decision %s: %w", decisionID, err)
	}
	return stored, nil
}

// insert writes the contributions of the sealed entry e: its own,
// executed (those its Executes adds, as settled), and its pending ones.
func (h *histTx) insert(ctx context.Context, e *ledger.Entry, executed []ledger.Contribution) error {
	rec := e.Record
	for _, cs := range [][]ledger.Contribution{e.Contributions, executed} {
		for _, c := range cs {
			if _, err := h.add.ExecContext(ctx, rec.TenantID, c.Aggregate, c.Group, c.At.UnixNano(), c.Amount, rec.Audit.Seq, rec.RecordID); err != nil {
				return fmt.Errorf("sqlite: history contribution of record %s: %w", rec.RecordID, err)
			}
		}
	}
	for _, c := range e.PendingContributions {
		if _, err := h.pendAdd.ExecContext(ctx, rec.TenantID, rec.DecisionID, c.Aggregate, c.Group, c.At.UnixNano(), c.Amount, c.Usage, rec.Audit.Seq, rec.RecordID); err != nil {
			return fmt.Errorf("sqlite: pending history contribution of record %s: %w", rec.RecordID, err)
		}
	}
	return nil
}
