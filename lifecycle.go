package writ

import (
	"context"
	"encoding/json"
	"time"
)

// Lifecycle carries one decision past its receipt: the execution report
// of the effect it allowed, a resume once what blocked it has changed, its
// whole story, and the decisions still in flight. The in-process engine
// and the HTTP client both satisfy it.
type Lifecycle interface {
	// ReportExecution records what happened to the effect a decision
	// allowed, as a sealed record (status CLOSED) under the decision's
	// id, durable before it returns. One report per decision: the same
	// report again returns the first acknowledgement (Repeated set); a
	// different one is ECONFLICT. A decision that did not permit
	// execution cannot be reported succeeded (ECONFLICT); a decision the
	// tenant does not have is ENOTFOUND.
	ReportExecution(ctx context.Context, r *ExecutionReport) (*ExecutionAck, error)
	// Resume decides a blocked decision's action again, through the
	// normal loop, and returns the fresh receipt, whose record continues
	// the decision (same decision_id) and supersedes the blocked record.
	// With Wait, it first waits, up to Wait, for an approval the blocked
	// receipt waits on to be decided; if none is decided in time, it
	// returns the blocked receipt again with Metadata.Repeated
	// "still_waiting" and writes nothing.
	Resume(ctx context.Context, r *ResumeRequest) (*Receipt, error)
	// Decision returns the whole story of one decision: every record that
	// belongs to it in chain order, its receipts and its approval
	// requests. ENOTFOUND for a decision the tenant does not have.
	Decision(ctx context.Context, tenantID, decisionID string) (*DecisionStory, error)
	// InFlight lists the tenant's decisions whose permit awaits an
	// execution report, oldest first.
	InFlight(ctx context.Context, q InFlightQuery) (*InFlightPage, error)
}

// ExecutionStatus is what happened to an allowed effect.
type ExecutionStatus string

// Execution statuses.
const (
	ExecutionSucceeded   ExecutionStatus = "succeeded"
	ExecutionFailed      ExecutionStatus = "failed"
	ExecutionNotExecuted ExecutionStatus = "not_executed"
)

// ExecutionReport is an agent's (or the MCP gateway's) report of what
// happened to the effect decision DecisionID allowed. It carries a digest
// of the result, never the result itself.
type ExecutionReport struct {
	TenantID string `json:"tenant_id"`
	// DecisionID names the decision (over HTTP, the path does).
	DecisionID string          `json:"decision_id,omitempty"`
	Status     ExecutionStatus `json:"status"`
	// ToolCallID names the call (default: the tool call id of the
	// permitting record's lineage).
	ToolCallID   string `json:"tool_call_id,omitempty"`
	ToolResultID string `json:"tool_result_id,omitempty"`
	// ResultDigest is "sha256:" and 64 lowercase hex digits of the
	// result, computed by the reporter.
	ResultDigest   string          `json:"result_digest,omitempty"`
	Error          *ExecutionError `json:"error,omitempty"`
	StartedAt      *time.Time      `json:"started_at,omitempty"`
	EndedAt        *time.Time      `json:"ended_at,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	ReversalToken  string          `json:"reversal_token,omitempty"`
	// Usage is what the effect itself used.
	Usage *Usage `json:"usage,omitempty"`
	// Actor reports; default: the permitting record's actor.
	Actor *Actor `json:"actor,omitempty"`
	// TraceID joins the report to a trace; default: the permitting
	// record's trace id, so the whole story shares one trace.
	TraceID string `json:"trace_id,omitempty"`
}

// ExecutionError is why an effect failed.
type ExecutionError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// ExecutionAck acknowledges a sealed execution report.
type ExecutionAck struct {
	TenantID   string `json:"tenant_id"`
	DecisionID string `json:"decision_id"`
	// RecordID is the report's sealed record; ReportedFor the permitting
	// record it closes (or, for a decision that permitted nothing, its
	// latest record).
	RecordID    string          `json:"record_id"`
	ReportedFor string          `json:"reported_for"`
	Status      Status          `json:"status"`
	Execution   ExecutionStatus `json:"execution"`
	// Findings are what the report revealed: "reported_after_expiry",
	// "not_permitted".
	Findings []Reason `json:"findings"`
	TraceID  string   `json:"trace_id"`
	// Repeated is "idempotent" when this is the first report's
	// acknowledgement returned again.
	Repeated string `json:"repeated,omitempty"`
}

// Findings of execution reports.
const (
	FindingReportedAfterExpiry = "reported_after_expiry"
	FindingNotPermitted        = "not_permitted"
)

// Execution is a record's execution block. On a permit (a check record
// that allowed the effect) it says until when the permit is valid and
// whether an execution report is required. On an execution report's
// record it says what happened.
type Execution struct {
	ValidUntil     *time.Time `json:"valid_until,omitempty"`
	ReportRequired bool       `json:"report_required,omitempty"`

	Status       ExecutionStatus `json:"status,omitempty"`
	ReportedFor  string          `json:"reported_for,omitempty"`
	ResultDigest string          `json:"result_digest,omitempty"`
	Error        *ExecutionError `json:"error,omitempty"`
	StartedAt    *time.Time      `json:"started_at,omitempty"`
	EndedAt      *time.Time      `json:"ended_at,omitempty"`
	Findings     []Reason        `json:"findings,omitempty"`
	// Transcript is the call's entry in its run's tool transcript, on an
	// execution report's record sealed since issue 32 (see
	// TranscriptEntry).
	Transcript *TranscriptEntry `json:"transcript,omitempty"`
}

// ResumeRequest resumes a blocked decision. Request is the same check,
// as the agent made it (the ledger keeps only its redacted form), with
// whatever changed: new evidence, say. writ refuses a request for another
// action than the decision's (another decision key or other arguments).
type ResumeRequest struct {
	TenantID   string        `json:"tenant_id"`
	DecisionID string        `json:"decision_id"`
	Request    *CheckRequest `json:"request"`
	// Wait is how long to wait for an approval the decision waits on to
	// be decided (at most MaxResumeWait); zero re-decides at once.
	Wait time.Duration `json:"-"`
}

// MaxResumeWait bounds ResumeRequest.Wait.
const MaxResumeWait = 5 * time.Minute

// Repeat reason of a resume that waited in vain.
const RepeatedStillWaiting = "still_waiting"

// DecisionStory is one decision, start to finish.
type DecisionStory struct {
	TenantID   string `json:"tenant_id"`
	DecisionID string `json:"decision_id"`
	// State sums the story up.
	State DecisionState `json:"state"`
	// Records are every record of the decision in chain order: checks,
	// approval decisions, the execution report, and step verdicts that
	// cite the decision.
	Records []StoryRecord `json:"records"`
	// Approvals are the approval requests the decision asked for.
	Approvals []ApprovalRequest `json:"approvals"`
}

// DecisionState is where a decision stands.
type DecisionState struct {
	// Status is the status of the decision's latest check or report
	// record.
	Status        Status  `json:"status"`
	Outcome       Outcome `json:"outcome,omitempty"`
	SafeToExecute bool    `json:"safe_to_execute"`
	// PermitRecordID is the latest record that permitted the effect.
	PermitRecordID string     `json:"permit_record_id,omitempty"`
	ValidUntil     *time.Time `json:"valid_until,omitempty"`
	ReportRequired bool       `json:"report_required,omitempty"`
	// Execution is the reported execution status, if reported.
	Execution ExecutionStatus `json:"execution,omitempty"`
	// InFlight is true while a required report is missing.
	InFlight bool `json:"in_flight"`
	// Retracted is set when a retraction names one of the decision's
	// records (its record stays, flagged).
	Retracted bool `json:"retracted,omitempty"`
	// CorrectedBy lists the records of other decisions that supersede
	// one of this decision's records: its corrections.
	CorrectedBy []string `json:"corrected_by,omitempty"`
}

// Kinds of story records.
const (
	StoryCheck     = "check"
	StoryApproval  = "approval_decision"
	StoryExecution = "execution_report"
	StoryVerdict   = "step_verdict"
)

// StoryRecord is one record of a decision's story, with its seal
// references and, for a check, the receipt answered with it.
type StoryRecord struct {
	Kind      string          `json:"kind"`
	RecordID  string          `json:"record_id"`
	Status    Status          `json:"status"`
	Timestamp time.Time       `json:"timestamp"`
	Seal      Audit           `json:"seal"`
	Record    json.RawMessage `json:"record"`
	Receipt   json.RawMessage `json:"receipt,omitempty"`
	// Supersedes is the record this one supersedes, SupersededBy the
	// records that supersede it (corrections, re-checks, execution
	// reports, retractions; of any decision), in chain order.
	Supersedes   string   `json:"supersedes,omitempty"`
	SupersededBy []string `json:"superseded_by,omitempty"`
	// Retracted is set on a record a retraction names.
	Retracted bool `json:"retracted,omitempty"`
	// Feedback lists the feedback entries' records on this record.
	Feedback []string `json:"feedback,omitempty"`
	// LastReplay is the record's latest recorded replay.
	LastReplay *LastReplay `json:"last_replay,omitempty"`
}

// InFlightQuery filters decisions in flight. ExpiredBy, when set, keeps
// only those whose permit expired before it.
type InFlightQuery struct {
	TenantID  string
	ExpiredBy time.Time
	Limit     int
	Cursor    string
}

// InFlightDecision is a permit still awaiting its execution report.
type InFlightDecision struct {
	DecisionID  string     `json:"decision_id"`
	RecordID    string     `json:"record_id"`
	DecisionKey string     `json:"decision_key"`
	DecidedAt   time.Time  `json:"decided_at"`
	ValidUntil  *time.Time `json:"valid_until,omitempty"`
	Expired     bool       `json:"expired"`
	TraceID     string     `json:"trace_id"`
}

// InFlightPage is one page of decisions in flight.
type InFlightPage struct {
	Decisions  []InFlightDecision `json:"decisions"`
	NextCursor string             `json:"next_cursor,omitempty"`
}
