package postgres

import (
	"crypto/rand"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/ledger/verify"
)

// partitionOf returns the tenant partition (records_hNN) that holds
// tenant's rows, found with PostgreSQL's own hash partition test
// (satisfies_hash_partition), not with the planner the tests check.
func partitionOf(t *testing.T, st *Store, tenant string) string {
	t.Helper()
	var name string
	if err := st.pool.QueryRow(t.Context(), `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'records'::regclass
		AND satisfies_hash_partition('records'::regclass, writ_record_partitions(), substr(c.relname, 10)::int, $1::text)`, tenant).Scan(&name); err != nil {
		t.Fatalf("the tenant partition of %s: %v", tenant, err)
	}
	return name
}

// scanned returns the records partitions a plan reads: every relation a
// node of an EXPLAIN (FORMAT JSON) names, and with ANALYZE only those of
// nodes that ran at least once.
func scanned(t *testing.T, plan []byte, analyzed bool) []string {
	t.Helper()
	var top []struct{ Plan map[string]any }
	if err := json.Unmarshal(plan, &top); err != nil || len(top) != 1 {
		t.Fatalf("EXPLAIN output %.200s: %v", plan, err)
	}
	var out []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		rel, _ := n["Relation Name"].(string)
		loops, _ := n["Actual Loops"].(float64)
		if strings.HasPrefix(rel, "records") && (!analyzed || loops > 0) && !slices.Contains(out, rel) {
			out = append(out, rel)
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(top[0].Plan)
	slices.Sort(out)
	return out
}

// appendMonths appends n records of each tenant, one a month from
// January 2026, and returns them.
func appendMonths(t *testing.T, st *Store, tenants []string, n int) []*writ.Record {
	t.Helper()
	var recs []*writ.Record
	for _, tenant := range tenants {
		var es []*ledger.Entry
		for i := 1; i <= n; i++ {
			rec := ledgertest.NewRecord(tenant, i)
			rec.Timestamp = time.Date(2026, time.Month(i), 10, 12, 0, i, 0, time.UTC)
			es = append(es, ledgertest.NewEntry(rec))
			recs = append(recs, rec)
		}
		if err := st.Append(t.Context(), es, ledger.Seal); err != nil {
			t.Fatalf("Append(%s) = %v", tenant, err)
		}
	}
	return recs
}

var planTenants = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "cyberdyne"}

// TestTenantPartitionPlan: a tenant's queries read only its tenant
// partition, and a time window only that partition's months; what the
// planner prunes (EXPLAIN) and what the executor prunes at run time, for a
// generic plan of the same statement (EXPLAIN ANALYZE: the partitions
// whose scans ran).
func TestTenantPartitionPlan(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, dsn)
	defer st.Close()
	if err := st.EnsurePartitions(ctx, time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	appendMonths(t, st, planTenants, 3)
	if _, err := st.pool.Exec(ctx, `ANALYZE records`); err != nil {
		t.Fatal(err)
	}
	acme := partitionOf(t, st, "acme")
	var others int
	for _, tenant := range planTenants[1:] {
		if partitionOf(t, st, tenant) != acme {
			others++
		}
	}
	if others == 0 {
		t.Fatalf("every tenant of %v hashes to %s; the test needs some elsewhere", planTenants, acme)
	}

	feb := writ.RecordQuery{TenantID: "acme",
		From: time.Date(2026, time.February, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, time.February, 20, 0, 0, 0, 0, time.UTC)}
	list, listArgs := recordsQuery(writ.RecordQuery{TenantID: "acme"}, 0, 50, 0, -1)
	win, winArgs := recordsQuery(feb, 0, 50, 0, -1)
	subj, subjArgs := recordsQuery(writ.RecordQuery{TenantID: "acme", SubjectID: "customer:c-002"}, 0, 50, 0, -1)
	var months []string // all of acme's tenant partition
	if err := st.pool.QueryRow(ctx, `SELECT array_agg(relid::regclass::text) FROM pg_partition_tree($1::regclass) WHERE isleaf`, acme).Scan(&months); err != nil || len(months) < 5 {
		t.Fatalf("the partitions of %s: %v, %v", acme, months, err)
	}
	for _, tc := range []struct {
		name string
		sql  string
		args []any
		want []string // the partitions it may read
		// planned: the plan itself names no other partition (the
		// decision_records view's subqueries about a record name its
		// tenant as a parameter, pruned when they run).
		planned bool
	}{
		{"Records", list, listArgs, months, true},
		{"Records in February", win, winArgs, []string{acme + "_p202602"}, true},
		{"Records of a subject", subj, subjArgs, months, true},
		{"Chain", `SELECT raw FROM records WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, []any{"acme", int64(0), 50}, months, true},
		{"decision_records", `SELECT record_id, replay, superseded_by, retracted, feedback FROM decision_records WHERE tenant_id = $1`, []any{"acme"}, months, false},
	} {
		for _, v := range []struct {
			mode    string
			analyze bool
		}{{"force_custom_plan", false}, {"force_custom_plan", true}, {"force_generic_plan", true}} {
			if !v.analyze && !tc.planned {
				continue
			}
			conn, err := st.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mode := v.mode
			explain := "EXPLAIN (FORMAT JSON) "
			if v.analyze {
				mode += ", analyze"
				explain = "EXPLAIN (ANALYZE, FORMAT JSON) "
			}
			if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+v.mode); err != nil {
				t.Fatal(err)
			}
			var plan []byte
			err = conn.QueryRow(ctx, explain+tc.sql, tc.args...).Scan(&plan)
			conn.Exec(ctx, `RESET plan_cache_mode`)
			conn.Release()
			if err != nil {
				t.Fatalf("%s: EXPLAIN: %v", tc.name, err)
			}
			got := scanned(t, plan, v.analyze)
			if len(got) == 0 || slices.ContainsFunc(got, func(p string) bool { return !slices.Contains(tc.want, p) }) {
				t.Errorf("%s (%s): the plan reads %v, want only some of %v", tc.name, mode, got, tc.want)
			}
		}
	}
}

// TestMigrationToTenantPartitions: a database at schema version 23, its
// records partitioned by month only, holding records of several tenants
// in several months (one in the default partition), migrates to tenant
// partitions keeping every record byte for byte, each in its tenant's
// partition and month; the ledger verifies, appends go on, and the
// database still refuses to change a record.
func TestMigrationToTenantPartitions(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	const before = 23
	if len(ms) <= before || ms[before].Name != "0024_tenant_partitions.sql" {
		t.Fatalf("migration %d is %+v", before+1, ms[before])
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE writ_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:before] {
		if _, err := c.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("migration %s: %v", m.Name, err)
		}
		if _, err := c.Exec(ctx, `INSERT INTO writ_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	c.Close(ctx)

	// The store at version 23 appends (its SQL names no partition), with
	// that version's monthly partitions from January to April 2026, and
	// a record of 2032 in the default partition.
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	old := &Store{pool: pool, stop: make(chan struct{})}
	if _, err := pool.Exec(ctx, `SELECT writ_ensure_partitions('2026-01-01 00:00:00+00', 3)`); err != nil {
		t.Fatal(err)
	}
	tenants := planTenants[:5]
	recs := appendMonths(t, old, tenants, 3)
	late := ledgertest.NewRecord("acme", 4)
	late.Timestamp = time.Date(2032, time.May, 1, 0, 0, 0, 0, time.UTC)
	if err := old.Append(ctx, []*ledger.Entry{ledgertest.NewEntry(late)}, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	recs = append(recs, late)
	skey, _, err := note.GenerateKey(rand.Reader, "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	for _, tenant := range tenants {
		if _, err := ledger.IssueCheckpoint(ctx, old, signer, "writ", tenant, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	const snapshot = `SELECT coalesce(jsonb_agg(jsonb_build_array(tenant_id, seq, record_id, decision_key, status, trace_id, ts, ts_ns,
		approval_mode_effective, encode(sha256(raw), 'hex'), doc, encode(sha256(receipt), 'hex')) ORDER BY tenant_id, seq), '[]')::text FROM records`
	var was string
	var wasParts int
	if err := pool.QueryRow(ctx, snapshot).Scan(&was); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT tableoid) FROM records`).Scan(&wasParts); err != nil || wasParts != 4 {
		t.Fatalf("before migrating, records sit in %d partitions (%v), want 4 (three months and the default)", wasParts, err)
	}
	pool.Close()

	st := openStore(t, dsn)
	defer st.Close()
	var is string
	if err := st.pool.QueryRow(ctx, snapshot).Scan(&is); err != nil {
		t.Fatal(err)
	}
	if is != was {
		t.Errorf("after migrating, records =\n%s\nwant\n%s", is, was)
	}
	// Each record sits in its tenant's partition and its month's.
	for _, rec := range recs {
		var part string
		if err := st.pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM records WHERE record_id = $1`, rec.RecordID).Scan(&part); err != nil {
			t.Fatal(err)
		}
		if want := partitionOf(t, st, rec.TenantID) + "_p" + rec.Timestamp.Format("200601"); part != want {
			t.Errorf("record %s of %s, %s, sits in %s, want %s", rec.RecordID, rec.TenantID, rec.Timestamp, part, want)
		}
	}
	// Every leaf partition has the nine indexes and the TRUNCATE guard.
	var bad []string
	if err := st.pool.QueryRow(ctx, `SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{}') FROM pg_partition_tree('records') p
		JOIN pg_class c ON c.oid = p.relid
		WHERE p.isleaf AND ((SELECT count(*) FROM pg_index i WHERE i.indrelid = p.relid) <> 9
			OR NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = p.relid AND g.tgname = c.relname || '_no_truncate')
			OR NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = p.relid AND g.tgname = 'records_append_only'))`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("partitions %v lack an index or a trigger", bad)
	}
	acme := partitionOf(t, st, "acme")
	mustRefuse(t, st, []string{
		`UPDATE records SET status = 'DECIDED'`,
		`DELETE FROM records`,
		`DELETE FROM ` + acme,
		`DELETE FROM ` + acme + `_p202602`,
		`TRUNCATE records`,
		`TRUNCATE ` + acme,
		`TRUNCATE ` + acme + `_p202602`,
		`TRUNCATE ` + acme + `_default`,
	})
	var rows int
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM decision_records WHERE NOT retracted AND superseded_by = '[]'`).Scan(&rows); err != nil || rows != len(recs) {
		t.Errorf("decision_records holds %d rows (%v), want %d", rows, err, len(recs))
	}
	// Appends go on, into the new partitions.
	next := ledgertest.NewRecord("globex", 4)
	next.Timestamp = time.Date(2026, time.March, 20, 0, 0, 0, 0, time.UTC)
	if err := st.Append(ctx, []*ledger.Entry{ledgertest.NewEntry(next)}, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range tenants {
		if _, err := ledger.IssueCheckpoint(ctx, st, signer, "writ", tenant, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := verify.Verify(ctx, st, verify.VerifyOptions{Hashes: st, Revocations: st})
	if err != nil || !rep.Intact() || rep.Records != int64(len(recs)+1) {
		t.Errorf("Verify() = %+v, %v; want intact over %d records", rep, err, len(recs)+1)
	}
}

// TestDecisionRecordsScorecardFailed: the decision_records view's
// scorecard_failed column is true for the records whose scorecard failed
// their spec's pass mark and false for the others (a passing scorecard,
// none), and the seed's retention classes count them.
func TestDecisionRecordsScorecardFailed(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	st := openStore(t, dsn)
	defer st.Close()
	ctx := t.Context()
	var entries []*ledger.Entry
	want := map[string]bool{}
	for i, tc := range []struct {
		scorecard map[string]float64
		failed    []string
	}{
		{map[string]float64{"safety": 0.5, "utility": 1}, []string{"safety"}},
		{map[string]float64{"safety": 1, "utility": 1}, nil},
		{nil, nil},
		{map[string]float64{"utility": 0.2}, []string{"safety", "utility"}},
	} {
		r := ledgertest.NewRecord("acme", i+1)
		r.Scorecard, r.ScorecardFailed = tc.scorecard, tc.failed
		r.Timestamp = time.Date(2026, time.January, 15, 0, 0, i, 0, time.UTC) // in the month docs/scale.md counts
		entries = append(entries, ledgertest.NewEntry(r))
		want[r.RecordID] = tc.failed != nil
	}
	if err := st.Append(ctx, entries, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	rows, err := st.pool.Query(ctx, `SELECT record_id, scorecard_failed FROM decision_records WHERE tenant_id = $1`, "acme")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for rows.Next() {
		var id string
		var failed bool
		if err := rows.Scan(&id, &failed); err != nil {
			t.Fatal(err)
		}
		got[id] = failed
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("decision_records scorecard_failed = %v, want %v", got, want)
	}
	// docs/scale.md's count of the seed's retention classes, as printed.
	doc, err := os.ReadFile("../docs/scale.md")
	if err != nil {
		t.Fatal(err)
	}
	var query string
	for _, block := range strings.Split(string(doc), "```sql\n")[1:] {
		if q, _, _ := strings.Cut(block, "```"); strings.Contains(q, "AS failed_scorecard") {
			query = q
		}
	}
	if query == "" {
		t.Fatal("docs/scale.md has no query counting failed_scorecard")
	}
	var destructive, denied, escalated, failed int
	if err := st.pool.QueryRow(ctx, query).Scan(&destructive, &denied, &escalated, &failed); err != nil || failed != 2 {
		t.Errorf("docs/scale.md's retention query: failed_scorecard = %d (%v), want 2", failed, err)
	}
}
