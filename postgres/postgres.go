// Package postgres is writ's shared store: the ledger (decision records,
// their receipts, idempotency claims, blocks, content-addressed blobs,
// chain heads, the per-tenant Merkle tree and its checkpoints, workflow
// run events, approval requests and their events, and shadow decisions)
// and the API keys, in a PostgreSQL database that several writ servers
// use at once. It implements ledger.Store and auth.Store and passes
// ledgertest, like the embedded SQLite store.
//
// The store keeps what the SealFunc returned byte for byte (records.raw)
// and serves it as it is; the jsonb copy (records.doc) is for queries only
// and is never served, hashed or proved. The store must never rewrite
// sealed bytes, and never update or delete a record or anything appended
// with it: the database enforces this too, with triggers that refuse any
// UPDATE, DELETE or TRUNCATE of those tables and their partitions. Only a
// tenant's chain head moves, and only forward.
//
// Several servers may append to the same tenant at once. Each append
// transaction locks the heads of its tenants (SELECT … FOR UPDATE, in
// tenant order) before it reads a claim or seals a record, so per tenant
// appends serialize: no seq is repeated or skipped, there is one tree, and
// a checkpoint of a size is stored once (a different one is refused). It
// also locks the approval requests its events name before it counts their
// events, so two servers cannot both decide a request or redeem it past
// its allowance. Nothing is cached between transactions: every append
// starts from what the database holds.
//
// Schema migrations are embedded and applied by Open, in one transaction
// under a database-wide advisory lock, so servers starting together apply
// them once. Records are partitioned by tenant (8 hash partitions),
// then by month of their timestamp; Open creates the current month's
// partition of each tenant partition and the next ones, and the store
// does so again every day while it is open (EnsurePartitions).
//
// Analysts query the decision_records view, which exposes the record's
// members as columns across tenants. The ledger.Store methods never read
// across tenants.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// migrationLock is the key of the advisory lock under which migrations
// are applied and partitions created ("writ" in ASCII, then 1).
const migrationLock int64 = 0x7772697400000001

// runLockClass is the first key of the two-key advisory locks that
// serialize the events of one run (the two-key and one-key lock spaces do
// not overlap).
const runLockClass int32 = 0x77726974

// MonthsAhead is how many months of record partitions EnsurePartitions
// creates beyond the current one.
const MonthsAhead = 3

// partitionEvery is how often an open Store calls EnsurePartitions.
const partitionEvery = 24 * time.Hour

// Store is the PostgreSQL ledger store. Its methods are safe for
// concurrent use, and several Stores (in several processes) may share one
// database.
type Store struct {
	pool   *pgxpool.Pool
	closed atomic.Bool

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

var _ ledger.Store = (*Store)(nil)

// Open connects to the database at dsn (a PostgreSQL URL or key=value
// string, as pgx reads it; a search_path parameter selects the schema),
// applies missing schema migrations and creates the record partitions of
// the coming months before it returns.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// A record is durable before its caller hears of it: commits wait for
	// the WAL flush, whatever the server's default.
	if _, set := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; !set {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "writ"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, stop: make(chan struct{})}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.EnsurePartitions(ctx, time.Now()); err != nil {
		pool.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.partitionLoop()
	return s, nil
}

// partitionLoop creates the coming months' partitions every day, so a
// month's records never wait for a restart to get their partition.
func (s *Store) partitionLoop() {
	defer s.wg.Done()
	t := time.NewTicker(partitionEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := s.EnsurePartitions(ctx, now); err != nil {
				slog.Default().Error("postgres: create record partitions", "err", err)
			}
			cancel()
		}
	}
}

// EnsurePartitions creates the monthly partitions of each tenant
// partition of records (UTC months) from now's month through MonthsAhead
// months after it, unless they exist.
// Open calls it, and an open Store calls it daily; several servers may
// call it at once. It waits at most a few seconds for the lock that
// creating a partition takes on records, and fails rather than hold up
// appends behind a long query.
func (s *Store) EnsurePartitions(ctx context.Context, now time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The advisory lock is waited for without a limit (another server
		// may be creating the same partitions); the limit is for the locks
		// on records that creating a partition takes.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT writ_ensure_partitions($1, $2)`, now.UTC(), MonthsAhead)
		return err
	})
}

// Close stops the partition loop and closes the pool, once appends in
// flight have returned their connections.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		s.wg.Wait()
		s.pool.Close()
	})
	return nil
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies the migrations the database does not have yet, all in
// one transaction under an advisory lock: a database is at one known
// version or another, never between two, and servers starting together
// apply each migration once (the second waits, then finds nothing to do).
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS writ_migrations (
			version    integer     NOT NULL PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM writ_migrations`).Scan(&have); err != nil {
			return err
		}
		if have > len(ms) {
			return fmt.Errorf("the database is at schema version %d, newer than this writ knows (%d)", have, len(ms))
		}
		for _, m := range ms[have:] {
			// The simple protocol runs a file of several statements.
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO writ_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
