package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
)

// TestWithdrawalAnnouncedAsDecided: a withdrawn approval request is
// announced to the decided hook (the webhook's approval.decided) with
// state withdrawn, as webhook's package doc says, so an orchestrator
// waiting on it learns that no approver will answer.
func TestWithdrawalAnnouncedAsDecided(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var told []*writ.ApprovalRequest
	h := newHarness(t, example("refund"), func(c *engine.Config) {
		c.AnnounceDecided = func(a *writ.ApprovalRequest) { mu.Lock(); told = append(told, a); mu.Unlock() }
	})
	blocked, err := h.eng.Check(ctx, refundRequest(t, "refund-high-value-human-review"))
	if err != nil || len(blocked.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("Check = %+v, %v; want one approval asked for", blocked, err)
	}
	id := blocked.Metadata.ApprovalIDs[0]
	a, err := h.eng.WithdrawApproval(ctx, &writ.WithdrawApprovalRequest{TenantID: "acme", ApprovalID: id, Reason: "The customer cancelled."})
	if err != nil || a.State != writ.ApprovalWithdrawn {
		t.Fatalf("WithdrawApproval = %+v, %v; want the approval, withdrawn", a, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || told[0].ApprovalID != id || told[0].State != writ.ApprovalWithdrawn {
		t.Errorf("the decided hook was told %+v, want the approval, withdrawn, once", told)
	}
}
