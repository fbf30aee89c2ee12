package writ

import "time"

// ReceiptType is the value of every receipt's receipt_type field.
const ReceiptType = "verifiedx_decision_receipt"

// Outcome is what a boundary check decided. Callers branch on Outcome,
// SafeToExecute and Disposition.Mode.
type Outcome string

// Outcomes.
const (
	OutcomeAllow            Outcome = "allow"
	OutcomeAllowWithWarning Outcome = "allow_with_warning"
	OutcomeReplanRequired   Outcome = "replan_required"
	OutcomeGoalFailTerminal Outcome = "goal_fail_terminal"
)

// Outcomes lists every outcome, most permissive first.
var Outcomes = []Outcome{OutcomeAllow, OutcomeAllowWithWarning, OutcomeReplanRequired, OutcomeGoalFailTerminal}

// Mode is how the workflow should continue after a receipt.
type Mode string

// Disposition modes.
const (
	ModeContinueDownstream Mode = "continue_downstream"
	ModeLocalReplan        Mode = "local_replan"
	ModeUpstreamReplan     Mode = "upstream_replan"
	ModeHumanReview        Mode = "human_review"
	ModeTerminalBlock      Mode = "terminal_block"
)

// Routing directions.
const (
	DirectionDownstream = "downstream"
	DirectionLocal      = "local"
	DirectionUpstream   = "upstream"
	DirectionHuman      = "human"
	DirectionStop       = "stop"
)

// Receipt is the decision receipt: the structured contract returned for
// every boundary check. Field names, types and values follow the receipt
// contract; what_would_change_this and resume_when carry prose, and their
// *_conditions siblings carry the same conditions in a form a machine can
// check.
type Receipt struct {
	ReceiptType            string  `json:"receipt_type"`
	DecisionID             string  `json:"decision_id"`
	Outcome                Outcome `json:"outcome"`
	ActionClass            string  `json:"action_class"`
	SafeToExecute          bool    `json:"safe_to_execute"`
	HumanReviewTerminal    bool    `json:"human_review_terminal"`
	MustNotRetrySameAction bool    `json:"must_not_retry_same_action"`

	Reasons                       []Reason    `json:"reasons"`
	SafeNextSteps                 []Reason    `json:"safe_next_steps"`
	ViewerGuidance                []string    `json:"viewer_guidance"`
	WhatWouldChangeThis           []string    `json:"what_would_change_this"`
	WhatWouldChangeThisConditions []Condition `json:"what_would_change_this_conditions"`

	Disposition     Disposition     `json:"disposition"`
	Routing         Routing         `json:"routing"`
	ResumeContract  ResumeContract  `json:"resume_contract"`
	RuntimeLoopback RuntimeLoopback `json:"runtime_loopback"`
	Metadata        Metadata        `json:"metadata"`
}

// Reason is a structured reason or a safe next step: a stable code and a
// message for people.
type Reason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Condition is something that, once true, would change the decision. Text
// is for people; the other fields are for machines:
//
//   - kind "evidence": evidence of EvidenceKind (younger than MaxAge, and
//     satisfying Expression when set) is attached to the retried check.
//   - kind "approval": an approval at gate GateID is attached.
//   - kind "expression": the CEL Expression holds over the retried check's
//     variables (the same variables rule conditions see).
//   - kind "budget": the request's usage fits the spec's budget again.
type Condition struct {
	Kind         string `json:"kind"`
	Text         string `json:"text"`
	EvidenceKind string `json:"evidence_kind,omitempty"`
	MaxAge       string `json:"max_age,omitempty"`
	GateID       string `json:"gate_id,omitempty"`
	// ApprovalID names the pending approval request at GateID; retry the
	// check with it in approval_ids once it is approved.
	ApprovalID string `json:"approval_id,omitempty"`
	Expression string `json:"expression,omitempty"`
}

// Condition kinds.
const (
	ConditionEvidence   = "evidence"
	ConditionApproval   = "approval"
	ConditionExpression = "expression"
	ConditionBudget     = "budget"
)

// Disposition says where the workflow may go next.
type Disposition struct {
	Mode                   Mode `json:"mode"`
	DownstreamAllowed      bool `json:"downstream_allowed"`
	LocalReplanRecommended bool `json:"local_replan_recommended"`
	UpstreamReplanRequired bool `json:"upstream_replan_required"`
}

// Routing carries hints for the next stage of the workflow.
type Routing struct {
	Direction    string `json:"direction"`
	TargetHint   string `json:"target_hint,omitempty"`
	ReturnToNode string `json:"return_to_node,omitempty"`
	WorkflowID   string `json:"workflow_id,omitempty"`
	NodeID       string `json:"node_id,omitempty"`
}

// ResumeContract gives the retry semantics of a blocked or warned boundary.
type ResumeContract struct {
	RetryThisNode                 bool        `json:"retry_this_node"`
	PassReceiptUpstream           bool        `json:"pass_receipt_upstream"`
	PassNewUpstreamContextOnRetry bool        `json:"pass_new_upstream_context_on_retry"`
	ResumeWhen                    []string    `json:"resume_when"`
	ResumeWhenConditions          []Condition `json:"resume_when_conditions"`
}

// RuntimeLoopback tells a runtime adapter whether the goal is still the same.
type RuntimeLoopback struct {
	SameGoalState bool `json:"same_goal_state"`
}

// Metadata is runtime metadata attached by writ. RecordID names the durable
// decision record behind the receipt; a receipt without one never permits
// execution.
type Metadata struct {
	RecordID    string `json:"record_id,omitempty"`
	DecisionKey string `json:"decision_key,omitempty"`
	Pack        string `json:"pack,omitempty"`
	PackHash    string `json:"pack_hash,omitempty"`
	TraceID     string `json:"trace_id,omitempty"`
	// Repeated is set when the receipt is an earlier decision returned
	// again: "idempotent" for a retried idempotency key, "must_not_retry"
	// for an unchanged retry of a blocked action.
	Repeated string `json:"repeated,omitempty"`
	// FailClosed is set when writ could not commit the record.
	FailClosed bool `json:"fail_closed,omitempty"`
	// ApprovalIDs name the approval requests this decision waits on: the
	// pending approvals of a human_review receipt, or the terminal
	// escalation handed to people.
	ApprovalIDs []string `json:"approval_ids,omitempty"`
	// ExpiresAt is when an allow stops being valid (the spec's
	// execution.valid_for); the effect must not start after it.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// ExecutionReport is "required" when the agent must report the
	// effect's execution (POST /v1/decisions/{id}/execution).
	ExecutionReport string `json:"execution_report,omitempty"`
}

// Repeat reasons in Metadata.Repeated.
const (
	RepeatedIdempotent   = "idempotent"
	RepeatedMustNotRetry = "must_not_retry"
)
