package ledger

import (
	"context"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// ApprovalStore is the part of a store that keeps approval requests and
// their append-only events. Requests and events are written only with
// records, by Store.Append (Entry.NewApprovals, Entry.ApprovalEvent), so
// every approval fact is durable exactly when the record that states it is.
type ApprovalStore interface {
	// Approval returns one of the tenant's approval requests with its
	// events in seq order, derived with ApprovalRequest.Apply(now), or
	// ENOTFOUND.
	Approval(ctx context.Context, tenantID, approvalID string, now time.Time) (*writ.ApprovalRequest, error)
	// Approvals lists the tenant's requests matching q, oldest first,
	// each with its events and derived at now.
	Approvals(ctx context.Context, q writ.ApprovalQuery, now time.Time) (*writ.ApprovalPage, error)
	// OpenApproval returns the tenant's newest request at gateID whose
	// binding digest is bindingDigest and that is still pending at now,
	// or nil: a check that needs the same approval again points to it
	// instead of asking twice.
	OpenApproval(ctx context.Context, tenantID, gateID, bindingDigest string, now time.Time) (*writ.ApprovalRequest, error)
	// DecidedApprovals returns those of the tenant's approval requests ids
	// that have been approved or denied, in one read.
	DecidedApprovals(ctx context.Context, tenantID string, ids []string) ([]string, error)
}

// NewApproval is an approval request created with its check's record.
type NewApproval struct {
	Request *writ.ApprovalRequest
	// BindingDigest is BindingDigest(Request.Binding), indexed for
	// OpenApproval.
	BindingDigest string
}

// ApprovalEvent is an event appended with a record, guarded inside the
// transaction: a decision (approved, denied) only while the request has no
// decision; a redemption only while it is approved and its uses are below
// its allowance. An event whose guard fails is not appended, and neither
// is its entry's record: the store sets Entry.Refused instead.
type ApprovalEvent struct {
	TenantID   string
	ApprovalID string
	Event      writ.ApprovalEvent // Seq and RecordID are set by the store
}

// Refusal reasons in Entry.Refused.
const (
	RefusedDecided   = "already_decided"
	RefusedNotGiven  = "not_approved"
	RefusedExhausted = "allowance_used"
	RefusedUnknown   = "unknown_approval"
)

// BindingDigest is the digest OpenApproval looks requests up by: the
// SHA-256 of the binding's canonical JSON.
func BindingDigest(b writ.ApprovalBinding) (string, error) {
	return record.CanonicalDigest(b)
}
