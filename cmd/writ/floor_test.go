//go:build writ_floor

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/sqlite"
)

// TestFloorStoreSealsAsTheStoreDoes holds the floor instrument to the work
// it claims to measure: for the same batches it seals the same bytes as the
// SQLite store, computes the same Merkle tree hashes, and writes each
// record with its receipt and envelope to its log.
//
//	go test -tags writ_floor -run Floor ./cmd/writ
func TestFloorStoreSealsAsTheStoreDoes(t *testing.T) {
	ctx := context.Background()
	open := func() (*sqlite.Store, string) {
		dir := t.TempDir()
		st, err := sqlite.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, dir
	}
	sq, _ := open()
	inner, dir := open()
	st, err := measureStore(inner, dir)
	if err != nil {
		t.Fatal(err)
	}
	floor := st.(*floorStore)

	var want [][]byte // raw, receipt and envelope of each record, in order
	n := 0
	for _, size := range []int{1, 5, 13, 2, 40} {
		batch := func() []*ledger.Entry {
			var es []*ledger.Entry
			for i := range size {
				tenant := "t-a"
				if i%3 == 2 {
					tenant = "t-b"
				}
				rec := ledgertest.NewRecord(tenant, n+i)
				env := []byte(fmt.Sprintf(`{"envelope":%d}`, n+i))
				rec.Replay.ReplayPacketID = record.Digest(env)
				e := ledgertest.NewEntry(rec)
				e.Envelope = env
				es = append(es, e)
			}
			return es
		}
		mine, theirs := batch(), batch()
		n += size
		if err := floor.Append(ctx, mine, ledger.Seal); err != nil {
			t.Fatal(err)
		}
		if err := sq.Append(ctx, theirs, ledger.Seal); err != nil {
			t.Fatal(err)
		}
		for i := range mine {
			if !bytes.Equal(mine[i].Raw, theirs[i].Raw) {
				t.Fatalf("record %d sealed as\n%s\nthe store sealed it as\n%s", i, mine[i].Raw, theirs[i].Raw)
			}
			want = append(want, mine[i].Raw, mine[i].Receipt, mine[i].Envelope)
		}
	}
	for tenant, hashes := range floor.tree {
		idx := make([]int64, len(hashes))
		for i := range idx {
			idx[i] = int64(i)
		}
		stored, err := sq.ReadHashes(ctx, tenant, idx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range hashes {
			if hashes[i] != stored[i] {
				t.Fatalf("tenant %s: tree hash %d is %x, the store's %x", tenant, i, hashes[i], stored[i])
			}
		}
	}
	if len(floor.tree["t-a"]) == 0 || len(floor.tree["t-b"]) == 0 {
		t.Fatalf("tree hashes of both tenants expected, got %d and %d", len(floor.tree["t-a"]), len(floor.tree["t-b"]))
	}

	log, err := os.ReadFile(filepath.Join(dir, "floor.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if len(log) < 4 || int(binary.BigEndian.Uint32(log)) > len(log)-4 {
			t.Fatalf("frame %d of %d: the log ends early", i, len(want))
		}
		size := binary.BigEndian.Uint32(log)
		if got := log[4 : 4+size]; !bytes.Equal(got, w) {
			t.Fatalf("frame %d is %q, want %q", i, got, w)
		}
		log = log[4+size:]
	}
	if len(log) != 0 {
		t.Fatalf("%d bytes after the last frame", len(log))
	}
}
