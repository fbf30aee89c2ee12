package ledger

import (
	"context"
	"time"

	"github.com/writhq/writ"
)

// ShadowDecision is what a shadow pack would have decided for a check:
// kept beside the enforced record, in the same transaction, never
// enforced and never in a receipt. A report compares the two.
type ShadowDecision struct {
	TenantID string `json:"tenant_id"`
	// RecordID is the enforced decision's record.
	RecordID    string    `json:"record_id"`
	DecisionKey string    `json:"decision_key"`
	At          time.Time `json:"at"`
	// Pack and PackHash pin the shadow pack (its files are stored as
	// blobs, like the enforced pack's).
	Pack     string `json:"pack"`
	PackHash string `json:"pack_hash"`
	// EnforcedOutcome is the enforced receipt's outcome, Outcome the
	// shadow decision's, and Status its record status.
	EnforcedOutcome writ.Outcome `json:"enforced_outcome"`
	Outcome         writ.Outcome `json:"outcome"`
	Status          writ.Status  `json:"status"`
	// PolicyDecisions are the shadow decision's applied checks, as a
	// record would list them; Reasons its receipt's reasons.
	PolicyDecisions []writ.PolicyDecision `json:"policy_decisions"`
	Reasons         []writ.Reason         `json:"reasons"`
}

// ShadowQuery selects a tenant's shadow decisions. Zero fields do not
// filter, except TenantID, which is required.
type ShadowQuery struct {
	TenantID string
	// PackHash keeps the decisions of one shadow pack.
	PackHash    string
	DecisionKey string
	// From is inclusive, To exclusive.
	From, To time.Time
	// Limit caps the page size (default 100, at most 1000).
	Limit  int
	Cursor string
}

// ShadowPage is one page of shadow decisions, oldest first.
type ShadowPage struct {
	Decisions  []ShadowDecision
	NextCursor string
}

// ShadowStore keeps shadow decisions. They are written only with their
// enforced record, by Store.Append (Entry.Shadow), and never changed.
type ShadowStore interface {
	ShadowDecisions(ctx context.Context, q ShadowQuery) (*ShadowPage, error)
}
