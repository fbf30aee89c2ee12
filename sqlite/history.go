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
	histAsOfSQL = `SELECT coalesce(sum(amount), 0) FROM history_contributions
		WHERE tenant_id = ? AND aggregate = ? AND group_key = ? AND at_ns > ? AND seq < ?`
	histPendAddSQL = `INSERT INTO history_pending (tenant_id, decision_id, aggregate, group_key, at_ns, amount, usage_dim, seq, record_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// The pending contributions of a decision's last record that stored any.
	histPendReadSQL = `SELECT aggregate, group_key, at_ns, amount, usage_dim FROM history_pending
		WHERE tenant_id = ?1 AND decision_id = ?2
		AND seq = (SELECT max(seq) FROM history_pending WHERE tenant_id = ?1 AND decision_id = ?2)
		ORDER BY rowid`
)

// maxAtOnce is the most history reads one statement sums (sumsSQL) and
// the most contributions one statement inserts (addsSQL). A check's
// reads and contributions (a pack's aggregates and writ's tool-call
// meter) each cost one statement, not one an aggregate, so that one more
// aggregate costs an index seek and an index insert, not a statement;
// an entry with more runs more statements.
const maxAtOnce = 4

// sumsSQL is one statement that sums n reads, each a scalar subquery
// (its parameters ?1 to ?4 the first read's tenant, aggregate, group and
// since, ?5 to ?8 the second's...).
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

// addsSQL is one statement that inserts n contributions, seven
// parameters a row.
func addsSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO history_contributions (tenant_id, aggregate, group_key, at_ns, amount, seq, record_id) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// byCount are statements by how many reads or rows they handle: [n-1]
// handles n.
type byCount [maxAtOnce]*sql.Stmt

func (c *byCount) prepare(db *sql.DB, query func(int) string) error {
	for i := range c {
		st, err := db.Prepare(query(i + 1))
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		c[i] = st
	}
	return nil
}

// histStmts are the history statements, prepared once: sumsW, adds,
// pendAdd and pendRead on the write connection (inside Append), sumsR
// and asOf on the read pool.
type histStmts struct {
	sumsW, sumsR, adds      byCount
	pendAdd, pendRead, asOf *sql.Stmt
}

func (h *histStmts) prepare(write, read *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		db   *sql.DB
		sql  string
	}{{&h.pendAdd, write, histPendAddSQL}, {&h.pendRead, write, histPendReadSQL}, {&h.asOf, read, histAsOfSQL}} {
		st, err := p.db.Prepare(p.sql)
		if err != nil {
			h.close()
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		*p.stmt = st
	}
	for _, p := range []struct {
		c     *byCount
		db    *sql.DB
		query func(int) string
	}{{&h.sumsW, write, sumsSQL}, {&h.sumsR, read, sumsSQL}, {&h.adds, write, addsSQL}} {
		if err := p.c.prepare(p.db, p.query); err != nil {
			h.close()
			return err
		}
	}
	return nil
}

func (h *histStmts) close() {
	sts := []*sql.Stmt{h.pendAdd, h.pendRead, h.asOf}
	for _, c := range []*byCount{&h.sumsW, &h.sumsR, &h.adds} {
		sts = append(sts, c[:]...)
	}
	for _, st := range sts {
		if st != nil {
			st.Close()
		}
	}
}

// HistoryValues returns the current value of each read (see
// ledger.HistoryStore).
func (s *Store) HistoryValues(ctx context.Context, tenantID string, reads []ledger.HistoryRead) ([]float64, error) {
	return historySums(ctx, func(n int) *sql.Stmt { return s.hist.sumsR[n-1] }, tenantID, reads)
}

// HistoryAsOf returns a read's value counting only records before seq.
func (s *Store) HistoryAsOf(ctx context.Context, tenantID string, r ledger.HistoryRead, seq int64) (float64, error) {
	var v float64
	if err := s.hist.asOf.QueryRowContext(ctx, tenantID, r.Aggregate, r.Group, r.Since.UnixNano(), seq).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlite: read history %s: %w", r.Aggregate, err)
	}
	return v, nil
}

// historySums sums reads with one statement for each maxAtOnce of them;
// sums(n) is the statement that sums n.
func historySums(ctx context.Context, sums func(n int) *sql.Stmt, tenantID string, reads []ledger.HistoryRead) ([]float64, error) {
	out := make([]float64, len(reads))
	args := make([]any, 0, 4*min(len(reads), maxAtOnce))
	dest := make([]any, 0, min(len(reads), maxAtOnce))
	for done := 0; done < len(reads); {
		n := min(len(reads)-done, maxAtOnce)
		args, dest = args[:0], dest[:0]
		for i, r := range reads[done : done+n] {
			args = append(args, tenantID, r.Aggregate, r.Group, r.Since.UnixNano())
			dest = append(dest, &out[done+i])
		}
		if err := sums(n).QueryRowContext(ctx, args...).Scan(dest...); err != nil {
			return nil, fmt.Errorf("sqlite: read history %s: %w", reads[done].Aggregate, err)
		}
		done += n
	}
	return out, nil
}

// histTx is the history work of one append transaction.
type histTx struct {
	pendAdd, pendRead *sql.Stmt
	// sums and adds are histStmts' sumsW and adds, each bound to the
	// transaction when an entry first needs it.
	sums, adds txByCount
	// args is the arguments of an insert, reused from entry to entry.
	args []any
}

// txByCount binds statements by count to a transaction as they are
// first used.
type txByCount struct {
	tx    *sql.Tx
	db    *byCount
	bound byCount
}

func (c *txByCount) stmt(ctx context.Context, n int) *sql.Stmt {
	if c.bound[n-1] == nil {
		c.bound[n-1] = c.tx.StmtContext(ctx, c.db[n-1])
	}
	return c.bound[n-1]
}

func (c *txByCount) close() {
	for _, st := range c.bound {
		if st != nil {
			st.Close()
		}
	}
}

func (s *Store) histTx(ctx context.Context, tx *sql.Tx) *histTx {
	return &histTx{pendAdd: tx.StmtContext(ctx, s.hist.pendAdd), pendRead: tx.StmtContext(ctx, s.hist.pendRead),
		sums: txByCount{tx: tx, db: &s.hist.sumsW}, adds: txByCount{tx: tx, db: &s.hist.adds}}
}

func (h *histTx) close() {
	h.pendAdd.Close()
	h.pendRead.Close()
	h.sums.close()
	h.adds.close()
}

// values returns the stored value of each of e's history reads, for
// ledger.Settle; the single writer keeps every other append out
// meanwhile.
func (h *histTx) values(ctx context.Context, e *ledger.Entry) ([]float64, error) {
	return historySums(ctx, func(n int) *sql.Stmt { return h.sums.stmt(ctx, n) }, e.Record.TenantID, e.HistoryReads)
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

// insert writes the contributions of the sealed entry e: its own and
// executed (those its Executes adds, as settled), maxAtOnce rows a
// statement, and its pending ones.
func (h *histTx) insert(ctx context.Context, e *ledger.Entry, executed []ledger.Contribution) error {
	rec := e.Record
	own := e.Contributions
	for total, done := len(own)+len(executed), 0; done < total; {
		n := min(total-done, maxAtOnce)
		h.args = h.args[:0]
		for i := done; i < done+n; i++ {
			var c *ledger.Contribution
			if i < len(own) {
				c = &own[i]
			} else {
				c = &executed[i-len(own)]
			}
			h.args = append(h.args, rec.TenantID, c.Aggregate, c.Group, c.At.UnixNano(), c.Amount, rec.Audit.Seq, rec.RecordID)
		}
		if _, err := h.adds.stmt(ctx, n).ExecContext(ctx, h.args...); err != nil {
			return fmt.Errorf("sqlite: history contribution of record %s: %w", rec.RecordID, err)
		}
		done += n
	}
	for _, c := range e.PendingContributions {
		if _, err := h.pendAdd.ExecContext(ctx, rec.TenantID, rec.DecisionID, c.Aggregate, c.Group, c.At.UnixNano(), c.Amount, c.Usage, rec.Audit.Seq, rec.RecordID); err != nil {
			return fmt.Errorf("sqlite: pending history contribution of record %s: %w", rec.RecordID, err)
		}
	}
	return nil
}
