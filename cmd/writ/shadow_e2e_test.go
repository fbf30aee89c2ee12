package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/replay"
)

// TestShadowPackOverHTTP runs the real server with a shadow pack that
// lowers the refund approval threshold to 4,000 INR, then reports what
// the shadow would have changed.
func TestShadowPackOverHTTP(t *testing.T) {
	cand := t.TempDir()
	if err := os.CopyFS(cand, os.DirFS("../../examples/refund")); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(cand, "policies", "returns.yaml")
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "args.amount_inr > 10000", "args.amount_inr > 4000", 1)
	s = strings.Replace(s, "version: 1.0.0", "version: 1.1.0", 1)
	if err := os.WriteFile(rules, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	srv := startServerArgs(t, "--data", data, "--pack", "../../examples/refund", "--shadow-pack", cand)
	c := httpapi.NewClient(srv.url)
	fileIDV(t, c, "acme", "idv.acme.example")
	var allowed string
	for _, name := range []string{"refund-allow", "refund-high-value-human-review", "refund-account-frozen-goal-fail"} {
		rc, err := c.Check(context.Background(), freshRefund(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "refund-allow" {
			if !rc.SafeToExecute {
				t.Fatalf("refund-allow enforced = %s; the shadow pack must not change it", rc.Outcome)
			}
			allowed = rc.Metadata.RecordID
		}
	}
	// The same report over the API (GET /v1/shadow/report), as the
	// console reads it.
	resp, err := http.Get(srv.url + "/v1/shadow/report?tenant_id=acme")
	if err != nil {
		t.Fatal(err)
	}
	apiBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/shadow/report = %d %s", resp.StatusCode, apiBody)
	}
	resp, err = http.Get(srv.url + "/v1/shadow/report?tenant_id=acme&examples=0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("GET /v1/shadow/report?examples=0 = %d %s, want a 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	srv.stop(t)

	stdout, stderr, code := runLedgerCmd(t, "shadow", "report", "--data", data, "--tenant", "acme", "--json")
	if code != exitOK {
		t.Fatalf("writ shadow report: exit %d: %s", code, stderr)
	}
	var rep replay.ShadowReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Decisions != 3 || rep.Changed != 1 || len(rep.Packs) != 1 || rep.Packs[0].Decisions != 3 {
		t.Fatalf("report = %s", stdout)
	}
	var apiRep replay.ShadowReport
	if err := json.Unmarshal(apiBody, &apiRep); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(apiRep, rep) {
		t.Errorf("GET /v1/shadow/report = %s\nwant what writ shadow report --json says:\n%s", apiBody, stdout)
	}
	first := rep.Transitions[0]
	if first.From != "allow" || first.To != "replan_required" || first.Count != 1 || first.Examples[0] != allowed ||
		first.RulesFired["POLICY_RETURNS_V1@1.1.0:R_HIGH_VALUE_REQUIRES_APPROVAL"] != 1 {
		t.Errorf("changed transition = %+v", first)
	}
	for _, tr := range rep.Transitions[1:] {
		if tr.Changed() {
			t.Errorf("unexpected change %+v", tr)
		}
	}
	text, _, code := runLedgerCmd(t, "shadow", "report", "--data", data, "--tenant", "acme")
	if code != exitOK || !strings.Contains(text, "allow") || !strings.Contains(text, "fires POLICY_RETURNS_V1@1.1.0:R_HIGH_VALUE_REQUIRES_APPROVAL (1)") {
		t.Errorf("text report:\n%s", text)
	}
	// The shadow's decisions never touched the records: every one replays
	// equal under its own pinned pack.
	if out, errOut, code := runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "--all"); code != exitOK {
		t.Errorf("writ replay --all after shadowing: exit %d\n%s%s", code, out, errOut)
	}
}
