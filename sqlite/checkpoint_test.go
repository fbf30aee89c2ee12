package sqlite

import (
	"os"
	"testing"
	"time"
)

// TestBackgroundCheckpoint appends a few hundred records, far fewer pages
// than the writer's own checkpoint waits for, and checks that they reach
// the database file anyway: only the background checkpointer copies them
// there. Then the store reopens with every record in place.
func TestBackgroundCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	size := func() int64 {
		fi, err := os.Stat(s.path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	for i := range 20 {
		appendAll(t, s, newEntries("acme", i*16, 16)...)
	}
	// 320 records of about 3 KB, one 4 KiB page each at least, are nowhere
	// near walBackstopPages: the writer has not checkpointed them.
	for deadline := time.Now().Add(10 * time.Second); size() < before+320*4096; {
		if time.Now().After(deadline) {
			t.Fatalf("the database file is %d bytes 10 s after 320 appends (%d before): the WAL was not checkpointed in the background (last error %v)", size(), before, s.ckpt.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.ckpt.Err(); err != nil {
		t.Errorf("background checkpoint: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	if _, n := verifyChains(t, s); n != 320 {
		t.Errorf("after reopening, verify saw %d records, want 320", n)
	}
}

// TestCheckpointRestartsGrownWAL: once the WAL has grown past
// walRestartPages (here while a reader held a snapshot in it, as a steady
// stream of reads does), a checkpoint starts the log over, and the next
// commit truncates the file to walSizeLimit (issue 38: under a mixed load
// the WAL grew without bound).
func TestCheckpointRestartsGrownWAL(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	ctx := t.Context()
	walSize := func() int64 {
		fi, err := os.Stat(s.path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	reader, err := s.read.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := reader.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	appended := 0
	for walSize() <= 2*walSizeLimit {
		appendAll(t, s, newEntries("acme", appended, 64)...)
		appended += 64
	}
	tx.Rollback()
	reader.Close()
	before := s.ckpt.Restarts()
	if err := s.ckpt.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if s.ckpt.Restarts() == before {
		t.Fatalf("a checkpoint of a %d-byte WAL with no reader did not start it over", walSize())
	}
	appendAll(t, s, newEntries("acme", appended, 1)...)
	if size := walSize(); size > walSizeLimit {
		t.Errorf("after the restart and a commit, the WAL is %d bytes, more than journal_size_limit %d", size, walSizeLimit)
	}
	if _, n := verifyChains(t, s); n != int64(appended+1) {
		t.Errorf("verify saw %d records, want %d", n, appended+1)
	}
}
