package ledger

import (
	"encoding/json"
	"time"
)

// RunEvent is one append-only event of a workflow run. Seq numbers a
// run's events from 1; stores assign it when they append.
type RunEvent struct {
	TenantID string          `json:"tenant_id"`
	RunID    string          `json:"run_id"`
	Seq      int64           `json:"seq"`
	Kind     string          `json:"kind"`
	StepID   string          `json:"step_id,omitempty"`
	RecordID string          `json:"record_id,omitempty"`
	At       time.Time       `json:"at"`
	Data     json.RawMessage `json:"data"`
}

// Run event kinds.
const (
	RunStarted   = "run_started"
	CallObserved = "call_observed" // a boundary check of the run's step that writ allowed
	CallExecuted = "call_executed" // an execution report of an observed call: it succeeded
	StepAttempt  = "step_attempt"  // a step attempt and its verdict
)
