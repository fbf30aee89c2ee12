package replay_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/sqlite"
)

// benchLedger returns a store of refund checks to replay and its tenant.
// WRIT_REPLAY_BENCH_DATA names a data directory built with
// `writ ledger generate --replayable` (tenant-1 is replayed); without it,
// WRIT_REPLAY_BENCH_RECORDS (default 20000) checks are decided through
// an engine into a temporary store first.
func benchLedger(b *testing.B) (ledger.Store, string) {
	if dir := os.Getenv("WRIT_REPLAY_BENCH_DATA"); dir != "" {
		st, err := sqlite.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st, "tenant-1"
	}
	n := 20000
	if s := os.Getenv("WRIT_REPLAY_BENCH_RECORDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	h := newHarness(b, example("refund"))
	names := []string{"refund-allow", "refund-high-value-human-review", "refund-allow-with-warning", "refund-stale-idv-local-replan"}
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				req := refund(b, names[i%len(names)])
				req.IdempotencyKey = ""
				if _, err := h.eng.Check(context.Background(), req); err != nil {
					b.Error(err)
					return
				}
				h.clk.Add(time.Millisecond)
			}
		})
	}
	wg.Wait()
	return h.store, "acme"
}

// BenchmarkReplayTenant replays every record of a tenant, as
// `writ replay --all` does, and reports records per second.
func BenchmarkReplayTenant(b *testing.B) {
	st, tenant := benchLedger(b)
	ctx := context.Background()
	var records int64
	start := time.Now()
	for b.Loop() {
		// A new Replayer each time: the pinned pack is rebuilt, as in a
		// fresh `writ replay` process.
		sum, err := replay.New(st, replay.Options{}).Tenant(ctx, tenant, nil)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Equal != sum.Records {
			b.Fatalf("%d of %d records replayed equal", sum.Equal, sum.Records)
		}
		records += sum.Records
	}
	b.ReportMetric(float64(records)/time.Since(start).Seconds(), "records/s")
}
