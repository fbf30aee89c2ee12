package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
)

// approvalDecider is what asking the user needs beyond Writ: deciding an
// approval request (writ.Approvals has it; the engine and httpapi.Client
// both do).
type approvalDecider interface {
	DecideApproval(ctx context.Context, req *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error)
}

const (
	// inputApproval is the id of the one input request of an
	// input-required result (2026-07-28): the approval question.
	inputApproval = "io.github.writhq/approval"
	// stateTTL is how long a requestState may be answered.
	stateTTL = 15 * time.Minute
	// revisionInputRequired is the first revision that asks through
	// input-required results rather than elicitation/create.
	revisionInputRequired = "2026-07-28"
)

// question is one approval the user may be asked to decide.
type question struct {
	approvalID, gateID string
	params             *mcp.ElicitParams
}

// askable returns the question to put to the person at the client about
// the approval rc waits on, when everything allows it: the configuration
// names the user, the session is a stdio (or development-mode) one (a
// bearer key's caller is never asked: its user is not Config.User), the
// gate says elicit: true, and the client declared elicitation. ok is
// false otherwise.
func (g *Gateway) askable(req *mcp.CallToolRequest, creq *writ.CheckRequest, rc *writ.Receipt) (question, bool) {
	if _, can := g.opts.Writ.(approvalDecider); !can || g.cfg.User == "" || (req.Extra != nil && req.Extra.TokenInfo != nil) || req.Session == nil ||
		rc.Disposition.Mode != writ.ModeHumanReview || rc.HumanReviewTerminal || len(rc.Metadata.ApprovalIDs) == 0 {
		return question{}, false
	}
	if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
		return question{}, false
	}
	q := question{approvalID: rc.Metadata.ApprovalIDs[0]}
	for _, c := range rc.WhatWouldChangeThisConditions {
		if c.Kind == writ.ConditionApproval && c.ApprovalID == q.approvalID {
			q.gateID = c.GateID
		}
	}
	if gate := g.opts.Gates[q.gateID]; gate == nil || !gate.Elicit {
		return question{}, false
	}
	var why []string
	for _, r := range rc.Reasons {
		why = append(why, r.Message)
	}
	// The arguments as a record keeps them: the pack's redaction rules
	// hide what they name, here as there.
	args, err := json.Marshal(g.redactor.Map(creq.Arguments))
	if err != nil {
		return question{}, false
	}
	q.params = &mcp.ElicitParams{
		Message: fmt.Sprintf("writ asks you, %s, to approve or deny a call to %s (approval request %s at gate %s). Why: %s Arguments: %s", g.cfg.User, creq.Tool, q.approvalID, q.gateID, strings.Join(why, " "), args),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "enum": []any{"approve", "deny"}, "description": "Approve or deny this call."},
				"reason":   map[string]any{"type": "string", "description": "Why, for the record."},
			},
			"required": []any{"decision", "reason"},
		},
	}
	return q, true
}

// elicit asks the person at the client (elicitation/create, 2025-11-25)
// to decide the approval a blocked call waits on (see askable). Their
// answer is recorded as an approval decision by Config.User, and the
// decision resumed. ok is false when nothing was asked or nothing was
// decided; rc is then unchanged.
func (g *Gateway) elicit(ctx context.Context, req *mcp.CallToolRequest, creq *writ.CheckRequest, rc *writ.Receipt) (*writ.Receipt, bool) {
	q, ok := g.askable(req, creq, rc)
	if !ok {
		return rc, false
	}
	res, err := req.Session.Elicit(ctx, q.params)
	if err != nil {
		// Not asked (the client cannot be): the approval stays pending
		// for the console, the API or the CLI.
		g.log.Debug("gateway: elicitation not possible", "approval_id", q.approvalID, "error", err)
		return rc, false
	}
	if !g.answer(ctx, creq, q.approvalID, res) {
		return rc, false
	}
	rc2, err := g.decide(ctx, creq)
	if err != nil {
		return rc, false
	}
	return rc2, true
}

// answer records the user's answer to the approval question as their
// approval decision. Declined, cancelled or malformed answers decide
// nothing: the approval stays pending. It reports whether a decision
// was recorded.
func (g *Gateway) answer(ctx context.Context, creq *writ.CheckRequest, approvalID string, res *mcp.ElicitResult) bool {
	if res == nil || res.Action != "accept" {
		return false
	}
	decision, _ := res.Content["decision"].(string)
	reason, _ := res.Content["reason"].(string)
	dr := &writ.DecideApprovalRequest{TenantID: creq.TenantID, ApprovalID: approvalID, Approver: g.cfg.User, Reason: reason, TraceID: creq.TraceID}
	switch decision {
	case "approve":
		dr.Decision = writ.ApprovalApproved
	case "deny":
		dr.Decision = writ.ApprovalDenied
	default:
		return false
	}
	if _, err := g.opts.Writ.(approvalDecider).DecideApproval(ctx, dr); err != nil {
		g.log.Warn("gateway: the user's approval decision was not recorded", "approval_id", approvalID, "error", err)
		return false
	}
	return true
}

// inputRequired is the 2026-07-28 way of asking (see askable): instead
// of the blocked result, an input-required result whose one input
// request is the approval question, and a signed requestState naming the
// approval and the call. nil when the user is not to be asked.
func (g *Gateway) inputRequired(req *mcp.CallToolRequest, creq *writ.CheckRequest, rc *writ.Receipt) *mcp.CallToolResult {
	q, ok := g.askable(req, creq, rc)
	if !ok {
		return nil
	}
	st, err := g.sealState(creq, q.approvalID, rc.DecisionID)
	if err != nil {
		g.log.Warn("gateway: the input-required state could not be sealed; not asking", "approval_id", q.approvalID, "error", err)
		return nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputApproval: q.params}, RequestState: st}
}

// requestState is what a sealed requestState carries: the approval asked
// about, for which call (the digest of its wait key: tenant, actor, tool,
// arguments), until when, and a nonce that makes it single-use.
type requestState struct {
	ApprovalID string `json:"a"`
	DecisionID string `json:"d"`
	Call       string `json:"c"`
	Expires    int64  `json:"e"`
	Nonce      string `json:"n"`
}

// errState: a requestState the gateway refuses.
var errState = errors.New("requestState refused")

func (g *Gateway) sealState(creq *writ.CheckRequest, approvalID, decisionID string) (string, error) {
	key, err := waitKey(creq)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, 16)
	rand.Read(nonce)
	sum := sha256.Sum256([]byte(key))
	body, err := json.Marshal(requestState{ApprovalID: approvalID, DecisionID: decisionID, Call: hex.EncodeToString(sum[:]), Expires: g.now().Add(stateTTL).Unix(), Nonce: hex.EncodeToString(nonce)})
	if err != nil {
		return "", err
	}
	b64 := base64.RawURLEncoding
	return b64.EncodeToString(body) + "." + b64.EncodeToString(g.mac(body)), nil
}

func (g *Gateway) mac(body []byte) []byte {
	m := hmac.New(sha256.New, g.stateKey)
	m.Write(body)
	return m.Sum(nil)
}

// openState verifies a requestState the client echoed: sealed by this
// gateway (its key lives as long as the process), unaltered, unexpired,
// for this very call, and not answered before (each state is redeemed
// once). It is then spent.
func (g *Gateway) openState(creq *writ.CheckRequest, s string) (*requestState, error) {
	b64 := base64.RawURLEncoding
	bodyPart, sigPart, ok := strings.Cut(s, ".")
	body, err1 := b64.DecodeString(bodyPart)
	sig, err2 := b64.DecodeString(sigPart)
	// Only the text as sealed: decoding skips line breaks and spare bits,
	// so another text may decode to the same bytes.
	canonical := b64.EncodeToString(body) == bodyPart && b64.EncodeToString(sig) == sigPart
	if !ok || err1 != nil || err2 != nil || !canonical || !hmac.Equal(sig, g.mac(body)) {
		return nil, fmt.Errorf("%w: it was not issued by this gateway or was altered (a gateway that restarted no longer knows its earlier states)", errState)
	}
	var st requestState
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("%w: %v", errState, err)
	}
	key, err := waitKey(creq)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(key))
	now := g.now()
	switch {
	case st.Call != hex.EncodeToString(sum[:]):
		return nil, fmt.Errorf("%w: it was issued for another call (the tool, the arguments or the caller differ)", errState)
	case now.Unix() > st.Expires:
		return nil, fmt.Errorf("%w: it expired (states are answerable for %s)", errState, stateTTL)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for n, exp := range g.spent {
		if now.Unix() > exp {
			delete(g.spent, n)
		}
	}
	if _, used := g.spent[st.Nonce]; used {
		return nil, fmt.Errorf("%w: it was answered already (each state is answered once)", errState)
	}
	g.spent[st.Nonce] = st.Expires
	return &st, nil
}

// answered handles a 2026-07-28 retry that carries a requestState: the
// state is verified and spent, and the user's answer to the approval
// question recorded as their approval decision. A refused state is an
// error: the call is then refused, nothing decided or forwarded.
func (g *Gateway) answered(ctx context.Context, req *mcp.CallToolRequest, creq *writ.CheckRequest) error {
	st, err := g.openState(creq, req.Params.RequestState)
	if err != nil {
		return err
	}
	if _, can := g.opts.Writ.(approvalDecider); !can || g.cfg.User == "" || (req.Extra != nil && req.Extra.TokenInfo != nil) {
		return fmt.Errorf("%w: this session may not answer approval questions", errState)
	}
	res, _ := req.Params.InputResponses[inputApproval].(*mcp.ElicitResult)
	g.answer(ctx, creq, st.ApprovalID, res)
	return nil
}
