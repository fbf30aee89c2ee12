// Package sqlite is writ's embedded store: the ledger (decision records,
// their receipts, idempotency claims, blocks, content-addressed blobs,
// chain heads, approval requests and their events, shadow decisions) and
// the API keys, in one SQLite database file, writ.db, inside a data
// directory. It implements ledger.Store and auth.Store and passes
// ledgertest.
//
// The store keeps what the SealFunc returned byte for byte and serves it as
// it is. It must never rewrite sealed bytes, and never update or delete a
// record or anything appended with it: the database enforces this too, with
// triggers that abort any UPDATE or DELETE of those tables. Only a tenant's
// chain head moves, and only forward.
//
// Writes go through a single connection (one writer is all SQLite allows
// anyway, and it lets the store keep chain heads in memory); reads use a
// separate pool of query-only connections, which WAL mode lets run while a
// write transaction is open. One Store should own a data directory at a
// time. A second one on the same directory cannot fork a chain, though: an
// append sealed on a stale cached head is refused by the database (the
// seq is taken), and the head is read afresh for the next batch.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ/internal/durable"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
	sqlitedrv "modernc.org/sqlite" // also registers the "sqlite" driver, which the read pool uses
)

// FileName is the name of the database file inside the data directory.
const FileName = "writ.db"

// busyTimeout is how long a connection waits for a lock held by another
// connection (a checkpoint, or another process reading) before it fails.
const busyTimeout = 5 * time.Second

// Store is the SQLite ledger store. Its methods are safe for concurrent use.
type Store struct {
	path  string
	write *sql.DB // exactly one connection: the only writer
	read  *sql.DB // query-only connections

	// stmts are prepared once on the write connection and bound to each
	// append transaction, so a batch does not re-parse its SQL.
	stmts writeStmts
	// reads are the prepared point reads of the check path.
	reads readStmts
	// hashStmts are prepared reads of n tree hashes, by n (see ReadHashes).
	hashMu    sync.Mutex
	hashStmts map[int]*sql.Stmt
	// evStmts are prepared evidence reads, by how many ids and
	// addresses they read (see evidenceStmt).
	evMu    sync.Mutex
	evStmts [(maxEvidenceStmt + 1) * (maxEvidenceStmt + 1)]*sql.Stmt
	// upper caches the upper levels of every tenant's tree (immutable).
	upper upperCache
	// hist are the history aggregates' statements (history.go).
	hist histStmts
	// ckpt checkpoints the WAL off the commit path (checkpoint.go).
	ckpt *walCheckpointer

	// mu serialises appends and guards heads. heads caches each tenant's
	// durable chain head; it is only ever set from values that have been
	// committed, so a failed transaction cannot leave it ahead of the
	// database.
	mu     sync.Mutex
	heads  map[string]ledger.Head
	closed bool
	// recent holds, by tenant, the tree hashes committed with the last
	// recentRecords records (guarded by mu): the next appends read almost
	// only those (see recentTree).
	recent map[string]map[int64]tlog.Hash
}

var _ ledger.Store = (*Store)(nil)

// Open opens (creating it if needed) the store in dir: the directory is
// created with mode 0700 and the database file with mode 0600, since
// records name customers and decisions. Missing schema migrations are
// applied before Open returns.
func Open(dir string) (*Store, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sqlite: data directory: %w", err)
	}
	// Synced into its parent: SQLite syncs the database file and its
	// directory, never the directory's own entry.
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	// SQLite creates the -wal and -shm files with the database file's
	// mode, so creating it ourselves sets the mode of all three.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("sqlite: create database file: %w", err)
	}

	s := &Store{path: path, heads: make(map[string]ledger.Head), recent: make(map[string]map[int64]tlog.Hash)}
	// The driver applies DSN parameters on every new connection, so a
	// connection the pool replaces gets the same settings. The shorthand
	// keys are validated by the driver, unlike free-form _pragma values.
	w := url.Values{}
	w.Set("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	w.Set("_foreign_keys", "1")
	w.Set("_journal_mode", "WAL")
	// FULL syncs the WAL on every commit: a record is durable before the
	// caller hears of it, even across power loss.
	w.Set("_synchronous", "FULL")
	// The write transaction takes the write lock at BEGIN, so it cannot
	// fail half-way with SQLITE_BUSY when it first writes.
	w.Set("_txlock", "immediate")
	// The page caches live outside Go's heap (modernc's C allocator) and
	// were most of writ serve's memory: with 32 MiB here and 16 MiB for
	// each reader, its RSS reached 350 MB within seconds of load, against
	// a Go heap of 35 MB. The hot pages of an append are the right edges
	// of the tables and indexes, which a few MiB hold; smaller caches
	// measured no slower (docs/scale.md, "Memory").
	w.Add("_pragma", "cache_size(-8192)")
	// A commit writes every page it dirtied to the WAL, and the random
	// keys of an index (trace ids) dirty one leaf page per record: 16 KiB
	// pages wrote 89 KB a check, 4 KiB pages 43 KB, with no fewer checks a
	// second and two fifths less RSS (docs/scale.md, "Memory"). A record
	// and its receipt (about 3.5 KB) still fit in one page. It takes
	// effect only when the file is created: older databases keep their
	// 16 KiB pages.
	w.Add("_pragma", "page_size(4096)")
	// The WAL is checkpointed in the background (checkpoint.go), off the
	// commit path; the writer's own automatic checkpoint, which runs
	// inside the commit that crosses its bound while every check waiting
	// on the writer waits, is only the backstop.
	w.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(walBackstopPages)+")")
	// A WAL the checkpointer started over (checkpoint.go) is truncated to
	// this size by the next commit, so a burst does not keep its size.
	w.Add("_pragma", "journal_size_limit("+strconv.Itoa(walSizeLimit)+")")
	// Statement journals (a statement that may abort half-way, as any
	// insert guarded by a trigger can) go to temporary storage; on disk
	// that is a write per page, in memory it is free.
	w.Add("_pragma", "temp_store(MEMORY)")
	wc, err := sqlitedrv.NewConnector(dsn(path, w))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	s.write = sql.OpenDB(writeConnector{Connector: wc, path: path})
	s.write.SetMaxOpenConns(1)
	s.write.SetMaxIdleConns(1)
	s.write.SetConnMaxLifetime(0)
	s.write.SetConnMaxIdleTime(0)

	if err := migrate(s.write); err != nil {
		s.write.Close()
		return nil, err
	}
	if err := s.stmts.prepare(s.write); err != nil {
		s.write.Close()
		return nil, err
	}

	r := url.Values{}
	r.Set("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	r.Set("_foreign_keys", "1")
	r.Add("_pragma", "cache_size(-2048)")
	r.Add("_pragma", "temp_store(MEMORY)")
	r.Set("_query_only", "1")
	s.read, err = sql.Open("sqlite", dsn(path, r))
	if err != nil {
		s.stmts.close()
		s.write.Close()
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	s.read.SetMaxOpenConns(n)
	s.read.SetMaxIdleConns(n)
	if err := s.read.Ping(); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open read pool: %w", err)
	}
	if err := s.reads.prepare(s.read); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.hist.prepare(s.write, s.read); err != nil {
		s.Close()
		return nil, err
	}
	if s.ckpt, err = openCheckpointer(path); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// writeConnector opens the write connection, and refuses one that cannot
// write. SQLite opens a database file that it cannot open for writing
// read-only, without an error. database/sql replaces the write connection
// when a statement on it was interrupted (a cancelled context); a
// replacement opened while the data directory is read-only would stay
// read-only after the file system is writable again, and every append
// would fail until writ is restarted. (SQLite hands the new connection
// the closed one's file descriptor while another connection of the
// process holds the file, so this happens only when none does.) Refused,
// the append fails closed, and the next one opens the file again.
type writeConnector struct {
	driver.Connector
	path string
}

func (c writeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ro, ok := conn.(interface{ IsReadOnly(string) (bool, error) })
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("sqlite: a %T cannot say whether it is read-only", conn)
	}
	readOnly, err := ro.IsReadOnly("main")
	if err == nil && readOnly {
		err = fmt.Errorf("%s could not be opened for writing (SQLite opened it read-only)", c.path)
		if cause := writeRefusal(c.path + "-wal"); cause != nil {
			err = fmt.Errorf("%w: %w", err, cause)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// dsn builds a file: URI, which keeps a path with '?' or '#' in it intact.
func dsn(path string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: params.Encode()}
	return u.String()
}

// Close closes the store. Appends in flight finish first.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.stmts.close()
	s.reads.close()
	s.hist.close()
	s.hashMu.Lock()
	for _, st := range s.hashStmts {
		st.Close()
	}
	s.hashMu.Unlock()
	s.evMu.Lock()
	for _, st := range s.evStmts {
		if st != nil {
			st.Close()
		}
	}
	s.evMu.Unlock()
	var ckptErr error
	if s.ckpt != nil {
		ckptErr = s.ckpt.close()
	}
	return errors.Join(ckptErr, s.read.Close(), s.write.Close())
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies the migrations the database does not have yet, all in
// one transaction: a database is at one known version or another, never
// between two.
func migrate(db *sql.DB) (err error) {
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM migrations`).Scan(&have); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if have > len(ms) {
		return fmt.Errorf("sqlite: the database is at schema version %d, newer than this writ knows (%d)", have, len(ms))
	}
	for _, m := range ms[have:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}
