package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ/ledger"
)

// History aggregates (see ledger/history.go and migration 0007): a value
// is one indexed range read of a group's contributions in its window.
// Inside Append the reads run after the chain heads are locked (FOR
// UPDATE), so every other transaction of the tenant, on any server, has
// committed or waits: in READ COMMITTED the read sees all it committed.

const histSumSQL = `SELECT r.i, coalesce((SELECT sum(h.amount) FROM history_contributions h
		WHERE h.tenant_id = r.t AND h.aggregate = r.a AND h.group_key = r.g AND h.at_ns > r.s), 0)
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY AS r (t, a, g, s, i)`

// HistoryValues returns the current value of each read (see
// ledger.HistoryStore).
func (s *Store) HistoryValues(ctx context.Context, tenantID string, reads []ledger.HistoryRead) ([]float64, error) {
	q := newHistQuery()
	for _, r := range reads {
		q.add(tenantID, r)
	}
	b := &pgx.Batch{}
	q.queue(b)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("postgres: read history: %w", err)
	}
	return q.values, nil
}

// HistoryAsOf returns a read's value counting only records before seq.
func (s *Store) HistoryAsOf(ctx context.Context, tenantID string, r ledger.HistoryRead, seq int64) (float64, error) {
	var v float64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(amount), 0) FROM history_contributions
		WHERE tenant_id = $1 AND aggregate = $2 AND group_key = $3 AND at_ns > $4 AND seq < $5`,
		tenantID, r.Aggregate, r.Group, r.Since.UnixNano(), seq).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("postgres: read history %s: %w", r.Aggregate, err)
	}
	return v, nil
}

// histQuery reads many values in one statement.
type histQuery struct {
	t, a, g []string
	since   []int64
	values  []float64
}

func newHistQuery() *histQuery { return &histQuery{} }

// add adds a read and returns its index in values.
func (q *histQuery) add(tenant string, r ledger.HistoryRead) int {
	q.t, q.a, q.g, q.since = append(q.t, tenant), append(q.a, r.Aggregate), append(q.g, r.Group), append(q.since, r.Since.UnixNano())
	q.values = append(q.values, 0)
	return len(q.values) - 1
}

func (q *histQuery) queue(b *pgx.Batch) {
	if len(q.t) == 0 {
		return
	}
	b.Queue(histSumSQL, q.t, q.a, q.g, q.since).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i int64
			var v float64
			if err := rows.Scan(&i, &v); err != nil {
				return err
			}
			q.values[i-1] = v
		}
		return rows.Err()
	})
}

// histTx is the history work of one append attempt: the reads of the
// batch's entries, queued behind the head locks (what ledger.Settle asks
// through HistoryValues and Pending), and the contributions of the
// appended ones.
type histTx struct {
	q     *histQuery
	first [][]int // per entry, the indexes of its reads in q.values
	// stored are the pending contributions of the decisions the batch's
	// entries execute, by tenant and decision id.
	stored map[[2]string][]ledger.Contribution

	tenant, agg, group, record []string
	at, seq                    []int64
	amount                     []float64

	pTenant, pDecision, pAgg, pGroup, pUsage, pRecord []string
	pAt, pSeq                                         []int64
	pAmount                                           []float64
}

func newHistTx(entries []*ledger.Entry) *histTx {
	h := &histTx{q: newHistQuery(), first: make([][]int, len(entries)), stored: map[[2]string][]ledger.Contribution{}}
	for i, e := range entries {
		for _, r := range e.HistoryReads {
			h.first[i] = append(h.first[i], h.q.add(e.Record.TenantID, r))
		}
		if e.Executes != "" {
			h.stored[[2]string{e.Record.TenantID, e.Executes}] = nil
		}
	}
	return h
}

// queue queues the reads of the batch: the values its entries pinned and
// the pending contributions of the decisions they execute.
func (h *histTx) queue(b *pgx.Batch) {
	h.q.queue(b)
	if len(h.stored) == 0 {
		return
	}
	var kt, kd []string
	for k := range h.stored {
		kt, kd = append(kt, k[0]), append(kd, k[1])
	}
	// The pending contributions of each decision's last record that
	// stored any.
	b.Queue(`SELECT p.tenant_id, p.decision_id, p.aggregate, p.group_key, p.at_ns, p.amount, p.usage_dim
		FROM unnest($1::text[], $2::text[]) AS k (t, d)
		JOIN history_pending p ON p.tenant_id = k.t AND p.decision_id = k.d
		WHERE p.seq = (SELECT max(q.seq) FROM history_pending q WHERE q.tenant_id = k.t AND q.decision_id = k.d)
		ORDER BY 1, 2, 3, 4, 5`, kt, kd).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k [2]string
			var c ledger.Contribution
			var at int64
			if err := rows.Scan(&k[0], &k[1], &c.Aggregate, &c.Group, &at, &c.Amount, &c.Usage); err != nil {
				return err
			}
			c.At = time.Unix(0, at).UTC()
			h.stored[k] = append(h.stored[k], c)
		}
		return rows.Err()
	})
}

// values returns the stored values of entry i's history reads.
func (h *histTx) values(i int) []float64 {
	db := make([]float64, len(h.first[i]))
	for j, k := range h.first[i] {
		db[j] = h.q.values[k]
	}
	return db
}

// pending returns the stored pending contributions of a decision the
// batch executes.
func (h *histTx) pending(tenantID, decisionID string) []ledger.Contribution {
	return h.stored[[2]string{tenantID, decisionID}]
}

// add gathers the contributions of a sealed entry: its own, executed
// (those its Executes adds, as settled), and its pending ones.
func (h *histTx) add(e *ledger.Entry, executed []ledger.Contribution) {
	rec := e.Record
	for _, cs := range [][]ledger.Contribution{e.Contributions, executed} {
		for _, c := range cs {
			h.tenant, h.agg, h.group, h.record = append(h.tenant, rec.TenantID), append(h.agg, c.Aggregate), append(h.group, c.Group), append(h.record, rec.RecordID)
			h.at, h.seq, h.amount = append(h.at, c.At.UnixNano()), append(h.seq, rec.Audit.Seq), append(h.amount, c.Amount)
		}
	}
	for _, c := range e.PendingContributions {
		h.pTenant, h.pDecision, h.pAgg, h.pGroup, h.pRecord = append(h.pTenant, rec.TenantID), append(h.pDecision, rec.DecisionID), append(h.pAgg, c.Aggregate), append(h.pGroup, c.Group), append(h.pRecord, rec.RecordID)
		h.pAt, h.pSeq, h.pAmount, h.pUsage = append(h.pAt, c.At.UnixNano()), append(h.pSeq, rec.Audit.Seq), append(h.pAmount, c.Amount), append(h.pUsage, c.Usage)
	}
}

func (h *histTx) queueInsert(b *pgx.Batch) {
	if len(h.tenant) > 0 {
		b.Queue(`INSERT INTO history_contributions (tenant_id, aggregate, group_key, at_ns, amount, seq, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::float8[], $6::bigint[], $7::text[])`,
			h.tenant, h.agg, h.group, h.at, h.amount, h.seq, h.record)
	}
	if len(h.pTenant) > 0 {
		b.Queue(`INSERT INTO history_pending (tenant_id, decision_id, aggregate, group_key, at_ns, amount, usage_dim, seq, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::float8[], $7::text[], $8::bigint[], $9::text[])`,
			h.pTenant, h.pDecision, h.pAgg, h.pGroup, h.pAt, h.pAmount, h.pUsage, h.pSeq, h.pRecord)
	}
}
