//go:build writ_floor

package main

// This file is built only with -tags writ_floor, by `bench/peers/run
// --floor`: it makes a measuring instrument, not a store anyone could
// run. It answers "how fast could writ be with a storage path of its own,
// whatever index it kept?" by keeping no index at all: Append seals each
// batch on a chain kept in memory, computes its Merkle tree hashes in
// memory, writes every sealed record with its receipt and request
// envelope as length-prefixed frames to one log file with one write, and
// fsyncs it once, before the callers hear of the batch. What a check reads
// before it decides (idempotency keys, blocks) finds nothing, records
// cannot be read back, and no checkpoint is signed (Tenants lists none).
// Everything else is the SQLite store's, empty. See docs/benchmarks.md.

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/sqlite"
)

func init() {
	measureStore = func(st *sqlite.Store, dir string) (ledger.Store, error) {
		f, err := os.OpenFile(filepath.Join(dir, "floor.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		slog.Warn("writ_floor build: records go to an unindexed log file and cannot be read back; for bench/peers/run --floor only", "log", f.Name())
		return &floorStore{Store: st, log: f, heads: map[string]ledger.Head{}, tree: map[string][]tlog.Hash{}}, nil
	}
}

type floorStore struct {
	*sqlite.Store
	mu    sync.Mutex
	log   *os.File
	heads map[string]ledger.Head
	// tree holds each tenant's tree hashes by storage index.
	tree map[string][]tlog.Hash
	buf  []byte
}

func (s *floorStore) Append(_ context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	if err := ledger.ValidateBatch(entries); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]int64{} // each tenant's next seq in this batch
	todo := make([]int, len(entries))
	for i, e := range entries {
		todo[i] = i
		if _, ok := next[e.Record.TenantID]; !ok {
			next[e.Record.TenantID] = s.heads[e.Record.TenantID].Seq + 1
		}
	}
	// SealBatch advances s.heads; on error nothing below runs, and the
	// heads are put back.
	before := make(map[string]ledger.Head, len(next))
	for t := range next {
		before[t] = s.heads[t]
	}
	raws, err := ledger.SealBatch(seal, s.heads, entries, todo)
	if err != nil {
		for t, h := range before {
			s.heads[t] = h
		}
		return fmt.Errorf("seal: %w", err)
	}
	s.buf = s.buf[:0]
	grown := map[string]int{}
	for i, e := range entries {
		t := e.Record.TenantID
		seq := next[t]
		next[t]++
		hashes := s.tree[t]
		if _, ok := grown[t]; !ok {
			grown[t] = len(hashes)
		}
		read := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for k, x := range idx {
				if x < 0 || x >= int64(len(hashes)) {
					return nil, fmt.Errorf("floor: no tree hash %d", x)
				}
				out[k] = hashes[x]
			}
			return out, nil
		})
		first, add, err := ledger.TreeHashes(seq, raws[i], read)
		if err != nil || first != int64(len(hashes)) {
			s.rollback(before, grown)
			return fmt.Errorf("floor: tree hashes of seq %d: %v (first %d of %d)", seq, err, first, len(hashes))
		}
		s.tree[t] = append(hashes, add...)
		for _, b := range [][]byte{raws[i], e.Receipt, e.Envelope} {
			s.buf = binary.BigEndian.AppendUint32(s.buf, uint32(len(b)))
			s.buf = append(s.buf, b...)
		}
	}
	if _, err := s.log.Write(s.buf); err != nil {
		s.rollback(before, grown)
		return fmt.Errorf("floor: write: %w", err)
	}
	if err := s.log.Sync(); err != nil {
		s.rollback(before, grown)
		return fmt.Errorf("floor: fsync: %w", err)
	}
	for i, e := range entries {
		e.Raw = raws[i]
	}
	return nil
}

// rollback puts the heads and trees back as they were before a batch that
// failed. (A failed write may have left part of the batch in the log
// file; the file is never read.)
func (s *floorStore) rollback(heads map[string]ledger.Head, trees map[string]int) {
	for t, h := range heads {
		s.heads[t] = h
	}
	for t, n := range trees {
		s.tree[t] = s.tree[t][:n]
	}
}

func (s *floorStore) Priors(context.Context, string, string, ledger.BlockKey) (ledger.Priors, error) {
	return ledger.Priors{}, nil
}

func (s *floorStore) Tenants(context.Context) ([]string, error) { return nil, nil }
