package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/record"
)

// The store keeps all that verify.VerifyStore reads (`writ ledger verify`).
var _ verify.Store = (*Store)(nil)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Store { return mustOpen(t, t.TempDir()) })
}

// TestRecordsQueryWideRanges runs the conformance test of Records' filters
// with every time range and prefix counted wide, so that the chain walk
// Records takes for them (prefixRange, narrowTimeRange) answers as the
// index ranges do.
func TestRecordsQueryWideRanges(t *testing.T) {
	defer func(n int) { narrowRange = n }(narrowRange)
	narrowRange = 2
	ledgertest.RecordsQuery(t, openTemp(t))
	ledgertest.RecordsEnds(t, openTemp(t))
}

// mustOpen opens the store in dir; the caller closes it.
func mustOpen(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s) = %v", dir, err)
	}
	return s
}

// openTemp opens a store in a fresh directory, closed when the test ends.
func openTemp(t testing.TB) *Store {
	t.Helper()
	s := mustOpen(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	return s
}

func appendAll(t testing.TB, s *Store, es ...*ledger.Entry) {
	t.Helper()
	if err := s.Append(context.Background(), es, ledger.Seal); err != nil {
		t.Fatalf("Append(%d entries) = %v", len(es), err)
	}
}

func newEntries(tenant string, from, count int) []*ledger.Entry {
	es := make([]*ledger.Entry, count)
	for i := range es {
		es[i] = ledgertest.NewEntry(ledgertest.NewRecord(tenant, from+i))
	}
	return es
}

func verifyChains(t *testing.T, s *Store) ([]verify.Finding, int64) {
	t.Helper()
	findings, n, err := verify.VerifyChains(t.Context(), s)
	if err != nil {
		t.Fatalf("VerifyChains() = %v", err)
	}
	return findings, n
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "writ")
	s := mustOpen(t, dir)
	defer s.Close()
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, FileName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		// The umask may only take permissions away.
		if got := fi.Mode(); got&^want != 0 {
			t.Errorf("mode of %s = %v, want at most %v", path, got, want)
		}
	}
}

func TestOpenOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data dir #1?x=%20")
	s := mustOpen(t, dir)
	defer s.Close()
	appendAll(t, s, newEntries("acme", 1, 1)...)
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Errorf("after Open(%q), the database file is not inside the directory: %v", dir, err)
	}
}

// TestPragmas checks the settings on several connections of each pool at
// once: the DSN must apply them to every connection, not just the first.
func TestPragmas(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	pragma := func(c *sql.Conn, name string) string {
		var v string
		if err := c.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
			t.Fatalf("PRAGMA %s = %v", name, err)
		}
		return v
	}
	tests := []struct {
		pool  string
		db    *sql.DB
		conns int
		want  map[string]string
	}{
		{"write", s.write, 1, map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "5000", "query_only": "0", "page_size": "4096", "temp_store": "2", "wal_autocheckpoint": "4000", "cache_size": "-8192", "journal_size_limit": "32768000"}},
		{"read", s.read, 3, map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "5000", "query_only": "1", "temp_store": "2", "cache_size": "-2048"}},
		{"checkpoint", s.ckpt.db, 1, map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": "100", "query_only": "0"}},
	}
	for _, tc := range tests {
		var conns []*sql.Conn
		for range tc.conns {
			c, err := tc.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for i, c := range conns {
			for name, want := range tc.want {
				if got := pragma(c, name); got != want {
					t.Errorf("%s connection %d: PRAGMA %s = %s, want %s", tc.pool, i, name, got, want)
				}
			}
		}
		for _, c := range conns {
			c.Close()
		}
	}
	if _, err := s.read.ExecContext(ctx, `INSERT INTO heads (tenant_id, seq, hash) VALUES ('acme', 1, 'x')`); err == nil {
		t.Error("INSERT through the read pool succeeded, want it refused (query_only)")
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s := mustOpen(t, dir)
	appendAll(t, s, newEntries("acme", 1, 3)...)
	appendAll(t, s, append(newEntries("acme", 4, 2), newEntries("globex", 1, 3)...)...)
	before, err := s.Head(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	s = mustOpen(t, dir)
	defer s.Close()
	if got, err := s.Head(ctx, "acme"); err != nil || got != before {
		t.Errorf("after reopening, Head(acme) = %+v, %v; want %+v", got, err, before)
	}
	more := newEntries("acme", 6, 2)
	appendAll(t, s, more...)
	prev := before
	for _, e := range more {
		l, err := record.ParseLink(e.Raw)
		if err != nil || l.Seq != prev.Seq+1 || l.PrevHash != prev.Hash {
			t.Errorf("after reopening, %s was sealed at seq %d after %s (%v), want seq %d after %s", e.Record.RecordID, l.Seq, l.PrevHash, err, prev.Seq+1, prev.Hash)
		}
		prev = ledger.Head{Seq: l.Seq, Hash: l.RecordHash}
	}
	findings, n := verifyChains(t, s)
	if len(findings) != 0 || n != 10 {
		t.Errorf("after reopening, VerifyChains() = %+v over %d records, want no findings over 10", findings, n)
	}

	// Reopening applies no migration twice.
	var versions []int
	rows, err := s.read.QueryContext(ctx, `SELECT version FROM migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != len(ms) || versions[0] != 1 || versions[len(versions)-1] != len(ms) {
		t.Errorf("migrations table holds versions %v, want 1..%d once each", versions, len(ms))
	}
}

func TestSecondStoreCannotFork(t *testing.T) {
	dir := t.TempDir()
	a, b := mustOpen(t, dir), mustOpen(t, dir)
	defer a.Close()
	defer b.Close()
	appendAll(t, a, newEntries("acme", 1, 1)...)
	appendAll(t, b, newEntries("acme", 2, 1)...)
	// a's cached head is seq 1 now, one behind.
	if err := a.Append(t.Context(), newEntries("acme", 3, 1), ledger.Seal); err == nil {
		t.Fatal("Append on a stale head = nil, want the database to refuse it")
	}
	appendAll(t, a, newEntries("acme", 3, 1)...)
	if findings, n := verifyChains(t, a); len(findings) != 0 || n != 3 {
		t.Errorf("VerifyChains() = %+v over %d records, want no findings over 3", findings, n)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	if _, err := s.write.Exec(`INSERT INTO migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(dir); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(dir of schema version 999) = %v, want an error naming the newer schema", err)
	}
}

// appendOneOfEach appends a record of acme with a subject, an idempotency
// claim, a block and a blob, and a second record after it, with an
// envelope.
func appendOneOfEach(t *testing.T, s *Store) (*ledger.Entry, ledger.BlockKey, ledger.Blob) {
	t.Helper()
	e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
	e.Idempotency = &ledger.IdempotencyClaim{Key: "refund-o-00001", ArgsDigest: e.Record.Replay.ArgumentsDigest}
	block := ledger.BlockKey{DecisionKey: e.Record.DecisionKey, ArgsDigest: e.Record.Replay.ArgumentsDigest, PackHash: e.Record.Lineage.PackHash}
	e.Block = &block
	blob := ledgertest.NewBlob("pack_file", []byte(`{"tenant_id":"acme","tool":"refund"}`))
	e.Blobs = []ledger.Blob{blob}
	e2 := ledgertest.NewEntry(ledgertest.NewRecord("acme", 2))
	e2.Envelope = []byte(`{"tenant_id":"acme","tool":"refund","arguments":{}}`)
	e2.Record.Replay.ReplayPacketID = record.Digest(e2.Envelope)
	appendAll(t, s, e, e2)
	return e, block, blob
}

func TestAppendOnlyTriggers(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	e, block, blob := appendOneOfEach(t, s)
	id := e.Record.RecordID
	// A time low, so that the triggers have a row to refuse to change.
	if _, err := s.write.ExecContext(ctx, `INSERT INTO record_time_lows (tenant_id, level, seq, min_ts) VALUES ('acme', 1, 2, 0)`); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		stmt string
		want string // in the error
	}{
		{`UPDATE records SET status = 'REJECTED' WHERE seq = 1`, "append-only"},
		{`UPDATE records SET raw = CAST('{}' AS BLOB)`, "append-only"},
		{`DELETE FROM records WHERE seq = 2`, "append-only"},
		{`INSERT OR REPLACE INTO records SELECT * FROM records WHERE seq = 1`, "append-only"},
		{`UPDATE record_subjects SET subject_id = 'customer:c-999'`, "append-only"},
		{`DELETE FROM record_subjects`, "append-only"},
		{`INSERT OR REPLACE INTO record_subjects SELECT * FROM record_subjects`, "append-only"},
		{`UPDATE record_time_marks SET max_ts = 0`, "append-only"},
		{`DELETE FROM record_time_marks`, "append-only"},
		{`UPDATE record_time_lows SET min_ts = 0`, "append-only"},
		{`DELETE FROM record_time_lows`, "append-only"},
		{`UPDATE record_terms SET value = 'pd_x'`, "append-only"},
		{`DELETE FROM record_terms`, "append-only"},
		{`INSERT OR REPLACE INTO record_terms SELECT * FROM record_terms`, "append-only"},
		{`UPDATE idempotency SET args_digest = 'sha256:00'`, "append-only"},
		{`DELETE FROM idempotency`, "append-only"},
		{`INSERT OR REPLACE INTO idempotency (tenant_id, key, args_digest, record_id)
			SELECT tenant_id, key, 'sha256:00', record_id FROM idempotency`, "append-only"},
		{`UPDATE blocks SET record_id = 'rec_other'`, "append-only"},
		{`DELETE FROM blocks`, "append-only"},
		{`UPDATE blobs SET data = x'00'`, "append-only"},
		{`DELETE FROM blobs`, "append-only"},
		{`UPDATE envelopes SET data = x'00'`, "append-only"},
		{`DELETE FROM envelopes`, "append-only"},
		{`INSERT OR REPLACE INTO envelopes SELECT * FROM envelopes`, "append-only"},
		{`UPDATE heads SET seq = seq - 1`, "only moves forward"},
		{`UPDATE heads SET hash = 'sha256:00'`, "only moves forward"},
		{`UPDATE heads SET tenant_id = 'globex', seq = seq + 1`, "only moves forward"},
		{`INSERT OR REPLACE INTO heads (tenant_id, seq, hash) VALUES ('acme', 1, 'sha256:00')`, "only moves forward"},
		{`DELETE FROM heads`, "never deleted"},
	}
	for _, tc := range tests {
		_, err := s.write.ExecContext(ctx, tc.stmt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Exec(%s) = %v, want an error containing %q", tc.stmt, err, tc.want)
		}
	}

	// Insert-if-absent tables ignore a replacement instead of failing: the
	// first block and the first blob stay.
	for _, stmt := range []string{
		`INSERT OR REPLACE INTO blocks (tenant_id, decision_key, args_digest, pack_hash, record_id)
			SELECT tenant_id, decision_key, args_digest, pack_hash, 'rec_other' FROM blocks`,
		`INSERT OR REPLACE INTO blobs (hash, kind, data) SELECT hash, kind, x'00' FROM blobs`,
	} {
		if _, err := s.write.ExecContext(ctx, stmt); err != nil {
			t.Errorf("Exec(%s) = %v, want it ignored", stmt, err)
		}
	}
	if p, err := s.blocked(ctx, "acme", block); err != nil || p == nil || p.RecordID != id {
		t.Errorf("after INSERT OR REPLACE INTO blocks, Blocked(acme, %+v) = %+v, %v; want record %s", block, p, err, id)
	}
	if data, err := s.Blob(ctx, blob.Hash); err != nil || !bytes.Equal(data, blob.Data) {
		t.Errorf("after INSERT OR REPLACE INTO blobs, Blob(%s) = %q, %v; want %q", blob.Hash, data, err, blob.Data)
	}
	if p, err := s.idempotent(ctx, "acme", "refund-o-00001"); err != nil || p == nil || p.ArgsDigest != e.Idempotency.ArgsDigest {
		t.Errorf("after the refused statements, Idempotent(acme, refund-o-00001) = %+v, %v; want the first claim", p, err)
	}
	if findings, n := verifyChains(t, s); len(findings) != 0 || n != 2 {
		t.Errorf("after the refused statements, VerifyChains() = %+v over %d records, want no findings over 2", findings, n)
	}
	page, err := s.Records(ctx, writ.RecordQuery{TenantID: "acme", SubjectID: e.Record.SubjectIDs[0]})
	if err != nil || len(page.Records) != 1 {
		t.Errorf("after the refused statements, Records(subject %s) = %v, %v; want 1 record", e.Record.SubjectIDs[0], page, err)
	}

	// The head still moves forward, which is how appends advance it.
	if _, err := s.write.ExecContext(ctx, `UPDATE heads SET seq = seq + 1`); err != nil {
		t.Errorf("moving a head forward = %v, want allowed", err)
	}
}

// rawConn opens the store's database file with a connection of its own and
// no settings, as someone with access to the file could, and drops the
// triggers that would stop it.
func rawConn(t *testing.T, s *Store, triggers ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", s.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, tr := range triggers {
		if _, err := db.Exec(`DROP TRIGGER ` + tr); err != nil {
			t.Fatalf("DROP TRIGGER %s = %v", tr, err)
		}
	}
	return db
}

func TestTamperDetection(t *testing.T) {
	tests := []struct {
		name      string
		tamper    func(t *testing.T, s *Store, db *sql.DB)
		triggers  []string
		wantKinds []string
		wantSeq   int64
		wantID    string // record named by the finding, if any
	}{
		{
			name:     "one byte of a stored record changed",
			triggers: []string{"records_no_update"},
			tamper: func(t *testing.T, s *Store, db *sql.DB) {
				var raw []byte
				if err := db.QueryRow(`SELECT raw FROM records WHERE tenant_id = 'acme' AND seq = 3`).Scan(&raw); err != nil {
					t.Fatal(err)
				}
				i := bytes.Index(raw, []byte(`"decision_key":"payments.refund"`))
				if i < 0 {
					t.Fatalf("no decision_key in %s", raw)
				}
				raw[i+len(`"decision_key":"payments.r`)] = 'R'
				if _, err := db.Exec(`UPDATE records SET raw = ? WHERE tenant_id = 'acme' AND seq = 3`, raw); err != nil {
					t.Fatal(err)
				}
			},
			wantKinds: []string{verify.FindingHashMismatch},
			wantSeq:   3,
			wantID:    ledgertest.NewRecord("acme", 3).RecordID,
		},
		{
			name:     "a middle record deleted",
			triggers: []string{"records_no_delete", "record_subjects_no_delete"},
			tamper: func(t *testing.T, s *Store, db *sql.DB) {
				for _, stmt := range []string{
					`DELETE FROM record_subjects WHERE tenant_id = 'acme' AND seq = 3`,
					`DELETE FROM records WHERE tenant_id = 'acme' AND seq = 3`,
				} {
					if _, err := db.Exec(stmt); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantKinds: []string{verify.FindingMissingRecord, verify.FindingChainBreak},
			wantSeq:   4,
			wantID:    ledgertest.NewRecord("acme", 4).RecordID,
		},
		{
			name:     "the last record deleted",
			triggers: []string{"records_no_delete", "record_subjects_no_delete"},
			tamper: func(t *testing.T, s *Store, db *sql.DB) {
				for _, stmt := range []string{
					`DELETE FROM record_subjects WHERE tenant_id = 'acme' AND seq = 5`,
					`DELETE FROM records WHERE tenant_id = 'acme' AND seq = 5`,
				} {
					if _, err := db.Exec(stmt); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantKinds: []string{verify.FindingMissingRecord},
			wantSeq:   5,
		},
		{
			name:     "two records swapped",
			triggers: []string{"records_no_update"},
			tamper: func(t *testing.T, s *Store, db *sql.DB) {
				for _, stmt := range []string{
					`UPDATE records SET seq = 1000 WHERE tenant_id = 'acme' AND seq = 2`,
					`UPDATE records SET seq = 2 WHERE tenant_id = 'acme' AND seq = 3`,
					`UPDATE records SET seq = 3 WHERE tenant_id = 'acme' AND seq = 1000`,
				} {
					if _, err := db.Exec(stmt); err != nil {
						t.Fatalf("%s: %v", stmt, err)
					}
				}
			},
			// Record 3 now comes right after record 1, record 2 after
			// record 3: the chain checker sees a gap, then a step back.
			wantKinds: []string{verify.FindingChainBreak},
			wantSeq:   2,
			wantID:    ledgertest.NewRecord("acme", 2).RecordID,
		}, {
			name:     "stored tree hashes truncated",
			triggers: []string{"tree_hashes_no_delete"},
			tamper: func(t *testing.T, s *Store, db *sql.DB) {
				if _, err := db.Exec(`DELETE FROM tree_hashes WHERE tenant_id = 'acme' AND idx >= 4`); err != nil {
					t.Fatal(err)
				}
			},
			wantKinds: []string{verify.FindingTreeHashMismatch},
		},
		{
			name:     "a stored tree hash replaced",
			triggers: []string{"tree_hashes_no_update"},
			tamper: func(t *testing.T, s *Store, db *sql.DB) {
				if _, err := db.Exec(`UPDATE tree_hashes SET hash = zeroblob(32) WHERE tenant_id = 'acme' AND idx = 2`); err != nil {
					t.Fatal(err)
				}
			},
			// Storage index 2 is the level-1 node over records 1 and 2.
			wantKinds: []string{verify.FindingTreeHashMismatch},
			wantSeq:   1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTemp(t)
			appendAll(t, s, newEntries("acme", 1, 5)...)
			appendAll(t, s, newEntries("globex", 1, 2)...)
			if findings, _ := verifyChains(t, s); len(findings) != 0 {
				t.Fatalf("before tampering, VerifyChains() = %+v, want no findings", findings)
			}
			tc.tamper(t, s, rawConn(t, s, tc.triggers...))

			findings, _ := verifyChains(t, s)
			found := false
			for _, f := range findings {
				if f.TenantID != "acme" {
					t.Errorf("VerifyChains() finding in an untouched chain: %+v", f)
				}
				if slices.Contains(tc.wantKinds, f.Kind) && f.Seq == tc.wantSeq && (tc.wantID == "" || f.RecordID == tc.wantID) {
					found = true
				}
			}
			if !found {
				t.Errorf("VerifyChains() = %+v, want a finding of kind %v at acme seq %d naming %q", findings, tc.wantKinds, tc.wantSeq, tc.wantID)
			}
		})
	}
}

// TestServesTamperedBytes shows the store does not repair or re-derive
// what it serves: a changed record comes back changed, for verification to
// catch.
func TestServesTamperedBytes(t *testing.T) {
	s := openTemp(t)
	es := newEntries("acme", 1, 2)
	appendAll(t, s, es...)
	db := rawConn(t, s, "records_no_update")
	tampered := bytes.Replace(es[0].Raw, []byte(`"status":"DECIDED"`), []byte(`"status":"REJECTED"`), 1)
	if _, err := db.Exec(`UPDATE records SET raw = ? WHERE record_id = ?`, tampered, es[0].Record.RecordID); err != nil {
		t.Fatal(err)
	}
	got, err := s.Record(t.Context(), "acme", es[0].Record.RecordID)
	if err != nil || !bytes.Equal(got.Raw, tampered) {
		t.Errorf("Record(acme, %s) = %v; want the bytes as stored", es[0].Record.RecordID, err)
	}
}

func TestBlobHashMismatch(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	bad := ledger.Blob{Hash: record.Digest([]byte("what was claimed")), Kind: "envelope", Data: []byte("what was sent")}
	err := s.PutBlobs(ctx, []ledger.Blob{ledgertest.NewBlob("pack_file", []byte("ok")), bad})
	if writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("PutBlobs(blob whose hash is not its digest) = %v, want EINVALID", err)
	}
	e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
	e.Blobs = []ledger.Blob{bad}
	if err := s.Append(ctx, []*ledger.Entry{e}, ledger.Seal); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("Append(entry with a blob whose hash is not its digest) = %v, want EINVALID", err)
	}
	if _, err := s.Blob(ctx, bad.Hash); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Blob(%s) after the refused writes = %v, want ENOTFOUND", bad.Hash, err)
	}
	if h, err := s.Head(ctx, "acme"); err != nil || h != (ledger.Head{}) {
		t.Errorf("Head(acme) after the refused append = %+v, %v; want the zero Head", h, err)
	}
}

func TestInvalidInput(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	appendAll(t, s, newEntries("acme", 1, 2)...)
	cursor := func(json string) string { return base64.RawURLEncoding.EncodeToString([]byte(json)) }

	queries := []writ.RecordQuery{
		{},
		{TenantID: "acme", Limit: -1},
		{TenantID: "acme", Cursor: cursor(`{"after":0}`)},
		{TenantID: "acme", Cursor: cursor(`{"after":-5}`)},
		{TenantID: "acme", Cursor: cursor(`{"after":1,"tenant":"acme"}`)},
		{TenantID: "acme", Cursor: cursor(`{"after":1}{"after":2}`)},
		{TenantID: "acme", Cursor: cursor(`{"after":1}`) + "="},
	}
	for _, q := range queries {
		if _, err := s.Records(ctx, q); writ.ErrorCode(err) != writ.EINVALID {
			t.Errorf("Records(%+v) = %v, want EINVALID", q, err)
		}
	}
	if page, err := s.Records(ctx, writ.RecordQuery{TenantID: "acme", Cursor: cursor(`{"after":1}`)}); err != nil || len(page.Records) != 1 {
		t.Errorf("Records(acme, cursor after 1) = %v, %v; want 1 record", page, err)
	}
	if _, err := s.Chain(ctx, "acme", 0, 0); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("Chain(acme, 0, 0) = %v, want EINVALID", err)
	}

	entries := []struct {
		name string
		bad  func(ok *ledger.Entry) *ledger.Entry
	}{
		{"nil record", func(*ledger.Entry) *ledger.Entry { return &ledger.Entry{} }},
		{"no tenant", func(*ledger.Entry) *ledger.Entry { return ledgertest.NewEntry(ledgertest.NewRecord("", 3)) }},
		{"no record id", func(*ledger.Entry) *ledger.Entry {
			e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 3))
			e.Record.RecordID = ""
			return e
		}},
		{"timestamp beyond int64 nanoseconds", func(*ledger.Entry) *ledger.Entry {
			e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 3))
			e.Record.Timestamp = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
			return e
		}},
		{"empty idempotency key", func(*ledger.Entry) *ledger.Entry {
			e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 3))
			e.Idempotency = &ledger.IdempotencyClaim{ArgsDigest: e.Record.Replay.ArgumentsDigest}
			return e
		}},
		{"the same record twice", func(ok *ledger.Entry) *ledger.Entry { return ok }},
	}
	for _, tc := range entries {
		// A valid entry ahead of the bad one must not be written either.
		ok := ledgertest.NewEntry(ledgertest.NewRecord("acme", 4))
		if err := s.Append(ctx, []*ledger.Entry{ok, tc.bad(ok)}, ledger.Seal); writ.ErrorCode(err) != writ.EINVALID {
			t.Errorf("Append(valid entry, %s) = %v, want EINVALID", tc.name, err)
		}
	}
	if h, err := s.Head(ctx, "acme"); err != nil || h.Seq != 2 {
		t.Errorf("Head(acme) after the refused appends = %+v, %v; want seq 2", h, err)
	}
}

// TestAppendFailureKeepsCacheBehind makes the database refuse a batch after
// the SealFunc has run for it (a record id that is already taken), and
// checks the chain continues from the durable head.
func TestAppendFailureKeepsCacheBehind(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	first := newEntries("acme", 1, 2)
	appendAll(t, s, first...)
	head, err := s.Head(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	dup := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
	if err := s.Append(ctx, append(newEntries("acme", 3, 2), dup), ledger.Seal); err == nil {
		t.Fatal("Append(batch re-using a record id) = nil, want an error")
	}
	if got, err := s.Head(ctx, "acme"); err != nil || got != head {
		t.Errorf("Head(acme) after the failed append = %+v, %v; want %+v", got, err, head)
	}
	next := newEntries("acme", 3, 1)
	appendAll(t, s, next...)
	if l, _ := record.ParseLink(next[0].Raw); l.Seq != 3 || l.PrevHash != head.Hash {
		t.Errorf("after the failed append, the next record was sealed at seq %d after %s, want seq 3 after %s", l.Seq, l.PrevHash, head.Hash)
	}
	if findings, n := verifyChains(t, s); len(findings) != 0 || n != 3 {
		t.Errorf("VerifyChains() = %+v over %d records, want no findings over 3", findings, n)
	}
}

// TestQueriesUseIndexes checks that every filter of Records is served by
// an index scoped by tenant rather than a scan of all records.
func TestQueriesUseIndexes(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	now := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	queries := []struct {
		q      writ.RecordQuery
		byTime bool
		index  string // the index the plan must use
		prefix prefixRoute
	}{
		{writ.RecordQuery{TenantID: "acme"}, false, "sqlite_autoindex_records_2 (tenant_id=? AND seq>?)", prefixNone},
		{writ.RecordQuery{TenantID: "acme", DecisionKey: "payments.refund"}, false, "records_decision_key", prefixNone},
		{writ.RecordQuery{TenantID: "acme", Status: writ.StatusDecided}, false, "records_status", prefixNone},
		{writ.RecordQuery{TenantID: "acme", SubjectID: "customer:c-001"}, false, "SEARCH s USING PRIMARY KEY (tenant_id=? AND subject_id=? AND seq>?)", prefixNone},
		{writ.RecordQuery{TenantID: "acme", TraceID: strings.Repeat("ab", 16)}, false, "records_trace_id", prefixNone},
		// A narrow time range is read through the time index, never by
		// walking the chain up to it (issue 38).
		{writ.RecordQuery{TenantID: "acme", From: now, To: now.Add(time.Hour)}, true, "records_ts", prefixNone},
		// A range with no end walks the chain from its time floor
		// (record_time_marks), never from the chain's beginning.
		{writ.RecordQuery{TenantID: "acme", From: now}, false, "sqlite_autoindex_records_2 (tenant_id=? AND seq>?)", prefixNone},
		{writ.RecordQuery{TenantID: "acme", From: now, Newest: true}, false, "sqlite_autoindex_records_2 (tenant_id=? AND seq>?)", prefixNone},
		{writ.RecordQuery{TenantID: "acme", To: now}, true, "records_ts", prefixNone},
		// The seed's other query keys (issue 34).
		{writ.RecordQuery{TenantID: "acme", ApprovalMode: writ.ModeNetwork}, false, "records_approval_mode", prefixNone},
		{writ.RecordQuery{TenantID: "acme", PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny"}, false, "SEARCH t USING PRIMARY KEY (tenant_id=? AND term=? AND value=?)", prefixNone},
		{writ.RecordQuery{TenantID: "acme", Approver: "user:ops-lead"}, false, "SEARCH t USING PRIMARY KEY (tenant_id=? AND term=? AND value=?)", prefixNone},
		{writ.RecordQuery{TenantID: "acme", Scorecard: writ.ScorecardFailedQuery}, false, "SEARCH t USING PRIMARY KEY (tenant_id=? AND term=? AND value=?)", prefixNone},
		// A narrow prefix is an index range; a wide one walks the chain
		// and sorts nothing (issue 36).
		{writ.RecordQuery{TenantID: "acme", DecisionKeyPrefix: "payments.", Newest: true}, false, "records_decision_key (tenant_id=? AND decision_key>? AND decision_key<?)", prefixByKey},
		{writ.RecordQuery{TenantID: "acme", SubjectPrefix: "customer:", Newest: true}, false, "LIST SUBQUERY 1; SEARCH p USING PRIMARY KEY (tenant_id=? AND subject_id>? AND subject_id<?)", prefixBySubject},
		{writ.RecordQuery{TenantID: "acme", DecisionKeyPrefix: "payments.", Newest: true}, false, "SEARCH r USING INDEX sqlite_autoindex_records_2 (tenant_id=?)", prefixWalk},
		{writ.RecordQuery{TenantID: "acme", DecisionKeyPrefix: "payments."}, false, "SEARCH r USING INDEX sqlite_autoindex_records_2 (tenant_id=? AND seq>?)", prefixWalk},
		{writ.RecordQuery{TenantID: "acme", DecisionKeyPrefix: "payments.", SubjectPrefix: "customer:", Newest: true}, false, "SEARCH r USING INDEX sqlite_autoindex_records_2 (tenant_id=?)", prefixWalk},
	}
	for _, tt := range queries {
		q := tt.q
		if byTime, err := s.narrowTimeRange(ctx, q); err != nil || byTime != tt.byTime {
			t.Errorf("narrowTimeRange(%+v) = %v, %v; want %v", q, byTime, err, tt.byTime)
		}
		floor := int64(0)
		if !q.From.IsZero() {
			floor = 7 // a mark before the range
		}
		query, args := recordsQuery(q, 0, 101, tt.byTime, tt.prefix, floor, -1)
		plan := explainQueryPlan(t, s, query, args)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN") {
				t.Errorf("Records(%+v) plan %q scans a table", q, plan)
			}
			if tt.prefix == prefixWalk && strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("Records(%+v) plan %q sorts a wide prefix", q, plan)
			}
		}
		if !strings.Contains(strings.Join(plan, "; "), tt.index) {
			t.Errorf("Records(%+v) plan %q does not use %s", q, plan, tt.index)
		}
		t.Logf("Records(%+v): %q", q, plan)
	}

	// A wide range with an end walks back from its time ceiling
	// (record_time_lows), or forward up to it, never from or to the
	// chain's end, and reads no time index.
	for _, tt := range []struct {
		q     writ.RecordQuery
		index string
	}{
		{writ.RecordQuery{TenantID: "acme", To: now, Newest: true}, "SEARCH r USING INDEX sqlite_autoindex_records_2 (tenant_id=? AND seq<?)"},
		{writ.RecordQuery{TenantID: "acme", From: now, To: now.Add(24 * time.Hour), Newest: true}, "SEARCH r USING INDEX sqlite_autoindex_records_2 (tenant_id=? AND seq>? AND seq<?)"},
		{writ.RecordQuery{TenantID: "acme", To: now, Newest: true, Status: writ.StatusDecided}, "SEARCH r USING INDEX records_status (tenant_id=? AND status=? AND seq<?)"},
		{writ.RecordQuery{TenantID: "acme", To: now, Newest: true, SubjectID: "customer:c-001"}, "SEARCH s USING PRIMARY KEY (tenant_id=? AND subject_id=? AND seq<?)"},
		{writ.RecordQuery{TenantID: "acme", From: now, To: now.Add(24 * time.Hour)}, "SEARCH r USING INDEX sqlite_autoindex_records_2 (tenant_id=? AND seq>? AND seq<?)"},
	} {
		floor := int64(0)
		if !tt.q.From.IsZero() {
			floor = 7
		}
		query, args := recordsQuery(tt.q, 0, 101, false, prefixNone, floor, 4000)
		plan := explainQueryPlan(t, s, query, args)
		if got := strings.Join(plan, "; "); !strings.Contains(got, tt.index) || strings.Contains(got, "records_ts") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("Records(%+v) with a ceiling: plan %q, want %s and no time index, no sort", tt.q, plan, tt.index)
		}
	}

	// The other lists a console polls: each row a query and the index
	// every table it reads must be searched by.
	others := []struct {
		name  string
		query string
		args  []any
		uses  []string // the searches of the plan, in order
	}{
		{name: "Approvals(state=pending)", uses: []string{"SEARCH a USING INDEX approval_requests_list", "SEARCH d USING INDEX approval_events_one_decision", "SEARCH e USING PRIMARY KEY"}},
		{name: "Approvals(state=approved)", uses: []string{"SEARCH a USING INDEX approval_requests_list", "SEARCH d EXISTS USING PRIMARY KEY", "SEARCH e USING PRIMARY KEY"}},
		{name: "Approvals(state=expired)", uses: []string{"SEARCH a USING INDEX approval_requests_list", "SEARCH d USING INDEX approval_events_one_decision", "SEARCH e USING PRIMARY KEY"}},
		{name: "Approvals(gate_id)", uses: []string{"SEARCH a USING INDEX approval_requests_list", "SEARCH e USING PRIMARY KEY"}},
		{name: "approvalFloor", query: approvalFloorQuery, args: []any{"acme", now.UnixNano()}, uses: []string{"SEARCH approval_floors USING PRIMARY KEY (tenant_id=?)"}},
		{name: "nextApprovalFloor", query: nextApprovalFloorQuery, args: []any{"acme", 0, now.UnixNano()}, uses: []string{"SEARCH a USING INDEX approval_requests_list (tenant_id=? AND pos>?)", "SEARCH d USING INDEX approval_events_one_decision"}},
		{name: "ceilingRecord", query: ceilingRecordQuery, args: []any{"acme", 16, 31, now.UnixNano()}, uses: []string{"SEARCH records USING INDEX sqlite_autoindex_records_2 (tenant_id=? AND seq>? AND seq<?)"}},
		{name: "ceilingLow", query: ceilingLowQuery, args: []any{"acme", 1, 256, 496, now.UnixNano()}, uses: []string{"SEARCH record_time_lows USING PRIMARY KEY (tenant_id=? AND level=? AND seq>? AND seq<?)"}},
		{name: "timeFloor", query: timeFloorQuery, args: []any{"acme", now.UnixNano()}, uses: []string{"SEARCH record_time_marks USING PRIMARY KEY (tenant_id=? AND max_ts<?)"}},
		{name: "InFlight", query: inFlightQuery, args: []any{"acme", 0, 101}, uses: []string{"SEARCH r USING INDEX records_status (tenant_id=? AND status=? AND seq>?)", "SEARCH x USING PRIMARY KEY (tenant_id=? AND decision_id=?)"}},
	}
	approvalQueries := map[string]writ.ApprovalQuery{
		"Approvals(state=pending)":  {TenantID: "acme", State: writ.ApprovalPending},
		"Approvals(state=approved)": {TenantID: "acme", State: writ.ApprovalApproved},
		"Approvals(state=expired)":  {TenantID: "acme", State: writ.ApprovalExpired},
		"Approvals(gate_id)":        {TenantID: "acme", GateID: "refund-approval"},
	}
	for _, tt := range others {
		if aq, ok := approvalQueries[tt.name]; ok {
			tt.query, tt.args = approvalsQuery(aq, 0, 50, now)
		}
		plan := explainQueryPlan(t, s, tt.query, tt.args)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN") && step != "SCAN a" && step != "SCAN CONSTANT ROW" {
				t.Errorf("%s plan %q scans a table", tt.name, plan)
			}
		}
		// Every table is searched through the index named, in order.
		// ("SCAN a" walks the page the first search produced, not a
		// table.)
		i := 0
		for _, step := range plan {
			if i < len(tt.uses) && strings.HasPrefix(step, tt.uses[i]) {
				i++
			}
		}
		if i < len(tt.uses) {
			t.Errorf("%s plan %q does not search %q in order", tt.name, plan, tt.uses)
		}
		t.Logf("%s: %q", tt.name, plan)
	}
}

// explainQueryPlan returns the detail column of EXPLAIN QUERY PLAN query.
func explainQueryPlan(t *testing.T, s *Store, query string, args []any) []string {
	t.Helper()
	rows, err := s.read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s = %v", query, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// BenchmarkAppend measures appends of realistic entries (a record, its
// receipt, its request envelope and an idempotency claim) in batches, as
// the Appender's group commit produces them, with every commit synced. The
// entries come presealed, as the engine hands them over, so the figures are
// the store's: its inserts, its commit and the cheap in-transaction seal.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			benchmarkAppend(b, ledger.Seal, size)
		})
	}
}

// BenchmarkAppendSigned is BenchmarkAppend with records signed by an
// Ed25519 key, as writ serve seals them.
func BenchmarkAppendSigned(b *testing.B) {
	ring, err := keyring.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), "bench"); err != nil {
		b.Fatal(err)
	}
	// One signer for the run, as writ serve keeps one per key: the
	// ring's Signer reads and parses the key file on each call.
	signer, err := ring.Signer(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		b.Fatal(err)
	}
	seal := ledger.NewSeal(func(time.Time) (ledger.Signer, error) { return signer, nil })
	for _, size := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			benchmarkAppend(b, seal, size)
		})
	}
}

func benchmarkAppend(b *testing.B, seal ledger.SealFunc, size int) {
	s := openTemp(b)
	batches := make([][]*ledger.Entry, b.N)
	for i := range batches {
		batches[i] = newEntries("acme", i*size, size)
		for _, e := range batches[i] {
			e.Idempotency = &ledger.IdempotencyClaim{Key: "idem-" + e.Record.RecordID, ArgsDigest: e.Record.Replay.ArgumentsDigest}
			envelope := fmt.Appendf(nil, `{"tenant_id":"acme","tool":"refund","arguments":{"order_id":%q,"amount_cents":1250},"actor":{"type":"AGENT","id":"agent:support-bot"},"subject_ids":[%q,%q],"trace_id":%q}`,
				e.Record.RecordID, e.Record.SubjectIDs[0], e.Record.SubjectIDs[1], e.Record.TraceID)
			e.Blobs = []ledger.Blob{ledgertest.NewBlob("envelope", envelope)}
			var err error
			if e.Presealed, err = record.Preseal(e.Record); err != nil {
				b.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Append(ctx, batches[i], seal); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
}

// TestApprovalAndKeyTablesAppendOnly checks that the database refuses to
// change or forget approval requests, their events, API keys and their
// revocations, whatever SQL a client of the file sends.
func TestApprovalAndKeyTablesAppendOnly(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
	e.NewApprovals = []ledger.NewApproval{ledgertest.NewApproval(e.Record, "apr_1", "GATE_FINANCE", ledgertest.NewBinding("payments.refund", 1), t0, 1)}
	approve := ledgertest.NewApprovalEntry(ledgertest.NewRecord("acme", 2), "apr_1",
		writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "user:fin-1", Reason: "ok", At: t0.Add(time.Minute)})
	appendAll(t, s, e, approve)
	key, _, err := auth.NewKey("acme", "alice", []writ.Role{writ.RoleApprover}, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	key.SignedBy, key.SignedAt, key.Signature = "writ-test+0badc0de", t0, bytes.Repeat([]byte{7}, 64)
	if err := s.PutAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	revokedAt := t0.Add(time.Hour)
	if err := s.RevokeAPIKey(ctx, key.ID, revokedAt); err != nil {
		t.Fatal(err)
	}

	for _, stmt := range []string{
		`UPDATE approval_requests SET expires_ns = expires_ns + 1`,
		`UPDATE approval_requests SET request = CAST('{}' AS BLOB)`,
		`DELETE FROM approval_requests`,
		`INSERT OR REPLACE INTO approval_requests SELECT * FROM approval_requests`,
		`UPDATE approval_events SET kind = 'denied'`,
		`UPDATE approval_events SET actor = 'user:mallory'`,
		`DELETE FROM approval_events`,
		`INSERT OR REPLACE INTO approval_events SELECT * FROM approval_events`,
		`UPDATE approval_floors SET pos = 0`,
		`DELETE FROM approval_floors`,
		// A second decision, even at a new seq, would replace the first
		// through the one-decision index.
		`INSERT OR REPLACE INTO approval_events (tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns)
			SELECT tenant_id, approval_id, seq + 1, 'denied', 'user:mallory', 'x', record_id, at_ns FROM approval_events`,
		`UPDATE api_keys SET secret_hash = 'x'`,
		`UPDATE api_keys SET roles = '["admin"]'`,
		`DELETE FROM api_keys`,
		`INSERT OR REPLACE INTO api_keys SELECT * FROM api_keys`,
		`UPDATE api_key_revocations SET revoked_ns = revoked_ns + 1`,
		`DELETE FROM api_key_revocations`,
		`UPDATE api_key_signatures SET signature = zeroblob(64)`,
		`UPDATE api_key_signatures SET signed_by = 'mallory+00000000'`,
		`DELETE FROM api_key_signatures`,
		`INSERT OR REPLACE INTO api_key_signatures SELECT * FROM api_key_signatures`,
	} {
		_, err := s.write.ExecContext(ctx, stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("Exec(%s) = %v, want an error containing %q", stmt, err, "append-only")
		}
	}
	// A revocation is insert-if-absent: replacing it is ignored.
	if _, err := s.write.ExecContext(ctx, `INSERT OR REPLACE INTO api_key_revocations (key_id, revoked_ns) SELECT key_id, 0 FROM api_key_revocations`); err != nil {
		t.Errorf("INSERT OR REPLACE INTO api_key_revocations = %v, want it ignored", err)
	}

	a, err := s.Approval(ctx, "acme", "apr_1", t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if a.State != writ.ApprovalApproved || len(a.Events) != 1 || a.Events[0].Actor != "user:fin-1" || !a.ExpiresAt.Equal(t0.Add(ledgertest.ApprovalTTL)) {
		t.Errorf("after the refused statements, Approval(acme, apr_1) = state %s, events %+v, expires %s; want approved by user:fin-1, expiring %s",
			a.State, a.Events, a.ExpiresAt, t0.Add(ledgertest.ApprovalTTL))
	}
	k, err := s.APIKey(ctx, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if k.SecretHash != key.SecretHash || !slices.Equal(k.Roles, key.Roles) || k.RevokedAt == nil || !k.RevokedAt.Equal(revokedAt) {
		t.Errorf("after the refused statements, APIKey(%s) = %+v (revoked %v), want %+v revoked at %s", key.ID, k, k.RevokedAt, key, revokedAt)
	}
}

// TestShadowDecisionsAppendOnly checks that the database refuses to
// change or forget shadow decisions, whatever SQL a client of the file
// sends.
func TestShadowDecisionsAppendOnly(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	pack := "sha256:" + strings.Repeat("a1", 32)
	e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
	e.Shadow = ledgertest.NewShadow(e.Record, pack, writ.OutcomeReplanRequired)
	want := *e.Shadow
	appendAll(t, s, e)

	for _, stmt := range []string{
		`UPDATE shadow_decisions SET outcome = 'allow'`,
		`UPDATE shadow_decisions SET detail = CAST('{}' AS BLOB)`,
		`UPDATE shadow_decisions SET pos = pos + 1`,
		`DELETE FROM shadow_decisions`,
		`INSERT OR REPLACE INTO shadow_decisions SELECT * FROM shadow_decisions`,
		// A second decision of the same record and pack, at a new position.
		`INSERT INTO shadow_decisions (tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail)
			SELECT tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, 'allow', status, detail FROM shadow_decisions`,
	} {
		_, err := s.write.ExecContext(ctx, stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("Exec(%s) = %v, want an error containing %q", stmt, err, "append-only")
		}
	}
	// A shadow decision is of a record the database holds.
	orphan := `INSERT INTO shadow_decisions (tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail)
		SELECT tenant_id, 'rec_nope', decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail FROM shadow_decisions`
	if _, err := s.write.ExecContext(ctx, orphan); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Errorf("Exec(%s) = %v, want a foreign key error", orphan, err)
	}

	page, err := s.ShadowDecisions(ctx, ledger.ShadowQuery{TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Decisions) != 1 || page.Decisions[0].Outcome != want.Outcome || !slices.Equal(page.Decisions[0].Reasons, want.Reasons) {
		t.Errorf("after the refused statements, ShadowDecisions(acme) = %+v, want only %+v", page.Decisions, want)
	}
}

// TestVerifyAcrossPages tampers with a chain of several pages of records:
// the findings come out in chain order, the same whatever the number of
// workers. (Stored tree hashes across pages: ledger's
// TestStoredHashesAsTheTreeGrows.)
func TestVerifyAcrossPages(t *testing.T) {
	const n = 4200 // records: 3 pages
	s := openTemp(t)
	for from := 1; from <= n; from += 1400 {
		appendAll(t, s, newEntries("acme", from, 1400)...)
	}
	db := rawConn(t, s, "records_no_update", "records_no_delete", "record_subjects_no_delete")
	for _, seq := range []int{100, 2100, 4150} {
		if _, err := db.Exec(`UPDATE records SET raw = replace(raw, '"payments.refund"', '"payments.REFUND"') WHERE tenant_id = 'acme' AND seq = ?`, seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`DELETE FROM record_subjects WHERE tenant_id = 'acme' AND seq = 3000`,
		`DELETE FROM records WHERE tenant_id = 'acme' AND seq = 3000`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"hash_mismatch@100", "hash_mismatch@2100", "missing_record@3001", "hash_mismatch@4150", "tree_hash_mismatch@100"}
	for _, workers := range []int{1, 4} {
		rep, err := verify.Verify(t.Context(), s, verify.VerifyOptions{Workers: workers, Hashes: s, Revocations: s})
		if err != nil {
			t.Fatalf("Verify(%d workers) = %v", workers, err)
		}
		var got []string
		for _, f := range rep.Findings {
			got = append(got, fmt.Sprintf("%s@%d", f.Kind, f.Seq))
		}
		if !slices.Equal(got, want) || rep.Records != n-1 {
			t.Errorf("Verify(%d workers) = %v over %d records, want %v over %d", workers, got, rep.Records, want, n-1)
		}
	}
}

// TestProbeWrite: the write probe of GET /readyz commits, again and
// again, into its one row, about a batch's size.
func TestProbeWrite(t *testing.T) {
	st := openTemp(t)
	at := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		if err := st.ProbeWrite(t.Context(), at.Add(time.Duration(i))); err != nil {
			t.Fatalf("ProbeWrite() = %v", err)
		}
	}
	var rows, got, size int64
	if err := st.read.QueryRow(`SELECT count(*), max(at_ns), max(length(fill)) FROM write_probe`).Scan(&rows, &got, &size); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || got != at.Add(2).UnixNano() || size != 256<<10 {
		t.Errorf("write_probe holds %d rows, the last at %d with %d bytes; want 1, at %d with %d", rows, got, size, at.Add(2).UnixNano(), 256<<10)
	}
	st.Close()
	if err := st.ProbeWrite(t.Context(), at); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("ProbeWrite() on a closed store = %v, want ErrClosed", err)
	}
}

// TestMigrationPlacesRevocations: revocations stored before schema
// version 12 are placed at their tenant's chain head by the migration, so
// that the next checkpoint of a larger tree commits to them.
func TestMigrationPlacesRevocations(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "writ.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 12 || ms[11].Version != 12 {
		t.Fatalf("migration 12 is %+v", ms[11])
	}
	// A database at version 11: acme's head at 3, globex without records,
	// a revoked key of each.
	stmts := []string{`CREATE TABLE migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`}
	for _, m := range ms[:11] {
		stmts = append(stmts, m.SQL, fmt.Sprintf(`INSERT INTO migrations VALUES (%d, '%s', 0)`, m.Version, m.Name))
	}
	stmts = append(stmts,
		`INSERT INTO heads (tenant_id, seq, hash) VALUES ('acme', 3, 'sha256:00')`,
		`INSERT INTO api_keys (key_id, tenant_id, subject, roles, secret_hash, created_ns) VALUES ('key_a', 'acme', 'a', '["agent"]', 'aa', 1), ('key_g', 'globex', 'g', '["agent"]', 'bb', 1)`,
		`INSERT INTO api_key_revocations (key_id, revoked_ns) VALUES ('key_a', 5), ('key_g', 6)`)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()

	s := mustOpen(t, dir)
	defer s.Close()
	for id, want := range map[string]int64{"key_a": 3, "key_g": 0} {
		k, err := s.APIKey(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if k.RevokedAfter == nil || *k.RevokedAfter != want || k.RevokedAt == nil {
			t.Errorf("after migrating, key %s revoked at %v after %v, want after %d", id, k.RevokedAt, k.RevokedAfter, want)
		}
	}
	// The append-only guard is back.
	if _, err := s.write.Exec(`UPDATE api_key_revocations SET head_seq = 9`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("UPDATE api_key_revocations after migrating = %v, want the append-only refusal", err)
	}
}

// TestMigrationMarksTimes: migration 19 writes the time marks of the
// records appended before it, as ledger.TimeMarker would have: the
// running maximum of each tenant's times at every 16th seq and at its
// last record.
func TestMigrationMarksTimes(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 19 || ms[18].Name != "0019_time_marks.sql" {
		t.Fatalf("migration 19 is %+v", ms[18])
	}
	stmts := []string{`CREATE TABLE migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`}
	for _, m := range ms[:18] {
		stmts = append(stmts, m.SQL, fmt.Sprintf(`INSERT INTO migrations VALUES (%d, '%s', 0)`, m.Version, m.Name))
	}
	// acme: 40 records whose times are out of chain order; globex: 3.
	ts := map[string][]int64{"globex": {5, 3, 4}}
	for i := range 40 {
		ts["acme"] = append(ts["acme"], int64((i*7)%40))
	}
	marker := ledger.NewTimeMarker(nil)
	for _, tenant := range []string{"acme", "globex"} {
		for i, ns := range ts[tenant] {
			seq := int64(i + 1)
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO records (tenant_id, seq, record_id, decision_id, decision_key, status, trace_id, ts, approval_mode, raw, receipt)
				VALUES ('%s', %d, 'rec_%s_%d', 'dec', 'k', 'DECIDED', 't', %d, 'none', x'7b7d', x'')`, tenant, seq, tenant, seq, ns))
			marker.Add(tenant, seq, ns)
		}
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()

	s := mustOpen(t, dir)
	defer s.Close()
	var want []string
	for _, m := range marker.Marks() {
		want = append(want, fmt.Sprintf("%s %d %d", m.TenantID, m.Seq, m.MaxNanos))
	}
	slices.Sort(want)
	rows, err := s.read.Query(`SELECT tenant_id, seq, max_ts FROM record_time_marks`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var tenant string
		var seq, ns int64
		if err := rows.Scan(&tenant, &seq, &ns); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %d", tenant, seq, ns))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) || len(got) != 4 {
		t.Errorf("time marks after migrating = %q, want %q", got, want)
	}
}

// TestMigrationTimeLows: migration 21 writes the time lows of the records
// appended before it, as ledger.TimeLows would have at append.
func TestMigrationTimeLows(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 21 || ms[20].Name != "0021_time_lows.sql" {
		t.Fatalf("migration 21 is %+v", ms[20])
	}
	stmts := []string{`CREATE TABLE migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`}
	for _, m := range ms[:20] {
		stmts = append(stmts, m.SQL, fmt.Sprintf(`INSERT INTO migrations VALUES (%d, '%s', 0)`, m.Version, m.Name))
	}
	// acme: 600 records whose times are out of chain order; globex: 20.
	ts := map[string][]int64{}
	for i := range 600 {
		ts["acme"] = append(ts["acme"], int64((i*7)%600))
	}
	for i := range 20 {
		ts["globex"] = append(ts["globex"], int64(100-i))
	}
	var want []string
	for _, tenant := range []string{"acme", "globex"} {
		lows, err := ledger.TimeLows(tenant, 0, ts[tenant], nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lows {
			want = append(want, fmt.Sprintf("%s %d %d %d", l.TenantID, l.Level, l.Seq, l.MinNanos))
		}
		for i, ns := range ts[tenant] {
			seq := int64(i + 1)
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO records (tenant_id, seq, record_id, decision_id, decision_key, status, trace_id, ts, approval_mode, raw, receipt)
				VALUES ('%s', %d, 'rec_%s_%d', 'dec', 'k', 'DECIDED', 't', %d, 'none', x'7b7d', x'')`, tenant, seq, tenant, seq, ns))
		}
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()

	s := mustOpen(t, dir)
	defer s.Close()
	slices.Sort(want)
	rows, err := s.read.Query(`SELECT tenant_id, level, seq, min_ts FROM record_time_lows`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var tenant string
		var level, seq, ns int64
		if err := rows.Scan(&tenant, &level, &seq, &ns); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %d %d", tenant, level, seq, ns))
	}
	slices.Sort(got)
	// acme: 37 of level 1 and 2 of level 2; globex: 1 of level 1.
	if !slices.Equal(got, want) || len(got) != 40 {
		t.Errorf("time lows after migrating = %q, want %q", got, want)
	}
}
