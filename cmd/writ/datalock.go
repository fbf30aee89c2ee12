package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/writhq/writ/sqlite"
)

// dataLockFile is the lock file of a data directory: while a command that
// appends to its ledger runs, it holds an exclusive lock on this file,
// which says which process it is.
const dataLockFile = "writ.lock"

// errDataDirInUse: another process appends to the data directory.
var errDataDirInUse = errors.New("data directory in use")

// lockDataDir takes the data directory's writer lock, or says which
// process holds it. One SQLite ledger has one writer: a second process
// appending to the same chain would make the first one's next commit fail
// closed (record_not_committed). The lock is an flock(2) on DIR/writ.lock,
// released when the file is closed or the process ends (a crash leaves no
// stale lock); the file holds the holder's pid and command line.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, dataLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the data directory's lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "a process that has not said which yet"
			}
			return nil, fmt.Errorf("%w: %s is in use by another writ process (%s); one data directory has one writer: stop that process, or send checks to its server (--server URL)", errDataDirInUse, dir, who)
		}
		return nil, fmt.Errorf("lock the data directory %s: %w", dir, err)
	}
	who := "pid " + strconv.Itoa(os.Getpid()) + ": " + strings.Join(os.Args, " ")
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(who+"\n"), 0)
	}
	return f, nil
}

// lockedStore is a SQLite store whose process holds its data directory's
// writer lock until the store is closed. It embeds the store, so every
// interface the store satisfies (auth.Store, verify.StoredSource…) it
// satisfies too.
type lockedStore struct {
	*sqlite.Store
	lock *os.File
}

func (s *lockedStore) Close() error {
	err := s.Store.Close()
	s.lock.Close() // releases the flock
	return err
}
