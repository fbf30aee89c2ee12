package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
)

// TestTenantParamsOverHTTP: on each store, one server with one pack
// (examples/messaging) and two tenants with different parameter values
// (one set over HTTP, one with `writ params set`): the same email is
// internal for one and external (needing consent) for the other. A
// parameter change is a sealed record and decides the next check
// differently; values that do not fit are refused and write nothing;
// and every record of both tenants replays replay_equal after the
// change, on the values it pinned.
func TestTenantParamsOverHTTP(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			data := t.TempDir()
			args := []string{"--data", data, "--pack", "../../examples/messaging"}
			if store == "postgres" {
				dsn := os.Getenv("WRIT_TEST_POSTGRES")
				if dsn == "" {
					t.Skip("WRIT_TEST_POSTGRES is not set")
				}
				keys := filepath.Join(data, "keys")
				if out, err := exec.Command(writBinary, "ledger", "keys", "generate", "--keys", keys).CombinedOutput(); err != nil {
					t.Fatalf("keys generate: %v\n%s", err, out)
				}
				args = append(args, "--store", isolatedSchema(t, dsn), "--keys", keys)
			}
			testTenantParams(t, startServerArgs(t, args...))
		})
	}
}

func testTenantParams(t *testing.T, srv *server) {
	ctx := context.Background()
	c := httpapi.NewClient(srv.url)
	email := func(tenant string) *writ.CheckRequest {
		req := readExample(t, "../../examples/messaging/requests/email-internal-allow.json")
		req.TenantID = tenant
		return req
	}

	// acme over HTTP, globex with the CLI.
	acme, err := c.SetParams(ctx, &writ.SetParamsRequest{TenantID: "acme", Values: map[string]any{"own_domain": "example.com", "external_emails_per_day": 5},
		By: "human:acme_admin", Reason: "our domain", Replaces: "none"})
	if err != nil {
		t.Fatalf("set acme's params: %v", err)
	}
	if acme.Set == "" || acme.SetBy != "human:acme_admin" || acme.Effective["own_domain"] != "example.com" || acme.Effective["external_emails_per_day"] != float64(5) {
		t.Fatalf("acme's params = %+v", acme)
	}
	out, err := exec.Command(writBinary, "params", "set", "--server", srv.url, "--tenant", "globex", "--by", "human:globex_admin",
		"--reason", "our domain", "own_domain=globex.example").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `own_domain = "globex.example"`) {
		t.Fatalf("writ params set: %v\n%s", err, out)
	}
	globex, err := c.Params(ctx, "globex")
	if err != nil || globex.Effective["own_domain"] != "globex.example" || globex.Values["own_domain"] != "globex.example" || globex.Set == "" {
		t.Fatalf("globex's params = %+v, %v", globex, err)
	}

	// One pack, two tenants, two decisions.
	rcA, err := c.Check(ctx, email("acme"))
	if err != nil || rcA.Outcome != writ.OutcomeAllow {
		t.Fatalf("acme's email to lee@example.com = %+v, %v; want allow (internal for acme)", rcA, err)
	}
	rcG, err := c.Check(ctx, email("globex"))
	if err != nil || rcG.Outcome != writ.OutcomeReplanRequired || len(rcG.Reasons) != 1 || rcG.Reasons[0].Code != "customer_consent_required" {
		t.Fatalf("globex's email to lee@example.com = %+v, %v; want replan_required customer_consent_required (external for globex)", rcG, err)
	}
	recA, err := c.Record(ctx, "acme", rcA.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if p := recA.Record.Params; p == nil || p.Set != acme.Set || p.Digest != acme.Digest || p.Values["own_domain"] != "example.com" {
		t.Fatalf("acme's record pins params %+v, want set %s digest %s", p, acme.Set, acme.Digest)
	}
	change, err := c.Record(ctx, "acme", acme.Set)
	if err != nil {
		t.Fatal(err)
	}
	if r := change.Record; r.DecisionKey != "params:messaging" || r.Actor.ID != "human:acme_admin" || r.Outputs["reason"] != "our domain" {
		t.Fatalf("acme's parameter change record = %s", change.Raw)
	}

	// Values that do not fit, or a stale replaces, change nothing.
	before := recordCount(t, c)
	for _, bad := range []*writ.SetParamsRequest{
		{TenantID: "acme", Values: map[string]any{"own_domain": "not a domain"}, By: "human:acme_admin", Reason: "typo"},
		{TenantID: "acme", Values: map[string]any{"no_such_param": 1}, By: "human:acme_admin", Reason: "typo"},
		{TenantID: "acme", Values: map[string]any{"external_emails_per_day": -1}, By: "human:acme_admin", Reason: "typo"},
		{TenantID: "acme", Values: map[string]any{}, By: "human:acme_admin", Reason: "stale", Replaces: "none"},
	} {
		if _, err := c.SetParams(ctx, bad); err == nil {
			t.Errorf("SetParams(%+v) succeeded, want it refused", bad)
		}
	}
	if after := recordCount(t, c); after != before {
		t.Errorf("refused parameter changes wrote %d records", after-before)
	}

	// acme moves to its own domain: the same email is now external.
	moved, err := c.SetParams(ctx, &writ.SetParamsRequest{TenantID: "acme", Values: map[string]any{"own_domain": "acme.example"}, By: "human:acme_admin",
		Reason: "we moved to acme.example", Replaces: acme.Set})
	if err != nil {
		t.Fatal(err)
	}
	if moved.Effective["external_emails_per_day"] != float64(20) {
		t.Errorf("after the change external_emails_per_day = %v, want the default 20 again (left out of the values)", moved.Effective["external_emails_per_day"])
	}
	rcA2, err := c.Check(ctx, email("acme"))
	if err != nil || rcA2.Outcome != writ.OutcomeReplanRequired {
		t.Fatalf("acme's email after the change = %+v, %v; want replan_required", rcA2, err)
	}

	// Every record of both tenants replays equal on what it pinned,
	// the first acme check included (decided under the old values).
	for _, tenant := range []string{"acme", "globex"} {
		page, err := c.Records(ctx, writ.RecordQuery{TenantID: tenant, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range page.Records {
			res, err := c.Replay(ctx, tenant, sr.Record.RecordID)
			if err != nil {
				t.Fatalf("replay %s/%s: %v", tenant, sr.Record.RecordID, err)
			}
			if res.Status != writ.ReplayEqual {
				t.Errorf("replay %s/%s (%s) = %s %+v, want replay_equal", tenant, sr.Record.RecordID, sr.Record.DecisionKey, res.Status, res.Differences)
			}
		}
	}
}
