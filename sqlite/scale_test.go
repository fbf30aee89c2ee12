package sqlite

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ/ledger/ledgertest"
)

// TestQueriesAtScale times each query of docs/scale.md's table on a
// ledger made by `writ ledger generate` (tenant-1, one record a second
// from 2026-01-01, 1,000,000 records) in the data directory WRIT_SCALE_DATA,
// and logs p50 and p99 of 40 calls of the store and the plan SQLite chose
// (EXPLAIN QUERY PLAN). Without the variable it is skipped: run it by hand
// (see docs/scale.md).
func TestQueriesAtScale(t *testing.T) {
	dir := os.Getenv("WRIT_SCALE_DATA")
	if dir == "" {
		t.Skip("WRIT_SCALE_DATA is not set")
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for _, q := range ledgertest.ScaleQueries("tenant-1") {
		var times []time.Duration
		for range 40 {
			t0 := time.Now()
			if _, err := s.Records(ctx, q); err != nil {
				t.Fatalf("Records(%+v) = %v", q, err)
			}
			times = append(times, time.Since(t0))
		}
		slices.Sort(times)
		byTime, err := s.narrowTimeRange(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		prefix, err := s.prefixRange(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		floor, err := s.timeFloor(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		ceiling := int64(-1)
		if q.Newest && !q.To.IsZero() && !byTime {
			if ceiling, err = s.timeCeiling(ctx, q, 0); err != nil {
				t.Fatal(err)
			}
		}
		query, args := recordsQuery(q, 0, 51, byTime, prefix, floor, ceiling)
		plan := explainQueryPlan(t, s, query, args)
		t.Logf("Records(%s): p50 %.1f ms, p99 %.1f ms: %s", ledgertest.DescribeQuery(q),
			float64(times[len(times)/2])/1e6, float64(times[len(times)*99/100])/1e6, strings.Join(plan, "; "))
	}
}
