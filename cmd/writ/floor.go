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
	"maps"
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
	todo := make([]int, len(entries))
	for i := range entries {
		todo[i] = i
	}
	// The batch works on copies of the heads and trees, kept only once
	// its log write is synced: a batch that fails leaves nothing behind
	// but bytes in the log, which is never read.
	heads := maps.Clone(s.heads)
	raws, err := ledger.SealBatch(seal, heads, entries, todo)
	if err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	trees := map[string][]tlog.Hash{}
	seqs := map[string]int64{}
	s.buf = s.buf[:0]
	for i, e := range entries {
		t := e.Record.TenantID
		hashes, ok := trees[t]
		if !ok {
			hashes, seqs[t] = s.tree[t], s.heads[t].Seq
		}
		seqs[t]++
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
		first, add, err := ledger.TreeHashes(seqs[t], raws[i], read)
		if err != nil || first != int64(len(hashes)) {
			return fmt.Errorf("floor: tree hashes of seq %d: %v (first %d of %d)", seqs[t], err, first, len(hashes))
		}
		trees[t] = append(hashes, add...)
		for _, b := range [][]byte{raws[i], e.Receipt, e.Envelope} {
			s.buf = binary.BigEndian.AppendUint32(s.buf, uint32(len(b)))
			s.buf = append(s.buf, b...)
		}
	}
	if _, err := s.log.Write(s.buf); err != nil {
		return fmt.Errorf("floor: write: %w", err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("floor: fsync: %w", err)
	}
	s.heads = heads
	for t, hashes := range trees {
		s.tree[t] = hashes
	}
	for i, e := range entries {
		e.Raw = raws[i]
	}
	return nil
}

func (s *floorStore) Priors(context.Context, string, string, ledger.BlockKey) (ledger.Priors, error) {
	return ledger.Priors{}, nil
}

func (s *floorStore) Tenants(context.Context) ([]string, error) { return nil, nil }
