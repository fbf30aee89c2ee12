package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
)

// approvalDecider is what elicitation needs beyond Writ: deciding an
// approval request (writ.Approvals has it; the engine and httpapi.Client
// both do).
type approvalDecider interface {
	DecideApproval(ctx context.Context, req *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error)
}

// elicit asks the person at the client to decide the approval a blocked
// call waits on, when everything allows it: the configuration names the
// user, the session is a stdio (or development-mode) one, the gate says
// elicit: true, and the client can be asked (elicitation capability, on a
// revision that lets the server ask). Their answer is recorded as an
// approval decision by Config.User, and the decision resumed. ok is false
// when nothing was asked or nothing was decided; rc is then unchanged.
func (g *Gateway) elicit(ctx context.Context, req *mcp.CallToolRequest, creq *writ.CheckRequest, rc *writ.Receipt) (*writ.Receipt, bool) {
	ap, can := g.opts.Writ.(approvalDecider)
	if !can || g.cfg.User == "" || (req.Extra != nil && req.Extra.TokenInfo != nil) || req.Session == nil ||
		rc.Disposition.Mode != writ.ModeHumanReview || rc.HumanReviewTerminal || len(rc.Metadata.ApprovalIDs) == 0 {
		return rc, false
	}
	approvalID, gateID := rc.Metadata.ApprovalIDs[0], ""
	for _, c := range rc.WhatWouldChangeThisConditions {
		if c.Kind == writ.ConditionApproval && c.ApprovalID == approvalID {
			gateID = c.GateID
		}
	}
	if gate := g.opts.Gates[gateID]; gate == nil || !gate.Elicit {
		return rc, false
	}
	var why []string
	for _, r := range rc.Reasons {
		why = append(why, r.Message)
	}
	msg := fmt.Sprintf("writ asks you, %s, to approve or deny a call to %s (approval request %s at gate %s): %s", g.cfg.User, creq.Tool, approvalID, gateID, strings.Join(why, " "))
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decision": map[string]any{"type": "string", "enum": []any{"approve", "deny"}, "description": "Approve or deny this call."},
			"reason":   map[string]any{"type": "string", "description": "Why, for the record."},
		},
		"required": []any{"decision", "reason"},
	}})
	if err != nil || res.Action != "accept" {
		// Not asked (the client cannot be), declined or cancelled: the
		// approval stays pending for the console, the API or the CLI.
		if err != nil {
			g.log.Debug("gateway: elicitation not possible", "approval_id", approvalID, "error", err)
		}
		return rc, false
	}
	decision, _ := res.Content["decision"].(string)
	reason, _ := res.Content["reason"].(string)
	dr := &writ.DecideApprovalRequest{TenantID: creq.TenantID, ApprovalID: approvalID, Decision: writ.ApprovalDenied, Approver: g.cfg.User, Reason: reason, TraceID: creq.TraceID}
	if decision == "approve" {
		dr.Decision = writ.ApprovalApproved
	}
	if _, err := ap.DecideApproval(ctx, dr); err != nil {
		g.log.Warn("gateway: the user's approval decision was not recorded", "approval_id", approvalID, "error", err)
		return rc, false
	}
	rc2, err := g.decide(ctx, creq)
	if err != nil {
		return rc, false
	}
	return rc2, true
}
