package engine_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger/verify"
)

// TestVerifyApprovals: approval requests and events agree with the
// sealed records that state them; an approval forged by inserting an
// event row (the tables refuse updates, not inserts) is found, and so is
// a redemption naming a record that was not allowed.
func TestVerifyApprovals(t *testing.T) {
	ctx := context.Background()
	clk := newClock(exampleClock)
	h := newHarness(t, example("refund"), withClock(clk))
	req := highValue(t)
	_, a := askApproval(t, h, req)
	decideApproval(t, h, a.ApprovalID, writ.ApprovalApproved, "user_finance_lead_77")
	if rc := retryWith(t, h, req, a.ApprovalID); !rc.SafeToExecute {
		t.Fatalf("redemption = %s", rc.Outcome)
	}
	other := highValue(t)
	other.Arguments["amount_inr"] = 12000.0
	other.Outputs["refund_amount_inr"] = 12000.0
	otherRC, b := askApproval(t, h, other)

	findings, err := verify.VerifyApprovals(ctx, h.store, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 0 {
		t.Fatalf("findings over an honest ledger: %+v", findings)
	}

	// Someone with the database file forges an approval of b, naming the
	// asking check's own record as its decision record.
	db, err := sql.Open("sqlite", filepath.Join(h.dir, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO approval_events (tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns) VALUES ('acme', ?, 1, 'approved', 'mallory', 'forged', ?, ?)`,
		b.ApprovalID, otherRC.Metadata.RecordID, clk.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	findings, err = verify.VerifyApprovals(ctx, h.store, clk.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 1 || findings[0].Kind != verify.FindingApprovalMismatch || findings[0].RecordID != otherRC.Metadata.RecordID ||
		!strings.Contains(findings[0].Detail, b.ApprovalID) || !strings.Contains(findings[0].Detail, "approved event") {
		t.Errorf("findings after a forged approval = %+v", findings)
	}

	// And a redemption of a's approval naming a record it did not allow.
	if _, err := db.Exec(`INSERT INTO approval_events (tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns) VALUES ('acme', ?, 3, 'redeemed', '', '', ?, ?)`,
		a.ApprovalID, otherRC.Metadata.RecordID, clk.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	findings, err = verify.VerifyApprovals(ctx, h.store, clk.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 2 || !strings.Contains(findings[0].Detail+findings[1].Detail, a.ApprovalID+": the redeemed event names record "+otherRC.Metadata.RecordID) {
		t.Errorf("findings after a forged redemption = %+v", findings)
	}
}
