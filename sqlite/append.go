package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// writeStmts are the statements of an append transaction: prepared on
// the write connection, or bound to one transaction.
type writeStmts struct {
	claim, head, treeRead, runSeq, approvalTally                        *sql.Stmt
	record, subject, idempotency, block, blob, move, treeHash, runEvent *sql.Stmt
	envelope, term                                                      *sql.Stmt
	approval, approvalEvent, shadow                                     *sql.Stmt
	reportClaim, report                                                 *sql.Stmt
	lastTimeMark, timeMark                                              *sql.Stmt
	recordsMinTime, lowsMinTime, timeLow                                *sql.Stmt
	approvalFloor, nextApprovalFloor, addApprovalFloor                  *sql.Stmt
	classified, classifiedSubject, erase                                *sql.Stmt
}

func (w *writeStmts) prepare(db *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&w.claim, `SELECT i.args_digest, i.record_id, r.receipt FROM idempotency i
			JOIN records r ON r.record_id = i.record_id AND r.tenant_id = i.tenant_id
			WHERE i.tenant_id = ? AND i.key = ?`},
		{&w.head, `SELECT seq, hash FROM heads WHERE tenant_id = ?`},
		{&w.reportClaim, reportQuery},
		{&w.report, `INSERT INTO execution_reports (tenant_id, decision_id, report_digest, record_id) VALUES (?, ?, ?, ?)`},
		{&w.record, `INSERT INTO records (tenant_id, seq, record_id, decision_id, decision_key, status, trace_id, ts, approval_mode, raw, receipt)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&w.approvalFloor, `SELECT coalesce(max(pos), 0) FROM approval_floors WHERE tenant_id = ?`},
		{&w.nextApprovalFloor, nextApprovalFloorQuery},
		{&w.addApprovalFloor, `INSERT INTO approval_floors (tenant_id, pos, at_ns) VALUES (?, ?, ?)`},
		{&w.lastTimeMark, `SELECT max_ts FROM record_time_marks WHERE tenant_id = ? ORDER BY max_ts DESC LIMIT 1`},
		{&w.timeMark, `INSERT INTO record_time_marks (tenant_id, max_ts, seq) VALUES (?, ?, ?)`},
		{&w.recordsMinTime, `SELECT min(ts) FROM records WHERE tenant_id = ? AND seq > ? AND seq <= ?`},
		{&w.lowsMinTime, `SELECT min(min_ts) FROM record_time_lows WHERE tenant_id = ? AND level = ? AND seq > ? AND seq <= ?`},
		{&w.timeLow, `INSERT INTO record_time_lows (tenant_id, level, seq, min_ts) VALUES (?, ?, ?, ?)`},
		{&w.subject, `INSERT INTO record_subjects (tenant_id, subject_id, seq) VALUES (?, ?, ?)`},
		{&w.term, `INSERT INTO record_terms (tenant_id, term, value, seq) VALUES (?, ?, ?, ?)`},
		{&w.idempotency, `INSERT INTO idempotency (tenant_id, key, args_digest, record_id) VALUES (?, ?, ?, ?)`},
		// First record wins: a later block of the same action keeps the
		// first answer.
		{&w.block, `INSERT INTO blocks (tenant_id, decision_key, args_digest, pack_hash, record_id) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`},
		{&w.blob, `INSERT INTO blobs (hash, kind, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`},
		{&w.envelope, `INSERT INTO envelopes (tenant_id, seq, hash, data) VALUES (?, ?, ?, ?)`},
		{&w.move, `INSERT INTO heads (tenant_id, seq, hash) VALUES (?, ?, ?)
			ON CONFLICT (tenant_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`},
		{&w.treeRead, `SELECT hash FROM tree_hashes WHERE tenant_id = ? AND idx = ?`},
		{&w.treeHash, `INSERT INTO tree_hashes (tenant_id, idx, hash) VALUES (?, ?, ?)`},
		{&w.runSeq, `SELECT coalesce(max(seq), 0) FROM run_events WHERE tenant_id = ? AND run_id = ?`},
		{&w.runEvent, `INSERT INTO run_events (tenant_id, run_id, seq, kind, step_id, record_id, at_ns, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		{&w.approvalTally, `SELECT a.allowance,
			coalesce((SELECT e.kind FROM approval_events e WHERE e.tenant_id = a.tenant_id AND e.approval_id = a.approval_id
				AND e.kind IN ('approved', 'denied', 'withdrawn') ORDER BY e.seq DESC LIMIT 1), ''),
			(SELECT count(*) FROM approval_events e WHERE e.tenant_id = a.tenant_id AND e.approval_id = a.approval_id AND e.kind = 'redeemed'),
			(SELECT coalesce(max(e.seq), 0) FROM approval_events e WHERE e.tenant_id = a.tenant_id AND e.approval_id = a.approval_id)
			FROM approval_requests a WHERE a.tenant_id = ? AND a.approval_id = ?`},
		{&w.approval, `INSERT INTO approval_requests (tenant_id, approval_id, gate_id, decision_key, binding_digest, allowance, record_id, created_ns, expires_ns, request)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&w.approvalEvent, `INSERT INTO approval_events (tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		{&w.classified, `INSERT INTO classified_values (tenant_id, ref, rule_id, classification, salt, value, record_id) VALUES (?, ?, ?, ?, ?, ?, ?)`},
		{&w.classifiedSubject, `INSERT INTO classified_subjects (tenant_id, subject_id, ref) VALUES (?, ?, ?)`},
		{&w.erase, `DELETE FROM classified_values WHERE tenant_id = ? AND ref = ?`},
		{&w.shadow, `INSERT INTO shadow_decisions (tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
	} {
		st, err := db.Prepare(p.sql)
		if err != nil {
			w.close()
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		*p.stmt = st
	}
	return nil
}

func (w *writeStmts) close() {
	for _, st := range []*sql.Stmt{w.claim, w.head, w.record, w.subject, w.term, w.idempotency, w.block, w.blob, w.envelope, w.move, w.treeRead, w.treeHash, w.runSeq, w.runEvent,
		w.approvalTally, w.approval, w.approvalEvent, w.shadow, w.reportClaim, w.report, w.lastTimeMark, w.timeMark,
		w.recordsMinTime, w.lowsMinTime, w.timeLow, w.approvalFloor, w.nextApprovalFloor, w.addApprovalFloor, w.classified, w.classifiedSubject, w.erase} {
		if st != nil {
			st.Close()
		}
	}
}

type approvalKey struct{ tenant, id string }

// Append seals and writes entries in one transaction, as ledger.Store
// specifies. Entries' Raw, Prior and Refused are set only once the
// transaction has committed; an appended approval event's Seq and
// RecordID are set while it runs.
//
// The single write connection keeps every other append out of the
// transaction, in its phases: settle the batch (ledger.Settle, reading
// through settleReads), read the heads of the appended entries' tenants
// (cachedHead), seal, write the entries (writeEntries) and what each
// tenant's chain gains (writeTenants), commit, and only then remember
// the new heads and tree hashes (remember).
func (s *Store) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) (err error) {
	if len(entries) == 0 {
		return nil
	}
	if err := ledger.ValidateBatch(entries); err != nil {
		return err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ledger.ErrClosed
	}
	defer s.explain(&err)
	// heads holds the batch's heads; it reaches s.heads only after the
	// commit.
	heads := make(map[string]ledger.Head)
	defer func() {
		if err != nil {
			// The failure may come from the database disagreeing with
			// the cache (another writer, say): read the heads afresh
			// next time.
			for t := range heads {
				delete(s.heads, t)
			}
		}
	}()

	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin append: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	st := s.stmts.bind(ctx, tx)
	defer st.close()
	hist := s.histTx(ctx, tx)
	defer hist.close()

	settled, err := ledger.Settle(ctx, entries, settleReads{st, hist})
	if err != nil {
		return err
	}
	todo := settled.Appended
	for _, i := range todo {
		t := entries[i].Record.TenantID
		if _, ok := heads[t]; !ok {
			if heads[t], err = s.cachedHead(ctx, st.head, t); err != nil {
				return err
			}
		}
	}
	// Seal the batch: its chain in order, the signatures in parallel.
	raws, err := ledger.SealBatch(seal, heads, entries, todo)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	written, err := st.writeEntries(ctx, hist, entries, settled, raws, s.recent)
	if err != nil {
		return err
	}
	if err := st.writeTenants(ctx, heads, entries, todo); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit append: %w", err)
	}
	s.ckpt.committed()
	s.remember(heads, written)
	settled.Answer(entries, raws)
	return nil
}

// settleReads are ledger.Settle's reads in an append transaction, on
// demand: the single writer keeps every other append out meanwhile.
type settleReads struct {
	st   *writeStmts
	hist *histTx
}

func (r settleReads) Report(ctx context.Context, tenantID, decisionID string) (*ledger.Prior, error) {
	p, err := scanPrior(r.st.reportClaim.QueryRowContext(ctx, tenantID, decisionID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: read execution report: %w", err)
	}
	return p, nil
}

func (r settleReads) Claim(ctx context.Context, tenantID, key string) (*ledger.Prior, error) {
	return r.st.claimed(ctx, tenantID, key)
}

func (r settleReads) HistoryValues(ctx context.Context, _ int, e *ledger.Entry) ([]float64, error) {
	return r.hist.values(ctx, e)
}

func (r settleReads) Pending(ctx context.Context, tenantID, decisionID string) ([]ledger.Contribution, error) {
	return r.hist.pending(ctx, tenantID, decisionID)
}

func (r settleReads) Tally(ctx context.Context, tenantID, approvalID string) (*ledger.ApprovalTally, error) {
	return r.st.tally(ctx, approvalKey{tenantID, approvalID})
}

// writeEntries writes the sealed entries settled.Appended (raws[i] the
// bytes of entry i) with everything that travels with them, their
// history contributions and their tree hashes, and returns the tree
// hashes it wrote, by tenant. recent holds the tree hashes committed with
// each tenant's last records (see recentTree).
func (w *writeStmts) writeEntries(ctx context.Context, hist *histTx, entries []*ledger.Entry, settled *ledger.Settlement, raws [][]byte, recent map[string]map[int64]tlog.Hash) (map[string]map[int64]tlog.Hash, error) {
	// Tree hashes written earlier in this transaction, by tenant: the
	// hashes of a record depend on those of the records before it.
	written := make(map[string]map[int64]tlog.Hash)
	for _, i := range settled.Appended {
		e := entries[i]
		rec := e.Record
		if err := w.insert(ctx, e, raws[i]); err != nil {
			return nil, err
		}
		if err := hist.insert(ctx, e, settled.Executed[i]); err != nil {
			return nil, err
		}
		if written[rec.TenantID] == nil {
			written[rec.TenantID] = make(map[int64]tlog.Hash)
		}
		if err := w.addTreeHashes(ctx, rec.TenantID, rec.Audit.Seq, raws[i], written[rec.TenantID], recent[rec.TenantID]); err != nil {
			return nil, err
		}
	}
	return written, nil
}

// writeTenants writes what the appended entries todo add to each
// tenant's chain as a whole: its time marks and time lows, its approval
// floor, and its new head.
func (w *writeStmts) writeTenants(ctx context.Context, heads map[string]ledger.Head, entries []*ledger.Entry, todo []int) error {
	if err := w.addTimeMarks(ctx, heads, entries, todo); err != nil {
		return err
	}
	if err := w.addTimeLows(ctx, entries, todo); err != nil {
		return err
	}
	if err := w.raiseApprovalFloors(ctx, entries, todo); err != nil {
		return err
	}
	for t, h := range heads {
		if _, err := w.move.ExecContext(ctx, t, h.Seq, h.Hash); err != nil {
			return fmt.Errorf("sqlite: advance head of tenant %s: %w", t, err)
		}
	}
	return nil
}

// remember keeps the heads and tree hashes an append committed, for the
// next appends. The caller holds s.mu.
func (s *Store) remember(heads map[string]ledger.Head, written map[string]map[int64]tlog.Hash) {
	for t, h := range heads {
		s.heads[t] = h
	}
	for t, hs := range written {
		if _, ok := s.recent[t]; !ok && len(s.recent) >= maxRecentTenants {
			for other := range s.recent { // any one: a miss costs reads, not correctness
				delete(s.recent, other)
				break
			}
		}
		s.recent[t] = recentTree(s.recent[t], hs, heads[t].Seq)
	}
}

// insert writes one sealed entry: its record and receipt, its subjects,
// its idempotency claim, its block, its envelope and blobs, its run event, its
// approval requests and event, and its shadow decision.
func (w *writeStmts) insert(ctx context.Context, e *ledger.Entry, raw []byte) error {
	rec := e.Record
	tenant, seq := rec.TenantID, rec.Audit.Seq
	receipt := e.Receipt
	if receipt == nil {
		receipt = []byte{}
	}
	if _, err := w.record.ExecContext(ctx, tenant, seq, rec.RecordID, rec.DecisionID, rec.DecisionKey,
		string(rec.Status), rec.TraceID, rec.Timestamp.UnixNano(), string(rec.ApprovalModeEffective), raw, receipt); err != nil {
		return fmt.Errorf("sqlite: insert record %s: %w", rec.RecordID, err)
	}
	for j, sub := range rec.SubjectIDs {
		if slices.Contains(rec.SubjectIDs[:j], sub) {
			continue
		}
		if _, err := w.subject.ExecContext(ctx, tenant, sub, seq); err != nil {
			return fmt.Errorf("sqlite: insert subject of record %s: %w", rec.RecordID, err)
		}
	}
	for _, t := range sqlkit.RecordTerms(rec) {
		if _, err := w.term.ExecContext(ctx, tenant, t.Term, t.Value, seq); err != nil {
			return fmt.Errorf("sqlite: insert %s of record %s: %w", t.Term, rec.RecordID, err)
		}
	}
	if c := e.Idempotency; c != nil {
		if _, err := w.idempotency.ExecContext(ctx, tenant, c.Key, c.ArgsDigest, rec.RecordID); err != nil {
			return fmt.Errorf("sqlite: claim idempotency key of record %s: %w", rec.RecordID, err)
		}
	}
	if c := e.Report; c != nil {
		if _, err := w.report.ExecContext(ctx, tenant, c.DecisionID, c.ReportDigest, rec.RecordID); err != nil {
			return fmt.Errorf("sqlite: claim the execution report of decision %s with record %s: %w", c.DecisionID, rec.RecordID, err)
		}
	}
	if b := e.Block; b != nil {
		if _, err := w.block.ExecContext(ctx, tenant, b.DecisionKey, b.ArgsDigest, b.PackHash, rec.RecordID); err != nil {
			return fmt.Errorf("sqlite: block of record %s: %w", rec.RecordID, err)
		}
	}
	if e.Envelope != nil {
		if _, err := w.envelope.ExecContext(ctx, tenant, seq, rec.Replay.ReplayPacketID, e.Envelope); err != nil {
			return fmt.Errorf("sqlite: envelope of record %s: %w", rec.RecordID, err)
		}
	}
	for _, b := range e.Blobs {
		if _, err := w.blob.ExecContext(ctx, b.Hash, b.Kind, b.Data); err != nil {
			return fmt.Errorf("sqlite: blob %s of record %s: %w", b.Hash, rec.RecordID, err)
		}
	}
	if ev := e.RunEvent; ev != nil {
		ev.RecordID = rec.RecordID
		if err := w.appendRunEvent(ctx, ev); err != nil {
			return err
		}
	}
	for _, a := range e.NewApprovals {
		r := a.Request
		doc, err := sqlkit.ApprovalJSON(r)
		if err != nil {
			return fmt.Errorf("sqlite: approval %s of record %s: %w", r.ApprovalID, rec.RecordID, err)
		}
		if _, err := w.approval.ExecContext(ctx, tenant, r.ApprovalID, r.GateID, r.Binding.DecisionKey, a.BindingDigest, r.Allowance,
			r.RecordID, r.CreatedAt.UnixNano(), r.ExpiresAt.UnixNano(), doc); err != nil {
			return fmt.Errorf("sqlite: insert approval %s of record %s: %w", r.ApprovalID, rec.RecordID, err)
		}
	}
	if a := e.ApprovalEvent; a != nil {
		ev := a.Event
		if _, err := w.approvalEvent.ExecContext(ctx, a.TenantID, a.ApprovalID, ev.Seq, ev.Kind, ev.Actor, ev.Reason, ev.RecordID, ev.At.UnixNano()); err != nil {
			return fmt.Errorf("sqlite: append event of approval %s with record %s: %w", a.ApprovalID, rec.RecordID, err)
		}
	}
	if d := e.Shadow; d != nil {
		d.RecordID = rec.RecordID
		detail, err := sqlkit.ShadowDetail(d)
		if err != nil {
			return fmt.Errorf("sqlite: shadow decision of record %s: %w", rec.RecordID, err)
		}
		if _, err := w.shadow.ExecContext(ctx, tenant, d.RecordID, d.DecisionKey, d.Pack, d.PackHash, d.At.UnixNano(),
			string(d.EnforcedOutcome), string(d.Outcome), string(d.Status), detail); err != nil {
			return fmt.Errorf("sqlite: insert shadow decision of record %s: %w", rec.RecordID, err)
		}
	}
	for i := range e.Classified {
		v := &e.Classified[i]
		v.RecordID = rec.RecordID
		if _, err := w.classified.ExecContext(ctx, tenant, v.Ref, v.Rule, v.Classification, v.Salt, v.Value, rec.RecordID); err != nil {
			return fmt.Errorf("sqlite: insert classified value of record %s: %w", rec.RecordID, err)
		}
		for j, sub := range v.SubjectIDs {
			if slices.Contains(v.SubjectIDs[:j], sub) {
				continue
			}
			if _, err := w.classifiedSubject.ExecContext(ctx, tenant, sub, v.Ref); err != nil {
				return fmt.Errorf("sqlite: insert subject of classified value of record %s: %w", rec.RecordID, err)
			}
		}
	}
	if x := e.Erasure; x != nil {
		for _, ref := range x.Refs {
			if _, err := w.erase.ExecContext(ctx, tenant, ref); err != nil {
				return fmt.Errorf("sqlite: erase classified value with record %s: %w", rec.RecordID, err)
			}
		}
	}
	return nil
}

// addTimeMarks writes the time marks of the appended entries todo
// (ledger.TimeMarker), on top of each tenant's last mark.
func (w *writeStmts) addTimeMarks(ctx context.Context, heads map[string]ledger.Head, entries []*ledger.Entry, todo []int) error {
	prior := make(map[string]int64, len(heads))
	for t := range heads {
		var m int64
		switch err := w.lastTimeMark.QueryRowContext(ctx, t).Scan(&m); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("sqlite: read the time mark of tenant %s: %w", t, err)
		default:
			prior[t] = m
		}
	}
	marker := ledger.NewTimeMarker(prior)
	for _, i := range todo {
		rec := entries[i].Record
		marker.Add(rec.TenantID, rec.Audit.Seq, rec.Timestamp.UnixNano())
	}
	for _, m := range marker.Marks() {
		if _, err := w.timeMark.ExecContext(ctx, m.TenantID, m.MaxNanos, m.Seq); err != nil {
			return fmt.Errorf("sqlite: time mark of tenant %s at %d: %w", m.TenantID, m.Seq, err)
		}
	}
	return nil
}

// addTimeLows writes the time lows (ledger.TimeLows) of the blocks the
// appended entries todo complete, after their records.
func (w *writeStmts) addTimeLows(ctx context.Context, entries []*ledger.Entry, todo []int) error {
	type run struct {
		prior int64
		times []int64
	}
	runs := map[string]*run{}
	var tenants []string
	for _, i := range todo {
		rec := entries[i].Record
		r := runs[rec.TenantID]
		if r == nil {
			r = &run{prior: rec.Audit.Seq - 1}
			runs[rec.TenantID] = r
			tenants = append(tenants, rec.TenantID)
		}
		if rec.Audit.Seq != r.prior+int64(len(r.times))+1 {
			return fmt.Errorf("sqlite: time lows of tenant %s: seq %d follows %d", rec.TenantID, rec.Audit.Seq, r.prior+int64(len(r.times)))
		}
		r.times = append(r.times, rec.Timestamp.UnixNano())
	}
	for _, t := range tenants {
		r := runs[t]
		lows, err := ledger.TimeLows(t, r.prior, r.times, func(level int, lo, hi int64) (int64, bool, error) {
			var m sql.NullInt64
			var err error
			if level == 0 {
				err = w.recordsMinTime.QueryRowContext(ctx, t, lo, hi).Scan(&m)
			} else {
				err = w.lowsMinTime.QueryRowContext(ctx, t, level, lo, hi).Scan(&m)
			}
			return m.Int64, m.Valid, err
		})
		if err != nil {
			return fmt.Errorf("sqlite: time lows of tenant %s: %w", t, err)
		}
		for _, l := range lows {
			if _, err := w.timeLow.ExecContext(ctx, l.TenantID, l.Level, l.Seq, l.MinNanos); err != nil {
				return fmt.Errorf("sqlite: time low of tenant %s at %d: %w", l.TenantID, l.Seq, err)
			}
		}
	}
	return nil
}

// nextApprovalFloorQuery selects where a tenant's approval floor (see
// migration 0020) may rise to: just before its first request after the
// last floor that is undecided and unexpired at a time, or, with none,
// its last request. The arguments are the tenant, the last floor and the
// time (Unix nanoseconds).
const nextApprovalFloorQuery = `SELECT coalesce(
	(SELECT a.pos - 1 FROM approval_requests a WHERE a.tenant_id = ?1 AND a.pos > ?2 AND a.expires_ns > ?3 AND ` + undecided + `
		ORDER BY a.pos LIMIT 1),
	(SELECT max(pos) FROM approval_requests WHERE tenant_id = ?1), 0)`

// raiseApprovalFloors writes a new approval floor for each tenant whose
// requests the entries todo decide, when it rose, as of the time of the
// tenant's first decision among them (the engine's clock, as the requests'
// expiries are).
func (w *writeStmts) raiseApprovalFloors(ctx context.Context, entries []*ledger.Entry, todo []int) error {
	seen := map[string]bool{}
	for _, i := range todo {
		ev := entries[i].ApprovalEvent
		if ev == nil || ev.Event.Kind == writ.ApprovalEventRedeemed || seen[ev.TenantID] {
			continue
		}
		seen[ev.TenantID] = true
		var last, next int64
		if err := w.approvalFloor.QueryRowContext(ctx, ev.TenantID).Scan(&last); err != nil {
			return fmt.Errorf("sqlite: read the approval floor of tenant %s: %w", ev.TenantID, err)
		}
		at := ledger.UnixNanos(ev.Event.At)
		if err := w.nextApprovalFloor.QueryRowContext(ctx, ev.TenantID, last, at).Scan(&next); err != nil {
			return fmt.Errorf("sqlite: raise the approval floor of tenant %s: %w", ev.TenantID, err)
		}
		if next > last {
			if _, err := w.addApprovalFloor.ExecContext(ctx, ev.TenantID, next, at); err != nil {
				return fmt.Errorf("sqlite: raise the approval floor of tenant %s: %w", ev.TenantID, err)
			}
		}
	}
	return nil
}

// tally reads what the guard of an event of the approval request
// k needs, or nil if the tenant has no such request.
func (w *writeStmts) tally(ctx context.Context, k approvalKey) (*ledger.ApprovalTally, error) {
	var t ledger.ApprovalTally
	err := w.approvalTally.QueryRowContext(ctx, k.tenant, k.id).Scan(&t.Allowance, &t.Decision, &t.Redeemed, &t.LastSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read approval %s: %w", k.id, err)
	}
	return &t, nil
}

// appendRunEvent appends ev after its run's last event (the transaction
// sees the events appended earlier in it).
func (w *writeStmts) appendRunEvent(ctx context.Context, ev *ledger.RunEvent) error {
	var last int64
	if err := w.runSeq.QueryRowContext(ctx, ev.TenantID, ev.RunID).Scan(&last); err != nil {
		return fmt.Errorf("sqlite: run %s: %w", ev.RunID, err)
	}
	ev.Seq = last + 1
	data := ev.Data
	if data == nil {
		data = []byte("{}")
	}
	if _, err := w.runEvent.ExecContext(ctx, ev.TenantID, ev.RunID, ev.Seq, ev.Kind, ev.StepID, ev.RecordID, ev.At.UnixNano(), []byte(data)); err != nil {
		return fmt.Errorf("sqlite: append event of run %s: %w", ev.RunID, err)
	}
	return nil
}

// addTreeHashes stores the tree hashes of the record at seq; written
// holds the tenant's hashes stored earlier in the same transaction, and
// recent those committed with its last records (see recentTree).
func (w *writeStmts) addTreeHashes(ctx context.Context, tenant string, seq int64, raw []byte, written, recent map[int64]tlog.Hash) error {
	read := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for k, idx := range indexes {
			if h, ok := written[idx]; ok {
				out[k] = h
				continue
			}
			if h, ok := recent[idx]; ok {
				out[k] = h
				continue
			}
			var b []byte
			if err := w.treeRead.QueryRowContext(ctx, tenant, idx).Scan(&b); err != nil {
				return nil, fmt.Errorf("sqlite: tree hash %d of tenant %s: %w", idx, tenant, err)
			}
			copy(out[k][:], b)
		}
		return out, nil
	})
	first, hashes, err := ledger.TreeHashes(seq, raw, read)
	if err != nil {
		return err
	}
	for k, h := range hashes {
		idx := first + int64(k)
		if _, err := w.treeHash.ExecContext(ctx, tenant, idx, h[:]); err != nil {
			return fmt.Errorf("sqlite: store tree hash %d of tenant %s: %w", idx, tenant, err)
		}
		written[idx] = h
	}
	return nil
}

// recentRecords is how many of a tenant's last records the store keeps
// the tree hashes of. Appending record n reads the root of the subtree
// left of it at each level its position completes; the one at level i was
// stored about 2^i records earlier, so keeping 32 records' hashes answers
// every read but those of levels 5 and up, one append in 32. At most
// maxRecentTenants tenants' are kept (about 2 KB each).
const (
	recentRecords    = 32
	maxRecentTenants = 1024
)

// recentTree adds the tree hashes a transaction committed to a tenant's
// recent ones (both may be nil) and drops those stored before its last
// recentRecords records, now that its head is at seq. Stored hashes never
// change, so whatever is kept stays right; only committed ones are added.
func recentTree(recent, committed map[int64]tlog.Hash, seq int64) map[int64]tlog.Hash {
	if recent == nil {
		recent = make(map[int64]tlog.Hash, 2*recentRecords+8)
	}
	for idx, h := range committed {
		recent[idx] = h
	}
	if seq > recentRecords {
		oldest := tlog.StoredHashIndex(0, seq-1-recentRecords)
		for idx := range recent {
			if idx < oldest {
				delete(recent, idx)
			}
		}
	}
	return recent
}

// cachedHead returns a tenant's durable head, reading it once from the
// database. The caller holds s.mu.
func (s *Store) cachedHead(ctx context.Context, q *sql.Stmt, tenant string) (ledger.Head, error) {
	if h, ok := s.heads[tenant]; ok {
		return h, nil
	}
	var h ledger.Head
	err := q.QueryRowContext(ctx, tenant).Scan(&h.Seq, &h.Hash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return ledger.Head{}, fmt.Errorf("sqlite: read head of tenant %s: %w", tenant, err)
	}
	s.heads[tenant] = h
	return h, nil
}

// bind returns the statements bound to tx. The write pool has one
// connection, so binding reuses the statements prepared on it.
func (w *writeStmts) bind(ctx context.Context, tx *sql.Tx) *writeStmts {
	return &writeStmts{
		claim:       tx.StmtContext(ctx, w.claim),
		head:        tx.StmtContext(ctx, w.head),
		record:      tx.StmtContext(ctx, w.record),
		subject:     tx.StmtContext(ctx, w.subject),
		term:        tx.StmtContext(ctx, w.term),
		idempotency: tx.StmtContext(ctx, w.idempotency),
		block:       tx.StmtContext(ctx, w.block),
		blob:        tx.StmtContext(ctx, w.blob),
		envelope:    tx.StmtContext(ctx, w.envelope),
		move:        tx.StmtContext(ctx, w.move),
		treeRead:    tx.StmtContext(ctx, w.treeRead),
		treeHash:    tx.StmtContext(ctx, w.treeHash),
		runSeq:      tx.StmtContext(ctx, w.runSeq),
		runEvent:    tx.StmtContext(ctx, w.runEvent),

		approvalTally:     tx.StmtContext(ctx, w.approvalTally),
		approval:          tx.StmtContext(ctx, w.approval),
		approvalEvent:     tx.StmtContext(ctx, w.approvalEvent),
		shadow:            tx.StmtContext(ctx, w.shadow),
		reportClaim:       tx.StmtContext(ctx, w.reportClaim),
		report:            tx.StmtContext(ctx, w.report),
		lastTimeMark:      tx.StmtContext(ctx, w.lastTimeMark),
		approvalFloor:     tx.StmtContext(ctx, w.approvalFloor),
		nextApprovalFloor: tx.StmtContext(ctx, w.nextApprovalFloor),
		addApprovalFloor:  tx.StmtContext(ctx, w.addApprovalFloor),
		timeMark:          tx.StmtContext(ctx, w.timeMark),
		recordsMinTime:    tx.StmtContext(ctx, w.recordsMinTime),
		lowsMinTime:       tx.StmtContext(ctx, w.lowsMinTime),
		timeLow:           tx.StmtContext(ctx, w.timeLow),

		classified:        tx.StmtContext(ctx, w.classified),
		classifiedSubject: tx.StmtContext(ctx, w.classifiedSubject),
		erase:             tx.StmtContext(ctx, w.erase),
	}
}

// claimed returns the first answer under an idempotency key, or nil.
func (t *writeStmts) claimed(ctx context.Context, tenant, key string) (*ledger.Prior, error) {
	var p ledger.Prior
	err := t.claim.QueryRowContext(ctx, tenant, key).Scan(&p.ArgsDigest, &p.RecordID, &p.Receipt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: read idempotency key: %w", err)
	}
	return &p, nil
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
	return s.writeTx(ctx, "put blobs", func(tx *sql.Tx) error {
		st := tx.StmtContext(ctx, s.stmts.blob)
		defer st.Close()
		for _, b := range blobs {
			if _, err := st.ExecContext(ctx, b.Hash, b.Kind, b.Data); err != nil {
				return fmt.Errorf("sqlite: put blob %s: %w", b.Hash, err)
			}
		}
		return nil
	})
}

// ProbeWrite commits a write that changes nothing the ledger holds (the
// write_probe row, 256 KiB: about a batch of checks), durably, as an
// append would: it tells whether the store can commit now, where a read
// cannot (a full disk, a read-only data directory). GET /readyz calls it
// after a group commit failed.
func (s *Store) ProbeWrite(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ledger.ErrClosed
	}
	return s.writeTx(ctx, "write probe", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO write_probe (id, at_ns, fill) VALUES (1, ?, randomblob(262144))
			ON CONFLICT (id) DO UPDATE SET at_ns = excluded.at_ns, fill = excluded.fill`, now.UnixNano()); err != nil {
			return fmt.Errorf("sqlite: write probe: %w", err)
		}
		return nil
	})
}

// writeTx runs fn in a transaction on the write connection and commits
// it, or rolls it back if fn fails; what names the transaction in its
// errors. A failed write is explained (see explain).
func (s *Store) writeTx(ctx context.Context, what string, fn func(*sql.Tx) error) (err error) {
	defer s.explain(&err)
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin %s: %w", what, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit %s: %w", what, err)
	}
	return nil
}
