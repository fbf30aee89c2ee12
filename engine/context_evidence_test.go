package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/replay"
)

// fraudFromEvidencePack is the refund example whose spec takes
// context.fraud_score from the score of the cited fraud_assessment
// evidence of the refund's customer, with a rule that replans a refund
// whose fraud score no issuer or observation gave (it reads
// context_provenance).
func fraudFromEvidencePack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		t.Fatal(err)
	}
	edit := func(rel, old, new string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), old, new, 1)
		if s == string(b) {
			t.Fatalf("%s has no %q to edit", rel, old)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("specs/refund-execute.yaml", "required_evidence:\n", `context_from_evidence:
  - field: fraud_score
    kind: fraud_assessment
    attribute: score
    subject: customer
required_evidence:
`)
	edit("policies/returns.yaml", "rules:\n", `rules:
  - id: R_FRAUD_SCORE_UNVERIFIED
    description: A refund's fraud score comes from the fraud engine, not the agent.
    when: '!("fraud_score" in context_provenance) || !(context_provenance.fraud_score in ["issued", "observed"])'
    effect: replan_local
    reason:
      code: fraud_score_unverified
      message: No fraud assessment of the customer from the fraud engine was cited.
`)
	return dir
}

// TestContextFromEvidence (issue 32, context facts from evidence), in
// SQLite and PostgreSQL: a spec's context field from evidence is filled
// with the cited item's attribute and the caller's value is ignored,
// whichever it is; the record says where it came from; a rule reads the
// field's provenance; an item of another subject, a revoked one, or an
// unresolvable citation fills nothing; of two items the later observed
// fills it; every record replays equal.
func TestContextFromEvidence(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) { testContextFromEvidence(t, testStore(t, name)) })
	}
}

func testContextFromEvidence(t *testing.T, st ledger.Store) {
	ctx := context.Background()
	eng, err := engine.New(ctx, engine.Config{Policy: compile(t, fraudFromEvidencePack(t)), Store: st, BindingKey: testBindingKey,
		Now: func() time.Time { return exampleClock }, Random: newSeededReader(11)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	fraudEngine := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_fraud", Subject: "fraud.acme.example", Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	add := func(id, subject string, score float64, observed time.Time) {
		t.Helper()
		if _, err := eng.AddEvidence(fraudEngine, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "fraud_assessment", ID: id,
			SubjectIDs: []string{subject}, Attributes: map[string]any{"score": score}, ObservedAt: &observed}); err != nil {
			t.Fatal(err)
		}
	}
	// The refund's identity verification (idv_771, which the example
	// request cites) is on file from the IDV service: a refund accepts
	// only evidence writ resolves.
	idv := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example", Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	verified := exampleClock.Add(-20 * time.Minute)
	if _, err := eng.AddEvidence(idv, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: "idv_771",
		SubjectIDs: []string{"customer:cus_77"}, Attributes: map[string]any{"method": "otp"}, ObservedAt: &verified}); err != nil {
		t.Fatal(err)
	}
	add("fa_low", "customer:cus_77", 0.05, exampleClock.Add(-2*time.Hour))
	add("fa_high", "customer:cus_77", 0.93, exampleClock.Add(-time.Hour))
	add("fa_other", "customer:cus_12", 0.01, exampleClock.Add(-time.Minute))
	add("fa_revoked", "customer:cus_77", 0.02, exampleClock.Add(-time.Minute))
	if _, err := eng.RevokeEvidence(fraudEngine, &writ.RevokeEvidenceRequest{TenantID: "acme", ID: "fa_revoked", Reason: "scored the wrong order"}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name       string
		cite       []string // fraud_assessment ids cited
		claimed    any      // the caller's context.fraud_score (nil: left out)
		wantCode   string   // a reason code the receipt must carry
		wantSafe   bool
		wantSource writ.ContextSource
	}{
		{"low score issued, claim matches", []string{"fa_low"}, 0.05, "", true,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", Provenance: writ.ProvenanceIssued, IgnoredClaim: true}},
		{"low score issued, no claim", []string{"fa_low"}, nil, "", true,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", Provenance: writ.ProvenanceIssued}},
		{"high score issued, agent claims low", []string{"fa_high"}, 0.01, "fraud_signal_high", false,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", Provenance: writ.ProvenanceIssued, IgnoredClaim: true}},
		{"the later of two items fills it", []string{"fa_low", "fa_high"}, 0.05, "fraud_signal_high", false,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", Provenance: writ.ProvenanceIssued, IgnoredClaim: true}},
		{"no item cited, agent claims low", nil, 0.01, "fraud_score_unverified", false,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", IgnoredClaim: true}},
		{"another customer's item", []string{"fa_other"}, 0.01, "fraud_score_unverified", false,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", IgnoredClaim: true}},
		{"a revoked item", []string{"fa_revoked"}, 0.01, "fraud_score_unverified", false,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", IgnoredClaim: true}},
		{"an unresolvable citation", []string{"fa_made_up"}, 0.01, "fraud_score_unverified", false,
			writ.ContextSource{Kind: "fraud_assessment", Attribute: "score", IgnoredClaim: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := readRequest(t, example("refund", "requests", "refund-allow.json"))
			req.IdempotencyKey = ""
			delete(req.Context, "fraud_score")
			if c.claimed != nil {
				req.Context["fraud_score"] = c.claimed
			}
			for _, id := range c.cite {
				req.Evidence = append(req.Evidence, writ.Evidence{Kind: "fraud_assessment", ID: id})
			}
			rc, err := eng.Check(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			codes := []string{}
			for _, r := range rc.Reasons {
				codes = append(codes, r.Code)
			}
			if rc.SafeToExecute != c.wantSafe || c.wantCode != "" && !strings.Contains(strings.Join(codes, " "), c.wantCode) {
				t.Errorf("Check(cites %v, claims %v) = %s safe %v, reasons %v; want safe %v with %q", c.cite, c.claimed, rc.Outcome, rc.SafeToExecute, codes, c.wantSafe, c.wantCode)
			}
			sr, err := eng.Record(ctx, "acme", rc.Metadata.RecordID)
			if err != nil {
				t.Fatal(err)
			}
			got := sr.Record.ContextSources["fraud_score"]
			want := c.wantSource
			if want.Provenance != "" {
				// The item that filled it: the last cited that could.
				if !strings.HasPrefix(got.Evidence, "fraud_assessment:"+c.cite[len(c.cite)-1]+"#sha256:") {
					t.Errorf("context_sources.fraud_score.evidence = %q, want the item %s", got.Evidence, c.cite[len(c.cite)-1])
				}
				want.Evidence = got.Evidence
			}
			if got != want {
				t.Errorf("record context_sources.fraud_score = %+v, want %+v", got, want)
			}
		})
	}

	// A citation that sets the subjects writ pins is refused, nothing written.
	req := readRequest(t, example("refund", "requests", "refund-allow.json"))
	req.Evidence = append(req.Evidence, writ.Evidence{Kind: "fraud_assessment", ID: "fa_low", SubjectIDs: []string{"customer:cus_77"}})
	head, _ := st.Head(ctx, "acme")
	if _, err := eng.Check(ctx, req); writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(err.Error(), "subject_ids are set by writ") {
		t.Errorf("Check(citation with subject_ids) = %v, want EINVALID naming subject_ids", err)
	}
	if h, _ := st.Head(ctx, "acme"); h != head {
		t.Errorf("a refused check wrote: head %+v, want %+v", h, head)
	}

	// Replay decides each record again on its pinned envelope: equal.
	sum, err := replay.New(st, replay.Options{}).Tenant(ctx, "acme", func(res *replay.Result) error {
		if res.Status != replay.StatusEqual {
			t.Errorf("replay of %s: %s %+v", res.RecordID, res.Status, res.Differences)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records == 0 {
		t.Error("replayed no records")
	}
}
