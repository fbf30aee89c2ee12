package writ

import (
	"context"
	"time"
)

// Approval request states. A request is pending until an approver
// approves or denies it, its requester withdraws it, or it expires
// undecided.
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalWithdrawn = "withdrawn"
	ApprovalExpired   = "expired"
)

// Approval event kinds.
const (
	ApprovalEventApproved = "approved"
	ApprovalEventDenied   = "denied"
	// ApprovalEventWithdrawn is its requester's withdrawal: it decides
	// the request as a denial does, and no one may approve it after.
	ApprovalEventWithdrawn = "withdrawn"
	// ApprovalEventRedeemed is appended with the record of a check that an
	// approval allowed.
	ApprovalEventRedeemed = "redeemed"
)

// EscalationGatePrefix prefixes the gate id of an escalation's approval
// request: "escalation:<rule id>". Escalations are terminal.
const EscalationGatePrefix = "escalation:"

// ApprovalBinding is exactly what an approval approves. A check may redeem
// an approval only while all of it still holds.
type ApprovalBinding struct {
	DecisionKey string `json:"decision_key"`
	// ArgumentsDigest is a keyed digest of the action's unredacted
	// arguments ("hmac-sha256:…"; see record.Binder): it changes with any
	// argument and reveals none. Live checks compare it.
	ArgumentsDigest string `json:"arguments_digest"`
	// RedactedArgumentsDigest is the record's replay.arguments_digest: the
	// digest of the redacted arguments, which replay can recompute from
	// the stored request envelope. Replay, which never sees unredacted
	// arguments, compares this one instead.
	RedactedArgumentsDigest string `json:"redacted_arguments_digest"`
	// EvidenceSnapshotHash is the record's replay.evidence_snapshot_hash:
	// the digest of the evidence the approver saw.
	EvidenceSnapshotHash string `json:"evidence_snapshot_hash"`
	// BundleRevisions are the spec's policy bundles as bundle_id@version.
	BundleRevisions []string `json:"bundle_revisions"`
}

// Requester is who asked for an approval: the actor of the check and,
// when the server authenticates callers, the API key that made it. No
// one named here may approve the request.
type Requester struct {
	ActorID         string `json:"actor_id"`
	DelegatedUserID string `json:"delegated_user_id,omitempty"`
	KeyID           string `json:"key_id,omitempty"`
	Subject         string `json:"subject,omitempty"`
}

// ApprovalRequest is a durable request for a human decision at a gate,
// created by a check whose outcome needs one and frozen on what that check
// saw. The request itself never changes; decisions and redemptions are
// append-only events, from which State, Decision and Uses are derived.
type ApprovalRequest struct {
	ApprovalID string `json:"approval_id"`
	TenantID   string `json:"tenant_id"`
	// GateID is the approval gate, or "escalation:<rule id>" for an
	// escalation.
	GateID string `json:"gate_id"`
	// Terminal marks an escalation (human_review_terminal): the automated
	// path ended, and no check can redeem the request.
	Terminal   bool   `json:"terminal"`
	TargetHint string `json:"target_hint,omitempty"`
	// ApprovalModeEffective is the approval mode of the action.
	ApprovalModeEffective ApprovalMode    `json:"approval_mode_effective"`
	Binding               ApprovalBinding `json:"binding"`
	// RecordID and DecisionID name the check that asked; its record and
	// its stored (redacted) request envelope, ReplayPacketID, are what
	// the approver reviews.
	RecordID       string    `json:"record_id"`
	DecisionID     string    `json:"decision_id"`
	ReplayPacketID string    `json:"replay_packet_id"`
	TraceID        string    `json:"trace_id"`
	SubjectIDs     []string  `json:"subject_ids"`
	RequestedBy    Requester `json:"requested_by"`
	// Reasons are the reasons the check gave for needing the approval.
	Reasons []Reason `json:"reasons"`
	// CreatedAt is when the check asked. The request may be decided until
	// ExpiresAt; an approval may be redeemed until its decision's
	// ValidUntil.
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Allowance is how many checks may redeem the approval (default 1).
	Allowance int `json:"allowance"`

	// Derived from Events (and the clock, for expiry) by the store.
	State    string            `json:"state"`
	Decision *ApprovalDecision `json:"decision,omitempty"`
	Uses     int               `json:"uses"`
	Events   []ApprovalEvent   `json:"events"`
}

// ApprovalDecision is an approver's answer to an approval request, or its
// requester's withdrawal of it.
type ApprovalDecision struct {
	// Decision is ApprovalApproved, ApprovalDenied or ApprovalWithdrawn;
	// for a withdrawal, Approver is who withdrew.
	Decision string    `json:"decision"`
	Approver string    `json:"approver"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"decided_at"`
	// ValidUntil is when an approval stops being redeemable: its decision
	// time plus the gate's ttl.
	ValidUntil time.Time `json:"valid_until,omitzero"`
	// RecordID is the decision record of the approval or denial.
	RecordID string `json:"record_id"`
}

// ApprovalEvent is one append-only event of an approval request. Seq
// numbers a request's events from 1.
type ApprovalEvent struct {
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
	// Actor is the approver of a decision; empty for a redemption.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// RecordID is the decision record written with the event: the
	// approval or denial, or the check that redeemed the approval.
	RecordID string    `json:"record_id"`
	At       time.Time `json:"at"`
}

// Apply derives State, Decision and Uses from Events at the clock
// reading now. An approval stays redeemable for the gate's ttl after it is
// given, the same span the request had to be decided in.
func (a *ApprovalRequest) Apply(now time.Time) {
	ttl := a.ExpiresAt.Sub(a.CreatedAt)
	a.State, a.Decision, a.Uses = ApprovalPending, nil, 0
	for _, ev := range a.Events {
		switch ev.Kind {
		case ApprovalEventApproved, ApprovalEventDenied, ApprovalEventWithdrawn:
			d := &ApprovalDecision{Decision: ApprovalApproved, Approver: ev.Actor, Reason: ev.Reason, At: ev.At, RecordID: ev.RecordID}
			switch ev.Kind {
			case ApprovalEventDenied:
				d.Decision = ApprovalDenied
			case ApprovalEventWithdrawn:
				d.Decision = ApprovalWithdrawn
			default:
				d.ValidUntil = ev.At.Add(ttl)
			}
			a.State, a.Decision = d.Decision, d
		case ApprovalEventRedeemed:
			a.Uses++
		}
	}
	if a.State == ApprovalPending && !now.Before(a.ExpiresAt) {
		a.State = ApprovalExpired
	}
}

// ApprovalQuery filters a tenant's approval requests. Zero fields do not
// filter.
type ApprovalQuery struct {
	TenantID    string
	State       string // pending, approved, denied, withdrawn or expired
	GateID      string
	DecisionKey string
	// CreatedBefore keeps requests created before it (an age filter).
	CreatedBefore time.Time
	// Limit caps the page size (default 100, at most 1000).
	Limit int
	// Cursor continues a previous page (ApprovalPage.NextCursor).
	Cursor string
}

// ApprovalPage is one page of approval requests, oldest first.
type ApprovalPage struct {
	Approvals  []ApprovalRequest `json:"approvals"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// DecideApprovalRequest approves or denies an approval request.
type DecideApprovalRequest struct {
	TenantID   string `json:"tenant_id"`
	ApprovalID string `json:"approval_id"`
	// Decision is ApprovalApproved or ApprovalDenied.
	Decision string `json:"decision"`
	// Approver names the approver. With authentication it is the API
	// key's subject and may be omitted; without (development mode) it is
	// required.
	Approver string `json:"approver,omitempty"`
	// Reason says why, for the record. Required.
	Reason  string `json:"reason"`
	TraceID string `json:"trace_id,omitempty"`
}

// WithdrawApprovalRequest withdraws a pending approval request that its
// requester no longer needs.
type WithdrawApprovalRequest struct {
	TenantID   string `json:"tenant_id"`
	ApprovalID string `json:"approval_id"`
	// Reason says why, for the record. Optional.
	Reason  string `json:"reason,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
}

// Approvals is the approval queue: what approvers and auditors program
// against. The engine and the HTTP client both satisfy it.
type Approvals interface {
	// Approvals lists the tenant's approval requests matching q.
	Approvals(ctx context.Context, q ApprovalQuery) (*ApprovalPage, error)
	// Approval returns one approval request with its events, or
	// ENOTFOUND (also for another tenant's request).
	Approval(ctx context.Context, tenantID, approvalID string) (*ApprovalRequest, error)
	// DecideApproval approves or denies a pending request. The decision is
	// a decision record in the ledger, durable before DecideApproval
	// returns. Deciding a request twice, after it expired, or by one of
	// its requesters is an error.
	DecideApproval(ctx context.Context, req *DecideApprovalRequest) (*ApprovalRequest, error)
	// WithdrawApproval withdraws a pending request for its requester: a
	// decision record (an AGENT's REJECTED approval record with outcome
	// withdrawn), durable before WithdrawApproval returns. Withdrawing a
	// request that is decided, withdrawn or expired is ECONFLICT; with
	// authentication, only one of its requesters may withdraw it.
	WithdrawApproval(ctx context.Context, req *WithdrawApprovalRequest) (*ApprovalRequest, error)
}
