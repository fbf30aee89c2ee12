package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
)

// BenchmarkAppendHistory measures the append transaction (the single
// writer's critical path) with batches of 32 entries, each reading and
// contributing to 0, 1 or 2 history aggregates: the cost of re-reading the
// values under the write lock and inserting the contributions. It
// reports the process's CPU time per entry, which a loaded machine
// disturbs less than the time per batch (an fsync each).
func BenchmarkAppendHistory(b *testing.B) {
	for _, aggs := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("aggregates=%d", aggs), func(b *testing.B) {
			s, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
			n := 0
			before := cpuTime(b)
			b.ResetTimer()
			for b.Loop() {
				batch := make([]*ledger.Entry, 32)
				for i := range batch {
					n++
					e := ledgertest.NewEntry(ledgertest.NewRecord("acme", n))
					for a := range aggs {
						agg, group := fmt.Sprintf("agg%d:0123456789abcdef", a), fmt.Sprintf("g-%d", n)
						e.HistoryReads = append(e.HistoryReads, ledger.HistoryRead{Aggregate: agg, Group: group, Since: t0.Add(-24 * time.Hour)})
						e.Contributions = append(e.Contributions, ledger.Contribution{Aggregate: agg, Group: group, At: t0, Amount: 1})
					}
					batch[i] = e
				}
				if err := s.Append(context.Background(), batch, ledger.Seal); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-before).Nanoseconds())/1e3/float64(b.N*32), "cpu-µs/entry")
			b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHistoryLookup reads aggregate values from a large existing
// ledger (its data directory in WRIT_BENCH_DATA, built with `writ ledger
// generate --history-groups N`): one read of a random group of the
// first aggregate, over the 24 hours before the ledger's last record, as
// a check reads it before deciding.
func BenchmarkHistoryLookup(b *testing.B) {
	dir := os.Getenv("WRIT_BENCH_DATA")
	if dir == "" {
		b.Skip("WRIT_BENCH_DATA names no ledger to read")
	}
	s, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var tenant, agg string
	var groups, rows, last int64
	if err := s.read.QueryRowContext(ctx, `SELECT tenant_id, aggregate, max(at_ns) FROM history_contributions`).Scan(&tenant, &agg, &last); err != nil {
		b.Fatalf("no history contributions: %v", err)
	}
	if err := s.read.QueryRowContext(ctx, `SELECT count(DISTINCT group_key), count(*) FROM history_contributions WHERE tenant_id = ? AND aggregate = ?`, tenant, agg).Scan(&groups, &rows); err != nil {
		b.Fatal(err)
	}
	head, err := s.Head(ctx, tenant)
	if err != nil {
		b.Fatal(err)
	}
	since := time.Unix(0, last).Add(-24 * time.Hour)
	var window int64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM history_contributions WHERE tenant_id = ? AND aggregate = ? AND at_ns > ?`, tenant, agg, since.UnixNano()).Scan(&window); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		r := ledger.HistoryRead{Aggregate: agg, Group: fmt.Sprintf("g-%d", rng.Int64N(groups)), Since: since}
		if _, err := s.HistoryValues(ctx, tenant, []ledger.HistoryRead{r}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(head.Seq), "records")
	b.ReportMetric(float64(rows), "contributions")
	b.ReportMetric(float64(window)/float64(groups), "rows/group-in-window")
}
