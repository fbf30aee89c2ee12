// Package durable writes the files writ creates (keys, the binding key,
// key rings, bundles) so that they survive a power cut once written: the
// content goes to a temporary file in the same directory, which is synced,
// then renamed (or linked) into place, and the directory is synced. A
// reader sees either no file or the whole of it, never a prefix, and a
// file a writ command reported written is on the disk.
//
// It must never be used for the ledger itself: the stores have their own
// durability (SQLite's WAL with synchronous=FULL, PostgreSQL's commit).
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// ErrExist is returned by Create when the file already exists.
var ErrExist = fs.ErrExist

// WriteFile replaces the file at path with data, atomically and durably:
// after it returns nil, path holds data even across a power cut, and at no
// moment does path hold part of it.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

// Create writes data to a new file at path, durably, and fails with an
// error that matches ErrExist if path exists: two processes creating the
// same file at once see one winner, and the loser reads the winner's
// whole file.
func Create(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true)
}

func write(path string, data []byte, perm fs.FileMode, exclusive bool) (err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
		os.Remove(tmpName) // a no-op once renamed; the spare link once linked
	}()
	// CreateTemp makes the file 0600 whatever perm says; set it on the
	// open file, whatever the umask.
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	err = tmp.Close()
	tmp = nil
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if exclusive {
		// link(2) never replaces an existing name: the exclusive
		// create of the whole, synced file.
		if err := os.Link(tmpName, path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("write %s: %w", path, fs.ErrExist)
			}
			return fmt.Errorf("write %s: %w", path, err)
		}
	} else if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Remove(tmpName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// MkdirAll creates dir and its missing parents with mode perm, like
// os.MkdirAll, and syncs the parent of every directory it creates, so that
// a file later made durable in dir is reachable after a power cut.
func MkdirAll(dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("mkdir %s: not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return SyncDir(parent)
}

// SyncDir makes a directory's entries (files created, renamed or removed
// in it) durable.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for syncing there
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := syncFile(d); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// syncFile is (*os.File).Sync; a test replaces it to see every sync.
var syncFile = (*os.File).Sync
