package postgres

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/replay"
)

// golden is what the refund example's pack decides of one of its
// requests, as its golden record says (engine/testdata/golden): the
// record's status and the policy decisions that fired.
type golden struct {
	Status          writ.Status `json:"status"`
	PolicyDecisions []struct {
		ID      string `json:"policy_decision_id"`
		Verdict string `json:"verdict"`
	} `json:"policy_decisions"`
	Outputs struct {
		Amount float64 `json:"refund_amount_inr"`
	} `json:"outputs"`
}

// TestSeedQueriesAfterWorkload runs the seed's three queries, exactly as
// printed, on decision_records after a mixed workload through the engine
// (checks in the first quarter of 2026 and in the last days, a
// retraction, a feedback entry) and a sampled replay whose results are
// sealed as records. The expected numbers are computed from what the
// test sent and what the engine answered (and the example's golden
// records), never read from the store.
func TestSeedQueriesAfterWorkload(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, dsn)
	defer st.Close()
	p, err := pack.Load("../examples/refund")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: []byte("writ-test-binding-key-0123456789abcdef"), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	names := []string{"refund-allow", "refund-account-frozen-goal-fail", "refund-exceeds-order-goal-fail", "refund-high-value-human-review", "refund-fraud-terminal-review"}
	goldens := map[string]golden{}
	for _, n := range names {
		b, err := os.ReadFile("../engine/testdata/golden/refund/" + n + ".record.json")
		if err != nil {
			t.Fatal(err)
		}
		var g golden
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		goldens[n] = g
	}
	n := 0
	// filed are the evidence records check puts on file, and when.
	type filedAt struct {
		recordID string
		at       time.Time
	}
	var filed []filedAt
	// check sends one of the example's requests at time at, its evidence
	// observed a minute before, as a customer of its own (so no history
	// aggregate of one check reaches another).
	check := func(name string, at time.Time) *writ.Receipt {
		t.Helper()
		b, err := os.ReadFile("../examples/refund/requests/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var req writ.CheckRequest
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		n++
		req.IdempotencyKey = fmt.Sprintf("ik_seed_%d", n)
		req.ToolCallID = fmt.Sprintf("tc_seed_%d", n)
		for i := range req.SubjectIDs {
			if strings.HasPrefix(req.SubjectIDs[i], "customer:") {
				req.SubjectIDs[i] = fmt.Sprintf("customer:cus_seed_%d", n)
			}
		}
		obs := at.Add(-time.Minute)
		clock.Store(at.UnixNano())
		// The identity service's verification of that customer, on file
		// and cited: a refund accepts no evidence that is only the
		// caller's word.
		idv := fmt.Sprintf("idv_seed_%d", n)
		ictx := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example", Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
		se, err := eng.AddEvidence(ictx, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: idv,
			SubjectIDs: []string{fmt.Sprintf("customer:cus_seed_%d", n)}, Attributes: map[string]any{"method": "otp"}, ObservedAt: &obs})
		if err != nil {
			t.Fatal(err)
		}
		filed = append(filed, filedAt{se.RecordID, at})
		for i := range req.Evidence {
			req.Evidence[i].ObservedAt = &obs
			if req.Evidence[i].Kind == "identity_verification" {
				req.Evidence[i].ID, req.Evidence[i].Version = idv, ""
			}
		}
		rc, err := eng.Check(ctx, &req)
		if err != nil {
			t.Fatalf("Check(%s) = %v", name, err)
		}
		return rc
	}

	// Query 1's quarter: two of each request on 2026-02-10.
	type sent struct {
		name     string
		recordID string
		at       time.Time
	}
	var q1, recent []sent
	for i := range 2 {
		for _, name := range names {
			at := time.Date(2026, 2, 10, 12, i, 0, 0, time.UTC)
			q1 = append(q1, sent{name, check(name, at).Metadata.RecordID, at})
		}
	}
	// The last week: the same, an hour apart, ending now.
	start := time.Now().UTC().Add(-3 * 24 * time.Hour)
	for i := range 3 {
		for j, name := range names {
			at := start.Add(time.Duration(i*len(names)+j) * time.Minute)
			recent = append(recent, sent{name, check(name, at).Metadata.RecordID, at})
		}
	}
	// Ten days ago: outside query 2's week, inside query 3's 30 days.
	for _, name := range names {
		at := time.Now().UTC().Add(-10 * 24 * time.Hour)
		recent = append(recent, sent{name, check(name, at).Metadata.RecordID, at})
	}
	clock.Store(time.Now().UTC().Add(-time.Hour).UnixNano())
	ret, err := eng.Retract(ctx, &writ.RetractRequest{TenantID: "acme", RecordID: recent[0].recordID, By: "auditor_1", Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := eng.Feedback(ctx, &writ.FeedbackRequest{TenantID: "acme", RecordID: recent[1].recordID, Author: "lead_1", Label: "wrong_outcome"})
	if err != nil {
		t.Fatal(err)
	}
	annotations := []string{ret.RecordID, fb.RecordID}

	// A sampled replay, each result sealed as a record.
	const rate = 0.5
	rp := replay.New(st, replay.Options{})
	clock.Store(time.Now().UTC().Add(-30 * time.Minute).UnixNano())
	sum, _, err := rp.Sample(ctx, "acme", rate, 0, func(res *replay.Result) error {
		_, err := eng.RecordReplay(ctx, res)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Equal != sum.Records || sum.Records == 0 {
		t.Fatalf("sampled replay = %+v, want every sampled record replay_equal", sum)
	}

	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET TIME ZONE 'UTC'`); err != nil {
		t.Fatal(err)
	}

	// Query 1: the checks of the quarter above 10000 INR.
	var want1 []string
	for _, s := range q1 {
		if goldens[s.name].Outputs.Amount > 10000 {
			want1 = append(want1, s.recordID)
		}
	}
	rows, err := conn.Query(ctx, seedQuery1)
	if err != nil {
		t.Fatalf("query 1: %v", err)
	}
	got1, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id, trace, amount string
		var a, e, l []byte
		err := r.Scan(&id, &trace, &amount, &a, &e, &l)
		return id, err
	})
	if err != nil {
		t.Fatalf("query 1: %v", err)
	}
	slices.Sort(got1)
	slices.Sort(want1)
	if len(want1) == 0 || !slices.Equal(got1, want1) {
		t.Errorf("query 1 = %v, want %v", got1, want1)
	}

	// Query 2: per fired policy decision, the REJECTED checks of the week.
	weekAgo := time.Now().Add(-7 * 24 * time.Hour)
	want2 := map[string]int64{}
	for _, s := range recent {
		g := goldens[s.name]
		if g.Status != writ.StatusRejected || s.at.Before(weekAgo) {
			continue
		}
		for _, pd := range g.PolicyDecisions {
			if pd.Verdict != "allow" {
				want2[pd.ID]++
			}
		}
	}
	rows, err = conn.Query(ctx, seedQuery2)
	if err != nil {
		t.Fatalf("query 2: %v", err)
	}
	got2 := map[string]int64{}
	var counts []int64
	for rows.Next() {
		var id string
		var c int64
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		got2[id] = c
		counts = append(counts, c)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(want2) == 0 || fmt.Sprint(got2) != fmt.Sprint(want2) || !slices.IsSortedFunc(counts, func(a, b int64) int { return int(b - a) }) {
		t.Errorf("query 2 = %v (in the order %v), want %v, most denials first", got2, counts, want2)
	}

	// Query 3: every decision record of the 30 days (replay results are
	// not), and the share whose latest recorded replay is replay_equal:
	// those in the sample.
	var ids []string
	for _, s := range recent {
		ids = append(ids, s.recordID)
	}
	ids = append(ids, annotations...)
	for _, f := range filed { // the identity verifications of the 30 days
		if f.at.After(time.Now().Add(-30 * 24 * time.Hour)) {
			ids = append(ids, f.recordID)
		}
	}
	var sampled int
	for _, id := range ids {
		if replay.Sampled(id, rate) {
			sampled++
		}
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
	want3 := row3{p.ID(), int64(len(ids)), float64(sampled) / float64(len(ids))}
	if len(got3) != 1 || got3[0].Pack != want3.Pack || got3[0].N != want3.N || fmt.Sprintf("%.6f", got3[0].Rate) != fmt.Sprintf("%.6f", want3.Rate) {
		t.Errorf("query 3 = %+v, want [%+v]", got3, want3)
	}
	if sampled == 0 || sampled == len(ids) {
		t.Errorf("the sample holds %d of %d records: the test proves nothing about the rate", sampled, len(ids))
	}
	t.Logf("query 1: %d records; query 2: %v; query 3: %+v", len(got1), got2, got3)
}
