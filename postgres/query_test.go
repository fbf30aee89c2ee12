package postgres

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
)

// TestQueriesUseIndexes checks that every filter of Records, the pending
// approvals and the records in flight can be served through an index, with
// EXPLAIN: no table of the plan is read by a sequential scan. Sequential
// scans are disabled for the session, so the plan shows an index path
// whenever one exists (on tables this small the planner would otherwise
// read them whole); where one filter has an index of its own that also
// keeps chain order, the plan must use it. Which path PostgreSQL takes on
// a large table follows its statistics: docs/scale.md shows the plans
// at 1,000,000 records. Add a row for every new filter.
func TestQueriesUseIndexes(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	st := openStore(t, dsn)
	defer st.Close()
	ctx := t.Context()
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	records := []struct {
		q    writ.RecordQuery
		uses string // an index every partition's scan must use ("" for any)
	}{
		{writ.RecordQuery{TenantID: "acme"}, "_tenant_id_seq_idx"},
		{writ.RecordQuery{TenantID: "acme", Newest: true}, "_tenant_id_seq_idx"},
		{writ.RecordQuery{TenantID: "acme", DecisionKey: "payments.refund"}, "_decision_key_tenant_id_seq_idx"},
		{writ.RecordQuery{TenantID: "acme", Status: writ.StatusDecided}, "_status_tenant_id_seq_idx"},
		{writ.RecordQuery{TenantID: "acme", TraceID: strings.Repeat("ab", 16)}, "_trace_id_tenant_id_seq_idx"},
		{writ.RecordQuery{TenantID: "acme", SubjectID: "customer:c-001"}, "record_subjects_pkey"},
		{writ.RecordQuery{TenantID: "acme", SubjectPrefix: "customer:"}, "record_subjects_prefix"},
		{writ.RecordQuery{TenantID: "acme", DecisionKeyPrefix: "payments."}, ""},
		{writ.RecordQuery{TenantID: "acme", From: now, To: now.Add(time.Hour)}, ""},
		{writ.RecordQuery{TenantID: "acme", From: now}, ""},
		{writ.RecordQuery{TenantID: "acme", From: now, Newest: true}, ""},
		{writ.RecordQuery{TenantID: "acme", To: now}, ""},
		{writ.RecordQuery{TenantID: "acme", Outcome: "refunded", Status: writ.StatusDecided}, "_status_tenant_id_seq_idx"},
		{writ.RecordQuery{TenantID: "acme", ApprovalMode: writ.ModeNetwork}, "_approval_mode_effective_tenant_id_seq_idx"},
		{writ.RecordQuery{TenantID: "acme", PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny"}, ""},
		{writ.RecordQuery{TenantID: "acme", Approver: "user:ops-lead"}, ""},
		{writ.RecordQuery{TenantID: "acme", Scorecard: writ.ScorecardFailedQuery}, "record_terms_pkey"},
	}
	for _, tt := range records {
		floor := int64(0)
		if !tt.q.From.IsZero() {
			floor = 7 // a time mark before the range
		}
		query, args := recordsQuery(tt.q, 0, 101, floor, -1)
		checkPlan(t, conn, "Records("+ledgertest.DescribeQuery(tt.q)+")", query, args, tt.uses)
	}
	others := []struct {
		name  string
		query string
		args  []any
		uses  string
	}{
		{name: "Approvals(state=pending)", uses: "approval_events_one_decision"},
		{name: "Approvals(state=expired)", uses: "approval_events_one_decision"},
		{name: "Approvals(state=approved)", uses: "approval_events_pkey"},
		{name: "Approvals(gate_id)", uses: "approval_requests_list"},
		{name: "timeFloor", query: timeFloorQuery, args: []any{"acme", now.UnixNano()}, uses: "Index Only Scan Backward using record_time_marks_pkey"},
		{name: "timeBounds", query: timeBoundsQuery, args: []any{"acme", now.UnixNano(), nil, now.UnixNano()}, uses: "Index Only Scan Backward using record_time_marks_pkey"},
		{name: "approvalFloor", query: approvalFloorQuery, args: []any{"acme", now.UnixNano()}, uses: "Index Scan Backward using approval_floors_pkey"},
		{name: "raiseApprovalFloor", query: raiseApprovalFloorQuery, args: []any{"acme", now.UnixNano()}, uses: "approval_requests_list"},
		{name: "timeCeiling", query: `SELECT x.seq FROM record_time_lows x WHERE x.tenant_id = $1 AND x.level = $2 AND x.seq > $3 AND x.seq <= $4
			AND x.min_ts_ns < $5 ORDER BY x.seq DESC LIMIT 1`, args: []any{"acme", 1, 256, 496, now.UnixNano()}, uses: "record_time_lows_pkey"},
		{name: "InFlight", query: inFlightQuery, args: []any{"acme", 0, 101}, uses: "_status_tenant_id_seq_idx"},
	}
	// A range with an end walks back from its time ceiling
	// (record_time_lows), or forward up to it, by the chain's index.
	for _, q := range []writ.RecordQuery{
		{TenantID: "acme", To: now, Newest: true},
		{TenantID: "acme", From: now, To: now.Add(24 * time.Hour), Newest: true},
		{TenantID: "acme", From: now, To: now.Add(24 * time.Hour)},
	} {
		floor := int64(0)
		if !q.From.IsZero() {
			floor = 7
		}
		query, args := recordsQuery(q, 0, 101, floor, 4000)
		checkPlan(t, conn, "Records("+ledgertest.DescribeQuery(q)+") with a ceiling", query, args, "_tenant_id_seq_idx")
	}
	approvalQueries := map[string]writ.ApprovalQuery{
		"Approvals(state=pending)":  {TenantID: "acme", State: writ.ApprovalPending},
		"Approvals(state=expired)":  {TenantID: "acme", State: writ.ApprovalExpired},
		"Approvals(state=approved)": {TenantID: "acme", State: writ.ApprovalApproved},
		"Approvals(gate_id)":        {TenantID: "acme", GateID: "refund-approval"},
	}
	for _, tt := range others {
		if aq, ok := approvalQueries[tt.name]; ok {
			tt.query, tt.args = approvalsQuery(aq, 0, 50, now)
		}
		checkPlan(t, conn, tt.name, tt.query, tt.args, tt.uses)
	}
}

// checkPlan fails the test if EXPLAIN query reads a table by a sequential
// scan, or does not name the index uses.
func checkPlan(t *testing.T, conn *pgxpool.Conn, name, query string, args []any, uses string) {
	t.Helper()
	rows, err := conn.Query(t.Context(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s = %v", query, err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatalf("EXPLAIN %s = %v", query, err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan") {
		t.Errorf("%s: the plan reads a table whole:\n%s", name, text)
	}
	if uses != "" && !strings.Contains(text, uses) {
		t.Errorf("%s: the plan does not use %s:\n%s", name, uses, text)
	}
	t.Logf("%s:\n%s", name, text)
}

// TestQueriesAtScale times each query of docs/scale.md's table on a
// ledger made by `writ ledger generate` (tenant-1, one record a second
// from 2026-01-01, 1,000,000 records), named by WRIT_SCALE_POSTGRES (a DSN
// whose search_path selects its schema), and logs p50 and p99 of 40 calls
// of the store and the plan PostgreSQL chose (EXPLAIN ANALYZE). Without
// the variable it is skipped: run it by hand (see docs/scale.md).
func TestQueriesAtScale(t *testing.T) {
	dsn := os.Getenv("WRIT_SCALE_POSTGRES")
	if dsn == "" {
		t.Skip("WRIT_SCALE_POSTGRES is not set")
	}
	st := openStore(t, dsn)
	defer st.Close()
	ctx := t.Context()
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range ledgertest.ScaleQueries("tenant-1") {
		var times []time.Duration
		for range 40 {
			t0 := time.Now()
			if _, err := st.Records(ctx, q); err != nil {
				t.Fatalf("Records(%s) = %v", ledgertest.DescribeQuery(q), err)
			}
			times = append(times, time.Since(t0))
		}
		slices.Sort(times)
		floor, ceiling, err := st.timeBounds(ctx, q, 0)
		if err != nil {
			t.Fatal(err)
		}
		query, args := recordsQuery(q, 0, 51, floor, ceiling)
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		t.Logf("Records(%s): p50 %.1f ms, p99 %.1f ms\n%s", ledgertest.DescribeQuery(q),
			float64(times[len(times)/2])/1e6, float64(times[len(times)*99/100])/1e6, strings.Join(plan, "\n"))
	}
	// The console's other lists, on 9,950 decided approval requests and
	// 50 pending (ledgertest.ScaleApprovals).
	now := time.Now()
	ledgertest.ScaleApprovals(t, st, "tenant-1", now)
	var floor int64
	if err := st.pool.QueryRow(ctx, approvalFloorQuery, "tenant-1", now.UnixNano()).Scan(&floor); err != nil {
		t.Fatal(err)
	}
	pending := writ.ApprovalQuery{TenantID: "tenant-1", State: writ.ApprovalPending, Limit: 50}
	query, args := approvalsQuery(pending, floor, 50, now)
	lists := []struct {
		name  string
		query string
		args  []any
		call  func() (int, error)
	}{
		{"Approvals(state=pending)", query, args, func() (int, error) {
			page, err := st.Approvals(ctx, pending, now)
			if err != nil {
				return 0, err
			}
			return len(page.Approvals), nil
		}},
		{"InFlight", inFlightQuery, []any{"tenant-1", 0, 51}, func() (int, error) {
			recs, err := st.InFlight(ctx, "tenant-1", 0, 50)
			return len(recs), err
		}},
	}
	for _, l := range lists {
		var times []time.Duration
		n := 0
		for range 40 {
			t0 := time.Now()
			var err error
			if n, err = l.call(); err != nil {
				t.Fatalf("%s = %v", l.name, err)
			}
			times = append(times, time.Since(t0))
		}
		slices.Sort(times)
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+l.query, l.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		t.Logf("%s: %d rows, p50 %.1f ms, p99 %.1f ms\n%s", l.name, n,
			float64(times[len(times)/2])/1e6, float64(times[len(times)*99/100])/1e6, strings.Join(plan, "\n"))
	}
}

// TestApprovalFloorsRise: deciding requests in an order not theirs writes
// a floor only when the first undecided request moves on, just before it,
// and Approvals(state=pending) starts there.
func TestApprovalFloorsRise(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	st := openStore(t, dsn)
	defer st.Close()
	ctx := t.Context()
	t0 := time.Date(2026, time.June, 1, 9, 0, 0, 0, time.UTC)
	n := 0
	record := func() *writ.Record {
		n++
		r := ledgertest.NewRecord("acme", n)
		r.Timestamp = t0.Add(time.Duration(n) * time.Second)
		return r
	}
	for i := 1; i <= 4; i++ {
		r := record()
		e := ledgertest.NewEntry(r)
		e.NewApprovals = []ledger.NewApproval{ledgertest.NewApproval(r, fmt.Sprintf("apr_%d", i), "GATE", ledgertest.NewBinding("payments.refund", i), t0, 1)}
		if err := st.Append(ctx, []*ledger.Entry{e}, ledger.Seal); err != nil {
			t.Fatal(err)
		}
	}
	var base int64 // positions are global: the first request's, less one
	if err := st.pool.QueryRow(ctx, `SELECT min(pos) - 1 FROM approval_requests WHERE tenant_id = 'acme'`).Scan(&base); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		id   string
		want []int64 // the floors after the decision, past base
	}{
		{"apr_2", nil},        // apr_1 is still pending
		{"apr_1", []int64{2}}, // up to apr_2
		{"apr_4", []int64{2}}, // apr_3 is still pending
		{"apr_3", []int64{2, 4}},
	} {
		ev := writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "user:ops-lead", Reason: "ok", At: t0.Add(time.Minute)}
		if err := st.Append(ctx, []*ledger.Entry{ledgertest.NewApprovalEntry(record(), d.id, ev)}, ledger.Seal); err != nil {
			t.Fatal(err)
		}
		var got []int64
		if err := st.pool.QueryRow(ctx, `SELECT coalesce(array_agg(pos - $1 ORDER BY pos), '{}') FROM approval_floors WHERE tenant_id = 'acme'`, base).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, d.want) {
			t.Errorf("after deciding %s, approval floors = %v, want %v", d.id, got, d.want)
		}
	}
}

// TestTimeCeilingDeep holds writ_time_ceiling (migration 0023) to a walk
// back over 5,000 records with times out of chain order: whole blocks of
// three levels of time lows, which the conformance suite's 700 records do
// not reach.
func TestTimeCeilingDeep(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	st := openStore(t, dsn)
	defer st.Close()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(38, 2))
	base := time.Date(2026, time.March, 1, 0, 0, 0, 0, time.UTC)
	const n = 5000
	for from := 1; from <= n; {
		k := min(1+rng.IntN(700), n-from+1)
		var es []*ledger.Entry
		for i := from; i < from+k; i++ {
			r := ledgertest.NewRecord("deep", i)
			r.Timestamp = base.Add(time.Duration(i)*time.Second + time.Duration(rng.IntN(2000)-1500)*time.Second)
			es = append(es, ledgertest.NewEntry(r))
		}
		if err := st.Append(ctx, es, ledger.Seal); err != nil {
			t.Fatal(err)
		}
		from += k
	}
	var levels int
	if err := st.pool.QueryRow(ctx, `SELECT max(level) FROM record_time_lows WHERE tenant_id = 'deep'`).Scan(&levels); err != nil || levels != 3 {
		t.Fatalf("time lows of up to level %d (%v), want 3", levels, err)
	}
	for range 300 {
		hi := 1 + rng.Int64N(n)
		before := base.Add(time.Duration(rng.Int64N(n+1000)-500) * time.Second).UnixNano()
		var got, want int64
		if err := st.pool.QueryRow(ctx, timeCeilingQuery, "deep", hi, before).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if err := st.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM records WHERE tenant_id = 'deep' AND seq <= $1 AND ts_ns < $2`, hi, before).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("writ_time_ceiling(deep, %d, %d) = %d, want %d", hi, before, got, want)
		}
	}
}
