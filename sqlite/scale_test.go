package sqlite

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
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
		if !q.To.IsZero() && !byTime {
			if ceiling, err = s.timeCeiling(ctx, q, 0); err != nil {
				t.Fatal(err)
			}
		}
		query, args := recordsQuery(q, 0, 51, byTime, prefix, floor, ceiling)
		plan := explainQueryPlan(t, s, query, args)
		t.Logf("Records(%s): p50 %.1f ms, p99 %.1f ms: %s", ledgertest.DescribeQuery(q),
			float64(times[len(times)/2])/1e6, float64(times[len(times)*99/100])/1e6, strings.Join(plan, "; "))
	}
	// The console's other lists, on 9,950 decided approval requests and
	// 50 pending (ledgertest.ScaleApprovals).
	now := time.Now()
	ledgertest.ScaleApprovals(t, s, "tenant-1", now)
	var floor int64
	if err := s.read.QueryRowContext(ctx, approvalFloorQuery, "tenant-1", now.UnixNano()).Scan(&floor); err != nil {
		t.Fatal(err)
	}
	pending := writ.ApprovalQuery{TenantID: "tenant-1", State: writ.ApprovalPending, Limit: 50}
	query, args := approvalsQuery(pending, floor, 50, now)
	timeCalls(t, "Approvals(state=pending)", explainQueryPlan(t, s, query, args), func() (int, error) {
		page, err := s.Approvals(ctx, pending, now)
		if err != nil {
			return 0, err
		}
		return len(page.Approvals), nil
	})
	timeCalls(t, "InFlight", explainQueryPlan(t, s, inFlightQuery, []any{"tenant-1", 0, 51}), func() (int, error) {
		recs, err := s.InFlight(ctx, "tenant-1", 0, 50)
		return len(recs), err
	})
}

// timeCalls logs p50 and p99 of 40 calls of f, the rows of its last
// call, and a plan.
func timeCalls(t *testing.T, name string, plan []string, f func() (int, error)) {
	t.Helper()
	var times []time.Duration
	n := 0
	for range 40 {
		t0 := time.Now()
		var err error
		if n, err = f(); err != nil {
			t.Fatalf("%s = %v", name, err)
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	t.Logf("%s: %d rows, p50 %.1f ms, p99 %.1f ms: %s", name, n,
		float64(times[len(times)/2])/1e6, float64(times[len(times)*99/100])/1e6, strings.Join(plan, "; "))
}
