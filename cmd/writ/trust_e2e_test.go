package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
)

// TestTrustMatrix is docs/trust.md's matrix for the claims an agent can
// make about who it is (issue 31), over HTTP, in SQLite and PostgreSQL:
// each claim with and without it. A forged claim is refused (403,
// nothing written) and never moves a decision from blocked to allowed;
// without it, the decision rests on what writ authenticated.
func TestTrustMatrix(t *testing.T) {
	serverOnEachStore(t, testTrustMatrix)
}

func testTrustMatrix(t *testing.T, data string, storeArgs []string) {
	ctx := context.Background()
	key := func(tenant, subject, roles string, flags ...string) (token, id string) {
		t.Helper()
		args := append([]string{"keys", "create", "--tenant", tenant, "--subject", subject, "--role", roles, "--json"}, storeArgs...)
		out, err := exec.Command(writBinary, append(args, flags...)...).Output()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("writ keys create: %v\n%s", err, ee.Stderr)
		}
		var k struct {
			ID    string `json:"key_id"`
			Token string `json:"token"`
		}
		if err := json.Unmarshal(out, &k); err != nil {
			t.Fatalf("writ keys create --json printed %s (%v)", out, err)
		}
		return k.Token, k.ID
	}
	real, realID := key("acme", "agt_real", "agent")
	other, _ := key("acme", "agt_other", "agent")
	orch, orchID := key("acme", "orchestrator", "agent", "--actor-type", "SERVICE", "--acts-for", "AGENT:agt_*")
	globex, _ := key("globex", "agt_real", "agent")
	auditorTok, _ := key("acme", "auditor_olga", "auditor")
	idvTok, _ := key("acme", "idv.acme.example", "issuer")

	// The tenant trusts one issuer of delegation tokens; globex another.
	idp, forger, globexIdP := newIdP(t, "idp-1"), newIdP(t, "idp-1"), newIdP(t, "g-1")
	issuers := filepath.Join(data, "issuers.json")
	writeJSON(t, filepath.Join(data, "acme.jwks.json"), idp.jwks(t))
	writeJSON(t, filepath.Join(data, "globex.jwks.json"), globexIdP.jwks(t))
	writeJSON(t, issuers, map[string]any{"tenants": map[string]any{
		"acme":   []map[string]string{{"issuer": "https://idp.acme.example", "jwks_file": "acme.jwks.json", "audience": "writ"}},
		"globex": []map[string]string{{"issuer": "https://idp.globex.example", "jwks_file": "globex.jwks.json"}},
	}})
	// The refund example, with a budget of 5 tool calls per actor per day
	// beside its session budget (the session rows below).
	refundPack := filepath.Join(data, "refund")
	if err := os.CopyFS(refundPack, os.DirFS("../../examples/refund")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(refundPack, "specs", "refund-execute.yaml")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, bytes.Replace(b, []byte("  tool_calls: 20\n"), []byte("  tool_calls: 20\n  actor_tool_calls: 5\n  actor_window: 24h\n"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServerArgs(t, append([]string{"--pack", refundPack, "--delegation-issuers", issuers}, storeArgs...)...)
	auditor := clientFor(srv.url, auditorTok)
	fileIDV(t, clientFor(srv.url, idvTok), "acme", "")
	records := func() int {
		t.Helper()
		page, err := auditor.Records(ctx, writ.RecordQuery{TenantID: "acme", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Records)
	}
	record := func(rc *writ.Receipt) writ.Record {
		t.Helper()
		sr, err := auditor.Record(ctx, "acme", rc.Metadata.RecordID)
		if err != nil {
			t.Fatal(err)
		}
		return sr.Record
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if writ.ErrorCode(err) != writ.EFORBIDDEN || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %v, want 403 naming %q", what, err, want)
		}
	}
	refund := func(name string, actor writ.Actor) *writ.CheckRequest {
		req := freshRefund(t, name)
		req.TenantID, req.Actor = "", actor
		return req
	}
	now := time.Now()
	claims := func(over map[string]any) map[string]any {
		c := map[string]any{"iss": "https://idp.acme.example", "sub": "usr_771", "aud": []string{"writ"}, "exp": now.Add(time.Hour), "nbf": now.Add(-time.Minute)}
		for k, v := range over {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}

	// A decision blocked for a human's review, to resume below.
	blocked, err := clientFor(srv.url, real).Check(ctx, refund("refund-high-value-human-review", writ.Actor{}))
	if err != nil || blocked.SafeToExecute || blocked.HumanReviewTerminal {
		t.Fatalf("high-value check = %+v, %v; want blocked for review", blocked, err)
	}

	// Actor. The first finding: an agt_real key naming the CEO.
	n := records()
	_, err = clientFor(srv.url, real).Check(ctx, refund("refund-allow", writ.Actor{Type: writ.ActorHuman, ID: "ceo_alice"}))
	refused("check naming HUMAN:ceo_alice with agt_real's key", err, "actor mismatch")
	if got := records(); got != n {
		t.Errorf("the refused check wrote %d records", got-n)
	}
	// A request that sets what writ sets is refused as well.
	_, err = clientFor(srv.url, real).Check(ctx, refund("refund-allow", writ.Actor{Type: writ.ActorAgent, ID: "agt_real", Provenance: writ.ProvenanceAuthenticated}))
	refused("check setting actor.provenance", err, "set by writ")
	// Without the claim: the key's principal, authenticated.
	allowed, err := clientFor(srv.url, real).Check(ctx, refund("refund-allow", writ.Actor{DelegatedUserID: "usr_771"}))
	if err != nil || !allowed.SafeToExecute {
		t.Fatalf("check as the key's own principal = %+v, %v; want allowed", allowed, err)
	}
	rec := record(allowed)
	if a := rec.Actor; a.Type != writ.ActorAgent || a.ID != "agt_real" || a.Provenance != writ.ProvenanceAuthenticated || a.KeyID != realID || a.ActedBy != nil {
		t.Errorf("record actor = %+v, want AGENT agt_real, authenticated, key %s", a, realID)
	}
	if a := rec.Actor; a.DelegatedUserID != "usr_771" || a.DelegatedUserProvenance != writ.ProvenanceClaimed {
		t.Errorf("record delegated user = %q (%s), want usr_771 claimed (no token)", a.DelegatedUserID, a.DelegatedUserProvenance)
	}
	// An orchestrator's SERVICE key acting for an agent: who acted for whom.
	viaOrch, err := clientFor(srv.url, orch).Check(ctx, refund("refund-allow", writ.Actor{Type: writ.ActorAgent, ID: "agt_real"}))
	if err != nil {
		t.Fatal(err)
	}
	if a := record(viaOrch).Actor; a.ID != "agt_real" || a.KeyID != orchID || a.ActedBy == nil || *a.ActedBy != (writ.ActorRef{Type: writ.ActorService, ID: "orchestrator"}) {
		t.Errorf("record actor via the orchestrator = %+v, want agt_real acted for by SERVICE:orchestrator with key %s", a, orchID)
	}
	n = records()
	_, err = clientFor(srv.url, orch).Check(ctx, refund("refund-allow", writ.Actor{Type: writ.ActorHuman, ID: "ceo_alice"}))
	refused("the orchestrator naming a human it may not act for", err, "actor mismatch")

	// Delegated user: claimed without a token, authenticated with one.
	delegated := func(tok string) *httpapi.Client {
		return httpapi.NewClient(srv.url, httpapi.WithHeader("Authorization", "Bearer "+real), httpapi.WithHeader(httpapi.HeaderDelegation, tok))
	}
	rc, err := delegated(idp.sign(t, claims(nil))).Check(ctx, refund("refund-allow", writ.Actor{}))
	if err != nil {
		t.Fatalf("check with a valid delegation token: %v", err)
	}
	if a := record(rc).Actor; a.DelegatedUserID != "usr_771" || a.DelegatedUserProvenance != writ.ProvenanceAuthenticated || a.DelegatedUserIssuer != "https://idp.acme.example" {
		t.Errorf("record actor with a token = %+v, want usr_771 authenticated by https://idp.acme.example", a)
	}
	n = records()
	for _, tc := range []struct{ name, token, want string }{
		{"a bad signature", forger.sign(t, claims(nil)), "signature does not verify"},
		{"an unknown issuer", idp.sign(t, claims(map[string]any{"iss": "https://evil.example"})), "not one tenant \"acme\" trusts"},
		{"an expired token", idp.sign(t, claims(map[string]any{"exp": now.Add(-time.Minute)})), "has expired"},
		{"a token for another tenant", globexIdP.sign(t, claims(map[string]any{"iss": "https://idp.globex.example"})), "another tenant"},
		{"a token for another user", idp.sign(t, claims(map[string]any{"sub": "usr_other"})), "delegated user mismatch"},
	} {
		rc, err := delegated(tc.token).Check(ctx, refund("refund-allow", writ.Actor{DelegatedUserID: "usr_771"}))
		refused("check with "+tc.name, err, tc.want)
		if rc != nil && rc.SafeToExecute {
			t.Errorf("check with %s is safe to execute", tc.name)
		}
	}
	// Another tenant's key with acme's token: its tenant trusts another issuer.
	_, err = httpapi.NewClient(srv.url, httpapi.WithHeader("Authorization", "Bearer "+globex), httpapi.WithHeader(httpapi.HeaderDelegation, idp.sign(t, claims(nil)))).
		Check(ctx, refund("refund-allow", writ.Actor{}))
	refused("globex's check with acme's token", err, "another tenant")
	if got := records(); got != n {
		t.Errorf("the refused delegations wrote %d records", got-n)
	}

	// Reports and resumes: only from the key that made the decision, or
	// one that may act for its actor.
	n = records()
	report := &writ.ExecutionReport{TenantID: "acme", DecisionID: allowed.DecisionID, Status: writ.ExecutionSucceeded, ResultDigest: "sha256:" + strings.Repeat("ab", 32)}
	_, err = clientFor(srv.url, other).ReportExecution(ctx, report)
	refused("agt_other's report on agt_real's decision", err, "may not act on it")
	forged := *report
	forged.Actor = &writ.Actor{Type: writ.ActorAgent, ID: "agt_real"}
	_, err = clientFor(srv.url, other).ReportExecution(ctx, &forged)
	refused("agt_other's report naming agt_real", err, "actor mismatch")
	n = records()
	_, err = clientFor(srv.url, other).Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refund("refund-high-value-human-review", writ.Actor{})})
	refused("agt_other's resume of agt_real's decision", err, "may not act on it")
	if got := records(); got != n {
		t.Errorf("the refused report and resume wrote %d records", got-n)
	}
	// Without the claim: agt_real's own report is taken, and so is the
	// orchestrator's resume (it may act for agt_real); still blocked.
	ack, err := clientFor(srv.url, real).ReportExecution(ctx, report)
	if err != nil || ack.Status != writ.StatusClosed {
		t.Errorf("agt_real's own report = %+v, %v; want CLOSED", ack, err)
	}
	rc, err = clientFor(srv.url, orch).Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked.DecisionID, Request: refund("refund-high-value-human-review", writ.Actor{Type: writ.ActorAgent, ID: "agt_real"})})
	if err != nil || rc.SafeToExecute {
		t.Errorf("the orchestrator's resume = %+v, %v; want it decided, still blocked", rc, err)
	}

	// Session. The meter counts per session, a name the caller chooses:
	// leaving it out, or naming a fresh one, must not let a check through.
	budgetedAs := func(agent, customer, session string) *writ.CheckRequest {
		req := refund("refund-allow", writ.Actor{Type: writ.ActorAgent, ID: agent})
		req.SubjectIDs[0] = "customer:" + customer // one customer each: the velocity rule stays quiet
		req.InputsRefs.Session = session
		citeIDV(t, clientFor(srv.url, idvTok), req, "")
		return req
	}
	budgeted := func(customer, session string) *writ.CheckRequest { return budgetedAs("agt_budget", customer, session) }
	asBudget := clientFor(srv.url, orch) // acts for AGENT:agt_*
	// With the claim (no session, no run): refused, budget_unmetered.
	rc, err = asBudget.Check(ctx, budgeted("cus_b0", ""))
	if err != nil || rc.SafeToExecute || len(rc.Reasons) != 1 || rc.Reasons[0].Code != "budget_unmetered" {
		t.Errorf("check with the session omitted = %+v, %v; want blocked, budget_unmetered", rc, err)
	}
	// Without it: the same check naming its session is allowed, and so
	// are four more in fresh sessions, up to the actor's budget of 5.
	for i := 1; i <= 5; i++ {
		rc, err = asBudget.Check(ctx, budgeted(fmt.Sprintf("cus_b%d", i), fmt.Sprintf("sess_b%d", i)))
		if err != nil || !rc.SafeToExecute {
			t.Fatalf("check %d of agt_budget in session sess_b%d = %+v, %v; want allowed", i, i, rc, err)
		}
	}
	if m := record(rc).MeteredUsage; m == nil || m.ActorToolCalls != 5 || m.ToolCalls != 1 {
		t.Errorf("fifth check's metered_usage = %+v, want 5 for the actor, 1 in its session", m)
	}
	// The sixth: in its session (without the claim) and in a fresh one
	// (with it), blocked alike; leaving the session out again too.
	for _, tc := range []struct{ name, session string }{{"in the last session", "sess_b5"}, {"in a fresh session", "sess_fresh"}, {"with the session omitted", ""}} {
		rc, err := asBudget.Check(ctx, budgeted("cus_b6", tc.session))
		if err != nil || rc.SafeToExecute {
			t.Errorf("sixth check of agt_budget %s = %+v, %v; want blocked", tc.name, rc, err)
		}
	}
	// Another agent has its own count.
	rc, err = asBudget.Check(ctx, budgetedAs("agt_budget2", "cus_b7", "sess_fresh"))
	if err != nil || !rc.SafeToExecute {
		t.Errorf("another agent's check = %+v, %v; want allowed", rc, err)
	}
}

// idp is an issuer of delegation tokens: an Ed25519 key with its key id.
type idp struct{ priv, pub jwk.Key }

func newIdP(t *testing.T, kid string) idp {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	pub, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return idp{priv: k, pub: pub}
}

func (p idp) jwks(t *testing.T) jwk.Set {
	set := jwk.NewSet()
	if err := set.AddKey(p.pub); err != nil {
		t.Fatal(err)
	}
	return set
}

func (p idp) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	tok := jwt.New()
	for k, v := range claims {
		if err := tok.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA(), p.priv))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
