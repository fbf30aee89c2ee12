package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

var _ writ.Approvals = (*Engine)(nil)

// DefaultApprovalTTL is how long an approval request may be decided, and
// an approval redeemed, when its gate sets no ttl.
const DefaultApprovalTTL = 24 * time.Hour

// presentedApprovals reads the approvals a check presents, derived at now.
// An id the tenant does not have is invalid input, whoever's it is.
func (e *Engine) presentedApprovals(ctx context.Context, req *writ.CheckRequest, now time.Time) ([]*writ.ApprovalRequest, error) {
	var out []*writ.ApprovalRequest
	for i, id := range req.ApprovalIDs {
		a, err := e.store.Approval(ctx, req.TenantID, id, now)
		if writ.ErrorCode(err) == writ.ENOTFOUND {
			field := fmt.Sprintf("approval_ids[%d]", i)
			return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("approval %q is not an approval request of this tenant", id), Details: []writ.Detail{{Field: field, Message: "unknown approval"}}}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// askApprovals creates the approval requests a decision waits on: one per
// gate still open when the decision needs an approval, or a terminal one
// when it escalates. A request still pending for the same gate and
// binding is pointed to again instead of asking twice. The receipt rc,
// already redacted, is pointed at the requests.
func (e *Engine) askApprovals(ctx context.Context, rq *writ.CheckRequest, r *policy.Resolved, d *policy.Decision, rc *writ.Receipt, rec *writ.Record, binding writ.ApprovalBinding, now time.Time) ([]ledger.NewApproval, error) {
	var gates []string
	switch d.Effect {
	case policy.RequireApproval:
		gates = d.OpenGates()
	case policy.Escalate:
		gates = []string{writ.EscalationGatePrefix + d.EscalatedBy()}
	default:
		return nil, nil
	}
	digest, err := ledger.BindingDigest(binding)
	if err != nil {
		return nil, err
	}
	var created []ledger.NewApproval
	for _, gate := range gates {
		open, err := e.store.OpenApproval(ctx, rq.TenantID, gate, digest, now)
		if err != nil {
			return nil, err
		}
		id := ""
		if open != nil {
			id = open.ApprovalID
		} else {
			a := e.newApprovalRequest(ctx, rq, r, gate, rc, rec, binding, now)
			created = append(created, ledger.NewApproval{Request: a, BindingDigest: digest})
			id = a.ApprovalID
		}
		pointAt(rc, gate, id, e.policy.Pack.Gates[gate])
	}
	return created, nil
}

func (e *Engine) newApprovalRequest(ctx context.Context, rq *writ.CheckRequest, r *policy.Resolved, gate string, rc *writ.Receipt, rec *writ.Record, binding writ.ApprovalBinding, now time.Time) *writ.ApprovalRequest {
	ttl, allowance, terminal := DefaultApprovalTTL, 1, strings.HasPrefix(gate, writ.EscalationGatePrefix)
	hint := rc.Routing.TargetHint
	if g := e.policy.Pack.Gates[gate]; g != nil {
		if g.TTL > 0 {
			ttl = g.TTL
		}
		if g.Allowance > 0 {
			allowance = g.Allowance
		}
		if g.TargetHint != "" {
			hint = g.TargetHint
		}
	}
	by := writ.Requester{ActorID: rec.Actor.ID, DelegatedUserID: rec.Actor.DelegatedUserID}
	if p := writ.PrincipalFrom(ctx); p != nil {
		by.KeyID, by.Subject = p.KeyID, p.Subject
	}
	return &writ.ApprovalRequest{
		ApprovalID: e.newID("apr_", now), TenantID: rq.TenantID, GateID: gate, Terminal: terminal, TargetHint: hint,
		ApprovalModeEffective: r.ApprovalMode, Binding: binding,
		RecordID: rec.RecordID, DecisionID: rec.DecisionID, ReplayPacketID: rec.Replay.ReplayPacketID, TraceID: rec.TraceID,
		SubjectIDs: slices.Clone(rec.SubjectIDs), RequestedBy: by, Reasons: slices.Clone(rc.Reasons), // already redacted
		CreatedAt: now, ExpiresAt: now.Add(ttl), Allowance: allowance,
		State: writ.ApprovalPending, Events: []writ.ApprovalEvent{},
	}
}

// pointAt makes the receipt name the approval request at gate: in its
// metadata, in the approval conditions of the gate, and as a safe next step.
func pointAt(rc *writ.Receipt, gate, id string, g *pack.Gate) {
	rc.Metadata.ApprovalIDs = append(rc.Metadata.ApprovalIDs, id)
	for _, cs := range [][]writ.Condition{rc.WhatWouldChangeThisConditions, rc.ResumeContract.ResumeWhenConditions} {
		for i := range cs {
			if cs[i].Kind == writ.ConditionApproval && cs[i].GateID == gate {
				cs[i].ApprovalID = id
			}
		}
	}
	if strings.HasPrefix(gate, writ.EscalationGatePrefix) {
		rc.SafeNextSteps = append(rc.SafeNextSteps, writ.Reason{Code: "AWAIT_HUMAN_REVIEW", Message: fmt.Sprintf("People take over in escalation %s; this path ends here.", id)})
		return
	}
	who := gate
	if g != nil && g.TargetHint != "" {
		who = g.TargetHint
	}
	rc.SafeNextSteps = append(rc.SafeNextSteps, writ.Reason{Code: "AWAIT_APPROVAL", Message: fmt.Sprintf("Wait for approval %s at %s (%s), then retry this check with approval_ids [%q].", id, gate, who, id)})
	text := fmt.Sprintf("Approval %s at %s is granted and presented in approval_ids.", id, gate)
	cond := writ.Condition{Kind: writ.ConditionApproval, Text: text, GateID: gate, ApprovalID: id}
	if !slices.ContainsFunc(rc.WhatWouldChangeThisConditions, func(c writ.Condition) bool { return c.ApprovalID == id }) {
		rc.WhatWouldChangeThis = append(rc.WhatWouldChangeThis, text)
		rc.WhatWouldChangeThisConditions = append(rc.WhatWouldChangeThisConditions, cond)
		if rc.ResumeContract.RetryThisNode {
			rc.ResumeContract.ResumeWhen = append(rc.ResumeContract.ResumeWhen, text)
			rc.ResumeContract.ResumeWhenConditions = append(rc.ResumeContract.ResumeWhenConditions, cond)
		}
	}
}

// announce hands new approval requests to the configured announcer (a
// webhook), after their records are durable.
func (e *Engine) announce(created []ledger.NewApproval) {
	if e.announcer == nil {
		return
	}
	for _, a := range created {
		e.announcer(a.Request)
	}
}

// Approvals lists the tenant's approval requests; see writ.Approvals.
func (e *Engine) Approvals(ctx context.Context, q writ.ApprovalQuery) (*writ.ApprovalPage, error) {
	if err := needTenant(q.TenantID); err != nil {
		return nil, err
	}
	if q.Limit < 0 || q.Limit > 1000 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "limit must be between 1 and 1000", Details: []writ.Detail{{Field: "limit", Message: "out of range"}}}
	}
	switch q.State {
	case "", writ.ApprovalPending, writ.ApprovalApproved, writ.ApprovalDenied, writ.ApprovalWithdrawn, writ.ApprovalExpired:
	default:
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("unknown approval state %q (want pending, approved, denied, withdrawn or expired)", q.State), Details: []writ.Detail{{Field: "state", Message: "unknown state"}}}
	}
	return e.store.Approvals(ctx, q, e.now().UTC())
}

// Approval returns one approval request; see writ.Approvals.
func (e *Engine) Approval(ctx context.Context, tenantID, approvalID string) (*writ.ApprovalRequest, error) {
	if err := needTenant(tenantID); err != nil {
		return nil, err
	}
	return e.store.Approval(ctx, tenantID, approvalID, e.now().UTC())
}

// DecideApproval approves or denies a pending approval request; see
// writ.Approvals. The decision is a decision record (decision key
// "approval:<gate>") appended with the approval event in one transaction.
func (e *Engine) DecideApproval(ctx context.Context, req *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty approval decision")
	}
	rq := *req
	var ds []writ.Detail
	bad := func(field, msg string) { ds = append(ds, writ.Detail{Field: field, Message: msg}) }
	if rq.TenantID == "" || !tenantPattern.MatchString(rq.TenantID) {
		bad("tenant_id", "a valid tenant_id is required")
	}
	if rq.ApprovalID == "" {
		bad("approval_id", "required")
	}
	if rq.Decision != writ.ApprovalApproved && rq.Decision != writ.ApprovalDenied {
		bad("decision", "must be approved or denied")
	}
	if strings.TrimSpace(rq.Reason) == "" {
		bad("reason", "required: say why, for the record")
	}
	bindSubject(ctx, &rq.Approver, "approver", "the approver", bad)
	if rq.TraceID != "" && !writ.ValidTraceID(rq.TraceID) {
		bad("trace_id", "must be 32 lowercase hex digits, not all zero")
	}
	if len(ds) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid approval decision", Details: ds}
	}
	now := e.now().UTC()
	a, err := e.pendingApproval(ctx, rq.TenantID, rq.ApprovalID, now)
	if err != nil {
		return nil, err
	}
	if rq.Decision == writ.ApprovalApproved && selfApproval(a.RequestedBy, rq.Approver, writ.PrincipalFrom(ctx)) {
		return nil, writ.Errorf(writ.EFORBIDDEN, "%s asked for approval %s and may not approve it; another approver must", rq.Approver, a.ApprovalID)
	}
	return e.sealDecision(ctx, &rq, a, now)
}

// pendingApproval reads an approval request that may still be decided:
// one that is decided, withdrawn or expired is ECONFLICT.
func (e *Engine) pendingApproval(ctx context.Context, tenantID, approvalID string, now time.Time) (*writ.ApprovalRequest, error) {
	a, err := e.store.Approval(ctx, tenantID, approvalID, now)
	if err != nil {
		return nil, err
	}
	switch a.State {
	case writ.ApprovalApproved, writ.ApprovalDenied, writ.ApprovalWithdrawn:
		return nil, writ.Errorf(writ.ECONFLICT, "approval %s was already %s by %s at %s", a.ApprovalID, a.State, a.Decision.Approver, a.Decision.At.Format(time.RFC3339))
	case writ.ApprovalExpired:
		return nil, writ.Errorf(writ.ECONFLICT, "approval %s expired undecided at %s; the check must ask again", a.ApprovalID, a.ExpiresAt.Format(time.RFC3339))
	}
	return a, nil
}

// WithdrawApproval withdraws a pending approval request for its
// requester; see writ.Approvals. The withdrawal is sealed as an approval
// decision with decision "withdrawn": a REJECTED record (decision key
// "approval:<gate>") by the requester as an AGENT actor, appended with a
// withdrawn event in one transaction, exactly as a denial is.
func (e *Engine) WithdrawApproval(ctx context.Context, req *writ.WithdrawApprovalRequest) (*writ.ApprovalRequest, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty approval withdrawal")
	}
	var ds []writ.Detail
	if req.TenantID == "" || !tenantPattern.MatchString(req.TenantID) {
		ds = append(ds, writ.Detail{Field: "tenant_id", Message: "a valid tenant_id is required"})
	}
	if req.ApprovalID == "" {
		ds = append(ds, writ.Detail{Field: "approval_id", Message: "required"})
	}
	if req.TraceID != "" && !writ.ValidTraceID(req.TraceID) {
		ds = append(ds, writ.Detail{Field: "trace_id", Message: "must be 32 lowercase hex digits, not all zero"})
	}
	if len(ds) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid approval withdrawal", Details: ds}
	}
	now := e.now().UTC()
	a, err := e.pendingApproval(ctx, req.TenantID, req.ApprovalID, now)
	if err != nil {
		return nil, err
	}
	// Only a requester withdraws: with authentication, the key that asked
	// or one whose subject is a requester; without, the request's actor,
	// in whose name the withdrawal is recorded.
	by := a.RequestedBy.ActorID
	if p := writ.PrincipalFrom(ctx); p != nil {
		if !selfApproval(a.RequestedBy, p.Subject, p) {
			return nil, writ.Errorf(writ.EFORBIDDEN, "%s did not ask for approval %s and may not withdraw it; only its requester may", p.Subject, a.ApprovalID)
		}
		by = p.Subject
	}
	rq := &writ.DecideApprovalRequest{TenantID: req.TenantID, ApprovalID: req.ApprovalID, Decision: writ.ApprovalWithdrawn,
		Approver: by, Reason: req.Reason, TraceID: req.TraceID}
	return e.sealDecision(ctx, rq, a, now)
}

// sealDecision seals the decision rq of the pending approval request a: its
// record and its event, in one append, then wakes the resumes waiting on
// it.
func (e *Engine) sealDecision(ctx context.Context, rq *writ.DecideApprovalRequest, a *writ.ApprovalRequest, now time.Time) (*writ.ApprovalRequest, error) {
	if rq.TraceID == "" {
		rq.TraceID = e.newTraceID(now)
	}
	rec, envelope, err := record.ApprovalDecision(e.policy.Pack, e.redactor, rq, a, e.newID("dr_", now), now)
	if err != nil {
		return nil, err
	}
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: "the approval record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	kind := map[string]string{writ.ApprovalApproved: writ.ApprovalEventApproved, writ.ApprovalDenied: writ.ApprovalEventDenied,
		writ.ApprovalWithdrawn: writ.ApprovalEventWithdrawn}[rq.Decision]
	receipt, _ := json.Marshal(map[string]any{"approval_id": a.ApprovalID, "decision": rq.Decision, "approver": rq.Approver, "record_id": rec.RecordID})
	entry := &ledger.Entry{Record: rec, Receipt: receipt,
		Envelope:      envelope,
		ApprovalEvent: &ledger.ApprovalEvent{TenantID: rq.TenantID, ApprovalID: a.ApprovalID, Event: writ.ApprovalEvent{Kind: kind, Actor: rq.Approver, Reason: e.redactor.String(rq.Reason), At: now}}}
	if err := ledger.Bind(entry, nil); err != nil {
		return nil, err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, fmt.Errorf("canonicalize approval record: %w", err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		return nil, notRecorded("the approval decision", err)
	}
	if entry.Refused != "" {
		return nil, writ.Errorf(writ.ECONFLICT, "approval %s was decided by someone else meanwhile", a.ApprovalID)
	}
	// The decision is durable: its waiters and the decided hook are told
	// whatever happens next, or they would wait for a decision already
	// made, and a retry would be refused as decided.
	e.waiters.notify(rq.TenantID, rq.ApprovalID)
	decided, err := e.store.Approval(ctx, rq.TenantID, rq.ApprovalID, now)
	if err != nil {
		// The request as read before the append, with the event the
		// store just appended (its Seq and RecordID set), is what is
		// durable.
		e.log.Warn("a decided approval could not be read back; answering it from its appended event", "tenant", rq.TenantID, "approval_id", a.ApprovalID, "err", err)
		a.Events = append(a.Events, entry.ApprovalEvent.Event)
		a.Apply(now)
		decided = a
	}
	if e.onDecided != nil {
		e.onDecided(decided)
	}
	return decided, nil
}

// bindSubject sets *who, the person a request names (an approver, a
// setter), from the API key that made it: the key's subject, which the
// request may repeat but not contradict. A server that authenticates no
// one takes the request's word, which is then required.
func bindSubject(ctx context.Context, who *string, field, role string, bad func(field, msg string)) {
	p := writ.PrincipalFrom(ctx)
	switch {
	case p != nil && *who != "" && *who != p.Subject:
		bad(field, role+" is the API key's subject ("+p.Subject+"); omit "+field+" or give that")
	case p != nil:
		*who = p.Subject
	case strings.TrimSpace(*who) == "":
		bad(field, "required when the server does not authenticate callers")
	}
}

// selfApproval reports whether approver is one of the request's
// requesters: the checking actor, the user who delegated to it, or the
// holder of the API key that made the check.
func selfApproval(by writ.Requester, approver string, p *writ.Principal) bool {
	if approver == by.ActorID || (by.DelegatedUserID != "" && approver == by.DelegatedUserID) || (by.Subject != "" && approver == by.Subject) {
		return true
	}
	return p != nil && by.KeyID != "" && p.KeyID == by.KeyID
}
