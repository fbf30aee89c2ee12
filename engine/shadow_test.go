package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
)

// candidatePack copies the refund pack with the approval threshold
// lowered from 10,000 to 4,000 INR and its bundle revised.
func candidatePack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policies", "returns.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "args.amount_inr > 10000", "args.amount_inr > 4000", 1)
	s = strings.Replace(s, "version: 1.0.0", "version: 1.1.0", 1)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestShadowPack: every check is also decided under the shadow pack; its
// decision is stored beside the record, and the receipt and record are
// exactly what the enforcing pack alone would give, but for the record's
// bound.shadow digest of the shadow decision (and so its seal).
func TestShadowPack(t *testing.T) {
	ctx := context.Background()
	cand := compile(t, candidatePack(t))
	shadowed := newHarness(t, example("refund"), func(c *engine.Config) { c.Shadow = cand })
	plain := newHarness(t, example("refund"))

	names := []string{"refund-allow", "refund-high-value-human-review", "refund-account-frozen-goal-fail"}
	for _, name := range names {
		a, errA := shadowed.eng.Check(ctx, refundRequest(t, name))
		b, errB := plain.eng.Check(ctx, refundRequest(t, name))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("%s: the shadow pack changed the receipt:\n%s\n%s", name, ja, jb)
		}
		ra, _ := shadowed.eng.Record(ctx, "acme", a.Metadata.RecordID)
		rb, _ := plain.eng.Record(ctx, "acme", b.Metadata.RecordID)
		if ra.Record.Bound == nil || ra.Record.Bound.Shadow == "" || (rb.Record.Bound != nil && rb.Record.Bound.Shadow != "") {
			t.Errorf("%s: bound.shadow = %+v with the shadow pack, %+v without; want it only with", name, ra.Record.Bound, rb.Record.Bound)
		}
		unsealed := func(r writ.Record) string {
			r.Audit = writ.Audit{}
			if r.Bound != nil {
				bd := *r.Bound
				bd.Shadow = ""
				r.Bound = &bd
			}
			j, _ := json.Marshal(r)
			return string(j)
		}
		if unsealed(ra.Record) != unsealed(rb.Record) {
			t.Errorf("%s: the shadow pack changed the record beyond bound.shadow", name)
		}
	}
	page, err := shadowed.store.ShadowDecisions(ctx, ledger.ShadowQuery{TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Decisions) != len(names) {
		t.Fatalf("%d shadow decisions, want %d", len(page.Decisions), len(names))
	}
	want := []struct{ enforced, shadow writ.Outcome }{
		{writ.OutcomeAllow, writ.OutcomeReplanRequired}, // 4,200 INR now needs approval
		{writ.OutcomeReplanRequired, writ.OutcomeReplanRequired},
		{writ.OutcomeGoalFailTerminal, writ.OutcomeGoalFailTerminal},
	}
	for i, d := range page.Decisions {
		if d.EnforcedOutcome != want[i].enforced || d.Outcome != want[i].shadow || d.PackHash != cand.Pack.Hash || d.Pack != "support@1.0.0" {
			t.Errorf("shadow decision %d = %+v, want %s → %s under %s", i, d, want[i].enforced, want[i].shadow, cand.Pack.Hash)
		}
	}
	first := page.Decisions[0]
	var fired bool
	for _, pd := range first.PolicyDecisions {
		fired = fired || (pd.RuleIDs[0] == "R_HIGH_VALUE_REQUIRES_APPROVAL" && pd.Verdict == "require_approval" && pd.BundleID == "POLICY_RETURNS_V1@1.1.0")
	}
	if !fired || first.Status != writ.StatusEscalated || first.Reasons[0].Code != "high_value_refund" {
		t.Errorf("shadow decision of refund-allow = %+v", first)
	}
	// A shadow never creates an approval request.
	ap, err := shadowed.eng.Approvals(ctx, writ.ApprovalQuery{TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ap.Approvals) != 1 || ap.Approvals[0].RecordID == first.RecordID {
		t.Errorf("approval requests = %+v, want only the enforced high-value check's", ap.Approvals)
	}
	shadowed.verify(t)
	// Each shadow decision is the one its record binds.
	if fs, err := verify.VerifyStored(ctx, shadowed.store, time.Now()); err != nil || len(fs) != 0 {
		t.Errorf("VerifyStored = %+v, %v; want no findings", fs, err)
	}
}
