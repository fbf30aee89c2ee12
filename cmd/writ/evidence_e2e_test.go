package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// TestEvidenceOverHTTP: on each store, the evidence routes against a real
// server on loopback, with the refund example, whose identity
// verification must be issued or observed (the default of a mutating
// action class). An issuer key submits (over HTTP and with
// `writ evidence submit`); a key without the issuer role is refused with
// 403 problem+json and nothing is written; an item reads back by id and
// by content address; the refund is allowed on the issued item and
// refused on the made-up one (unresolvable), and on a revoked, expired,
// other-customer (evidence_subject_mismatch), other-tenant or tampered
// one, each with its diagnosis.
func TestEvidenceOverHTTP(t *testing.T) {
	serverOnEachStore(t, func(t *testing.T, _ string, storeArgs []string) { testEvidenceOverHTTP(t, storeArgs) })
}

func testEvidenceOverHTTP(t *testing.T, storeArgs []string) {
	ctx := context.Background()
	key := func(tenant, subject, roles string) string {
		t.Helper()
		args := append([]string{"keys", "create", "--tenant", tenant, "--subject", subject, "--role", roles, "--json"}, storeArgs...)
		out, err := exec.Command(writBinary, args...).Output()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("writ keys create: %v\n%s", err, ee.Stderr)
		}
		var k struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(out, &k); err != nil {
			t.Fatalf("writ keys create --json printed %s (%v)", out, err)
		}
		return k.Token
	}
	idvTok, fraudTok, agentTok := key("acme", "idv.acme.example", "issuer"), key("acme", "fraud.acme.example", "issuer"), key("acme", "agt_support", "agent")
	auditorTok, globexIDVTok := key("acme", "auditor_olga", "auditor"), key("globex", "idv.globex.example", "issuer")
	srv := startServerArgs(t, append([]string{"--pack", "../../examples/refund"}, storeArgs...)...)
	idv, agent, auditor := clientFor(srv.url, idvTok), clientFor(srv.url, agentTok), clientFor(srv.url, auditorTok)
	count := func() int {
		t.Helper()
		page, err := auditor.Records(ctx, writ.RecordQuery{TenantID: "acme", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Records)
	}
	now := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)

	// Submitted by the IDV's issuer key over HTTP, and by the fraud
	// engine's with the CLI.
	stored, err := idv.AddEvidence(ctx, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: "idv_771",
		SubjectIDs: []string{"customer:cus_77"}, Attributes: map[string]any{"method": "otp"}, ObservedAt: &now})
	if err != nil {
		t.Fatalf("submit as the IDV issuer: %v", err)
	}
	if stored.Provenance != writ.ProvenanceIssued || stored.Item.Issuer != "idv.acme.example" || !strings.HasPrefix(stored.ContentAddress, "sha256:") || stored.RecordID == "" {
		t.Fatalf("stored item = %+v, want issued by idv.acme.example, sealed, with a content address", stored)
	}
	cli := exec.Command(writBinary, "evidence", "submit", "--server", srv.url, "--kind", "fraud_assessment", "--id", "fa_881",
		"--subject", "customer:cus_77", "--subject", "order:ord_881", "--attr", "fraud_score=0.05", "--observed-at", now.Format(time.RFC3339))
	cli.Env = append(os.Environ(), "WRIT_API_KEY="+fraudTok)
	if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "fraud_assessment fa_881 stored, issued by fraud.acme.example") {
		t.Fatalf("writ evidence submit: %v\n%s", err, out)
	}

	// Read back by id and by content address, over HTTP and the CLI.
	for _, id := range []string{"idv_771", stored.ContentAddress} {
		got, err := agent.Evidence(ctx, "acme", id)
		if err != nil || got.ContentAddress != stored.ContentAddress || got.Item.ID != "idv_771" || got.Revoked != nil {
			t.Errorf("Evidence(acme, %s) = %+v, %v; want idv_771", id, got, err)
		}
	}
	show := exec.Command(writBinary, "evidence", "show", "--server", srv.url, "fa_881")
	show.Env = append(os.Environ(), "WRIT_API_KEY="+auditorTok)
	out, err := show.Output()
	var fa writ.StoredEvidence
	if err != nil || json.Unmarshal(out, &fa) != nil || fa.Item.Kind != "fraud_assessment" || fa.Item.Attributes["fraud_score"] != 0.05 {
		t.Errorf("writ evidence show fa_881 = %s, %v", out, err)
	}

	// Without the issuer role: 403 problem+json naming the cause, nothing written.
	before := count()
	for _, tc := range []struct {
		name, token string
		body        string
		want        string
	}{
		{"an agent key", agentTok, `{"kind":"identity_verification","id":"idv_agent","observed_at":"` + now.Format(time.RFC3339) + `"}`, "has no issuer role"},
		{"another tenant's issuer", globexIDVTok, `{"tenant_id":"acme","kind":"identity_verification","id":"idv_cross","observed_at":"` + now.Format(time.RFC3339) + `"}`, "belongs to another tenant"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.url+"/v1/evidence", bytes.NewReader([]byte(tc.body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tc.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var problem struct {
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		err = json.NewDecoder(resp.Body).Decode(&problem)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "application/problem+json" || err != nil || problem.Status != 403 || !strings.Contains(problem.Detail, tc.want) {
			t.Errorf("POST /v1/evidence with %s = %d %s %+v (%v), want 403 problem+json naming %q", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), problem, err, tc.want)
		}
	}
	revoke := exec.Command(writBinary, "evidence", "revoke", "--server", srv.url, "--reason", "not mine to revoke", "idv_771")
	revoke.Env = append(os.Environ(), "WRIT_API_KEY="+agentTok)
	if out, err := revoke.CombinedOutput(); err == nil || !strings.Contains(string(out), "needs the role issuer") {
		t.Errorf("writ evidence revoke with an agent key: %v\n%s; want refused, naming the issuer role", err, out)
	}
	if after := count(); after != before {
		t.Errorf("refused submissions wrote %d records", after-before)
	}

	// The refund of customer cus_77: allowed on the issued item about
	// cus_77, refused on anything else.
	refund := func(ev writ.Evidence) *writ.CheckRequest {
		req := readExample(t, "../../examples/refund/requests/refund-allow.json")
		req.IdempotencyKey, req.TenantID, req.Actor = "", "", writ.Actor{}
		req.SubjectIDs = []string{"customer:cus_77", "order:ord_881"}
		req.Evidence = []writ.Evidence{ev}
		return req
	}
	check := func(what string, ev writ.Evidence) *writ.Receipt {
		t.Helper()
		rc, err := agent.Check(ctx, refund(ev))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return rc
	}
	for _, id := range []string{"idv_771", stored.ContentAddress} {
		if rc := check("issued", writ.Evidence{Kind: "identity_verification", ID: id}); !rc.SafeToExecute {
			t.Errorf("refund citing the issued item as %s: %s %+v, want allowed", id, rc.Outcome, rc.Reasons)
		} else {
			rec, err := auditor.Record(ctx, "acme", rc.Metadata.RecordID)
			if err != nil || len(rec.Record.EvidenceRefs) != 1 || rec.Record.EvidenceRefs[0] != "identity_verification:idv_771#"+stored.ContentAddress {
				t.Errorf("the allow's record cites %v (%v), want the stored item by its content address", rec.Record.EvidenceRefs, err)
			}
		}
	}

	// A revoked, an expired, another customer's and another tenant's item.
	earlier, expired := now.Add(-2*time.Hour), now.Add(-time.Hour)
	for _, r := range []*writ.AddEvidenceRequest{
		{TenantID: "acme", Kind: "identity_verification", ID: "idv_revoked", SubjectIDs: []string{"customer:cus_77"}, ObservedAt: &now},
		{TenantID: "acme", Kind: "identity_verification", ID: "idv_expired", SubjectIDs: []string{"customer:cus_77"}, ObservedAt: &earlier, ExpiresAt: &expired},
		{TenantID: "acme", Kind: "identity_verification", ID: "idv_cus_99", SubjectIDs: []string{"customer:cus_99"}, ObservedAt: &now},
	} {
		if _, err := idv.AddEvidence(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := clientFor(srv.url, globexIDVTok).AddEvidence(ctx, &writ.AddEvidenceRequest{TenantID: "globex", Kind: "identity_verification", ID: "idv_globex", ObservedAt: &now}); err != nil {
		t.Fatal(err)
	}
	rv := exec.Command(writBinary, "evidence", "revoke", "--server", srv.url, "--reason", "the document was reported stolen", "idv_revoked")
	rv.Env = append(os.Environ(), "WRIT_API_KEY="+idvTok)
	if out, err := rv.CombinedOutput(); err != nil || !strings.Contains(string(out), "identity_verification idv_revoked revoked by idv.acme.example") {
		t.Fatalf("writ evidence revoke: %v\n%s", err, out)
	}
	if got, err := auditor.Evidence(ctx, "acme", "idv_revoked"); err != nil || got.Revoked == nil || got.Revoked.Reason != "the document was reported stolen" {
		t.Errorf("the revoked item reads back as %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name      string
		ev        writ.Evidence
		diagnosis string
	}{
		{"the made-up item (unresolvable)", writ.Evidence{Kind: "identity_verification", ID: "i_made_this_up", ObservedAt: &now}, "is not in this tenant's evidence store"},
		{"a revoked item", writ.Evidence{Kind: "identity_verification", ID: "idv_revoked"}, "was revoked"},
		{"an expired item", writ.Evidence{Kind: "identity_verification", ID: "idv_expired"}, "expired at"},
		{"another customer's item", writ.Evidence{Kind: "identity_verification", ID: "idv_cus_99"}, "is about customer:cus_99, and this check is about customer:cus_77, order:ord_881: they share no subject"},
		{"another tenant's item", writ.Evidence{Kind: "identity_verification", ID: "idv_globex"}, "is not in this tenant's evidence store"},
		{"another tenant's item, named as such", writ.Evidence{Kind: "identity_verification", ID: "idv_globex", TenantID: "globex"}, "belongs to another tenant"},
		{"a tampered citation", writ.Evidence{Kind: "identity_verification", ID: "idv_771", Hash: "sha256:" + strings.Repeat("0", 64)}, "does not match the stored item"},
	} {
		rc := check(tc.name, tc.ev)
		said := false
		for _, r := range rc.Reasons {
			said = said || r.Code == "missing_identity_verification" && strings.Contains(r.Message, tc.diagnosis)
		}
		if rc.SafeToExecute || !said {
			t.Errorf("refund citing %s: %s %+v; want refused, saying %q", tc.name, rc.Outcome, rc.Reasons, tc.diagnosis)
		}
	}
}
