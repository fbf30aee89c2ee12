package sqlite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ/ledger"
)

// TestWriterReplacedWhileReadOnly: database/sql replaces the write
// connection (the driver discards a connection whose statement was
// interrupted by a cancelled context) while the database file cannot be
// opened for writing. SQLite opens the new connection read-only, without
// an error; a store that kept it would fail every append long after the
// file is writable again. The store must refuse it, fail the appends
// while the file cannot be written, and append again, without being
// reopened, once it can.
func TestWriterReplacedWhileReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chattr +i needs root")
	}
	dir := t.TempDir()
	s := mustOpen(t, dir)
	defer s.Close()
	appendAll(t, s, newEntries("t", 1, 1)...)

	// While another connection of the process holds the file, SQLite
	// gives a new connection the descriptor a closed one left behind,
	// opened for writing. The read pool and the checkpoint connection
	// are closed so that none does, as when they were discarded too.
	if err := s.read.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.ckpt.close(); err != nil {
		t.Fatal(err)
	}
	// An immutable file cannot be opened for writing, even by root:
	// what SQLite sees of a file system that has turned read-only.
	db := filepath.Join(dir, FileName)
	if out, err := exec.Command("chattr", "+i", db).CombinedOutput(); err != nil {
		t.Skipf("cannot make the database file immutable: %v %s", err, out)
	}
	immutable := true
	writable := func() {
		if immutable {
			if out, err := exec.Command("chattr", "-i", db).CombinedOutput(); err != nil {
				t.Fatalf("chattr -i: %v %s", err, out)
			}
			immutable = false
		}
	}
	t.Cleanup(writable)

	// A statement on the write connection is interrupted: its context
	// is cancelled while it runs, and the connection is discarded.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var n int64
	err := s.write.QueryRowContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c`).Scan(&n)
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the endless query returned %v (ctx %v)", err, ctx.Err())
	}

	for range 2 {
		err = s.Append(t.Context(), newEntries("t", 2, 1), ledger.Seal)
		if err == nil {
			t.Fatal("an append succeeded while the database file could not be opened for writing")
		}
		if !strings.Contains(err.Error(), "read-only") {
			t.Errorf("the error does not say the database is read-only: %v", err)
		}
	}

	writable()
	appendAll(t, s, newEntries("t", 2, 1)...)
	s.Close()
	s = mustOpen(t, dir)
	if findings, n := verifyChains(t, s); len(findings) > 0 || n != 2 {
		t.Errorf("after the fault: %d records, findings %v", n, findings)
	}
}
