package ledgertest

import (
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// TestFixturesAreValid holds the fixtures to what the conformance suite
// assumes of them: every store must accept them, so a suite case that
// expects an append tests the append, not a refusal of a broken fixture.
func TestFixturesAreValid(t *testing.T) {
	ids := map[string]bool{}
	var entries []*ledger.Entry
	for _, tenant := range []string{"acme", "globex"} {
		for n := 1; n <= 100; n++ {
			rec := NewRecord(tenant, n)
			if ids[rec.RecordID] || ids[rec.DecisionID] {
				t.Errorf("NewRecord(%s, %d) repeats record id %s or decision id %s", tenant, n, rec.RecordID, rec.DecisionID)
			}
			ids[rec.RecordID], ids[rec.DecisionID] = true, true
			if !writ.ValidTraceID(rec.TraceID) {
				t.Errorf("NewRecord(%s, %d).TraceID = %q, not a W3C trace id", tenant, n, rec.TraceID)
			}
			if want := baseTime.Add(time.Duration(n) * time.Second); !rec.Timestamp.Equal(want) {
				t.Errorf("NewRecord(%s, %d).Timestamp = %s, want %s", tenant, n, rec.Timestamp, want)
			}
			entries = append(entries, NewEntry(rec))
		}
	}
	if err := ledger.ValidateBatch(entries); err != nil {
		t.Errorf("ValidateBatch(200 fixture entries) = %v", err)
	}

	if err := ledger.CheckBlobs([]ledger.Blob{NewBlob("envelope", []byte(`{"tenant_id":"acme"}`))}); err != nil {
		t.Errorf("CheckBlobs(NewBlob) = %v", err)
	}

	// An approval asked, then decided, then redeemed, and a shadow
	// decision: one batch, as the engine would append them.
	asked := NewEntry(NewRecord("acme", 101))
	asked.NewApprovals = []ledger.NewApproval{NewApproval(asked.Record, "apr_1", "GATE_FINANCE", NewBinding("payments.refund", 1), baseTime, 1)}
	decided := NewApprovalEntry(NewRecord("acme", 102), "apr_1",
		writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "user:fin-1", Reason: "ok", At: baseTime.Add(time.Minute)})
	redeemed := NewApprovalEntry(NewRecord("acme", 103), "apr_1",
		writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, Actor: "agent:support-bot", At: baseTime.Add(2 * time.Minute)})
	shadowed := NewEntry(NewRecord("acme", 104))
	shadowed.Shadow = NewShadow(shadowed.Record, "sha256:"+fixtureID("", "candidate"), writ.OutcomeReplanRequired)
	if err := ledger.ValidateBatch([]*ledger.Entry{asked, decided, redeemed, shadowed}); err != nil {
		t.Errorf("ValidateBatch(approval and shadow fixtures) = %v", err)
	}
	if r := asked.NewApprovals[0].Request; !r.ExpiresAt.Equal(r.CreatedAt.Add(ApprovalTTL)) {
		t.Errorf("NewApproval expires at %s, want ApprovalTTL after %s", r.ExpiresAt, r.CreatedAt)
	}
}
