package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/writhq/writ"
)

// TestMeterKeys: over HTTP, on both stores, the refund pack with
// `accepts: issued` on its budgets: the token and cost figures of an
// agent's key are claimed and do not count (budget_unmetered), those of
// a key with the role meter are issued and do; the record keeps the
// caller's figures with their provenance beside writ's own count. A
// request that sets usage.provenance is refused and writes nothing
// (issue 31).
func TestMeterKeys(t *testing.T) {
	serverOnEachStore(t, testMeterKeys)
}

func testMeterKeys(t *testing.T, data string, storeArgs []string) {
	ctx := context.Background()
	key := func(subject, roles string, flags ...string) string {
		t.Helper()
		args := append([]string{"keys", "create", "--tenant", "acme", "--subject", subject, "--role", roles, "--json"}, storeArgs...)
		out, err := exec.Command(writBinary, append(args, flags...)...).Output()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("writ keys create: %v\n%s", err, ee.Stderr)
		}
		var k struct {
			Token string   `json:"token"`
			Roles []string `json:"roles"`
		}
		if err := json.Unmarshal(out, &k); err != nil {
			t.Fatalf("writ keys create --json printed %s (%v)", out, err)
		}
		return k.Token
	}
	agent := key("agt_real", "agent")
	meter := key("gateway", "agent,meter", "--actor-type", "SERVICE", "--acts-for", "AGENT:agt_*")
	auditor := key("auditor_olga", "auditor")
	idv := key("idv.acme.example", "issuer")

	pack := filepath.Join(data, "refund")
	if err := os.CopyFS(pack, os.DirFS("../../examples/refund")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(pack, "specs", "refund-execute.yaml")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, bytes.Replace(b, []byte("  on_exceed: deny\n"), []byte("  accepts: issued\n  on_exceed: deny\n"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServerArgs(t, append([]string{"--pack", pack}, storeArgs...)...)
	records := func() int {
		t.Helper()
		page, err := clientFor(srv.url, auditor).Records(ctx, writ.RecordQuery{TenantID: "acme", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Records)
	}
	n := 0
	refund := func(cost float64) *writ.CheckRequest {
		n++
		req := freshRefund(t, "refund-allow")
		req.TenantID, req.Actor = "", writ.Actor{Type: writ.ActorAgent, ID: "agt_real"}
		req.SubjectIDs[0] = "customer:cus_m" + string(rune('a'+n)) // one customer each: the velocity rule stays quiet
		req.Usage = &writ.Usage{CostUSDCents: cost}
		citeIDV(t, clientFor(srv.url, idv), req, "")
		return req
	}

	// With the claim: the agent's own figure, under the budget, does not count.
	rc, err := clientFor(srv.url, agent).Check(ctx, refund(1))
	if err != nil || rc.SafeToExecute || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "budget_unmetered" {
		t.Errorf("check with the agent's claimed cost = %+v, %v; want blocked, budget_unmetered", rc, err)
	}
	// Leaving usage out does not either.
	req := refund(0)
	req.Usage = nil
	if rc, err := clientFor(srv.url, agent).Check(ctx, req); err != nil || rc.SafeToExecute {
		t.Errorf("check with no usage = %+v, %v; want blocked", rc, err)
	}
	// Setting the provenance is refused, and writes nothing.
	req = refund(1)
	before := records()
	req.Usage.Provenance = writ.ProvenanceIssued
	if _, err := clientFor(srv.url, agent).Check(ctx, req); writ.ErrorCode(err) != writ.EFORBIDDEN {
		t.Errorf("check setting usage.provenance = %v, want 403", err)
	}
	if got := records(); got != before {
		t.Errorf("the refused check wrote %d records", got-before)
	}
	// Without it: the meter's figure, for the agent it acts for, counts.
	rc, err = clientFor(srv.url, meter).Check(ctx, refund(1))
	if err != nil || !rc.SafeToExecute {
		t.Fatalf("check with the meter's cost = %+v, %v; want allowed", rc, err)
	}
	sr, err := clientFor(srv.url, auditor).Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if u, m := sr.Record.BudgetUsage, sr.Record.MeteredUsage; u == nil || u.CostUSDCents != 1 || u.Provenance != writ.ProvenanceIssued || m == nil || m.Provenance != writ.ProvenanceObserved || m.ToolCalls != 1 {
		t.Errorf("record budget_usage = %+v, metered_usage = %+v; want the meter's 1 cent issued, writ's 1 call observed", u, m)
	}
	// The meter's figure over the budget is refused as exceeded.
	if rc, err := clientFor(srv.url, meter).Check(ctx, refund(600)); err != nil || rc.SafeToExecute || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "budget_exceeded" {
		t.Errorf("check with the meter's cost over budget = %+v, %v; want blocked, budget_exceeded", rc, err)
	}
}
