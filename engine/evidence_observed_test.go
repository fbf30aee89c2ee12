package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/replay"
)

// TestObservedEvidence: evidence the MCP gateway captured is observed.
// Only the gateway submits it: in process (CaptureEvidence), or with a
// key that has the gateway role; every other submitter, and an
// observation that names no call, is refused with nothing written. A
// check citing the item is decided on it, and replays equal.
func TestObservedEvidence(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) { testObservedEvidence(t, testStore(t, name)) })
	}
}

func testObservedEvidence(t *testing.T, st ledger.Store) {
	ctx := context.Background()
	eng, err := engine.New(ctx, engine.Config{Policy: compile(t, example("refund")), Store: st, BindingKey: testBindingKey,
		Now: func() time.Time { return exampleClock }, Random: newSeededReader(11)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	as := func(tenant, subject string, roles ...writ.Role) context.Context {
		return writ.WithPrincipal(ctx, &writ.Principal{TenantID: tenant, KeyID: "key_" + subject, Subject: subject, Roles: roles, ActorType: writ.ActorService})
	}
	observedAt := exampleClock.Add(-time.Minute)
	obs := func() *writ.EvidenceObservation {
		return &writ.EvidenceObservation{Tool: "idv.check_identity", ToolCallID: "mcp_1", DecisionID: "dec_1", ResultDigest: "sha256:" + strings.Repeat("ab", 32)}
	}
	item := func(id string, o *writ.EvidenceObservation) *writ.AddEvidenceRequest {
		return &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: id, SubjectIDs: []string{"customer:cus_77"},
			Attributes: map[string]any{"method": "otp"}, ObservedAt: &observedAt, Observation: o}
	}
	head := func() int64 {
		h, err := st.Head(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		return h.Seq
	}
	before := head()
	noDecision := obs()
	noDecision.DecisionID = ""
	badDigest := obs()
	badDigest.ResultDigest = "sha256:0"
	signed := item("idv_jws", obs())
	signed.JWS = "a.b.c"
	for _, c := range []struct {
		what    string
		ctx     context.Context
		req     *writ.AddEvidenceRequest
		capture bool // in process, through CaptureEvidence
		want    string
		says    string
	}{
		{"an issuer key", as("acme", "idv.acme.example", writ.RoleIssuer), item("idv_a", obs()), false, writ.EFORBIDDEN, "no gateway role"},
		{"an agent key", as("acme", "agt_support", writ.RoleAgent), item("idv_b", obs()), false, writ.EFORBIDDEN, "no gateway role"},
		{"another tenant's gateway key", as("globex", "gw", writ.RoleGateway), item("idv_c", obs()), false, writ.EFORBIDDEN, "tenant"},
		{"no key", ctx, item("idv_d", obs()), false, writ.EFORBIDDEN, "MCP gateway only"},
		{"a gateway key without an observation", as("acme", "gw", writ.RoleGateway), item("idv_e", nil), false, writ.EFORBIDDEN, "no issuer role"},
		{"no decision", as("acme", "gw", writ.RoleGateway), item("idv_f", noDecision), false, writ.EINVALID, "observation.decision_id"},
		{"a bad result digest", as("acme", "gw", writ.RoleGateway), item("idv_g", badDigest), false, writ.EINVALID, "observation.result_digest"},
		{"observation and jws", as("acme", "gw", writ.RoleGateway), signed, false, writ.EINVALID, "not both"},
		{"in process, no observation", ctx, item("idv_h", nil), true, writ.EINVALID, "observation"},
	} {
		var err error
		if c.capture {
			_, err = eng.CaptureEvidence(c.ctx, c.req)
		} else {
			_, err = eng.AddEvidence(c.ctx, c.req)
		}
		if writ.ErrorCode(err) != c.want || err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("AddEvidence(%s) = %v, want %s saying %q", c.what, err, c.want, c.says)
		}
	}
	if after := head(); after != before {
		t.Fatalf("refused submissions wrote %d records", after-before)
	}

	// The gateway's key, over HTTP: observed, its key the actor.
	remote, err := eng.AddEvidence(as("acme", "gw", writ.RoleGateway), item("idv_remote", obs()))
	if err != nil {
		t.Fatal(err)
	}
	if remote.Provenance != writ.ProvenanceObserved || remote.Item.Issuer != "gw" || remote.Observation == nil || *remote.Observation != *obs() {
		t.Errorf("stored by the gateway's key = %+v, want observed, issuer gw, the observation", remote)
	}
	// In process: writ's own gateway, whoever called the tool.
	local, err := eng.CaptureEvidence(as("acme", "agt_support", writ.RoleAgent), item("idv_local", obs()))
	if err != nil {
		t.Fatal(err)
	}
	if local.Provenance != writ.ProvenanceObserved || local.Item.Issuer != "writ-gateway" {
		t.Errorf("captured in process = %+v, want observed, issuer writ-gateway", local)
	}
	sr, err := st.Record(ctx, "acme", local.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if a := sr.Record.Actor; a.ID != "writ-gateway" || a.Provenance != writ.ProvenanceObserved || a.KeyID != "" {
		t.Errorf("the captured item's record actor = %+v, want writ-gateway, observed, no key", a)
	}
	if pd := sr.Record.PolicyDecisions; len(pd) != 1 || len(pd[0].RuleIDs) != 1 || pd[0].RuleIDs[0] != "gateway_observation" {
		t.Errorf("policy decisions = %+v, want rule gateway_observation", pd)
	}
	if broken := verify.NewRules(pinned.NewPacks(st)).CheckRecord(ctx, &sr.Record); len(broken) > 0 {
		t.Errorf("the observed item's record breaks rules: %v", broken)
	}
	got, err := eng.Evidence(ctx, "acme", local.ContentAddress)
	if err != nil || got.Observation == nil || *got.Observation != *obs() || got.Provenance != writ.ProvenanceObserved {
		t.Errorf("Evidence(%s) = %+v, %v; want the observation read back", local.ContentAddress, got, err)
	}

	// A refund citing it is allowed on it; the record cites it.
	req := readRequest(t, example("refund", "requests", "refund-allow.json"))
	req.IdempotencyKey = ""
	req.Evidence = []writ.Evidence{{Kind: "identity_verification", ID: local.Item.ID}, {Kind: "order", ID: "ord_881", TenantID: "acme", ObservedAt: &observedAt}}
	rc, err := eng.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !rc.SafeToExecute {
		t.Fatalf("refund citing the observed item: %s %+v, want allowed", rc.Outcome, rc.Reasons)
	}
	rec, err := eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	want := "identity_verification:idv_local#" + local.ContentAddress
	if !strings.Contains(strings.Join(rec.Record.EvidenceRefs, " "), want) {
		t.Errorf("evidence_refs = %v, want %s", rec.Record.EvidenceRefs, want)
	}
	rp := replay.New(st, replay.Options{})
	if _, err := rp.Tenant(ctx, "acme", func(r *writ.ReplayResult) error {
		if r.Status != writ.ReplayEqual {
			t.Errorf("replay of %s (%s) = %s %+v", r.RecordID, r.DecisionKey, r.Status, r.Differences)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
