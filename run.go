package writ

import (
	"context"
	"time"
)

// StartRunRequest starts a run of a workflow of the pinned pack.
type StartRunRequest struct {
	TenantID   string `json:"tenant_id"`
	WorkflowID string `json:"workflow_id"`
	// RunID names the run; writ generates one when it is empty.
	RunID string `json:"run_id,omitempty"`
	// Pack, when set, must be the pinned pack's name@version or content
	// hash: a run never starts under a pack its caller did not expect.
	Pack string `json:"pack,omitempty"`
	// Context holds the run's context values; only the keys the workflow
	// declares are allowed.
	Context map[string]any `json:"context,omitempty"`
}

// AttemptRequest submits one attempt at a step: the agent's result
// payload and the tool calls it claims to have made.
type AttemptRequest struct {
	TenantID string         `json:"tenant_id"`
	RunID    string         `json:"run_id"`
	StepID   string         `json:"step_id"`
	Actor    Actor          `json:"actor"`
	Result   map[string]any `json:"result"`
	// ToolCalls are the calls the agent reports; writ counts them as
	// claimed unless it observed them itself.
	ToolCalls []ToolCallClaim `json:"tool_calls,omitempty"`
	TraceID   string          `json:"trace_id,omitempty"`
}

// ToolCallClaim is a tool call as an agent reports it.
type ToolCallClaim struct {
	Name   string         `json:"name"`
	Args   map[string]any `json:"args,omitempty"`
	Result any            `json:"result,omitempty"`
}

// Verdict states.
const (
	VerdictAccepted             = "accepted"
	VerdictAcceptedWithWarnings = "accepted_with_warnings"
	VerdictRetry                = "retry"
	VerdictAborted              = "aborted"
	VerdictEscalated            = "escalated"
)

// StepVerdict is the acceptance verdict of one step attempt.
type StepVerdict struct {
	RunID        string         `json:"run_id"`
	StepID       string         `json:"step_id"`
	State        string         `json:"state"`
	Checks       []VerdictCheck `json:"checks"`
	Failed       []VerdictCheck `json:"failed"`
	AttemptsUsed int            `json:"attempts_used"`
	AttemptsLeft int            `json:"attempts_left"`
	RetryPrompt  string         `json:"retry_prompt,omitempty"`
	RetryAfterMS int64          `json:"retry_after_ms,omitempty"`
	NextStep     string         `json:"next_step,omitempty"`
	EscalateTo   string         `json:"escalate_to,omitempty"`
	// Exemption is the declared reason a mutating step needs no contract.
	Exemption string `json:"exemption,omitempty"`
	// SelfReportIgnored says the payload reported its own success (a
	// field like success or status) that no rule checks: advisory only,
	// it did not count.
	SelfReportIgnored bool `json:"self_report_ignored,omitempty"`
	// ClaimedCalls lists, by name, the tool calls the attempt reported
	// that writ did not observe for the run and step: claimed, not
	// observed (absent from verdicts decided before issue 31).
	ClaimedCalls []string `json:"claimed_calls,omitempty"`
	DecisionID   string   `json:"decision_id"`
	RecordID     string   `json:"record_id"`
}

// VerdictCheck is one rule of a verification contract, checked.
type VerdictCheck struct {
	Kind          string `json:"kind"` // evidence or tool_call
	Target        string `json:"target"`
	Passed        bool   `json:"passed"`
	RejectMessage string `json:"reject_message,omitempty"`
	Detail        string `json:"detail,omitempty"`
}

// Run statuses.
const (
	RunActive    = "active"
	RunCompleted = "completed"
	RunAborted   = "aborted"
	RunEscalated = "escalated"
)

// Run is a workflow run and its history.
type Run struct {
	TenantID        string         `json:"tenant_id"`
	RunID           string         `json:"run_id"`
	WorkflowID      string         `json:"workflow_id"`
	WorkflowVersion string         `json:"workflow_version"`
	Pack            string         `json:"pack"`
	PackHash        string         `json:"pack_hash"`
	Status          string         `json:"status"`
	CurrentStep     string         `json:"current_step,omitempty"`
	Context         map[string]any `json:"context"`
	StartedAt       time.Time      `json:"started_at"`
	// StartedBy is the principal whose API key started the run (keyed
	// mode), with its key id: only that key, another key of the same
	// principal, or a key that may act for it submits attempts. Absent
	// for a run started in development mode.
	StartedBy *Actor     `json:"started_by,omitempty"`
	History   []RunEvent `json:"history"`
}

// RunEvent is one event of a run's history.
type RunEvent struct {
	Seq      int64        `json:"seq"`
	Kind     string       `json:"kind"` // run_started, call_observed, step_attempt
	StepID   string       `json:"step_id,omitempty"`
	At       time.Time    `json:"at"`
	RecordID string       `json:"record_id,omitempty"`
	Tool     string       `json:"tool,omitempty"`
	Verdict  *StepVerdict `json:"verdict,omitempty"`
}

// RunQuery selects a tenant's runs. Zero fields do not filter, except
// TenantID, which is required.
type RunQuery struct {
	TenantID   string
	WorkflowID string
	// Status keeps the runs in this state now (RunActive, RunCompleted,
	// RunAborted, RunEscalated).
	Status string
	// Limit caps the page size (default 100, at most 1000).
	Limit int
	// Cursor continues a previous page (RunPage.NextCursor).
	Cursor string
}

// RunSummary is a run without its history: its state now, and how far it
// got.
type RunSummary struct {
	TenantID        string    `json:"tenant_id"`
	RunID           string    `json:"run_id"`
	WorkflowID      string    `json:"workflow_id"`
	WorkflowVersion string    `json:"workflow_version"`
	Pack            string    `json:"pack"`
	PackHash        string    `json:"pack_hash"`
	Status          string    `json:"status"`
	CurrentStep     string    `json:"current_step,omitempty"`
	StartedAt       time.Time `json:"started_at"`
	// LastEventAt is the time of the run's latest event.
	LastEventAt time.Time `json:"last_event_at"`
	// Attempts counts the step attempts submitted, all steps together.
	Attempts int `json:"attempts"`
}

// RunPage is one page of runs in run id order; NextCursor is empty on
// the last page. A page may hold fewer runs than the limit, even none,
// while NextCursor is set: a page examines a bounded number of runs.
type RunPage struct {
	Runs       []RunSummary `json:"runs"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// RunStatuses lists every run status.
var RunStatuses = []string{RunActive, RunCompleted, RunAborted, RunEscalated}

// Workflows runs workflows whose steps are accepted on evidence. The
// in-process engine and the HTTP client satisfy it.
type Workflows interface {
	StartRun(ctx context.Context, req *StartRunRequest) (*Run, error)
	SubmitAttempt(ctx context.Context, req *AttemptRequest) (*StepVerdict, error)
	Run(ctx context.Context, tenantID, runID string) (*Run, error)
	// Runs lists the tenant's runs matching q, in run id order. Ids writ
	// generates begin with the run's start time, so generated runs come
	// oldest first.
	Runs(ctx context.Context, q RunQuery) (*RunPage, error)
}
