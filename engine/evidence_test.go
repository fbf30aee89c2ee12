package engine_test

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/writhq/writ"
	"github.com/writhq/writ/delegation"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/postgres"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/sqlite"
)

// testStore opens each store the engine's two-store tests run on: SQLite, and
// PostgreSQL (in a schema of its own) when WRIT_TEST_POSTGRES is set.
func testStore(t testing.TB, name string) ledger.Store {
	t.Helper()
	if name == "sqlite" {
		st, err := sqlite.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	dsn := os.Getenv("WRIT_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WRIT_TEST_POSTGRES is not set")
	}
	var b [6]byte
	crand.Read(b[:])
	schema := "writ_evidence_test_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	st, err := postgres.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type signer struct {
	kid  string
	priv jwk.Key
	pub  jwk.Key
}

func newSigner(t *testing.T, kid string) signer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := signer{kid: kid}
	if s.priv, err = jwk.Import(priv); err != nil {
		t.Fatal(err)
	}
	if s.pub, err = jwk.Import(pub); err != nil {
		t.Fatal(err)
	}
	for _, k := range []jwk.Key{s.priv, s.pub} {
		k.Set(jwk.KeyIDKey, kid)
		k.Set(jwk.AlgorithmKey, jwa.EdDSA())
	}
	return s
}

func (s signer) sign(t *testing.T, item *writ.EvidenceItem) string {
	t.Helper()
	canon, err := record.Canonical(item)
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	hdr.Set(jws.KeyIDKey, s.kid)
	tok, err := jws.Sign(canon, jws.WithKey(jwa.EdDSA(), s.priv, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

// TestEvidenceResolution is issue 32's must-show, in SQLite and
// PostgreSQL: a made-up identity_verification on a refund is refused as
// unresolvable; the same refund citing an item the IDV issuer submitted
// (or signed) is allowed; a revoked, expired, other-tenant or tampered
// item is refused with its own diagnosis; bad submissions are refused
// naming their cause, with nothing written; replay of the allowed
// decision stays equal after the item is revoked; the chain verifies.
func TestEvidenceResolution(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) { testEvidenceResolution(t, testStore(t, name)) })
	}
}

func testEvidenceResolution(t *testing.T, st ledger.Store) {
	ctx := context.Background()
	idvKey, forger := newSigner(t, "idv-1"), newSigner(t, "idv-1")
	set := jwk.NewSet()
	set.AddKey(idvKey.pub)
	eng, err := engine.New(ctx, engine.Config{Policy: compile(t, example("refund")), Store: st, BindingKey: testBindingKey,
		Now: func() time.Time { return exampleClock }, Random: newSeededReader(7),
		EvidenceIssuers: delegation.EvidenceIssuers{"acme": {{Issuer: "idv.acme.example", Keys: set}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	as := func(tenant, subject string, roles ...writ.Role) context.Context {
		return writ.WithPrincipal(ctx, &writ.Principal{TenantID: tenant, KeyID: "key_" + subject, Subject: subject, Roles: roles, ActorType: writ.ActorService})
	}
	idv := as("acme", "idv.acme.example", writ.RoleIssuer)
	globexIDV := as("globex", "idv.globex.example", writ.RoleIssuer)
	agent := as("acme", "agt_support", writ.RoleAgent)
	observed := exampleClock.Add(-20 * time.Minute)
	add := func(c context.Context, req writ.AddEvidenceRequest) (*writ.StoredEvidence, error) {
		if req.Kind == "" && req.JWS == "" {
			req.Kind = "identity_verification"
		}
		if req.ObservedAt == nil && req.JWS == "" {
			req.ObservedAt = &observed
		}
		if req.TenantID == "" {
			req.TenantID = "acme"
		}
		return eng.AddEvidence(c, &req)
	}
	stored, err := add(idv, writ.AddEvidenceRequest{ID: "idv_771", SubjectIDs: []string{"customer:cus_77"}, Attributes: map[string]any{"method": "otp"}})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Provenance != writ.ProvenanceIssued || !strings.HasPrefix(stored.ContentAddress, "sha256:") || stored.Item.Issuer != "idv.acme.example" {
		t.Fatalf("stored item = %+v, want issued by idv.acme.example with a content address", stored)
	}
	if ca, _, _ := engine.ContentAddress(&stored.Item); ca != stored.ContentAddress {
		t.Errorf("content address %s, but the item hashes to %s", stored.ContentAddress, ca)
	}
	// The record rules (what verify and verify-bundle check) catch an
	// item changed after sealing.
	sr, err := st.Record(ctx, "acme", stored.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	rules := verify.NewRules(pinned.NewPacks(st))
	if broken := rules.CheckRecord(ctx, &sr.Record); len(broken) > 0 {
		t.Errorf("the evidence record breaks rules: %v", broken)
	}
	tampered := sr.Record
	tampered.Outputs = map[string]any{}
	for k, v := range sr.Record.Outputs {
		tampered.Outputs[k] = v
	}
	item0 := map[string]any{}
	for k, v := range sr.Record.Outputs["item"].(map[string]any) {
		item0[k] = v
	}
	item0["attributes"] = map[string]any{"method": "none"}
	tampered.Outputs["item"] = item0
	if broken := rules.CheckRecord(ctx, &tampered); len(broken) == 0 || !strings.Contains(strings.Join(broken, ";"), "evidence: the item's content address") {
		t.Errorf("a changed item breaks %v, want the evidence rule", broken)
	}
	got, err := eng.Evidence(ctx, "acme", stored.ContentAddress)
	if err != nil || got.Item.ID != "idv_771" {
		t.Fatalf("Evidence by content address = %+v, %v", got, err)
	}

	refund := func(ev ...writ.Evidence) *writ.CheckRequest {
		req := readRequest(t, example("refund", "requests", "refund-allow.json"))
		req.IdempotencyKey = ""
		req.Evidence = append(ev, writ.Evidence{Kind: "order", ID: "ord_881", TenantID: "acme", ObservedAt: &observed})
		return req
	}
	check := func(what string, req *writ.CheckRequest) (*writ.Receipt, *writ.CheckRequest) {
		t.Helper()
		rc, err := eng.Check(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sr, err := eng.Record(ctx, "acme", rc.Metadata.RecordID)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := st.Envelope(ctx, "acme", sr.Record.Audit.Seq, sr.Record.Replay.ReplayPacketID)
		if err != nil {
			t.Fatal(err)
		}
		var env writ.CheckRequest
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatal(err)
		}
		return rc, &env
	}
	refused := func(what string, rc *writ.Receipt, diagnosis string) {
		t.Helper()
		said := false
		for _, r := range rc.Reasons {
			said = said || r.Code == "missing_identity_verification" && strings.Contains(r.Message, diagnosis)
		}
		if rc.SafeToExecute || !said {
			t.Errorf("%s: outcome %s, reasons %+v; want refused, saying %q", what, rc.Outcome, rc.Reasons, diagnosis)
		}
	}

	// The made-up item: unresolvable, claimed, refused.
	rc, env := check("made up", refund(writ.Evidence{Kind: "identity_verification", ID: "i_made_this_up", ObservedAt: &observed}))
	refused("the made-up identity_verification", rc, "is not in this tenant's evidence store")
	if e := env.Evidence[0]; e.Resolution != writ.ResolutionUnresolvable || e.Provenance != writ.ProvenanceClaimed {
		t.Errorf("made-up citation pinned as %s/%s, want unresolvable/claimed", e.Resolution, e.Provenance)
	}
	if len(rc.ResumeContract.ResumeWhenConditions) == 0 || !strings.Contains(rc.ResumeContract.ResumeWhenConditions[0].Text, "issued or observed") {
		t.Errorf("the condition to meet = %+v, want one naming issued or observed evidence", rc.ResumeContract.ResumeWhenConditions)
	}

	// Issued by the IDV key, cited by id or by content address: allowed.
	allowed, env := check("issued", refund(writ.Evidence{Kind: "identity_verification", ID: "idv_771"}))
	if !allowed.SafeToExecute {
		t.Fatalf("refund citing the issued item: %s %+v, want allowed", allowed.Outcome, allowed.Reasons)
	}
	if e := env.Evidence[0]; e.Resolution != writ.ResolutionResolved || e.Provenance != writ.ProvenanceIssued || e.Hash != stored.ContentAddress || e.Issuer != "idv.acme.example" {
		t.Errorf("issued citation pinned as %+v", e)
	}
	if rc, _ := check("by address", refund(writ.Evidence{Kind: "identity_verification", ID: stored.ContentAddress})); !rc.SafeToExecute {
		t.Errorf("refund citing the item by content address: %s %+v", rc.Outcome, rc.Reasons)
	}
	// Signed by the IDV's registered key and carried in by the agent.
	item := writ.EvidenceItem{TenantID: "acme", Kind: "identity_verification", ID: "idv_signed", SubjectIDs: []string{"customer:cus_77"},
		Attributes: map[string]any{"method": "document"}, ObservedAt: observed, Issuer: "idv.acme.example"}
	if rc, env := check("signed", refund(writ.Evidence{Kind: "identity_verification", JWS: idvKey.sign(t, &item)})); !rc.SafeToExecute || env.Evidence[0].Provenance != writ.ProvenanceIssued {
		t.Errorf("refund carrying a signed item: %s %+v", rc.Outcome, rc.Reasons)
	}
	rc, _ = check("forged", refund(writ.Evidence{Kind: "identity_verification", JWS: forger.sign(t, &item)}))
	refused("a forged signature", rc, "no issuer key of this tenant verifies")

	// Revoked, expired, another tenant's, tampered: refused with their diagnosis.
	if _, err := add(idv, writ.AddEvidenceRequest{ID: "idv_revoked"}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.RevokeEvidence(idv, &writ.RevokeEvidenceRequest{TenantID: "acme", ID: "idv_revoked", Reason: "the document was reported stolen"}); err != nil {
		t.Fatal(err)
	}
	rc, _ = check("revoked", refund(writ.Evidence{Kind: "identity_verification", ID: "idv_revoked"}))
	refused("a revoked item", rc, "was revoked")
	until := exampleClock.Add(-time.Minute)
	if _, err := add(idv, writ.AddEvidenceRequest{ID: "idv_expired", ExpiresAt: &until}); err != nil {
		t.Fatal(err)
	}
	rc, _ = check("expired", refund(writ.Evidence{Kind: "identity_verification", ID: "idv_expired"}))
	refused("an expired item", rc, "expired at")
	if _, err := add(globexIDV, writ.AddEvidenceRequest{TenantID: "globex", ID: "idv_globex"}); err != nil {
		t.Fatal(err)
	}
	rc, _ = check("other tenant", refund(writ.Evidence{Kind: "identity_verification", ID: "idv_globex"}))
	refused("another tenant's item", rc, "is not in this tenant's evidence store")
	rc, _ = check("other tenant named", refund(writ.Evidence{Kind: "identity_verification", ID: "idv_globex", TenantID: "globex"}))
	refused("another tenant's item, named as such", rc, "belongs to another tenant")
	rc, _ = check("tampered", refund(writ.Evidence{Kind: "identity_verification", ID: "idv_771", Hash: "sha256:" + strings.Repeat("0", 64)}))
	refused("a tampered citation", rc, "does not match the stored item")

	// A true fact about someone else: another customer's verification,
	// one about no one, one signed about another customer, and cus_77's
	// own on a refund that names no subject. Each is refused, the
	// citation pinned as subject_mismatch with the item's subjects.
	if _, err := add(idv, writ.AddEvidenceRequest{ID: "idv_cus_99", SubjectIDs: []string{"customer:cus_99"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := add(idv, writ.AddEvidenceRequest{ID: "idv_no_subject"}); err != nil {
		t.Fatal(err)
	}
	signed99 := item
	signed99.ID, signed99.SubjectIDs = "idv_signed_99", []string{"customer:cus_99"}
	// cus_77 has had its three refunds today, and the velocity rule's
	// deny would hide the evidence condition: these refunds are cus_31's.
	cus31 := func(ev writ.Evidence) *writ.CheckRequest {
		req := refund(ev)
		req.SubjectIDs = []string{"customer:cus_31", "order:ord_881"}
		return req
	}
	noSubject := refund(writ.Evidence{Kind: "identity_verification", ID: "idv_771"})
	noSubject.SubjectIDs = nil
	for _, c := range []struct {
		what      string
		req       *writ.CheckRequest
		diagnosis string
		subjects  []string
		condition bool // a check with no subject is denied by the velocity rule, failing closed
	}{
		{"another customer's item", cus31(writ.Evidence{Kind: "identity_verification", ID: "idv_cus_99"}),
			"is about customer:cus_99, and this check is about customer:cus_31, order:ord_881: they share no subject", []string{"customer:cus_99"}, true},
		{"cus_77's item on cus_31's refund", cus31(writ.Evidence{Kind: "identity_verification", ID: "idv_771"}),
			"is about customer:cus_77, and this check is about customer:cus_31, order:ord_881: they share no subject", []string{"customer:cus_77"}, true},
		{"an item about no one", cus31(writ.Evidence{Kind: "identity_verification", ID: "idv_no_subject"}),
			"is about no subject, and this check is about customer:cus_31, order:ord_881", nil, true},
		{"a signed item about another customer", cus31(writ.Evidence{Kind: "identity_verification", JWS: idvKey.sign(t, &signed99)}),
			"is about customer:cus_99, and this check is about customer:cus_31", []string{"customer:cus_99"}, true},
		{"a check that names no subject", noSubject,
			"is about customer:cus_77, and this check is about no subject", []string{"customer:cus_77"}, false},
	} {
		rc, env := check(c.what, c.req)
		refused(c.what, rc, c.diagnosis)
		if e := env.Evidence[0]; e.Resolution != writ.ResolutionSubjectMismatch || !slices.Equal(e.SubjectIDs, c.subjects) {
			t.Errorf("%s: citation pinned as %s with subjects %v, want subject_mismatch with %v", c.what, e.Resolution, e.SubjectIDs, c.subjects)
		}
		if conds := rc.WhatWouldChangeThisConditions; c.condition && !slices.ContainsFunc(conds, func(c writ.Condition) bool {
			return c.EvidenceKind == "identity_verification" && strings.Contains(c.Text, "about one of the check's subjects")
		}) {
			t.Errorf("%s: what would change this = %+v, want a condition naming the check's subjects", c.what, conds)
		}
	}

	// Bad submissions: refused naming the cause, nothing written.
	head := func() int64 {
		h, err := st.Head(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		return h.Seq
	}
	before := head()
	future := exampleClock.Add(time.Hour)
	big := map[string]any{"blob": strings.Repeat("x", writ.MaxEvidenceItemBytes)}
	forgedItem := item
	forgedItem.ID = "idv_forged"
	for _, c := range []struct {
		what string
		ctx  context.Context
		req  writ.AddEvidenceRequest
		code string
		want string
	}{
		{"no issuer role", agent, writ.AddEvidenceRequest{ID: "idv_agent"}, writ.EFORBIDDEN, "has no issuer role"},
		{"no key and no issuer (development mode)", ctx, writ.AddEvidenceRequest{ID: "idv_dev"}, writ.EINVALID, "issuer is required when the server authenticates no one"},
		{"an issuer key naming another issuer", idv, writ.AddEvidenceRequest{ID: "idv_other", Issuer: "someone_else"}, writ.EINVALID, "is not the API key's subject"},
		{"another tenant's item", globexIDV, writ.AddEvidenceRequest{ID: "idv_cross"}, writ.EFORBIDDEN, "of tenant \"globex\""},
		{"bad signature", agent, writ.AddEvidenceRequest{JWS: forger.sign(t, &forgedItem)}, writ.EFORBIDDEN, "does not verify"},
		{"unregistered key", agent, writ.AddEvidenceRequest{JWS: newSigner(t, "other-kid").sign(t, &forgedItem)}, writ.EFORBIDDEN, "not a key of an evidence issuer"},
		{"too large", idv, writ.AddEvidenceRequest{ID: "idv_big", Attributes: big}, writ.ETOOLARGE, "the limit is"},
		{"duplicate", idv, writ.AddEvidenceRequest{ID: "idv_771"}, writ.ECONFLICT, "already has an evidence item idv_771"},
		{"observed in the future", idv, writ.AddEvidenceRequest{ID: "idv_future", ObservedAt: &future}, writ.EINVALID, "in the future"},
	} {
		_, err := add(c.ctx, c.req)
		if writ.ErrorCode(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s naming %q", c.what, err, c.code, c.want)
		}
	}
	if _, err := eng.RevokeEvidence(idv, &writ.RevokeEvidenceRequest{TenantID: "acme", ID: "idv_nobody", Reason: "x"}); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("revoking an unknown item: %v, want not_found", err)
	}
	if n := head(); n != before {
		t.Errorf("refused submissions wrote %d records", n-before)
	}
	// A signed item stored by any key of the tenant is issued.
	if se, err := add(agent, writ.AddEvidenceRequest{JWS: idvKey.sign(t, &item)}); err != nil || se.Provenance != writ.ProvenanceIssued || se.SignedBy != "idv-1" {
		t.Errorf("storing a signed item with an agent key = %+v, %v", se, err)
	}

	// In development mode (no key) every caller is an issuer, naming
	// itself: the item counts as issued, and its record says the issuer
	// was only claimed.
	dev, err := add(ctx, writ.AddEvidenceRequest{ID: "idv_dev", Issuer: "idv_desk", SubjectIDs: []string{"customer:cus_dev"}})
	if err != nil || dev.Provenance != writ.ProvenanceIssued || dev.Item.Issuer != "idv_desk" || dev.SubmittedBy != "" {
		t.Fatalf("storing an item in development mode = %+v, %v; want issued by idv_desk", dev, err)
	}
	if dr, err := st.Record(ctx, "acme", dev.RecordID); err != nil || dr.Record.Actor.ID != "idv_desk" || dr.Record.Actor.Provenance != writ.ProvenanceClaimed {
		t.Errorf("the development-mode evidence record's actor = %+v, %v; want idv_desk, claimed", dr.Record.Actor, err)
	}
	devReq := refund(writ.Evidence{Kind: "identity_verification", ID: "idv_dev"})
	devReq.SubjectIDs = []string{"customer:cus_dev", "order:ord_881"} // cus_77 has had its three refunds today
	if rc, _ := check("development mode", devReq); !rc.SafeToExecute {
		t.Errorf("refund citing the development-mode item: %s %+v, want allowed", rc.Outcome, rc.Reasons)
	}
	if rv, err := eng.RevokeEvidence(ctx, &writ.RevokeEvidenceRequest{TenantID: "acme", ID: "idv_dev", Reason: "test over"}); err != nil || rv.Revoked == nil || rv.Revoked.By != "idv_desk" {
		t.Errorf("revoking in development mode = %+v, %v; want revoked by the item's issuer", rv, err)
	}

	// A later revocation does not change the replay of the earlier allow.
	if _, err := eng.RevokeEvidence(idv, &writ.RevokeEvidenceRequest{TenantID: "acme", ID: "idv_771", Reason: "re-verification failed"}); err != nil {
		t.Fatal(err)
	}
	rc, _ = check("after revocation", refund(writ.Evidence{Kind: "identity_verification", ID: "idv_771"}))
	refused("the revoked item, afterwards", rc, "was revoked")
	rp := replay.New(st, replay.Options{})
	res, err := rp.Record(ctx, "acme", allowed.Metadata.RecordID)
	if err != nil || res.Status != writ.ReplayEqual {
		t.Errorf("replay of the allow after its evidence was revoked = %+v, %v; want replay_equal", res, err)
	}
	sum, err := rp.Tenant(ctx, "acme", func(r *writ.ReplayResult) error {
		if r.Status != writ.ReplayEqual {
			t.Errorf("replay of %s (%s) = %s %+v", r.RecordID, r.DecisionKey, r.Status, r.Differences)
		}
		return nil
	})
	if err != nil || sum.Equal == 0 {
		t.Errorf("replay of the tenant = %+v, %v", sum, err)
	}
	findings, _, err := verify.VerifyChains(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Errorf("ledger finding: %+v", f)
	}
	stored2, err := eng.Evidence(ctx, "acme", "idv_771")
	if err != nil || stored2.Revoked == nil || stored2.Revoked.Reason != "re-verification failed" {
		t.Errorf("the revoked item reads %+v, %v", stored2, err)
	}
}
