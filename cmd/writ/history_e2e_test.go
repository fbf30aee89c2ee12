package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// TestRefundVelocityOverHTTP runs the README's rules-over-history
// walkthrough against the real server: four refunds of one customer,
// each for its own order; the fourth is refused naming
// R_REFUND_VELOCITY; the ledger verifies and every record replays equal.
func TestRefundVelocityOverHTTP(t *testing.T) {
	ctx := context.Background()
	w := newTenantWorld(t)
	agent := clientFor(w.srv.url, w.tokens["acme/agent"])
	var last *writ.Receipt
	for i, order := range []string{"ord_1", "ord_2", "ord_3", "ord_4"} {
		req := freshRefund(t, "refund-allow")
		req.TenantID = ""
		req.Arguments["order_id"], req.Outputs["order_id"] = order, order
		rc, err := agent.Check(ctx, req)
		if err != nil {
			t.Fatalf("refund %d: %v", i+1, err)
		}
		if i < 3 && rc.Outcome != writ.OutcomeAllow {
			t.Fatalf("refund %d: %s %+v, want allow", i+1, rc.Outcome, rc.Reasons)
		}
		last = rc
	}
	if last.SafeToExecute || last.Outcome != writ.OutcomeGoalFailTerminal || len(last.Reasons) != 1 ||
		last.Reasons[0].Code != "refund_velocity_exceeded" || !strings.Contains(last.Reasons[0].Message, "R_REFUND_VELOCITY") {
		t.Fatalf("4th refund: %s safe=%v %+v; want refused naming R_REFUND_VELOCITY", last.Outcome, last.SafeToExecute, last.Reasons)
	}
	rec, err := clientFor(w.srv.url, w.tokens["acme/auditor"]).Record(ctx, "", last.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	// Second comes writ's own count of the session's calls, which the
	// spec's tool_calls budget reads (issue 31).
	if h := rec.Record.History; len(h) != 2 || h[0].Name != "refunds_per_customer" || h[0].Group != "customer:cus_77" || h[0].Value != 3 || h[1].Name != "writ.tool_calls" {
		t.Errorf("4th refund's record pins history %+v, want refunds_per_customer = 3 for customer:cus_77, then writ.tool_calls", h)
	}
	w.srv.stop(t)
	if out, err := exec.Command(writBinary, "ledger", "verify", "--data", w.data).CombinedOutput(); err != nil {
		t.Errorf("writ ledger verify: %v\n%s", err, out)
	}
	if out, err := exec.Command(writBinary, "replay", "--data", w.data, "--tenant", "acme", "--all").CombinedOutput(); err != nil {
		t.Errorf("writ replay --all: %v\n%s", err, out)
	}
}
