package sqlite

import (
	"math/bits"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestRecentTreeKeepsWhatAppendsRead appends 1,000 records' tree hashes
// in batches of varied sizes and checks, before each append, that every
// hash the append reads below level 5 is among the recent ones kept, and
// that no more than recentRecords records' hashes are kept.
func TestRecentTreeKeepsWhatAppendsRead(t *testing.T) {
	var recent map[int64]tlog.Hash
	hashes := map[int64]tlog.Hash{} // every stored hash, as a store keeps them
	read := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for k, idx := range indexes {
			out[k] = hashes[idx]
		}
		return out, nil
	})
	n := int64(0) // records so far
	for batch := 1; n < 1000; batch = batch%7 + 1 {
		committed := map[int64]tlog.Hash{}
		for range batch {
			// The reads of record n: one per trailing 1 bit of n.
			for i := range bits.TrailingZeros64(uint64(n + 1)) {
				idx := tlog.StoredHashIndex(i, n>>uint(i)-1)
				if _, ok := committed[idx]; ok || i >= 5 {
					continue
				}
				if _, ok := recent[idx]; !ok {
					t.Fatalf("record %d reads tree hash %d (level %d), which is not among the recent ones", n, idx, i)
				}
			}
			hs, err := tlog.StoredHashes(n, []byte{byte(n)}, read)
			if err != nil {
				t.Fatal(err)
			}
			for k, h := range hs {
				idx := tlog.StoredHashIndex(0, n) + int64(k)
				hashes[idx], committed[idx] = h, h
			}
			n++
		}
		recent = recentTree(recent, committed, n)
		if n > recentRecords {
			if oldest := tlog.StoredHashIndex(0, n-1-recentRecords); len(recent) > int(tlog.StoredHashCount(n)-oldest) {
				t.Fatalf("after record %d: %d recent hashes kept, want at most %d", n, len(recent), tlog.StoredHashCount(n)-oldest)
			}
		}
		for idx, h := range recent {
			if hashes[idx] != h {
				t.Fatalf("recent hash %d differs from the stored one", idx)
			}
		}
	}
}
