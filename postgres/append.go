package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// maxAttempts bounds how often Append runs a batch whose transaction the
// database aborted for a deadlock or a serialization failure: nothing of it
// is durable then, so it is simply run again.
const maxAttempts = 3

// Append seals and writes entries in one transaction, as ledger.Store
// specifies. Entries' Raw, Prior and Refused are set only once the
// transaction has committed; an appended approval event's Seq and
// RecordID are set while it runs.
//
// The transaction first locks the chain heads of the batch's tenants, in
// tenant order (creating a head at seq 0 for a new tenant), then reads the
// idempotency claims, then locks the approval requests the batch's events
// name (SELECT … FOR UPDATE, in key order) and counts their events: with
// those locked, no other server can claim a key of those tenants, move
// their chains, or decide or redeem those requests until this one commits.
func (s *Store) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	if len(entries) == 0 {
		return nil
	}
	if err := ledger.ValidateBatch(entries); err != nil {
		return err
	}
	if s.closed.Load() {
		return ledger.ErrClosed
	}
	for attempt := 1; ; attempt++ {
		out, err := s.appendTx(ctx, entries, seal)
		if err != nil {
			if code := pgCode(err); attempt < maxAttempts && (code == "40P01" || code == "40001") {
				continue
			}
			return err
		}
		out.settled.Answer(entries, out.raws)
		return nil
	}
}

// appended is what one attempt of Append settled for the batch and the
// sealed bytes of the entries it appended.
type appended struct {
	settled *ledger.Settlement
	raws    [][]byte
}

type claimKey struct{ tenant, key string }

type approvalKey struct{ tenant, id string }

type runKey struct{ tenant, run string }

type blockKey struct {
	tenant string
	key    ledger.BlockKey
}

// appendTx runs one attempt of Append, in its phases: lock the batch's
// tenants and read what settling needs (lockAndRead), settle the batch
// (ledger.Settle), lock and read what its records build on (readBase),
// seal, gather the rows (gather), write them and commit (commitAppend).
func (s *Store) appendTx(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) (*appended, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: begin append: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback(context.WithoutCancel(ctx))
		}
	}()

	locked, err := lockAndRead(ctx, tx, entries)
	if err != nil {
		return nil, err
	}
	settled, err := ledger.Settle(ctx, entries, locked)
	if err != nil {
		return nil, err
	}
	out := &appended{settled: settled, raws: make([][]byte, len(entries))}
	if len(settled.Appended) == 0 {
		done = true
		if err := tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("postgres: commit append: %w", err)
		}
		return out, nil
	}
	base, err := readBase(ctx, tx, locked, entries, settled.Appended)
	if err != nil {
		return nil, err
	}
	if out.raws, err = ledger.SealBatch(seal, locked.heads, entries, settled.Appended); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	w, err := s.gather(ctx, tx, entries, out, locked, base)
	if err != nil {
		return nil, err
	}
	wb := w.batch()
	locked.hist.queueInsert(wb)
	if err := tx.SendBatch(ctx, wb).Close(); err != nil {
		return nil, fmt.Errorf("postgres: write append: %w", err)
	}
	done = true
	first := settled.Appended[0]
	if err := s.commitAppend(ctx, tx, entries[first].Record, out.raws[first]); err != nil {
		return nil, err
	}
	return out, nil
}

// locked is what an append attempt reads in its first round trip: its
// tenants' chain heads, locked (FOR UPDATE, in tenant order, a new
// tenant's created at seq 0) and their last time marks; then what
// ledger.Settle asks of it (SettleReads): the idempotency claims and
// execution reports the batch names, the approval requests its events
// name, locked (in key order) and counted, and the history values its
// entries read. With the heads and requests locked, no other server can
// claim a key of those tenants, move their chains, or decide or redeem
// those requests until this attempt ends.
type locked struct {
	tenants []string // sorted
	heads   map[string]ledger.Head
	marks   map[string]int64 // each tenant's last time mark
	claims  map[claimKey]*ledger.Prior
	reports map[claimKey]*ledger.Prior
	tallies map[approvalKey]*ledger.ApprovalTally
	hist    *histTx
}

func (l *locked) Report(_ context.Context, tenantID, decisionID string) (*ledger.Prior, error) {
	return l.reports[claimKey{tenantID, decisionID}], nil
}

func (l *locked) Claim(_ context.Context, tenantID, key string) (*ledger.Prior, error) {
	return l.claims[claimKey{tenantID, key}], nil
}

func (l *locked) HistoryValues(_ context.Context, i int, _ *ledger.Entry) ([]float64, error) {
	return l.hist.values(i), nil
}

func (l *locked) Pending(_ context.Context, tenantID, decisionID string) ([]ledger.Contribution, error) {
	return l.hist.pending(tenantID, decisionID), nil
}

func (l *locked) Tally(_ context.Context, tenantID, approvalID string) (*ledger.ApprovalTally, error) {
	return l.tallies[approvalKey{tenantID, approvalID}], nil
}

// lockAndRead locks the batch's heads and reads what settling it needs,
// in one round trip (the batch runs its statements in order).
func lockAndRead(ctx context.Context, tx pgx.Tx, entries []*ledger.Entry) (*locked, error) {
	l := &locked{heads: map[string]ledger.Head{}, marks: map[string]int64{}, claims: map[claimKey]*ledger.Prior{},
		reports: map[claimKey]*ledger.Prior{}, tallies: map[approvalKey]*ledger.ApprovalTally{}}
	var claimTenants, claimKeys []string
	var approvalKeys []approvalKey
	var reportTenants, reportDecisions []string
	for _, e := range entries {
		l.tenants = append(l.tenants, e.Record.TenantID)
		if c := e.Report; c != nil {
			reportTenants, reportDecisions = append(reportTenants, e.Record.TenantID), append(reportDecisions, c.DecisionID)
		}
		if c := e.Idempotency; c != nil {
			k := claimKey{e.Record.TenantID, c.Key}
			if _, ok := l.claims[k]; !ok {
				l.claims[k] = nil
				claimTenants, claimKeys = append(claimTenants, k.tenant), append(claimKeys, k.key)
			}
		}
		if ev := e.ApprovalEvent; ev != nil {
			k := approvalKey{ev.TenantID, ev.ApprovalID}
			if _, ok := l.tallies[k]; !ok {
				l.tallies[k] = nil
				approvalKeys = append(approvalKeys, k)
			}
		}
	}
	slices.Sort(l.tenants)
	l.tenants = slices.Compact(l.tenants)
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO heads (tenant_id, seq, hash)
		SELECT t, 0, '' FROM unnest($1::text[]) AS t ORDER BY t
		ON CONFLICT (tenant_id) DO NOTHING`, l.tenants)
	b.Queue(`SELECT tenant_id, seq, hash FROM heads WHERE tenant_id = ANY($1::text[]) ORDER BY tenant_id FOR UPDATE`, l.tenants).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var t string
				var h ledger.Head
				if err := rows.Scan(&t, &h.Seq, &h.Hash); err != nil {
					return err
				}
				if h.Seq == 0 {
					h = ledger.Head{}
				}
				l.heads[t] = h
			}
			return rows.Err()
		})
	// Each tenant's last time mark, read under its head's lock: the
	// running maximum the batch's marks continue.
	b.Queue(`SELECT t, m.max_ts_ns FROM unnest($1::text[]) AS t
		CROSS JOIN LATERAL (SELECT k.max_ts_ns FROM record_time_marks k WHERE k.tenant_id = t ORDER BY k.max_ts_ns DESC LIMIT 1) m`, l.tenants).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var t string
				var m int64
				if err := rows.Scan(&t, &m); err != nil {
					return err
				}
				l.marks[t] = m
			}
			return rows.Err()
		})
	if len(claimKeys) > 0 {
		b.Queue(`SELECT i.tenant_id, i.key, i.args_digest, i.record_id, r.receipt
			FROM unnest($1::text[], $2::text[]) AS c (tenant_id, key)
			JOIN idempotency i ON i.tenant_id = c.tenant_id AND i.key = c.key
			JOIN record_ids x ON x.record_id = i.record_id`+byID("r.receipt"), claimTenants, claimKeys).
			Query(scanClaims(l.claims))
	}
	if len(reportDecisions) > 0 {
		// Read under the heads' locks: every report of a tenant is
		// appended under its head's lock, so none can slip in between.
		b.Queue(`SELECT e.tenant_id, e.decision_id, e.report_digest, e.record_id, r.receipt
			FROM unnest($1::text[], $2::text[]) AS c (tenant_id, decision_id)
			JOIN execution_reports e ON e.tenant_id = c.tenant_id AND e.decision_id = c.decision_id
			JOIN record_ids x ON x.record_id = e.record_id`+byID("r.receipt"), reportTenants, reportDecisions).
			Query(scanClaims(l.reports))
	}
	if len(approvalKeys) > 0 {
		queueApprovalTallies(b, approvalKeys, l.tallies)
	}
	l.hist = newHistTx(entries)
	l.hist.queue(b) // behind the head locks
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("postgres: lock chain heads: %w", err)
	}
	if len(l.heads) != len(l.tenants) {
		return nil, fmt.Errorf("postgres: locked %d chain heads, want %d", len(l.heads), len(l.tenants))
	}
	return l, nil
}

// base is what the appended records build on: each run's last event seq
// (the runs locked), and each tenant's tree hashes known so far (the
// frontier of its tree at its head, then those the append adds).
type base struct {
	runs  map[runKey]int64
	known map[string]map[int64]tlog.Hash
}

// readBase locks the runs the appended entries todo add events to (in
// key order), reads their last seqs, and reads the frontier of each
// tenant's tree at its locked head, in one round trip.
func readBase(ctx context.Context, tx pgx.Tx, l *locked, entries []*ledger.Entry, todo []int) (*base, error) {
	r := &base{runs: map[runKey]int64{}, known: map[string]map[int64]tlog.Hash{}}
	var runKeys []runKey
	for _, i := range todo {
		if ev := entries[i].RunEvent; ev != nil {
			k := runKey{ev.TenantID, ev.RunID}
			if _, ok := r.runs[k]; !ok {
				r.runs[k] = 0
				runKeys = append(runKeys, k)
			}
		}
	}
	slices.SortFunc(runKeys, func(a, b runKey) int {
		return cmpJoin(a.tenant, a.run, b.tenant, b.run)
	})
	var fTenants []string
	var fIdx []int64
	for _, t := range l.tenants {
		r.known[t] = map[int64]tlog.Hash{}
		for _, idx := range frontier(l.heads[t].Seq) {
			fTenants, fIdx = append(fTenants, t), append(fIdx, idx)
		}
	}
	b := &pgx.Batch{}
	if len(runKeys) > 0 {
		rt, rr := make([]string, len(runKeys)), make([]string, len(runKeys))
		for j, k := range runKeys {
			b.Queue(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, runLockClass, runLockName(k.tenant, k.run))
			rt[j], rr[j] = k.tenant, k.run
		}
		b.Queue(`SELECT e.tenant_id, e.run_id, max(e.seq)
			FROM unnest($1::text[], $2::text[]) AS k (tenant_id, run_id)
			JOIN run_events e ON e.tenant_id = k.tenant_id AND e.run_id = k.run_id
			GROUP BY 1, 2`, rt, rr).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k runKey
					var last int64
					if err := rows.Scan(&k.tenant, &k.run, &last); err != nil {
						return err
					}
					r.runs[k] = last
				}
				return rows.Err()
			})
	}
	if len(fIdx) > 0 {
		b.Queue(`SELECT h.tenant_id, h.idx, h.hash
			FROM unnest($1::text[], $2::bigint[]) AS f (tenant_id, idx)
			JOIN tree_hashes h ON h.tenant_id = f.tenant_id AND h.idx = f.idx`, fTenants, fIdx).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var t string
					var idx int64
					var h []byte
					if err := rows.Scan(&t, &idx, &h); err != nil {
						return err
					}
					if len(h) != tlog.HashSize {
						return fmt.Errorf("tree hash %d of tenant %s has %d bytes", idx, t, len(h))
					}
					r.known[t][idx] = tlog.Hash(h)
				}
				return rows.Err()
			})
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("postgres: prepare append: %w", err)
		}
	}
	return r, nil
}

// gather returns the rows of the sealed entries out.settled.Appended: each
// record with its tree hashes and everything that travels with it, then
// the tenants' new heads, time marks and time lows.
func (s *Store) gather(ctx context.Context, tx pgx.Tx, entries []*ledger.Entry, out *appended, l *locked, r *base) (*rows, error) {
	w := &rows{}
	marker := ledger.NewTimeMarker(l.marks)
	lows := newLowRuns()
	for _, i := range out.settled.Appended {
		e := entries[i]
		rec := e.Record
		raw, seq := out.raws[i], rec.Audit.Seq
		known := r.known[rec.TenantID]
		first, hashes, err := ledger.TreeHashes(seq, raw, s.treeReader(ctx, tx, rec.TenantID, known))
		if err != nil {
			return nil, err
		}
		for k, h := range hashes {
			known[first+int64(k)] = h
			w.hashTenant = append(w.hashTenant, rec.TenantID)
			w.hashIdx = append(w.hashIdx, first+int64(k))
			w.hashVal = append(w.hashVal, bytes.Clone(h[:]))
		}
		if err := w.addRecord(e, raw); err != nil {
			return nil, err
		}
		marker.Add(rec.TenantID, seq, rec.Timestamp.UnixNano())
		if err := lows.add(rec.TenantID, seq, rec.Timestamp.UnixNano()); err != nil {
			return nil, err
		}
		if err := w.addCompanions(e, r.runs); err != nil {
			return nil, err
		}
		l.hist.add(e, out.settled.Executed[i])
	}
	for _, t := range l.tenants {
		if h := l.heads[t]; h.Seq > 0 {
			w.headTenant = append(w.headTenant, t)
			w.headSeq = append(w.headSeq, h.Seq)
			w.headHash = append(w.headHash, h.Hash)
		}
	}
	for _, m := range marker.Marks() {
		w.markTenant, w.markSeq, w.markMax = append(w.markTenant, m.TenantID), append(w.markSeq, m.Seq), append(w.markMax, m.MaxNanos)
	}
	if err := lows.compute(ctx, tx, w); err != nil {
		return nil, err
	}
	return w, nil
}

// addCompanions adds what travels with the sealed entry e besides its
// record: its approval requests and event, shadow decision, classified
// values, block (the first of an action wins, in the batch too),
// envelope, blobs, and run event (after the run's last, in runs).
func (w *rows) addCompanions(e *ledger.Entry, runs map[runKey]int64) error {
	rec := e.Record
	if err := w.addApprovals(e); err != nil {
		return err
	}
	if err := w.addShadow(e); err != nil {
		return err
	}
	w.addClassified(e)
	if b := e.Block; b != nil {
		k := blockKey{rec.TenantID, *b}
		if !w.blocksSeen[k] {
			if w.blocksSeen == nil {
				w.blocksSeen = map[blockKey]bool{}
			}
			w.blocksSeen[k] = true
			w.blockTenant = append(w.blockTenant, rec.TenantID)
			w.blockKey = append(w.blockKey, b.DecisionKey)
			w.blockArgs = append(w.blockArgs, b.ArgsDigest)
			w.blockPack = append(w.blockPack, b.PackHash)
			w.blockRecord = append(w.blockRecord, rec.RecordID)
		}
	}
	if e.Envelope != nil {
		w.envTenant = append(w.envTenant, rec.TenantID)
		w.envSeq = append(w.envSeq, rec.Audit.Seq)
		w.envHash = append(w.envHash, rec.Replay.ReplayPacketID)
		w.envData = append(w.envData, e.Envelope)
	}
	for _, bl := range e.Blobs {
		if !w.blobsSeen[bl.Hash] {
			if w.blobsSeen == nil {
				w.blobsSeen = map[string]bool{}
			}
			w.blobsSeen[bl.Hash] = true
			w.blobHash = append(w.blobHash, bl.Hash)
			w.blobKind = append(w.blobKind, bl.Kind)
			w.blobData = append(w.blobData, bl.Data)
		}
	}
	if ev := e.RunEvent; ev != nil {
		k := runKey{ev.TenantID, ev.RunID}
		runs[k]++
		ev.Seq, ev.RecordID = runs[k], rec.RecordID
		w.addRunEvent(ev)
	}
	return nil
}

// commitAppend commits an append whose first appended record is rec,
// sealed as raw. When the connection fails during COMMIT, the transaction
// may have committed: commitAppend finds out, so that an error still
// means nothing of the batch is durable.
func (s *Store) commitAppend(ctx context.Context, tx pgx.Tx, rec *writ.Record, raw []byte) error {
	err := tx.Commit(ctx)
	if err == nil {
		return nil
	}
	if pgCode(err) != "" || errors.Is(err, pgx.ErrTxCommitRollback) {
		// The server answered: the transaction rolled back.
		return fmt.Errorf("postgres: commit append: %w", err)
	}
	ok, rerr := s.committed(ctx, rec, raw)
	switch {
	case rerr != nil:
		return fmt.Errorf("postgres: commit append: %w (and whether it committed is unknown: %v)", err, rerr)
	case !ok:
		return fmt.Errorf("postgres: commit append: %w", err)
	}
	return nil
}

// lowRuns gathers each tenant's appended record times for its time lows
// (ledger.TimeLows).
type lowRuns struct {
	tenants []string
	runs    map[string]*lowRun
}

type lowRun struct {
	prior int64
	times []int64
}

func newLowRuns() *lowRuns { return &lowRuns{runs: map[string]*lowRun{}} }

// add adds a record of tenant at seq with time ns; a tenant's records come
// in seq order, one after the other.
func (l *lowRuns) add(tenant string, seq, ns int64) error {
	r := l.runs[tenant]
	if r == nil {
		r = &lowRun{prior: seq - 1}
		l.runs[tenant] = r
		l.tenants = append(l.tenants, tenant)
	}
	if seq != r.prior+int64(len(r.times))+1 {
		return fmt.Errorf("postgres: time lows of tenant %s: seq %d follows %d", tenant, seq, r.prior+int64(len(r.times)))
	}
	r.times = append(r.times, ns)
	return nil
}

// compute adds to w the lows of the blocks the append completes, reading
// in tx (under the tenants' head locks) the earlier part of a block that
// began before the append.
func (l *lowRuns) compute(ctx context.Context, tx pgx.Tx, w *rows) error {
	for _, t := range l.tenants {
		r := l.runs[t]
		lows, err := ledger.TimeLows(t, r.prior, r.times, func(level int, lo, hi int64) (int64, bool, error) {
			var m *int64
			var err error
			if level == 0 {
				err = tx.QueryRow(ctx, `SELECT min(ts_ns) FROM records WHERE tenant_id = $1 AND seq > $2 AND seq <= $3`, t, lo, hi).Scan(&m)
			} else {
				err = tx.QueryRow(ctx, `SELECT min(min_ts_ns) FROM record_time_lows WHERE tenant_id = $1 AND level = $2 AND seq > $3 AND seq <= $4`, t, level, lo, hi).Scan(&m)
			}
			if err != nil || m == nil {
				return 0, false, err
			}
			return *m, true, nil
		})
		if err != nil {
			return fmt.Errorf("postgres: time lows of tenant %s: %w", t, err)
		}
		for _, low := range lows {
			w.lowTenant = append(w.lowTenant, low.TenantID)
			w.lowLevel = append(w.lowLevel, int32(low.Level))
			w.lowSeq = append(w.lowSeq, low.Seq)
			w.lowMin = append(w.lowMin, low.MinNanos)
		}
	}
	return nil
}

// raiseApprovalFloorQuery writes a tenant's new approval floor (migration
// 0022), when it rose: just before its first request after the last floor
// that is undecided and unexpired at a time, or, with none, its last
// request. The arguments are the tenant and the time (Unix nanoseconds),
// that of the tenant's first decision in the append (the engine's clock,
// as the requests' expiries are). It runs under the tenant's head lock,
// so a tenant's floors are written one append at a time.
const raiseApprovalFloorQuery = `INSERT INTO approval_floors (tenant_id, pos, at_ns)
	SELECT $1, n.next, $2 FROM (
		SELECT f.last, coalesce(
			(SELECT a.pos - 1 FROM approval_requests a WHERE a.tenant_id = $1 AND a.pos > f.last AND a.expires_ns > $2 AND ` + undecided + `
				ORDER BY a.pos LIMIT 1),
			(SELECT max(pos) FROM approval_requests WHERE tenant_id = $1), 0) AS next
		FROM (SELECT coalesce(max(pos), 0) AS last FROM approval_floors WHERE tenant_id = $1) f) n
	WHERE n.next > n.last`

// queueApprovalTallies queues the statements that lock the approval
// requests keys name, in key order (so two batches lock them in the same
// order), and then count their events into tallies; a key whose request
// does not exist stays nil. Counting is a statement of its own, after the
// lock: in READ COMMITTED each statement reads a fresh snapshot, so it
// sees the events of a transaction the lock waited for.
func queueApprovalTallies(b *pgx.Batch, keys []approvalKey, tallies map[approvalKey]*ledger.ApprovalTally) {
	slices.SortFunc(keys, func(a, b approvalKey) int { return cmpJoin(a.tenant, a.id, b.tenant, b.id) })
	kt, ki := make([]string, len(keys)), make([]string, len(keys))
	for j, k := range keys {
		kt[j], ki[j] = k.tenant, k.id
	}
	b.Queue(`SELECT a.tenant_id, a.approval_id, a.allowance FROM approval_requests a
		JOIN unnest($1::text[], $2::text[]) AS k (tenant_id, approval_id) ON a.tenant_id = k.tenant_id AND a.approval_id = k.approval_id
		ORDER BY a.tenant_id, a.approval_id
		FOR UPDATE OF a`, kt, ki).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k approvalKey
				var t ledger.ApprovalTally
				if err := rows.Scan(&k.tenant, &k.id, &t.Allowance); err != nil {
					return err
				}
				tallies[k] = &t
			}
			return rows.Err()
		})
	b.Queue(`SELECT e.tenant_id, e.approval_id, max(e.seq), count(*) FILTER (WHERE e.kind = 'redeemed'),
			coalesce((array_agg(e.kind ORDER BY e.seq DESC) FILTER (WHERE e.kind IN ('approved', 'denied', 'withdrawn')))[1], '')
		FROM unnest($1::text[], $2::text[]) AS k (tenant_id, approval_id)
		JOIN approval_events e ON e.tenant_id = k.tenant_id AND e.approval_id = k.approval_id
		GROUP BY 1, 2`, kt, ki).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k approvalKey
				var last, redeemed int64
				var decision string
				if err := rows.Scan(&k.tenant, &k.id, &last, &redeemed, &decision); err != nil {
					return err
				}
				t := tallies[k]
				if t == nil {
					return fmt.Errorf("approval %s of tenant %s has events but no request", k.id, k.tenant)
				}
				t.LastSeq, t.Redeemed, t.Decision = last, int(redeemed), decision
			}
			return rows.Err()
		})
}

// committed reports whether the record sealed as raw is durable, after a
// COMMIT whose answer was lost. It first waits for the tenant's head lock,
// which the append transaction holds until it has committed or rolled
// back (a head the transaction created is waited for by inserting it).
func (s *Store) committed(ctx context.Context, rec *writ.Record, raw []byte) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) // never commits: the inserted head is only a wait
	if _, err := tx.Exec(ctx, `INSERT INTO heads (tenant_id, seq, hash) VALUES ($1, 0, '') ON CONFLICT (tenant_id) DO NOTHING`, rec.TenantID); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM heads WHERE tenant_id = $1 FOR SHARE`, rec.TenantID); err != nil {
		return false, err
	}
	var ok bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM record_ids x`+byID("r.raw")+`
		WHERE x.record_id = $1 AND x.tenant_id = $2 AND x.seq = $3 AND r.raw = $4)`,
		rec.RecordID, rec.TenantID, rec.Audit.Seq, raw).Scan(&ok)
	return ok, err
}

// treeReader reads a tenant's tree hashes: those of this transaction and
// the prefetched frontier from known, any other from the database (which,
// with the head locked, holds every hash below the head).
func (s *Store) treeReader(ctx context.Context, tx pgx.Tx, tenant string, known map[int64]tlog.Hash) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		var missing []int64
		for _, idx := range indexes {
			if _, ok := known[idx]; !ok {
				missing = append(missing, idx)
			}
		}
		if len(missing) > 0 {
			found, err := readHashes(ctx, tx, tenant, missing)
			if err != nil {
				return nil, err
			}
			for idx, h := range found {
				known[idx] = h
			}
		}
		out := make([]tlog.Hash, len(indexes))
		for k, idx := range indexes {
			h, ok := known[idx]
			if !ok {
				return nil, fmt.Errorf("postgres: tree hash %d of tenant %s is not stored", idx, tenant)
			}
			out[k] = h
		}
		return out, nil
	})
}

// frontier returns the storage indexes of the complete subtrees a tree of
// size n consists of: the only stored hashes appending to it reads.
func frontier(n int64) []int64 {
	var out []int64
	for level := 0; n>>level > 0; level++ {
		if (n>>level)&1 == 1 {
			out = append(out, tlog.StoredHashIndex(level, n>>level-1))
		}
	}
	return out
}

// runLockName names a run for its advisory lock (a hash collision only
// makes two runs wait for each other).
func runLockName(tenant, run string) string { return tenant + "\x1f" + run }

func cmpJoin(a1, a2, b1, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}

// rows are the rows an append writes, by column, so each table takes one
// INSERT … SELECT FROM unnest(…) however large the batch.
type rows struct {
	recID, recTenant, recDecisionID, recKey, recStatus, recTrace, recMode, recDoc []string
	recSeq, recTsNs                                                               []int64
	recTs                                                                         []time.Time
	recRaw, recReceipt                                                            [][]byte

	subID, subTenant []string
	subSeq           []int64
	subTs            []time.Time

	markTenant       []string
	lowTenant        []string
	lowLevel         []int32
	lowSeq, lowMin   []int64
	markSeq, markMax []int64

	termTerm, termValue, termTenant []string
	termSeq                         []int64
	termTs                          []time.Time

	claimTenant, claimKey, claimArgs, claimRecord []string

	reportTenant, reportDecision, reportDigest, reportRecord []string

	blockTenant, blockKey, blockArgs, blockPack, blockRecord []string

	blobHash, blobKind []string
	blobData           [][]byte

	envTenant, envHash []string
	envSeq             []int64
	envData            [][]byte

	hashTenant []string
	hashIdx    []int64
	hashVal    [][]byte

	// blocksSeen and blobsSeen keep the first block of an action and the
	// first copy of a blob.
	blocksSeen map[blockKey]bool
	blobsSeen  map[string]bool

	runTenant, runID, runKind, runStep, runRecord []string
	runSeq, runAt                                 []int64
	runData                                       [][]byte

	apprTenant, apprID, apprGate, apprKey, apprDigest, apprRecord []string
	apprAllowance, apprCreated, apprExpires                       []int64
	apprDoc                                                       [][]byte

	evTenant, evApproval, evKind, evActor, evReason, evRecord []string
	evSeq, evAt                                               []int64
	// floorTenant and floorAt: the tenants whose requests the batch
	// decides, each with the time of its first decision among them
	// (raiseApprovalFloors).
	floorTenant []string
	floorAt     []int64

	shTenant, shRecord, shKey, shPack, shPackHash, shEnforced, shOutcome, shStatus []string
	shAt                                                                           []int64
	shDetail                                                                       [][]byte

	cvTenant, cvRef, cvRule, cvClass, cvRecord []string
	cvSalt, cvValue                            [][]byte
	csTenant, csSubject, csRef                 []string
	erTenant, erRef                            []string

	headTenant, headHash []string
	headSeq              []int64
}

// addClassified adds e's classified values, their subjects, and the
// references its erasure deletes.
func (w *rows) addClassified(e *ledger.Entry) {
	t := e.Record.TenantID
	for i := range e.Classified {
		v := &e.Classified[i]
		v.RecordID = e.Record.RecordID
		w.cvTenant, w.cvRef, w.cvRule, w.cvClass, w.cvRecord = append(w.cvTenant, t), append(w.cvRef, v.Ref), append(w.cvRule, v.Rule), append(w.cvClass, v.Classification), append(w.cvRecord, v.RecordID)
		w.cvSalt, w.cvValue = append(w.cvSalt, v.Salt), append(w.cvValue, v.Value)
		for j, sub := range v.SubjectIDs {
			if slices.Contains(v.SubjectIDs[:j], sub) {
				continue
			}
			w.csTenant, w.csSubject, w.csRef = append(w.csTenant, t), append(w.csSubject, sub), append(w.csRef, v.Ref)
		}
	}
	if x := e.Erasure; x != nil {
		for _, ref := range x.Refs {
			w.erTenant, w.erRef = append(w.erTenant, t), append(w.erRef, ref)
		}
	}
}

// microTime is t truncated (floored) to the microsecond, the precision of
// timestamptz: the ts column and the bounds compared with it.
func microTime(ns int64) time.Time {
	us := ns / 1000
	if ns%1000 < 0 {
		us--
	}
	return time.UnixMicro(us).UTC()
}

func (w *rows) addRecord(e *ledger.Entry, raw []byte) error {
	rec := e.Record
	doc, err := jsonbText(raw)
	if err != nil {
		return fmt.Errorf("postgres: record %s: the sealed bytes are not a JSON object: %w", rec.RecordID, err)
	}
	receipt := e.Receipt
	if receipt == nil {
		receipt = []byte{}
	}
	ns := rec.Timestamp.UnixNano()
	ts := microTime(ns)
	w.recID = append(w.recID, rec.RecordID)
	w.recTenant = append(w.recTenant, rec.TenantID)
	w.recSeq = append(w.recSeq, rec.Audit.Seq)
	w.recDecisionID = append(w.recDecisionID, rec.DecisionID)
	w.recKey = append(w.recKey, rec.DecisionKey)
	w.recStatus = append(w.recStatus, string(rec.Status))
	w.recTrace = append(w.recTrace, rec.TraceID)
	w.recTs = append(w.recTs, ts)
	w.recTsNs = append(w.recTsNs, ns)
	w.recMode = append(w.recMode, string(rec.ApprovalModeEffective))
	w.recRaw = append(w.recRaw, raw)
	w.recDoc = append(w.recDoc, doc)
	w.recReceipt = append(w.recReceipt, receipt)
	for j, sub := range rec.SubjectIDs {
		if slices.Contains(rec.SubjectIDs[:j], sub) {
			continue
		}
		w.subID = append(w.subID, sub)
		w.subTenant = append(w.subTenant, rec.TenantID)
		w.subSeq = append(w.subSeq, rec.Audit.Seq)
		w.subTs = append(w.subTs, ts)
	}
	for _, t := range sqlkit.RecordTerms(rec) {
		w.termTerm = append(w.termTerm, t.Term)
		w.termValue = append(w.termValue, t.Value)
		w.termTenant = append(w.termTenant, rec.TenantID)
		w.termSeq = append(w.termSeq, rec.Audit.Seq)
		w.termTs = append(w.termTs, ts)
	}
	if c := e.Idempotency; c != nil {
		w.claimTenant = append(w.claimTenant, rec.TenantID)
		w.claimKey = append(w.claimKey, c.Key)
		w.claimArgs = append(w.claimArgs, c.ArgsDigest)
		w.claimRecord = append(w.claimRecord, rec.RecordID)
	}
	if c := e.Report; c != nil {
		w.reportTenant = append(w.reportTenant, rec.TenantID)
		w.reportDecision = append(w.reportDecision, c.DecisionID)
		w.reportDigest = append(w.reportDigest, c.ReportDigest)
		w.reportRecord = append(w.reportRecord, rec.RecordID)
	}
	return nil
}

// addApprovals adds the new approval requests of e and its approval
// event (whose Seq and RecordID the guard set).
func (w *rows) addApprovals(e *ledger.Entry) error {
	for _, a := range e.NewApprovals {
		r := a.Request
		doc, err := sqlkit.ApprovalJSON(r)
		if err != nil {
			return fmt.Errorf("postgres: approval %s of record %s: %w", r.ApprovalID, e.Record.RecordID, err)
		}
		w.apprTenant = append(w.apprTenant, r.TenantID)
		w.apprID = append(w.apprID, r.ApprovalID)
		w.apprGate = append(w.apprGate, r.GateID)
		w.apprKey = append(w.apprKey, r.Binding.DecisionKey)
		w.apprDigest = append(w.apprDigest, a.BindingDigest)
		w.apprRecord = append(w.apprRecord, r.RecordID)
		w.apprAllowance = append(w.apprAllowance, int64(r.Allowance))
		w.apprCreated = append(w.apprCreated, r.CreatedAt.UnixNano())
		w.apprExpires = append(w.apprExpires, r.ExpiresAt.UnixNano())
		w.apprDoc = append(w.apprDoc, doc)
	}
	if a := e.ApprovalEvent; a != nil {
		w.evTenant = append(w.evTenant, a.TenantID)
		w.evApproval = append(w.evApproval, a.ApprovalID)
		w.evSeq = append(w.evSeq, a.Event.Seq)
		w.evKind = append(w.evKind, a.Event.Kind)
		w.evActor = append(w.evActor, a.Event.Actor)
		w.evReason = append(w.evReason, a.Event.Reason)
		w.evRecord = append(w.evRecord, a.Event.RecordID)
		w.evAt = append(w.evAt, a.Event.At.UnixNano())
		if a.Event.Kind != writ.ApprovalEventRedeemed && !slices.Contains(w.floorTenant, a.TenantID) {
			w.floorTenant = append(w.floorTenant, a.TenantID)
			w.floorAt = append(w.floorAt, a.Event.At.UnixNano())
		}
	}
	return nil
}

// addShadow adds the shadow decision of e, as the decision of e's record.
func (w *rows) addShadow(e *ledger.Entry) error {
	d := e.Shadow
	if d == nil {
		return nil
	}
	d.RecordID = e.Record.RecordID
	detail, err := sqlkit.ShadowDetail(d)
	if err != nil {
		return fmt.Errorf("postgres: shadow decision of record %s: %w", d.RecordID, err)
	}
	w.shTenant = append(w.shTenant, e.Record.TenantID)
	w.shRecord = append(w.shRecord, d.RecordID)
	w.shKey = append(w.shKey, d.DecisionKey)
	w.shPack = append(w.shPack, d.Pack)
	w.shPackHash = append(w.shPackHash, d.PackHash)
	w.shAt = append(w.shAt, d.At.UnixNano())
	w.shEnforced = append(w.shEnforced, string(d.EnforcedOutcome))
	w.shOutcome = append(w.shOutcome, string(d.Outcome))
	w.shStatus = append(w.shStatus, string(d.Status))
	w.shDetail = append(w.shDetail, detail)
	return nil
}

func (w *rows) addRunEvent(ev *ledger.RunEvent) {
	data := ev.Data
	if data == nil {
		data = []byte("{}")
	}
	w.runTenant = append(w.runTenant, ev.TenantID)
	w.runID = append(w.runID, ev.RunID)
	w.runSeq = append(w.runSeq, ev.Seq)
	w.runKind = append(w.runKind, ev.Kind)
	w.runStep = append(w.runStep, ev.StepID)
	w.runRecord = append(w.runRecord, ev.RecordID)
	w.runAt = append(w.runAt, ev.At.UnixNano())
	w.runData = append(w.runData, []byte(data))
}

// batch returns the statements writing w, in an order the foreign keys
// accept (record_ids first).
func (w *rows) batch() *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO record_ids (record_id, tenant_id, seq, ts)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[])`,
		w.recID, w.recTenant, w.recSeq, w.recTs)
	b.Queue(`INSERT INTO records (tenant_id, seq, record_id, decision_id, decision_key, status, trace_id, ts, ts_ns,
			approval_mode_effective, raw, doc, receipt)
		SELECT t, s, id, d, k, st, tr, ts, ns, m, raw, doc::jsonb, rc
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::timestamptz[], $9::bigint[], $10::text[], $11::bytea[], $12::text[], $13::bytea[])
			AS u (t, s, id, d, k, st, tr, ts, ns, m, raw, doc, rc)`,
		w.recTenant, w.recSeq, w.recID, w.recDecisionID, w.recKey, w.recStatus, w.recTrace,
		w.recTs, w.recTsNs, w.recMode, w.recRaw, w.recDoc, w.recReceipt)
	if len(w.subID) > 0 {
		b.Queue(`INSERT INTO record_subjects (subject_id, tenant_id, seq, ts)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[])`,
			w.subID, w.subTenant, w.subSeq, w.subTs)
	}
	if len(w.termTerm) > 0 {
		b.Queue(`INSERT INTO record_terms (term, value, tenant_id, seq, ts)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[])`,
			w.termTerm, w.termValue, w.termTenant, w.termSeq, w.termTs)
	}
	if len(w.markSeq) > 0 {
		b.Queue(`INSERT INTO record_time_marks (tenant_id, seq, max_ts_ns)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])`,
			w.markTenant, w.markSeq, w.markMax)
	}
	if len(w.lowSeq) > 0 {
		b.Queue(`INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns)
			SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[])`,
			w.lowTenant, w.lowLevel, w.lowSeq, w.lowMin)
	}
	b.Queue(`INSERT INTO tree_hashes (tenant_id, idx, hash)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])`,
		w.hashTenant, w.hashIdx, w.hashVal)
	if len(w.claimKey) > 0 {
		b.Queue(`INSERT INTO idempotency (tenant_id, key, args_digest, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`,
			w.claimTenant, w.claimKey, w.claimArgs, w.claimRecord)
	}
	if len(w.reportDecision) > 0 {
		b.Queue(`INSERT INTO execution_reports (tenant_id, decision_id, report_digest, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`,
			w.reportTenant, w.reportDecision, w.reportDigest, w.reportRecord)
	}
	if len(w.blockKey) > 0 {
		// First record wins: a later block of the same action keeps the
		// first answer.
		b.Queue(`INSERT INTO blocks (tenant_id, decision_key, args_digest, pack_hash, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
			ON CONFLICT DO NOTHING`,
			w.blockTenant, w.blockKey, w.blockArgs, w.blockPack, w.blockRecord)
	}
	if len(w.envSeq) > 0 {
		b.Queue(`INSERT INTO envelopes (tenant_id, seq, hash, data)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[])`,
			w.envTenant, w.envSeq, w.envHash, w.envData)
	}
	if len(w.blobHash) > 0 {
		b.Queue(`INSERT INTO blobs (hash, kind, data)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[]) ORDER BY 1
			ON CONFLICT DO NOTHING`,
			w.blobHash, w.blobKind, w.blobData)
	}
	if len(w.runID) > 0 {
		b.Queue(`INSERT INTO run_events (tenant_id, run_id, seq, kind, step_id, record_id, at_ns, data)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bytea[])`,
			w.runTenant, w.runID, w.runSeq, w.runKind, w.runStep, w.runRecord, w.runAt, w.runData)
	}
	if len(w.apprID) > 0 {
		// In batch order, so positions follow it.
		b.Queue(`INSERT INTO approval_requests (tenant_id, approval_id, gate_id, decision_key, binding_digest, allowance, record_id,
				created_ns, expires_ns, request)
			SELECT t, id, g, k, d, al, r, c, x, doc
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[],
				$8::bigint[], $9::bigint[], $10::bytea[]) WITH ORDINALITY AS u (t, id, g, k, d, al, r, c, x, doc, n)
			ORDER BY n`,
			w.apprTenant, w.apprID, w.apprGate, w.apprKey, w.apprDigest, w.apprAllowance, w.apprRecord,
			w.apprCreated, w.apprExpires, w.apprDoc)
	}
	if len(w.evApproval) > 0 {
		b.Queue(`INSERT INTO approval_events (tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])`,
			w.evTenant, w.evApproval, w.evSeq, w.evKind, w.evActor, w.evReason, w.evRecord, w.evAt)
	}
	for i, t := range w.floorTenant {
		// After the batch's requests and events, in its transaction.
		b.Queue(raiseApprovalFloorQuery, t, w.floorAt[i])
	}
	if len(w.shRecord) > 0 {
		// In batch order, so positions follow it.
		b.Queue(`INSERT INTO shadow_decisions (tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail)
			SELECT t, r, k, p, h, a, eo, o, st, d
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::text[],
				$10::bytea[]) WITH ORDINALITY AS u (t, r, k, p, h, a, eo, o, st, d, n)
			ORDER BY n`,
			w.shTenant, w.shRecord, w.shKey, w.shPack, w.shPackHash, w.shAt, w.shEnforced, w.shOutcome, w.shStatus, w.shDetail)
	}
	if len(w.cvRef) > 0 {
		b.Queue(`INSERT INTO classified_values (tenant_id, ref, rule_id, classification, salt, value, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::bytea[], $7::text[])`,
			w.cvTenant, w.cvRef, w.cvRule, w.cvClass, w.cvSalt, w.cvValue, w.cvRecord)
	}
	if len(w.csRef) > 0 {
		b.Queue(`INSERT INTO classified_subjects (tenant_id, subject_id, ref)
			SELECT t, s, r FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u (t, s, r, n) ORDER BY n`,
			w.csTenant, w.csSubject, w.csRef)
	}
	if len(w.erRef) > 0 {
		// After the inserts: an erasure deletes what was stored before it.
		b.Queue(`DELETE FROM classified_values c USING unnest($1::text[], $2::text[]) AS u (tenant_id, ref)
			WHERE c.tenant_id = u.tenant_id AND c.ref = u.ref`, w.erTenant, w.erRef)
	}
	b.Queue(`UPDATE heads h SET seq = u.seq, hash = u.hash
		FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u (tenant_id, seq, hash)
		WHERE h.tenant_id = u.tenant_id`,
		w.headTenant, w.headSeq, w.headHash)
	return b
}

// jsonbText returns the sealed record as text for its jsonb copy. jsonb
// cannot hold U+0000, so a record with one in a string (legal JSON, and
// kept as it is in raw) gets U+FFFD in its query copy instead.
func jsonbText(raw []byte) (string, error) {
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return string(raw), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(stripNUL(v))
	return string(b), err
}

func stripNUL(v any) any {
	switch v := v.(type) {
	case string:
		return strings.ReplaceAll(v, "\x00", "\uFFFD")
	case []any:
		for i := range v {
			v[i] = stripNUL(v[i])
		}
		return v
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[strings.ReplaceAll(k, "\x00", "\uFFFD")] = stripNUL(x)
		}
		return m
	}
	return v
}

// PutBlobs stores blobs content-addressed (insert if absent) in one
// durable transaction.
func (s *Store) PutBlobs(ctx context.Context, blobs []ledger.Blob) error {
	if len(blobs) == 0 {
		return nil
	}
	if err := ledger.CheckBlobs(blobs); err != nil {
		return err
	}
	var hashes, kinds []string
	var data [][]byte
	seen := map[string]bool{}
	for _, b := range blobs {
		if !seen[b.Hash] {
			seen[b.Hash] = true
			hashes, kinds, data = append(hashes, b.Hash), append(kinds, b.Kind), append(data, b.Data)
		}
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO blobs (hash, kind, data)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[]) ORDER BY 1
		ON CONFLICT DO NOTHING`, hashes, kinds, data); err != nil {
		return fmt.Errorf("postgres: put blobs: %w", err)
	}
	return nil
}

// scanClaims reads rows of (tenant, key, digest, record id, receipt) into
// claims: the first answers under idempotency keys, or decisions' reports.
func scanClaims(claims map[claimKey]*ledger.Prior) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			var k claimKey
			var p ledger.Prior
			if err := rows.Scan(&k.tenant, &k.key, &p.ArgsDigest, &p.RecordID, &p.Receipt); err != nil {
				return err
			}
			claims[k] = &p
		}
		return rows.Err()
	}
}

// ProbeWrite commits a write that changes nothing the ledger holds (the
// write_probe row), as an append would: it tells whether the database
// takes writes now, where a read cannot (a standby that was not
// promoted, a database refusing writes). GET /readyz calls it after a
// group commit failed.
func (s *Store) ProbeWrite(ctx context.Context, now time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO write_probe (id, at_ns) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET at_ns = excluded.at_ns`, now.UnixNano())
	if err != nil {
		return fmt.Errorf("postgres: write probe: %w", err)
	}
	return nil
}
