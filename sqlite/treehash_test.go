package sqlite

import (
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestReadHashesInChunks reads more tree hashes at once than one
// statement reads, and every count from 1 up: the hashes are those read
// one at a time, and the store keeps no more prepared reads than
// maxHashRead (a read of any size once leaked the statement it prepared
// beyond a cache of 128).
func TestReadHashesInChunks(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	appendAll(t, s, newEntries("acme", 1, 300)...)
	var indexes []int64
	for n := range int64(300) {
		indexes = append(indexes, tlog.StoredHashIndex(0, n))
	}
	all, err := s.readHashes(t.Context(), "acme", indexes)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(indexes) {
		t.Fatalf("read %d hashes of %d", len(all), len(indexes))
	}
	for _, idx := range indexes[:20] {
		one, err := s.readHashes(t.Context(), "acme", []int64{idx})
		if err != nil {
			t.Fatal(err)
		}
		if one[idx] != all[idx] {
			t.Errorf("hash %d read alone = %v, in a read of %d = %v", idx, one[idx], len(indexes), all[idx])
		}
	}
	for n := 1; n <= 2*maxHashRead+3; n++ {
		got, err := s.readHashes(t.Context(), "acme", indexes[:n])
		if err != nil || len(got) != n {
			t.Fatalf("read of %d hashes = %d, %v", n, len(got), err)
		}
	}
	if len(s.hashStmts) > maxHashRead {
		t.Errorf("the store keeps %d prepared tree hash reads, want at most %d", len(s.hashStmts), maxHashRead)
	}
}
