package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/record"
)

// The store keeps all that verify.VerifyStore reads (`writ ledger verify`).
var _ verify.Store = (*Store)(nil)

// testDSN returns the database the tests use (WRIT_TEST_POSTGRES), or skips.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("WRIT_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WRIT_TEST_POSTGRES is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return dsn
}

// testSchema creates a schema of its own for the test, dropped when the
// test ends, and returns the DSN selecting it, so tests run in parallel
// and again without meeting each other's data.
func testSchema(t *testing.T) string {
	t.Helper()
	dsn := testDSN(t)
	var b [6]byte
	rand.Read(b[:])
	schema := "writ_test_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("connect: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("WRIT_TEST_POSTGRES: %v", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	st, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	return st
}

func TestConformance(t *testing.T) {
	testDSN(t)
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T) ledger.Store {
		return openStore(t, testSchema(t))
	})
}

// TestMigrationsConcurrent starts several stores on an empty schema at
// once: the advisory lock lets one apply the migrations and the others
// find them applied.
func TestMigrationsConcurrent(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open() #%d = %v", i, err)
		}
		defer stores[i].Close()
	}
	ms, _ := sqlkit.ReadMigrations(migrationFiles, "migrations")
	var n, max int
	if err := stores[0].pool.QueryRow(t.Context(), `SELECT count(*), max(version) FROM writ_migrations`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || max != len(ms) {
		t.Errorf("writ_migrations has %d rows up to version %d, want %d", n, max, len(ms))
	}
}

// TestTwoServers appends to one tenant through two stores (two pools, as
// two writ servers would) and two group-committing appenders at once,
// racing for shared idempotency keys, then checks one linear chain, one
// tree, one claim per key, and checkpoints both servers agree on.
func TestTwoServers(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
	for _, st := range stores {
		defer st.Close()
	}
	const perServer, perWriter = 4, 200
	type result struct {
		e   *ledger.Entry
		key string
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	for si, st := range stores {
		app := ledger.NewAppender(st, ledger.AppenderConfig{})
		var swg sync.WaitGroup
		for w := range perServer {
			swg.Go(func() {
				writer := si*perServer + w
				for i := range perWriter {
					e := ledgertest.NewEntry(ledgertest.NewRecord("acme", writer*perWriter+i))
					key := ""
					if i%2 == 1 {
						// Every writer claims the same odd keys: one
						// record each, whichever server wins.
						key = fmt.Sprintf("k-%d", i)
						e.Idempotency = &ledger.IdempotencyClaim{Key: key, ArgsDigest: "sha256:" + strings.Repeat("0", 64)}
					}
					if err := app.Append(context.Background(), e); err != nil {
						t.Errorf("server %d writer %d: Append = %v", si, w, err)
						return
					}
					mu.Lock()
					results = append(results, result{e, key})
					mu.Unlock()
				}
			})
		}
		wg.Go(func() {
			swg.Wait()
			if err := app.Close(); err != nil {
				t.Errorf("Appender.Close() = %v", err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	const writers = 2 * perServer
	wantRecords := writers*perWriter/2 + perWriter/2
	findings, n, err := verify.VerifyChains(ctx, stores[1])
	if err != nil {
		t.Fatalf("VerifyChains() = %v", err)
	}
	for _, f := range findings {
		t.Errorf("VerifyChains() finding: %+v", f)
	}
	if n != int64(wantRecords) {
		t.Errorf("VerifyChains() checked %d records, want %d", n, wantRecords)
	}

	chain, err := stores[0].Chain(ctx, "acme", 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != wantRecords {
		t.Fatalf("Chain(acme) has %d records, want %d", len(chain), wantRecords)
	}
	var seqs []int64
	if err := stores[0].pool.QueryRow(ctx, `SELECT array_agg(seq ORDER BY seq) FROM records WHERE tenant_id = 'acme'`).Scan(&seqs); err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("records of acme: seq %d at position %d, want 1..%d without gaps or repeats", s, i, wantRecords)
		}
	}

	// One claim per key: the appended entry of each key, and every other
	// entry of the key answered with it.
	winner := map[string]string{}
	for _, r := range results {
		if r.key != "" && r.e.Raw != nil {
			if prev, ok := winner[r.key]; ok {
				t.Errorf("key %s appended twice: %s and %s", r.key, prev, r.e.Record.RecordID)
			}
			winner[r.key] = r.e.Record.RecordID
		}
	}
	for _, r := range results {
		if r.key != "" && r.e.Raw == nil && (r.e.Prior == nil || r.e.Prior.RecordID != winner[r.key]) {
			t.Errorf("entry %s of key %s: Prior %+v, want the record %s", r.e.Record.RecordID, r.key, r.e.Prior, winner[r.key])
		}
	}
	if len(winner) != perWriter/2 {
		t.Errorf("%d keys appended, want %d", len(winner), perWriter/2)
	}

	// One tree: the root from the stored hashes is the root of the chain's
	// leaves.
	var leaves []tlog.Hash
	for _, raw := range chain {
		leaves = append(leaves, tlog.RecordHash(raw))
	}
	root, err := tlog.TreeHash(int64(len(chain)), ledger.HashReader(ctx, stores[0], "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if want := referenceRoot(leaves); root != want {
		t.Errorf("tree root %x, want %x", root, want)
	}

	// Both servers checkpoint the same size at once: same checkpoint, no
	// conflict.
	skey, _, err := note.GenerateKey(rand.Reader, "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cps := make([]*ledger.Checkpoint, len(stores))
	var cwg sync.WaitGroup
	for i, st := range stores {
		cwg.Go(func() {
			var err error
			if cps[i], err = ledger.IssueCheckpoint(ctx, st, signer, "writ", "acme", time.Now()); err != nil {
				t.Errorf("server %d: IssueCheckpoint = %v", i, err)
			}
		})
	}
	cwg.Wait()
	if cps[0] != nil && cps[1] != nil && (cps[0].Size != int64(wantRecords) || cps[0].Root != cps[1].Root || cps[0].Root != root) {
		t.Errorf("checkpoints %d/%x and %d/%x, want both at %d with root %x", cps[0].Size, cps[0].Root, cps[1].Size, cps[1].Root, wantRecords, root)
	}
}

func referenceRoot(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return tlog.NodeHash(referenceRoot(leaves[:k]), referenceRoot(leaves[k:]))
}

// TestAppendOnly checks that the database itself refuses to change or
// forget what was appended, whatever SQL a client sends.
func TestAppendOnly(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, dsn)
	defer st.Close()

	now := time.Now().UTC()
	es := []*ledger.Entry{
		ledgertest.NewEntry(ledgertest.NewRecord("acme", 1)), // 2025: the default partition
		ledgertest.NewEntry(ledgertest.NewRecord("acme", 2)),
	}
	es[1].Record.Timestamp = now // this month's partition
	es[0].Idempotency = &ledger.IdempotencyClaim{Key: "k", ArgsDigest: "sha256:" + strings.Repeat("1", 64)}
	es[0].Block = &ledger.BlockKey{DecisionKey: "payments.refund", ArgsDigest: "a", PackHash: "p"}
	es[0].Blobs = []ledger.Blob{ledgertest.NewBlob("envelope", []byte(`{"x":1}`))}
	es[1].Envelope = []byte(`{"x":2}`)
	es[1].Record.Replay.ReplayPacketID = record.Digest(es[1].Envelope)
	if err := st.StartRun(ctx, &ledger.RunEvent{TenantID: "acme", RunID: "r", Kind: ledger.RunStarted, At: now}); err != nil {
		t.Fatal(err)
	}
	es[1].RunEvent = &ledger.RunEvent{TenantID: "acme", RunID: "r", Kind: ledger.StepAttempt, At: now}
	if err := st.Append(ctx, es, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	if es[1].RunEvent.Seq != 2 {
		t.Errorf("run event seq = %d, want 2", es[1].RunEvent.Seq)
	}
	skey, _, _ := note.GenerateKey(rand.Reader, "writ-test")
	signer, _ := note.NewSigner(skey)
	if _, err := ledger.IssueCheckpoint(ctx, st, signer, "writ", "acme", now); err != nil {
		t.Fatal(err)
	}

	var parts []string
	if err := st.pool.QueryRow(ctx, `SELECT array_agg(DISTINCT tableoid::regclass::text ORDER BY tableoid::regclass::text) FROM records`).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	acme := partitionOf(t, st, "acme")
	if want := []string{acme + "_default", acme + "_p" + now.Format("200601")}; !slices.Equal(parts, want) {
		t.Errorf("records sit in partitions %v, want %v", parts, want)
	}

	// A floor and a time low, so that the row triggers have something to refuse.
	if _, err := st.pool.Exec(ctx, `INSERT INTO approval_floors (tenant_id, pos, at_ns) VALUES ('acme', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, `INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns) VALUES ('acme', 1, 2, 0)`); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, st, []string{
		`UPDATE records SET status = 'DECIDED'`,
		`UPDATE records SET raw = raw || ' '::bytea WHERE seq = 2`,
		`DELETE FROM records`,
		`DELETE FROM ` + acme,
		`DELETE FROM ` + acme + `_default`,
		`DELETE FROM ` + acme + `_p` + now.Format("200601"),
		`TRUNCATE records`,
		`TRUNCATE ` + acme,
		`TRUNCATE ` + acme + `_default`,
		`TRUNCATE ` + acme + `_p` + now.Format("200601"),
		`UPDATE record_ids SET seq = seq + 10`,
		`DELETE FROM record_ids`,
		`UPDATE record_subjects SET subject_id = 'x'`,
		`DELETE FROM record_subjects`,
		`UPDATE record_terms SET value = 'x'`,
		`DELETE FROM record_terms`,
		`TRUNCATE record_terms`,
		`UPDATE record_time_marks SET max_ts_ns = 0`,
		`DELETE FROM record_time_marks`,
		`TRUNCATE record_time_marks`,
		`UPDATE approval_floors SET pos = 0`,
		`DELETE FROM approval_floors`,
		`TRUNCATE approval_floors`,
		`UPDATE record_time_lows SET min_ts_ns = 0`,
		`DELETE FROM record_time_lows`,
		`TRUNCATE record_time_lows`,
		`UPDATE idempotency SET args_digest = 'x'`,
		`DELETE FROM idempotency`,
		`UPDATE blocks SET record_id = record_id`,
		`DELETE FROM blocks`,
		`UPDATE blobs SET kind = 'x'`,
		`DELETE FROM blobs`,
		`TRUNCATE blobs`,
		`UPDATE envelopes SET data = data`,
		`DELETE FROM envelopes`,
		`TRUNCATE envelopes`,
		`UPDATE tree_hashes SET hash = hash`,
		`DELETE FROM tree_hashes`,
		`UPDATE checkpoints SET note = note`,
		`DELETE FROM checkpoints`,
		`UPDATE run_events SET kind = 'x'`,
		`DELETE FROM run_events`,
		`UPDATE heads SET seq = 1`,
		`UPDATE heads SET seq = seq, hash = 'x'`,
		`UPDATE heads SET tenant_id = 'globex', seq = seq + 1`,
		`DELETE FROM heads`,
		`TRUNCATE heads`,
	})
	// A head may move forward (what an append does); rolled back here.
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE heads SET seq = seq + 1`); err != nil {
		t.Errorf("moving a head forward = %v", err)
	}
	tx.Rollback(ctx)

	findings, n, err := verify.VerifyChains(ctx, st)
	if err != nil || len(findings) != 0 || n != 2 {
		t.Errorf("VerifyChains() = %v, %d, %v; want no findings over 2 records", findings, n, err)
	}
}

// TestEnsurePartitions creates partitions ahead, and leaves a month whose
// records already sit in the default partition there.
func TestEnsurePartitions(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, dsn)
	defer st.Close()
	far := time.Date(2031, time.December, 20, 0, 0, 0, 0, time.UTC)
	rec := ledgertest.NewRecord("acme", 1)
	rec.Timestamp = far.AddDate(0, 1, 0) // January 2032: default, for now
	if err := st.Append(ctx, []*ledger.Entry{ledgertest.NewEntry(rec)}, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	for range 2 { // again: nothing to do
		if err := st.EnsurePartitions(ctx, far); err != nil {
			t.Fatalf("EnsurePartitions = %v", err)
		}
	}
	// acme's tenant partition leaves January 2032 in its default; the
	// other tenant partitions, which hold no record of it, get it.
	acme := partitionOf(t, st, "acme")
	other := "records_h00"
	if acme == other {
		other = "records_h01"
	}
	for part, want := range map[string][]string{
		acme:  {acme + "_p203112", acme + "_p203202", acme + "_p203203"},
		other: {other + "_p203112", other + "_p203201", other + "_p203202", other + "_p203203"},
	} {
		var parts []string
		if err := st.pool.QueryRow(ctx, `SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass AND c.relname >= $1 || '_p2031'`, part).Scan(&parts); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(parts, want) {
			t.Errorf("partitions of %s from 2031-12 = %v, want %v (2032-01 has acme's record in %s's default partition)", part, parts, want, acme)
		}
	}
	if got, err := st.Record(ctx, "acme", rec.RecordID); err != nil || got.Record.RecordID != rec.RecordID {
		t.Errorf("Record() = %v, %v", got, err)
	}
	// Every partition, those there when migration 0005 ran and those
	// created since, compresses the record's large values with LZ4.
	var notLZ4 []string
	if err := st.pool.QueryRow(ctx, `SELECT coalesce(array_agg(c.relname || '.' || a.attname ORDER BY c.relname, a.attname), '{}')
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE c.oid IN (SELECT relid FROM pg_partition_tree('records'))
		  AND a.attname IN ('raw', 'doc', 'receipt') AND a.attcompression <> 'l'`).Scan(&notLZ4); err != nil {
		t.Fatal(err)
	}
	if len(notLZ4) > 0 {
		t.Errorf("columns not compressed with lz4: %v", notLZ4)
	}
}

// The seed's query patterns, verbatim.
const (
	seedQuery1 = `SELECT
  record_id,
  trace_id,
  outputs->>'refund_amount_inr' AS amount_inr,
  approvals,
  evidence_refs,
  lineage
FROM decision_records
WHERE decision_key = 'support.refund.execute'
  AND (outputs->>'refund_amount_inr')::numeric > 10000
  AND timestamp >= '2026-01-01'
  AND timestamp < '2026-04-01';`
	seedQuery2 = `SELECT
  jsonb_array_elements(policy_decisions)->>'policy_decision_id' AS policy_decision_id,
  count(*) AS records
FROM decision_records
WHERE status = 'REJECTED'
  AND timestamp >= now() - interval '7 days'
GROUP BY 1
ORDER BY records DESC;`
	seedQuery3 = `SELECT
  lineage->>'pack_version' AS pack_version,
  count(*) AS sampled_records,
  avg(CASE WHEN replay->>'last_status' = 'replay_equal' THEN 1 ELSE 0 END) AS replay_equal_rate
FROM decision_records
WHERE timestamp >= now() - interval '30 days'
GROUP BY 1;`
)

func TestSeedQueries(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, dsn)
	defer st.Close()
	// One session, its time zone pinned: query 1's date literals are read
	// in it.
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET TIME ZONE 'UTC'`); err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC()
	var es []*ledger.Entry
	add := func(tenant string, ts time.Time, key string, status writ.Status, amount float64, pack string, pds ...string) *writ.Record {
		r := ledgertest.NewRecord(tenant, len(es)+1)
		r.Timestamp, r.DecisionKey, r.Status = ts, key, status
		r.Outputs = map[string]any{"refund_amount_inr": amount, "currency": "INR"}
		r.Approvals = []writ.Approval{{GateID: "g", Approver: "user:a", ApprovalModeEffective: writ.ModeNetwork, EvidenceSnapshotHash: "sha256:" + strings.Repeat("e", 64), DecidedAt: ts}}
		r.Lineage.PackVersion = pack
		r.PolicyDecisions = nil
		for _, pd := range pds {
			r.PolicyDecisions = append(r.PolicyDecisions, writ.PolicyDecision{PolicyDecisionID: pd, BundleID: "b", RuleIDs: []string{"r"}, Verdict: "deny"})
		}
		// Every record also lists the checks that did not fire, with
		// verdict allow: query 2 must not count them.
		r.PolicyDecisions = append(r.PolicyDecisions, writ.PolicyDecision{PolicyDecisionID: "pd_quiet:allow", BundleID: "b", RuleIDs: []string{"quiet"}, Verdict: "allow"})
		es = append(es, ledgertest.NewEntry(r))
		return r
	}
	q1 := time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC)
	big1 := add("acme", q1, "support.refund.execute", writ.StatusDecided, 25000, "2025.03.1", "pd_a")
	big2 := add("globex", q1.AddDate(0, 1, 0), "support.refund.execute", writ.StatusDecided, 10000.5, "2025.03.1", "pd_a")
	add("acme", q1, "support.refund.execute", writ.StatusDecided, 10000, "2025.03.1", "pd_a")                                  // not > 10000
	add("acme", q1, "support.refund.other", writ.StatusDecided, 50000, "2025.03.1", "pd_a")                                    // other key
	add("acme", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), "support.refund.execute", writ.StatusDecided, 50000, "2025.03.1") // after Q1
	add("acme", time.Date(2025, 12, 31, 23, 59, 59, 0, time.UTC), "support.refund.execute", writ.StatusDecided, 50000, "2025.03.1")

	add("acme", now.Add(-time.Hour), "support.refund.execute", writ.StatusRejected, 1, "2026.11.1", "pd_limit", "pd_kyc")
	add("globex", now.Add(-2*24*time.Hour), "support.refund.execute", writ.StatusRejected, 1, "2026.11.1", "pd_limit")
	add("acme", now.Add(-3*24*time.Hour), "support.refund.execute", writ.StatusRejected, 1, "2026.11.2", "pd_limit")
	add("acme", now.Add(-10*24*time.Hour), "support.refund.execute", writ.StatusRejected, 1, "2026.11.2", "pd_old") // older than a week
	add("acme", now.Add(-time.Hour), "support.refund.execute", writ.StatusDecided, 1, "2026.11.2", "pd_allow")
	if err := st.Append(ctx, es, ledger.Seal); err != nil {
		t.Fatal(err)
	}

	rows, err := conn.Query(ctx, seedQuery1)
	if err != nil {
		t.Fatalf("query 1: %v", err)
	}
	type row1 struct {
		RecordID, TraceID, Amount string
		Approvals, Evidence, Lin  []byte
	}
	got1, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row1, error) {
		var x row1
		err := r.Scan(&x.RecordID, &x.TraceID, &x.Amount, &x.Approvals, &x.Evidence, &x.Lin)
		return x, err
	})
	if err != nil {
		t.Fatalf("query 1: %v", err)
	}
	slices.SortFunc(got1, func(a, b row1) int { return strings.Compare(a.Amount, b.Amount) })
	if len(got1) != 2 || got1[0].RecordID != big2.RecordID || got1[0].Amount != "10000.5" || got1[1].RecordID != big1.RecordID || got1[1].Amount != "25000" ||
		got1[1].TraceID != big1.TraceID || !strings.Contains(string(got1[1].Approvals), `"approver": "user:a"`) || !strings.Contains(string(got1[1].Lin), `"pack_version": "2025.03.1"`) {
		t.Errorf("query 1 = %+v, want %s (25000) and %s (10000.5)", got1, big1.RecordID, big2.RecordID)
	}

	rows, err = conn.Query(ctx, seedQuery2)
	if err != nil {
		t.Fatalf("query 2: %v", err)
	}
	type row2 struct {
		ID string
		N  int64
	}
	got2, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row2])
	if err != nil {
		t.Fatalf("query 2: %v", err)
	}
	if want := []row2{{"pd_limit", 3}, {"pd_kyc", 1}}; !slices.Equal(got2, want) {
		t.Errorf("query 2 = %v, want %v", got2, want)
	}

	// A containment filter on the whole list uses its GIN index.
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	var plan []string
	rows, err = conn.Query(ctx, `EXPLAIN SELECT record_id FROM decision_records WHERE policy_evaluations @> '[{"policy_decision_id": "pd_kyc"}]'`)
	if err != nil {
		t.Fatal(err)
	}
	if plan, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); strings.Contains(p, "Seq Scan on records") || !strings.Contains(p, "Bitmap Index Scan") {
		t.Errorf("policy_evaluations @> … does not use the GIN index:\n%s", p)
	}
	if _, err := conn.Exec(ctx, `RESET enable_seqscan`); err != nil {
		t.Fatal(err)
	}

	rows, err = conn.Query(ctx, seedQuery3)
	if err != nil {
		t.Fatalf("query 3: %v", err)
	}
	type row3 struct {
		Pack string
		N    int64
		Rate float64
	}
	got3, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row3, error) {
		var x row3
		var rate pgtype.Numeric
		if err := r.Scan(&x.Pack, &x.N, &rate); err != nil {
			return x, err
		}
		f, err := rate.Float64Value()
		x.Rate = f.Float64
		return x, err
	})
	if err != nil {
		t.Fatalf("query 3: %v", err)
	}
	slices.SortFunc(got3, func(a, b row3) int { return strings.Compare(a.Pack, b.Pack) })
	if want := []row3{{"2026.11.1", 2, 0}, {"2026.11.2", 3, 0}}; !slices.Equal(got3, want) {
		t.Errorf("query 3 = %v, want %v (writ records carry no replay.last_status: rate 0)", got3, want)
	}
}

// TestApprovalAndKeyTablesAppendOnly checks that the database refuses to
// change or forget approval requests, their events, API keys and their
// revocations, whatever SQL a client sends.
func TestApprovalAndKeyTablesAppendOnly(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, dsn)
	defer st.Close()
	t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
	e.NewApprovals = []ledger.NewApproval{ledgertest.NewApproval(e.Record, "apr_1", "GATE_FINANCE", ledgertest.NewBinding("payments.refund", 1), t0, 1)}
	approve := ledgertest.NewApprovalEntry(ledgertest.NewRecord("acme", 2), "apr_1",
		writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "user:fin-1", Reason: "ok", At: t0.Add(time.Minute)})
	if err := st.Append(ctx, []*ledger.Entry{e, approve}, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	key, _, err := auth.NewKey("acme", "alice", []writ.Role{writ.RoleApprover}, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	key.SignedBy, key.SignedAt, key.Signature = "writ-test+0badc0de", t0, bytes.Repeat([]byte{7}, 64)
	if err := st.PutAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	revokedAt := t0.Add(time.Hour)
	if err := st.RevokeAPIKey(ctx, key.ID, revokedAt); err != nil {
		t.Fatal(err)
	}

	mustRefuse(t, st, []string{
		`UPDATE approval_requests SET expires_ns = expires_ns + 1`,
		`UPDATE approval_requests SET request = '\x7b7d'::bytea`,
		`DELETE FROM approval_requests`,
		`TRUNCATE approval_requests CASCADE`,
		`UPDATE approval_events SET kind = 'denied'`,
		`UPDATE approval_events SET actor = 'user:mallory'`,
		`DELETE FROM approval_events`,
		`TRUNCATE approval_events`,
		`UPDATE api_keys SET secret_hash = 'x'`,
		`UPDATE api_keys SET roles = '["admin"]'`,
		`DELETE FROM api_keys`,
		`TRUNCATE api_keys CASCADE`,
		`UPDATE api_key_revocations SET revoked_ns = revoked_ns + 1`,
		`DELETE FROM api_key_revocations`,
		`TRUNCATE api_key_revocations`,
		`UPDATE api_key_signatures SET signature = '\x00'::bytea`,
		`DELETE FROM api_key_signatures`,
		`TRUNCATE api_key_signatures`,
	})
	// A second decision is refused by the database too, whatever its seq.
	_, err = st.pool.Exec(ctx, `INSERT INTO approval_events (tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns)
		SELECT tenant_id, approval_id, seq + 1, 'denied', 'user:mallory', 'x', record_id, at_ns FROM approval_events`)
	if code := pgCode(err); code != "23505" {
		t.Errorf("inserting a second decision = %v (SQLSTATE %s), want unique_violation 23505", err, code)
	}

	a, err := st.Approval(ctx, "acme", "apr_1", t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if a.State != writ.ApprovalApproved || len(a.Events) != 1 || a.Events[0].Actor != "user:fin-1" || !a.ExpiresAt.Equal(t0.Add(ledgertest.ApprovalTTL)) {
		t.Errorf("after the refused statements, Approval(acme, apr_1) = state %s, events %+v, expires %s; want approved by user:fin-1, expiring %s",
			a.State, a.Events, a.ExpiresAt, t0.Add(ledgertest.ApprovalTTL))
	}
	k, err := st.APIKey(ctx, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if k.SecretHash != key.SecretHash || !slices.Equal(k.Roles, key.Roles) || k.RevokedAt == nil || !k.RevokedAt.Equal(revokedAt) {
		t.Errorf("after the refused statements, APIKey(%s) = %+v (revoked %v), want %+v revoked at %s", key.ID, k, k.RevokedAt, key, revokedAt)
	}
}

// TestConcurrentRedemption races checks on two stores (two pools, as two
// writ servers would) to redeem the same approvals, each allowed once:
// every approval is redeemed exactly once, and every other attempt is
// refused as used up, with nothing of it written.
func TestConcurrentRedemption(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
	for _, st := range stores {
		defer st.Close()
	}
	const approvals, perServer, attempts = 8, 4, 3
	t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	n := 0
	next := func() *writ.Record { n++; return ledgertest.NewRecord("acme", n) }
	var setup []*ledger.Entry
	for i := range approvals {
		id := fmt.Sprintf("apr_%d", i)
		e := ledgertest.NewEntry(next())
		e.NewApprovals = []ledger.NewApproval{ledgertest.NewApproval(e.Record, id, "GATE_FINANCE", ledgertest.NewBinding("payments.refund", i), t0, 1)}
		setup = append(setup, e, ledgertest.NewApprovalEntry(next(), id,
			writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "user:fin-1", Reason: "ok", At: t0}))
	}
	if err := stores[0].Append(ctx, setup, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	// Every writer tries every approval, attempts times, one entry per
	// transaction; the entries are made up front.
	type writer struct {
		st      *Store
		entries []*ledger.Entry
	}
	var writers []writer
	for _, st := range stores {
		for range perServer {
			w := writer{st: st}
			for range attempts {
				for i := range approvals {
					w.entries = append(w.entries, ledgertest.NewApprovalEntry(next(), fmt.Sprintf("apr_%d", i),
						writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, At: now}))
				}
			}
			writers = append(writers, w)
		}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, w := range writers {
		wg.Go(func() {
			<-start
			for _, e := range w.entries {
				if err := w.st.Append(ctx, []*ledger.Entry{e}, ledger.Seal); err != nil {
					t.Errorf("Append(redemption of %s) = %v", e.ApprovalEvent.ApprovalID, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	redeemed := map[string][]string{}
	for _, w := range writers {
		for _, e := range w.entries {
			id := e.ApprovalEvent.ApprovalID
			switch {
			case e.Raw != nil && e.Refused == "":
				redeemed[id] = append(redeemed[id], e.Record.RecordID)
			case e.Raw == nil && e.Refused == ledger.RefusedExhausted:
			default:
				t.Errorf("redemption of %s: Raw %d bytes, Refused %q; want appended or refused %q", id, len(e.Raw), e.Refused, ledger.RefusedExhausted)
			}
		}
	}
	for i := range approvals {
		id := fmt.Sprintf("apr_%d", i)
		if len(redeemed[id]) != 1 {
			t.Errorf("%s redeemed by %d records %v, want exactly 1", id, len(redeemed[id]), redeemed[id])
			continue
		}
		a, err := stores[1].Approval(ctx, "acme", id, now)
		if err != nil {
			t.Fatal(err)
		}
		if a.Uses != 1 || len(a.Events) != 2 || a.Events[1].Seq != 2 || a.Events[1].Kind != writ.ApprovalEventRedeemed || a.Events[1].RecordID != redeemed[id][0] {
			t.Errorf("Approval(acme, %s) = uses %d, events %+v; want 1 use, redeemed at seq 2 by %s", id, a.Uses, a.Events, redeemed[id][0])
		}
	}
	want := int64(len(setup) + approvals)
	findings, got, err := verify.VerifyChains(ctx, stores[1])
	if err != nil || len(findings) != 0 || got != want {
		t.Errorf("VerifyChains() = %v, %d records, %v; want no findings over %d records", findings, got, err, want)
	}
}

// TestShadowDecisionsAppendOnly checks that the database refuses to
// change or forget shadow decisions, whatever SQL a client sends.
func TestShadowDecisionsAppendOnly(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, dsn)
	defer st.Close()
	pack := "sha256:" + strings.Repeat("a1", 32)
	e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
	e.Shadow = ledgertest.NewShadow(e.Record, pack, writ.OutcomeReplanRequired)
	want := *e.Shadow
	if err := st.Append(ctx, []*ledger.Entry{e}, ledger.Seal); err != nil {
		t.Fatal(err)
	}

	mustRefuse(t, st, []string{
		`UPDATE shadow_decisions SET outcome = 'allow'`,
		`UPDATE shadow_decisions SET detail = '\x7b7d'::bytea`,
		`DELETE FROM shadow_decisions`,
		`TRUNCATE shadow_decisions`,
	})
	for _, tc := range []struct{ stmt, code string }{
		// A second decision of the same record and pack.
		{`INSERT INTO shadow_decisions (tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail)
			SELECT tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, 'allow', status, detail FROM shadow_decisions`, "23505"},
		// A decision of a record the database does not hold.
		{`INSERT INTO shadow_decisions (tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail)
			SELECT tenant_id, 'rec_nope', decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail FROM shadow_decisions`, "23503"},
	} {
		_, err := st.pool.Exec(ctx, tc.stmt)
		if code := pgCode(err); code != tc.code {
			t.Errorf("%s = %v (SQLSTATE %s), want SQLSTATE %s", tc.stmt, err, code, tc.code)
		}
	}

	page, err := st.ShadowDecisions(ctx, ledger.ShadowQuery{TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Decisions) != 1 || page.Decisions[0].Outcome != want.Outcome || !slices.Equal(page.Decisions[0].Reasons, want.Reasons) {
		t.Errorf("after the refused statements, ShadowDecisions(acme) = %+v, want only %+v", page.Decisions, want)
	}
}

// mustRefuse runs each statement and wants the append-only triggers to
// refuse it (restrict_violation).
func mustRefuse(t *testing.T, st *Store, stmts []string) {
	t.Helper()
	for _, stmt := range stmts {
		_, err := st.pool.Exec(t.Context(), stmt)
		if err == nil {
			t.Errorf("%s succeeded, want it refused", stmt)
		} else if code := pgCode(err); code != "23001" {
			t.Errorf("%s = %v (SQLSTATE %s), want restrict_violation 23001", stmt, err, code)
		}
	}
}

// TestProbeWrite: the write probe of GET /readyz commits, again and
// again, into its one row.
func TestProbeWrite(t *testing.T) {
	testDSN(t)
	t.Parallel()
	st := openStore(t, testSchema(t))
	defer st.Close()
	at := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		if err := st.ProbeWrite(t.Context(), at.Add(time.Duration(i))); err != nil {
			t.Fatalf("ProbeWrite() = %v", err)
		}
	}
	var rows, got int64
	if err := st.pool.QueryRow(t.Context(), `SELECT count(*), max(at_ns) FROM write_probe`).Scan(&rows, &got); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || got != at.Add(2).UnixNano() {
		t.Errorf("write_probe holds %d rows, the last at %d; want 1, at %d", rows, got, at.Add(2).UnixNano())
	}
}

// TestMigrationPlacesRevocations: revocations stored before schema
// version 12 are placed at their tenant's chain head by the migration, so
// that the next checkpoint of a larger tree commits to them.
func TestMigrationPlacesRevocations(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	ms, err := sqlkit.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 12 || ms[11].Version != 12 {
		t.Fatalf("migration 12 is %+v", ms[11])
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	// A database at version 11: acme's head at 3, globex without records,
	// a revoked key of each.
	stmts := []string{`CREATE TABLE writ_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`}
	for _, m := range ms[:11] {
		stmts = append(stmts, m.SQL, fmt.Sprintf(`INSERT INTO writ_migrations (version, name) VALUES (%d, '%s')`, m.Version, m.Name))
	}
	stmts = append(stmts,
		`INSERT INTO heads (tenant_id, seq, hash) VALUES ('acme', 3, 'sha256:00')`,
		`INSERT INTO api_keys (key_id, tenant_id, subject, roles, secret_hash, created_ns) VALUES ('key_a', 'acme', 'a', '["agent"]', 'aa', 1), ('key_g', 'globex', 'g', '["agent"]', 'bb', 1)`,
		`INSERT INTO api_key_revocations (key_id, revoked_ns) VALUES ('key_a', 5), ('key_g', 6)`)
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	c.Close(ctx)

	s := openStore(t, dsn)
	defer s.Close()
	for id, want := range map[string]int64{"key_a": 3, "key_g": 0} {
		k, err := s.APIKey(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if k.RevokedAfter == nil || *k.RevokedAfter != want || k.RevokedAt == nil {
			t.Errorf("after migrating, key %s revoked at %v after %v, want after %d", id, k.RevokedAt, k.RevokedAfter, want)
		}
	}
	// The append-only guard is back.
	if _, err := s.pool.Exec(ctx, `UPDATE api_key_revocations SET head_seq = 9`); err == nil {
		t.Errorf("UPDATE api_key_revocations after migrating = nil, want the append-only refusal")
	}
}
