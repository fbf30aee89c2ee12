package engine_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/sqlite"
)

// refund returns the refund example's allowed request as a new refund:
// its own order and idempotency key, for customer (none when ""), with
// its evidence observed a minute before now.
func refund(t testing.TB, tenant, customer string, n int, now time.Time) *writ.CheckRequest {
	req := readRequest(t, example("refund", "requests", "refund-allow.json"))
	order := fmt.Sprintf("ord_%d", n)
	req.TenantID = tenant
	req.IdempotencyKey = fmt.Sprintf("ik_%s_%s_%d", tenant, customer, n)
	req.ToolCallID = fmt.Sprintf("tc_%d", n)
	req.Arguments["order_id"] = order
	req.Outputs["order_id"] = order
	req.SubjectIDs = []string{"order:" + order}
	if customer != "" {
		req.SubjectIDs = append(req.SubjectIDs, "customer:"+customer)
	}
	observed := now.Add(-time.Minute)
	for i := range req.Evidence {
		req.Evidence[i].TenantID = tenant
		req.Evidence[i].ObservedAt = &observed
	}
	if customer != "" {
		// The customer's own identity verification of the day, which
		// verifyCustomers put on file.
		req.Evidence[0] = writ.Evidence{Kind: "identity_verification", ID: idvOf(customer, now), TenantID: tenant}
	}
	return req
}

// idvOf names the identity verification of customer on now's day.
func idvOf(customer string, now time.Time) string {
	return "idv_" + customer + "_" + now.UTC().Format("20060102")
}

// verifyCustomers has the IDV service submit an identity verification
// of each customer in tenant, observed a minute before now, as item
// idvOf(customer, now): the evidence refund cites that day, since a
// refund accepts only evidence writ resolves.
func verifyCustomers(t testing.TB, eng *engine.Engine, tenant string, now time.Time, customers ...string) {
	t.Helper()
	idv := writ.WithPrincipal(context.Background(), &writ.Principal{TenantID: tenant, KeyID: "key_idv_" + tenant, Subject: "idv." + tenant + ".example",
		Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	observed := now.Add(-time.Minute)
	for _, c := range customers {
		if _, err := eng.AddEvidence(idv, &writ.AddEvidenceRequest{TenantID: tenant, Kind: "identity_verification", ID: idvOf(c, now),
			SubjectIDs: []string{"customer:" + c}, ObservedAt: &observed}); err != nil && writ.ErrorCode(err) != writ.ECONFLICT { // ECONFLICT: on file already
			t.Fatalf("verify %s of %s: %v", c, tenant, err)
		}
	}
}

// replayAll replays every record of the tenant and wants each equal.
func replayAll(t *testing.T, h *harness, tenant string) {
	t.Helper()
	sum, err := replay.New(h.store, replay.Options{}).Tenant(context.Background(), tenant, func(res *replay.Result) error {
		if res.Status != replay.StatusEqual {
			t.Errorf("replay of %s: %s %+v", res.RecordID, res.Status, res.Differences)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records == 0 {
		t.Errorf("replayed no records of %s", tenant)
	}
}

// TestRefundVelocity: the refund example allows at most 3 refunds per
// customer in 24 hours. The 4th is denied naming rule R_REFUND_VELOCITY;
// another customer, or the same customer id of another tenant, is
// counted apart; the window slides with the clock; a refund naming no
// customer cannot be counted and fails closed. Every record replays
// equal, its pinned value included.
func TestRefundVelocity(t *testing.T) {
	clk := newClock(exampleClock)
	h := newHarness(t, example("refund"), func(c *engine.Config) { c.Now = clk.Now })
	ctx := context.Background()
	check := func(req *writ.CheckRequest) *writ.Receipt {
		t.Helper()
		rc, err := h.eng.Check(ctx, req)
		if err != nil {
			t.Fatalf("Check(%s): %v", req.Arguments["order_id"], err)
		}
		return rc
	}
	verifyCustomers(t, h.eng, "acme", clk.Now(), "cus_1", "cus_2")
	verifyCustomers(t, h.eng, "globex", clk.Now(), "cus_1")
	for i := range 3 {
		if rc := check(refund(t, "acme", "cus_1", i, clk.Now())); rc.Outcome != writ.OutcomeAllow {
			t.Fatalf("refund %d of cus_1: outcome %s (%+v), want allow", i+1, rc.Outcome, rc.Reasons)
		}
		clk.Add(time.Hour)
	}
	rc := check(refund(t, "acme", "cus_1", 3, clk.Now()))
	if rc.SafeToExecute || rc.Outcome != writ.OutcomeGoalFailTerminal || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "refund_velocity_exceeded" ||
		!strings.Contains(rc.Reasons[0].Message, "R_REFUND_VELOCITY") || !strings.Contains(rc.Reasons[0].Message, "has had 3 ") {
		t.Fatalf("4th refund of cus_1: %s safe=%v %+v; want denied by R_REFUND_VELOCITY with the count 3", rc.Outcome, rc.SafeToExecute, rc.Reasons)
	}
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	// The refund pack's budget meters tool calls: writ's count of the
	// session comes second (see TestMeteredToolCalls).
	if hv := rec.Record.History; len(hv) != 2 || hv[0].Name != "refunds_per_customer" || hv[0].Group != "customer:cus_1" || hv[0].Value != 3 || hv[1].Name != policy.MeterToolCalls ||
		!hv[0].Since.Equal(clk.Now().Add(-24*time.Hour)) {
		t.Errorf("4th refund's record pins history %+v, want refunds_per_customer = 3 for customer:cus_1 since %s", hv, clk.Now().Add(-24*time.Hour))
	}
	if rc := check(refund(t, "acme", "cus_2", 4, clk.Now())); rc.Outcome != writ.OutcomeAllow {
		t.Errorf("refund of cus_2 after cus_1's limit: %s %+v, want allow", rc.Outcome, rc.Reasons)
	}
	if rc := check(refund(t, "globex", "cus_1", 5, clk.Now())); rc.Outcome != writ.OutcomeAllow {
		t.Errorf("refund of globex's cus_1: %s %+v, want allow (tenants are counted apart)", rc.Outcome, rc.Reasons)
	}
	// The first refund (3 h ago) leaves the window 24 h after it.
	clk.Add(21 * time.Hour)
	verifyCustomers(t, h.eng, "acme", clk.Now(), "cus_1") // yesterday's verification is stale
	if rc := check(refund(t, "acme", "cus_1", 6, clk.Now())); rc.Outcome != writ.OutcomeAllow {
		t.Errorf("refund of cus_1 24 h after the first: %s %+v, want allow", rc.Outcome, rc.Reasons)
	}
	if rc := check(refund(t, "acme", "cus_1", 7, clk.Now())); rc.Outcome != writ.OutcomeGoalFailTerminal {
		t.Errorf("next refund of cus_1: %s %+v, want denied (3 in the window again)", rc.Outcome, rc.Reasons)
	}
	// A refund naming no customer has no customer's identity verified
	// either (missing_identity_verification beside the velocity rule).
	rc = check(refund(t, "acme", "", 8, clk.Now()))
	if rc.SafeToExecute || len(rc.Reasons) != 2 || !strings.Contains(rc.Reasons[0].Message, "could not be evaluated") || rc.Reasons[1].Code != "missing_identity_verification" {
		t.Errorf("refund naming no customer: %s %+v, want denied, failing closed", rc.Outcome, rc.Reasons)
	}
	h.verify(t)
	replayAll(t, h, "acme")
	replayAll(t, h, "globex")
}

// TestVelocityConcurrent: 16 concurrent refunds of one customer allow
// exactly 3 (see ledger/history.go for why).
func TestVelocityConcurrent(t *testing.T) {
	h := newHarness(t, example("refund"))
	outcomes := raceRefunds(t, []*engine.Engine{h.eng}, 16)
	if outcomes[writ.OutcomeAllow] != 3 || outcomes[writ.OutcomeGoalFailTerminal] != 13 {
		t.Errorf("16 concurrent refunds of one customer: %v, want 3 allowed and 13 denied", outcomes)
	}
	h.verify(t)
	replayAll(t, h, "acme")
}

// raceRefunds sends n refunds of one customer at once, spread over the
// engines, and counts their outcomes.
func raceRefunds(t *testing.T, engines []*engine.Engine, n int) map[writ.Outcome]int {
	var mu sync.Mutex
	outcomes := map[writ.Outcome]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	verifyCustomers(t, engines[0], "acme", exampleClock, "cus_race")
	for i := range n {
		wg.Go(func() {
			<-start
			rc, err := engines[i%len(engines)].Check(context.Background(), refund(t, "acme", "cus_race", i, exampleClock))
			if err != nil {
				t.Errorf("refund %d: %v", i, err)
				return
			}
			mu.Lock()
			outcomes[rc.Outcome]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return outcomes
}

// TestHistoryChangedIsADiff: a record's pinned history value that the
// ledger's contributions as of the record do not give is a typed
// replay difference, changed_history. A contribution row is slipped in
// below the record (rows are append-only, so inserting is the only
// tampering the database lets through).
func TestHistoryChangedIsADiff(t *testing.T) {
	h := newHarness(t, example("refund"))
	ctx := context.Background()
	var last *writ.Receipt
	verifyCustomers(t, h.eng, "acme", exampleClock, "cus_1")
	for i := range 3 {
		rc, err := h.eng.Check(ctx, refund(t, "acme", "cus_1", i, exampleClock))
		if err != nil || rc.Outcome != writ.OutcomeAllow {
			t.Fatalf("refund %d: %v %+v", i, err, rc)
		}
		last = rc
	}
	rp := replay.New(h.store, replay.Options{})
	if res, err := rp.Record(ctx, "acme", last.Metadata.RecordID); err != nil || res.Status != replay.StatusEqual {
		t.Fatalf("replay before tampering: %+v, %v; want equal", res, err)
	}
	rec, err := h.eng.Record(ctx, "acme", last.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	pinned := rec.Record.History[0]
	db, err := sql.Open("sqlite", filepath.Join(h.dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO history_contributions (tenant_id, aggregate, group_key, at_ns, amount, seq, record_id)
		SELECT tenant_id, ?, ?, ?, 1, 1, record_id FROM records WHERE tenant_id = 'acme' AND seq = 1`,
		pinned.Aggregate, pinned.Group, exampleClock.UnixNano()); err != nil {
		t.Fatal(err)
	}
	res, err := rp.Record(ctx, "acme", last.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != replay.StatusDiff || len(res.Differences) != 1 {
		t.Fatalf("replay after tampering: %s %+v, want one difference", res.Status, res.Differences)
	}
	d := res.Differences[0]
	if d.Class != replay.ClassHistory || d.Path != "history[0].value" || string(d.Recorded) != "2" || string(d.Replayed) != "3" {
		t.Errorf("difference %+v, want changed_history at history[0].value, recorded 2, replayed 3", d)
	}
}

// TestExecutedFilter: under a copy of the refund pack whose aggregates
// count executed refunds (the velocity count, and a session's tokens), an
// allowed refund counts only once its execution report says it succeeded,
// and the session's tokens are the report's own usage, not the check's.
func TestExecutedFilter(t *testing.T) {
	dir := refundPackVariant(t, 2, "filter: allowed", "filter: executed", "window: 24h}", "window: 24h, filter: executed}")
	h := newHarness(t, dir)
	ctx := context.Background()
	var decisions []string
	verifyCustomers(t, h.eng, "acme", exampleClock, "cus_1")
	for i := range 4 {
		rc, err := h.eng.Check(ctx, refund(t, "acme", "cus_1", i, exampleClock))
		if err != nil || rc.Outcome != writ.OutcomeAllow {
			t.Fatalf("refund %d before any report: %v %+v, want allow (nothing executed yet)", i, err, rc)
		}
		decisions = append(decisions, rc.DecisionID)
	}
	for i, id := range decisions[:3] {
		rep := &writ.ExecutionReport{TenantID: "acme", DecisionID: id, Status: writ.ExecutionSucceeded, Usage: &writ.Usage{Tokens: 100 * int64(i+1)}}
		if i == 2 {
			rep.Usage = nil // the check's own usage counts
		}
		if _, err := h.eng.ReportExecution(ctx, rep); err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	// A failed execution counts nowhere.
	if _, err := h.eng.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "acme", DecisionID: decisions[3], Status: writ.ExecutionFailed,
		Error: &writ.ExecutionError{Code: "psp_timeout"}}); err != nil {
		t.Fatal(err)
	}
	rc, err := h.eng.Check(ctx, refund(t, "acme", "cus_1", 9, exampleClock))
	if err != nil || rc.SafeToExecute || rc.Reasons[0].Code != "refund_velocity_exceeded" {
		t.Fatalf("refund after 3 executed: %v %+v, want refused by the velocity rule", err, rc)
	}
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, v := range rec.Record.History {
		got[v.Name] = v.Value
	}
	// 100 + 200 reported, and the third report's check declared 4720.
	if got["refunds_per_customer"] != 3 || got["session_tokens"] != 100+200+4720 {
		t.Errorf("pinned history %v, want refunds_per_customer 3 and session_tokens %d", got, 100+200+4720)
	}
	h.verify(t)
	replayAll(t, h, "acme")
}
