package main

import (
	"context"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
)

// TestGatewayWritDecidesApprovals: the in-process gateway can ask its
// user whether tracing is on or off; the traced wrapper once dropped
// DecideApproval, and with it every question.
func TestGatewayWritDecidesApprovals(t *testing.T) {
	for _, tracing := range []bool{false, true} {
		if _, ok := gatewayWrit((*engine.Engine)(nil), tracing).(interface {
			DecideApproval(context.Context, *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error)
		}); !ok {
			t.Errorf("tracing %v: the gateway's writ does not decide approvals", tracing)
		}
	}
}
