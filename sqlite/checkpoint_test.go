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
	if _, n := verify(t, s); n != 320 {
		t.Errorf("after reopening, verify saw %d records, want 320", n)
	}
}
