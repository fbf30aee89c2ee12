package writ

import (
	"context"
	"encoding/json"
)

// Replay statuses.
const (
	// ReplayEqual: the rebuilt record has the recorded canonical bytes.
	ReplayEqual = "replay_equal"
	// ReplayDiff: something differs; Differences says what and where.
	ReplayDiff = "diff"
	// ReplayError: the record could not be replayed (its pinned inputs are
	// authentic but cannot be decided again by this writ); Error says why.
	ReplayError = "error"
)

// ReplayResult is the replay of one record: its pinned inputs fetched and
// hash-checked, the decision run again at its recorded clock, the record
// rebuilt and its canonical bytes compared (see docs/replay.md).
type ReplayResult struct {
	TenantID    string `json:"tenant_id"`
	RecordID    string `json:"record_id"`
	Seq         int64  `json:"seq,omitempty"`
	DecisionKey string `json:"decision_key,omitempty"`
	// Kind is check, step_verdict or approval_decision.
	Kind   string `json:"kind,omitempty"`
	Status string `json:"status"`
	// Classes are the distinct classes of Differences, sorted.
	Classes     []string           `json:"classes,omitempty"`
	Differences []ReplayDifference `json:"differences,omitempty"`
	Error       string             `json:"error,omitempty"`
	// Erased lists the references of the classified inputs that were
	// erased, when Status is ReplayInputsErased.
	Erased []string `json:"erased,omitempty"`
}

// ReplayDifference is one thing that differs between the record as
// sealed and as replayed.
type ReplayDifference struct {
	// Class is changed_evidence, changed_policy, changed_tool_transcript,
	// changed_compiled_context, changed_scorecard, changed_record or
	// tamper_detected.
	Class string `json:"class"`
	// Path is the JSON path in the record ("outputs.outcome",
	// "policy_decisions[4].verdict"); empty for an input the record does
	// not pin by hash (an approval request, a run's events).
	Path string `json:"path,omitempty"`
	// Input names the pinned input a tamper finding is about ("envelope
	// sha256:…", "pack sha256:…", "approval apr_…", "run run_…").
	Input string `json:"input,omitempty"`
	// Recorded and Replayed are the values at Path (absent when the
	// member is absent on that side).
	Recorded json.RawMessage `json:"recorded,omitempty"`
	Replayed json.RawMessage `json:"replayed,omitempty"`
	Detail   string          `json:"detail,omitempty"`
}

// Replays replays records for auditors. The replay package's Replayer
// satisfies it.
type Replays interface {
	// Replay replays one of the tenant's records; another tenant's record
	// is ENOTFOUND.
	Replay(ctx context.Context, tenantID, recordID string) (*ReplayResult, error)
	// ReplayTrace replays every record of the tenant with the trace id, in
	// chain order; a trace without records is ENOTFOUND.
	ReplayTrace(ctx context.Context, tenantID, traceID string) ([]*ReplayResult, error)
}
