package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	sqlitedrv "modernc.org/sqlite"
)

// The WAL is checkpointed (its committed frames copied into the database
// file) off the commit path. With SQLite's automatic checkpoint, the
// commit that takes the WAL past its bound runs the checkpoint itself,
// before it returns: every check of that batch, and every check queued
// behind it, waits for a few thousand page writes and the database
// file's fsync. Here a goroutine with a connection of its own runs a
// PASSIVE checkpoint at most every walCheckpointEvery while commits
// come in; PASSIVE waits for no reader or writer, so appends go on
// beside it. The writer keeps SQLite's automatic checkpoint as a
// backstop, at walBackstopPages: the WAL can only be restarted from its
// beginning by a checkpoint that has caught up with every commit, which
// under steady load the background one seldom does, and the backstop's
// checkpoint then has little left to copy. Durability does not change: a
// commit is synced before it returns (synchronous=FULL), and a checkpoint
// copies only frames already durable, syncing the database file after.
//
// Neither checkpoint starts the WAL over while readers keep coming: SQLite
// restarts the log (writes from its beginning again) only when the writer
// begins a transaction with every frame copied and no reader reading from
// the log, and under a steady stream of reads that moment seldom comes.
// The log then grew without bound under a mixed load (issue 38: the data
// directory grew by about 50 KB an operation, in jumps, and a test of
// three-record appends beside six readers left a 112 MB WAL beside a 39
// MB database). So once the log holds more than walRestartPages frames,
// the checkpoint is a RESTART: it takes the write lock, copies what is
// left, and waits for the readers of the log to finish (at most
// walRestartWait, then it gives up until the next time) so that the next
// commit writes from the log's beginning; journal_size_limit then
// truncates the file. Appends wait for it, about as long as a checkpoint
// of what PASSIVE left and the current reads take.
const (
	walCheckpointEvery = 20 * time.Millisecond
	walBackstopPages   = 4000
	walRestartPages    = 2 * walBackstopPages
	walRestartWait     = 100 * time.Millisecond
	// walSizeLimit is the size (bytes) a restarted WAL file is truncated
	// to (journal_size_limit).
	walSizeLimit = walRestartPages * 4096
)

// walCheckpointer runs the background checkpoints.
type walCheckpointer struct {
	db   *sql.DB
	kick chan struct{} // a commit happened (never blocks the writer)
	stop chan struct{}
	done chan struct{}

	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex
	lastErr  error // the last checkpoint's error, nil once one succeeds
	restarts int64 // RESTART checkpoints that started the log over
}

// openCheckpointer opens the checkpoint connection on the database at path
// and starts its goroutine.
func openCheckpointer(path string) (*walCheckpointer, error) {
	v := url.Values{}
	// PASSIVE never waits; RESTART waits this long for the write lock and
	// for the log's readers, then gives up.
	v.Set("_busy_timeout", strconv.FormatInt(walRestartWait.Milliseconds(), 10))
	v.Set("_synchronous", "FULL")
	// Opened like the write connection (writeConnector), so that one opened
	// while the disk refuses writes is replaced, not kept read-only.
	conn, err := sqlitedrv.NewConnector(dsn(path, v))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open checkpoint connection: %w", err)
	}
	db := sql.OpenDB(writeConnector{Connector: conn, path: path})
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open checkpoint connection: %w", err)
	}
	c := &walCheckpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

// committed tells the checkpointer that a transaction committed.
func (c *walCheckpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *walCheckpointer) loop() {
	defer close(c.done)
	pause := time.NewTimer(walCheckpointEvery)
	pause.Stop()
	for {
		select {
		case <-c.stop:
			pause.Stop()
			return
		case <-c.kick:
		}
		err := c.checkpoint()
		c.mu.Lock()
		c.lastErr = err
		c.mu.Unlock()
		// At most one checkpoint per walCheckpointEvery: each syncs the
		// WAL and the database file, and the commits between two are
		// copied by the next.
		pause.Reset(walCheckpointEvery)
		select {
		case <-c.stop:
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// checkpoint runs one PASSIVE checkpoint, and a RESTART when the log has
// grown past walRestartPages. A failure (a full or read-only disk) is
// kept for Err and the next commit tries again; the writer's backstop
// bounds the WAL meanwhile. A RESTART that found the log still read is
// not a failure: the next one tries again.
func (c *walCheckpointer) checkpoint() error {
	var busy, log, copied int64
	if err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied); err != nil {
		return fmt.Errorf("sqlite: WAL checkpoint: %w", err)
	}
	if log <= walRestartPages {
		return nil
	}
	if err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &log, &copied); err != nil {
		return fmt.Errorf("sqlite: WAL checkpoint: %w", err)
	}
	c.mu.Lock()
	if busy == 0 {
		c.restarts++
	}
	c.mu.Unlock()
	return nil
}

// Restarts returns how many times a checkpoint started the WAL over.
func (c *walCheckpointer) Restarts() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// Err returns the last background checkpoint's error.
func (c *walCheckpointer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// close stops the goroutine and closes its connection; again, it does
// nothing.
func (c *walCheckpointer) close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.closeErr = c.db.Close()
	})
	return c.closeErr
}
