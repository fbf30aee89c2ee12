package writ

import (
	"context"
	"encoding/json"
	"time"
)

// Service is what an agent builder programs against. The in-process engine
// (package engine) and the HTTP client (package httpapi) both satisfy it.
type Service interface {
	// Check evaluates one boundary under the pinned pack and returns its
	// receipt. A receipt that permits execution is returned only after its
	// record is durably committed. If the record cannot be committed, Check
	// returns a fail-closed receipt (SafeToExecute false, Metadata.FailClosed)
	// together with an EUNAVAILABLE error.
	Check(ctx context.Context, req *CheckRequest) (*Receipt, error)
	// Record returns one record of the tenant, exactly as sealed.
	Record(ctx context.Context, tenantID, recordID string) (*StoredRecord, error)
	// Records lists the tenant's records matching q, oldest first.
	Records(ctx context.Context, q RecordQuery) (*RecordPage, error)
}

// StoredRecord is a record as the ledger keeps it: Raw holds the exact
// sealed JSON bytes; Record is the same record parsed.
type StoredRecord struct {
	Record Record
	Raw    json.RawMessage
}

// RecordQuery filters a tenant's records. Zero fields do not filter.
type RecordQuery struct {
	TenantID    string
	DecisionKey string
	Status      Status
	// Outcome keeps the records whose outputs.outcome is this outcome:
	// check records carry one; approval decisions and execution reports
	// do not, so they never match.
	Outcome   Outcome
	SubjectID string
	TraceID   string
	// ApprovalMode keeps the records whose approval_mode_effective is
	// this mode.
	ApprovalMode ApprovalMode
	// PolicyDecisionID keeps the records one of whose policy decisions
	// has this policy_decision_id (a rule with its verdict, such as
	// "pd:refunds@3:R_LIMIT:deny").
	PolicyDecisionID string
	// Approver keeps the records one of whose approvals names this
	// approver: the approval decisions a person made.
	Approver string
	// RefersTo keeps the records about this record: those that
	// supersede it, retract it, give feedback on it or record its
	// replay.
	RefersTo string
	// Scorecard "failed" keeps the records whose scorecard failed their
	// spec's pass mark (Record.ScorecardFailed); the only value.
	Scorecard string
	// From is inclusive, To exclusive.
	From, To time.Time
	// DecisionKeyPrefix and SubjectPrefix keep the records whose
	// decision key, or one of whose subjects, begins with the prefix
	// (compared byte by byte, case-sensitive).
	DecisionKeyPrefix string
	SubjectPrefix     string
	// Newest serves the newest records first (descending seq) instead
	// of chain order; a cursor continues in the order of its query.
	Newest bool
	// Limit caps the page size (default 100, at most 1000).
	Limit int
	// Cursor continues a previous page (RecordPage.NextCursor).
	Cursor string
}

// ScorecardFailedQuery is the value of RecordQuery.Scorecard that keeps
// the records whose scorecard failed their spec's pass mark.
const ScorecardFailedQuery = "failed"

// RecordPage is one page of records; NextCursor is empty on the last page.
type RecordPage struct {
	Records    []StoredRecord
	NextCursor string
}
