package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// explain adds to a failed write what SQLite's message leaves out, so
// that the log says what an operator must fix. SQLite answers a write or
// fsync that the file system refused with "disk I/O error", whatever the
// system said; the common cause is a data directory whose file system
// has turned read-only (Linux remounts one read-only after an error) or
// that no longer lets writ write. A file system that refuses writes
// refuses to open the WAL for writing too, and opening it changes
// nothing, so ask that. (Not the database file: closing a descriptor of
// it would drop SQLite's POSIX locks on it. SQLite locks the -shm file and
// the database file, never the WAL.)
//
// Use it deferred, on a named error: defer s.explain(&err).
func (s *Store) explain(errp *error) {
	var se *sqlitedrv.Error
	if *errp == nil || !errors.As(*errp, &se) {
		return
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
	default:
		return
	}
	if cause := writeRefusal(s.path + "-wal"); cause != nil {
		*errp = fmt.Errorf("%w: %w", *errp, cause)
	}
}

// writeRefusal says why path cannot be opened for writing, or returns
// nil if it can (or does not exist).
func writeRefusal(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	switch {
	case err == nil:
		f.Close()
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("the data directory %s is on a read-only file system (%w)", filepath.Dir(path), err)
	default:
		return fmt.Errorf("the data directory %s refuses writes (%w)", filepath.Dir(path), err)
	}
}
