package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/sqlite"
)

// BenchmarkCheckStorage splits the CPU of a signed check between the
// engine's own work and the store's SQL. "durable" runs the checks
// BenchmarkCheck runs, signed with Ed25519 as writ serve signs them, on
// SQLite; "without-sql" runs them on the same store with its SQL left
// out: Append only seals (the chain, the hash and the signature) and
// writes nothing, and no earlier answer is looked up. That is no store
// anyone could run, only a measurement: the difference between the two
// is what keeping the record costs. Each reports the process's CPU time
// (user + system) per check, with 32 callers.
//
//	go test ./engine -run '^$' -bench CheckStorage -benchtime 5000x
func BenchmarkCheckStorage(b *testing.B) {
	ring, err := keyring.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), exampleClock.Add(-time.Hour), "bench"); err != nil {
		b.Fatal(err)
	}
	// One signer for the run, as writ serve keeps one per key: the
	// ring's Signer reads and parses the key file on each call.
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		b.Fatal(err)
	}
	seal := ledger.NewSeal(func(time.Time) (ledger.Signer, error) { return signer, nil })
	for _, tc := range []struct {
		name  string
		store func(*sqlite.Store) ledger.Store
	}{
		{"durable", func(st *sqlite.Store) ledger.Store { return st }},
		{"without-sql", func(st *sqlite.Store) ledger.Store { return &sealOnlyStore{Store: st, heads: map[string]ledger.Head{}} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := newHarness(b, example("wf-2302"), func(c *engine.Config) {
				c.Store = tc.store(c.Store.(*sqlite.Store))
				c.Appender.Seal = seal
			})
			base := readRequest(b, example("wf-2302", "requests", "wf-2302-allow.json"))
			var seq atomic.Int64
			b.SetParallelism(16)
			before := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := *base
					n := seq.Add(1)
					req.Arguments = map[string]any{"workflow_ref": "WF-2302", "seq": float64(n)}
					rc, err := h.eng.Check(context.Background(), &req)
					if err != nil || !rc.SafeToExecute {
						b.Fatalf("check %d: %v %+v", n, err, rc)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/check")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
		})
	}
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sealOnlyStore is a store with its SQL left out, for BenchmarkCheckStorage
// only: Append seals each batch on the chain it keeps in memory and
// writes nothing; Priors finds nothing. Everything else is the SQLite
// store's.
type sealOnlyStore struct {
	*sqlite.Store
	mu    sync.Mutex
	heads map[string]ledger.Head
}

func (s *sealOnlyStore) Append(_ context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	if err := ledger.ValidateBatch(entries); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	todo := make([]int, len(entries))
	for i := range entries {
		todo[i] = i
	}
	raws, err := ledger.SealBatch(seal, s.heads, entries, todo)
	if err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	for i, e := range entries {
		e.Raw = raws[i]
	}
	return nil
}

func (s *sealOnlyStore) Priors(context.Context, string, string, ledger.BlockKey) (ledger.Priors, error) {
	return ledger.Priors{}, nil
}
