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
	"github.com/writhq/writ/ledger"
)

// maxAttempts bounds how often Append runs a batch whose transaction the
// database aborted for a deadlock or a serialization failure: nothing of it
// is durable then, so it is simply run again.
const maxAttempts = 3

// Append seals and writes entries in one transaction, as ledger.Store
// specifies. Entries' Raw and Prior are set only once the transaction has
// committed.
//
// The transaction first locks the chain heads of the batch's tenants, in
// tenant order (creating a head at seq 0 for a new tenant), then reads the
// idempotency claims: with the heads locked, no other server can claim a
// key of those tenants or move their chains until this one commits.
func (s *Store) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	if len(entries) == 0 {
		return nil
	}
	ids := make(map[string]bool, len(entries))
	for i, e := range entries {
		if err := ledger.ValidateEntry(i, e); err != nil {
			return err
		}
		if ids[e.Record.RecordID] {
			return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("ledger entry %d: record %s appears twice in the batch", i, e.Record.RecordID)}
		}
		ids[e.Record.RecordID] = true
	}
	if s.closed.Load() {
		return ledger.ErrClosed
	}
	for attempt := 1; ; attempt++ {
		raws, priors, err := s.appendTx(ctx, entries, seal)
		if err != nil {
			if code := pgCode(err); attempt < maxAttempts && (code == "40P01" || code == "40001") {
				continue
			}
			return err
		}
		for i, e := range entries {
			e.Raw, e.Prior = raws[i], priors[i]
		}
		return nil
	}
}

type claimKey struct{ tenant, key string }

type runKey struct{ tenant, run string }

type blockKey struct {
	tenant string
	key    ledger.BlockKey
}

// appendTx runs one attempt of Append and returns, per entry, the sealed
// bytes or the prior answer.
func (s *Store) appendTx(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) (raws [][]byte, priors []*ledger.Prior, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: begin append: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback(context.WithoutCancel(ctx))
		}
	}()

	// Lock the heads, then read the claims (the batch runs its statements
	// in order, in one round trip).
	var tenants []string
	var claimTenants, claimKeys []string
	seenClaim := map[claimKey]bool{}
	for _, e := range entries {
		tenants = append(tenants, e.Record.TenantID)
		if c := e.Idempotency; c != nil {
			k := claimKey{e.Record.TenantID, c.Key}
			if !seenClaim[k] {
				seenClaim[k] = true
				claimTenants, claimKeys = append(claimTenants, k.tenant), append(claimKeys, k.key)
			}
		}
	}
	slices.Sort(tenants)
	tenants = slices.Compact(tenants)
	heads := make(map[string]ledger.Head, len(tenants))
	dbClaims := map[claimKey]*ledger.Prior{}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO heads (tenant_id, seq, hash)
		SELECT t, 0, '' FROM unnest($1::text[]) AS t ORDER BY t
		ON CONFLICT (tenant_id) DO NOTHING`, tenants)
	b.Queue(`SELECT tenant_id, seq, hash FROM heads WHERE tenant_id = ANY($1::text[]) ORDER BY tenant_id FOR UPDATE`, tenants).
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
				heads[t] = h
			}
			return rows.Err()
		})
	if len(claimKeys) > 0 {
		b.Queue(`SELECT i.tenant_id, i.key, i.args_digest, i.record_id, r.receipt
			FROM unnest($1::text[], $2::text[]) AS c (tenant_id, key)
			JOIN idempotency i ON i.tenant_id = c.tenant_id AND i.key = c.key
			JOIN record_ids x ON x.record_id = i.record_id`+byID("r.receipt"), claimTenants, claimKeys).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k claimKey
					var p ledger.Prior
					if err := rows.Scan(&k.tenant, &k.key, &p.ArgsDigest, &p.RecordID, &p.Receipt); err != nil {
						return err
					}
					dbClaims[k] = &p
				}
				return rows.Err()
			})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, fmt.Errorf("postgres: lock chain heads: %w", err)
	}
	if len(heads) != len(tenants) {
		return nil, nil, fmt.Errorf("postgres: locked %d chain heads, want %d", len(heads), len(tenants))
	}

	// Settle which entries are appended: an entry whose key is claimed, in
	// the database or earlier in this batch, is answered with the first
	// claim instead.
	priors = make([]*ledger.Prior, len(entries))
	todo := make([]int, 0, len(entries))
	for i, e := range entries {
		rec := e.Record
		if c := e.Idempotency; c != nil {
			k := claimKey{rec.TenantID, c.Key}
			if prior := dbClaims[k]; prior != nil {
				priors[i] = prior
				continue
			}
			dbClaims[k] = &ledger.Prior{ArgsDigest: c.ArgsDigest, Receipt: bytes.Clone(e.Receipt), RecordID: rec.RecordID}
		}
		todo = append(todo, i)
	}
	raws = make([][]byte, len(entries))
	if len(todo) == 0 {
		if err := tx.Commit(ctx); err != nil {
			return nil, nil, fmt.Errorf("postgres: commit append: %w", err)
		}
		done = true
		return raws, priors, nil
	}

	// Lock the runs the batch appends to, read their last seqs, and read
	// the tree hashes the new records' hashes build on: the frontier of
	// each tenant's tree at its head.
	runs := map[runKey]int64{}
	var runKeys []runKey
	for _, i := range todo {
		if ev := entries[i].RunEvent; ev != nil {
			k := runKey{ev.TenantID, ev.RunID}
			if _, ok := runs[k]; !ok {
				runs[k] = 0
				runKeys = append(runKeys, k)
			}
		}
	}
	slices.SortFunc(runKeys, func(a, b runKey) int {
		return cmpJoin(a.tenant, a.run, b.tenant, b.run)
	})
	known := map[string]map[int64]tlog.Hash{}
	var fTenants []string
	var fIdx []int64
	for _, t := range tenants {
		known[t] = map[int64]tlog.Hash{}
		for _, idx := range frontier(heads[t].Seq) {
			fTenants, fIdx = append(fTenants, t), append(fIdx, idx)
		}
	}
	b = &pgx.Batch{}
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
					runs[k] = last
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
					known[t][idx] = tlog.Hash(h)
				}
				return rows.Err()
			})
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, nil, fmt.Errorf("postgres: prepare append: %w", err)
		}
	}

	// Seal each record on its tenant's head and gather the rows.
	var w rows
	blocksSeen := map[blockKey]bool{}
	blobsSeen := map[string]bool{}
	for _, i := range todo {
		e := entries[i]
		rec := e.Record
		head := heads[rec.TenantID]
		raw, err := seal(head, e)
		if err != nil {
			return nil, nil, fmt.Errorf("postgres: seal record %s: %w", rec.RecordID, err)
		}
		// The head the next record links to is what the seal says; a
		// SealFunc that does not follow the head would fork the chain.
		a := rec.Audit
		if a.Seq != head.Seq+1 || a.RecordHash == "" {
			return nil, nil, fmt.Errorf("postgres: the SealFunc sealed record %s at seq %d with hash %q after head %d", rec.RecordID, a.Seq, a.RecordHash, head.Seq)
		}
		heads[rec.TenantID] = ledger.Head{Seq: a.Seq, Hash: a.RecordHash}
		raws[i] = raw

		first, hashes, err := ledger.TreeHashes(a.Seq, raw, s.treeReader(ctx, tx, rec.TenantID, known[rec.TenantID]))
		if err != nil {
			return nil, nil, err
		}
		for k, h := range hashes {
			known[rec.TenantID][first+int64(k)] = h
			w.hashTenant = append(w.hashTenant, rec.TenantID)
			w.hashIdx = append(w.hashIdx, first+int64(k))
			w.hashVal = append(w.hashVal, bytes.Clone(h[:]))
		}

		if err := w.addRecord(e, raw); err != nil {
			return nil, nil, err
		}
		if b := e.Block; b != nil {
			k := blockKey{rec.TenantID, *b}
			if !blocksSeen[k] { // first record wins, in the batch too
				blocksSeen[k] = true
				w.blockTenant = append(w.blockTenant, rec.TenantID)
				w.blockKey = append(w.blockKey, b.DecisionKey)
				w.blockArgs = append(w.blockArgs, b.ArgsDigest)
				w.blockPack = append(w.blockPack, b.PackHash)
				w.blockRecord = append(w.blockRecord, rec.RecordID)
			}
		}
		for _, bl := range e.Blobs {
			if !blobsSeen[bl.Hash] {
				blobsSeen[bl.Hash] = true
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
	}
	for _, t := range tenants {
		if h := heads[t]; h.Seq > 0 {
			w.headTenant = append(w.headTenant, t)
			w.headSeq = append(w.headSeq, h.Seq)
			w.headHash = append(w.headHash, h.Hash)
		}
	}

	if err := tx.SendBatch(ctx, w.batch()).Close(); err != nil {
		return nil, nil, fmt.Errorf("postgres: write append: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		done = true
		if pgCode(err) != "" || errors.Is(err, pgx.ErrTxCommitRollback) {
			// The server answered: the transaction rolled back.
			return nil, nil, fmt.Errorf("postgres: commit append: %w", err)
		}
		// The connection failed during COMMIT: the transaction may have
		// committed. Find out, so that an error still means nothing of
		// the batch is durable.
		first := todo[0]
		ok, rerr := s.committed(ctx, entries[first].Record, raws[first])
		switch {
		case rerr != nil:
			return nil, nil, fmt.Errorf("postgres: commit append: %w (and whether it committed is unknown: %v)", err, rerr)
		case !ok:
			return nil, nil, fmt.Errorf("postgres: commit append: %w", err)
		}
		return raws, priors, nil
	}
	done = true
	return raws, priors, nil
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

	claimTenant, claimKey, claimArgs, claimRecord []string

	blockTenant, blockKey, blockArgs, blockPack, blockRecord []string

	blobHash, blobKind []string
	blobData           [][]byte

	hashTenant []string
	hashIdx    []int64
	hashVal    [][]byte

	runTenant, runID, runKind, runStep, runRecord []string
	runSeq, runAt                                 []int64
	runData                                       [][]byte

	headTenant, headHash []string
	headSeq              []int64
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
	if c := e.Idempotency; c != nil {
		w.claimTenant = append(w.claimTenant, rec.TenantID)
		w.claimKey = append(w.claimKey, c.Key)
		w.claimArgs = append(w.claimArgs, c.ArgsDigest)
		w.claimRecord = append(w.claimRecord, rec.RecordID)
	}
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
	b.Queue(`INSERT INTO tree_hashes (tenant_id, idx, hash)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])`,
		w.hashTenant, w.hashIdx, w.hashVal)
	if len(w.claimKey) > 0 {
		b.Queue(`INSERT INTO idempotency (tenant_id, key, args_digest, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`,
			w.claimTenant, w.claimKey, w.claimArgs, w.claimRecord)
	}
	if len(w.blockKey) > 0 {
		// First record wins: a later block of the same action keeps the
		// first answer.
		b.Queue(`INSERT INTO blocks (tenant_id, decision_key, args_digest, pack_hash, record_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
			ON CONFLICT DO NOTHING`,
			w.blockTenant, w.blockKey, w.blockArgs, w.blockPack, w.blockRecord)
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
