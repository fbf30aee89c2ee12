// Package workflow folds a workflow run's events into its state and
// decides and records a step attempt's verdict: the pure half of runs.
//
// Everything here is a function of its arguments: the run's events, the
// pinned pack, its compiled verification contracts, the redactor and
// the clock reading. The engine calls it to decide an attempt; replay
// calls it, on the events recorded before a verdict, to rebuild the
// verdict's record byte for byte. It must never read a store, a clock
// or a random source, and never import the engine or an adapter.
package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
)

// Started is the data of a run's first event (ledger.RunStarted).
type Started struct {
	WorkflowID      string         `json:"workflow_id"`
	WorkflowVersion string         `json:"workflow_version"`
	Pack            string         `json:"pack"`
	PackHash        string         `json:"pack_hash"`
	Context         map[string]any `json:"context"`
	Step            string         `json:"step"`
	// StartedBy is the key's principal that started the run (keyed
	// mode); absent in development mode.
	StartedBy *writ.Actor `json:"started_by,omitempty"`
}

// ObservedCall is the data of a call writ allowed for a run's step
// (ledger.CallObserved).
type ObservedCall struct {
	Tool       string         `json:"tool"`
	Args       map[string]any `json:"args,omitempty"`
	DecisionID string         `json:"decision_id"`
}

// ExecutedCall is the data of an execution report of an observed call
// (ledger.CallExecuted).
type ExecutedCall struct {
	DecisionID string `json:"decision_id"`
	RecordID   string `json:"record_id"` // the report's record
}

// Attempted is the data of a step attempt (ledger.StepAttempt).
type Attempted struct {
	Verdict *writ.StepVerdict `json:"verdict"`
}

// State is a run folded from its events.
type State struct {
	// Run is the run with its history.
	Run *writ.Run
	// Start is the run's start event, which its records bind.
	Start *ledger.RunEvent

	attempts int                              // attempts at the current step since it became current
	observed map[string][]acceptance.ToolCall // calls writ observed, by step
	calls    map[string]callAt                // observed calls by decision id
}

// callAt places an observed call in State.observed.
type callAt struct {
	step string
	i    int
}

// Fold folds a run's events, in seq order, into its state. p is the
// pinned pack: a step it defines as terminal and without a contract
// completes the run when an attempt is accepted into it.
func Fold(p *pack.Pack, tenantID, runID string, evs []ledger.RunEvent) (*State, error) {
	st := &State{observed: map[string][]acceptance.ToolCall{}, calls: map[string]callAt{}}
	for _, ev := range evs {
		h := writ.RunEvent{Seq: ev.Seq, Kind: ev.Kind, StepID: ev.StepID, At: ev.At, RecordID: ev.RecordID}
		switch ev.Kind {
		case ledger.RunStarted:
			st.Start = &ev
			var d Started
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("run %s: start event: %w", runID, err)
			}
			st.Run = &writ.Run{TenantID: tenantID, RunID: runID, WorkflowID: d.WorkflowID, WorkflowVersion: d.WorkflowVersion,
				Pack: d.Pack, PackHash: d.PackHash, Status: writ.RunActive, CurrentStep: d.Step, Context: d.Context, StartedAt: ev.At, StartedBy: d.StartedBy}
		case ledger.CallObserved:
			var d ObservedCall
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("run %s: observed call: %w", runID, err)
			}
			h.Tool = d.Tool
			st.calls[d.DecisionID] = callAt{ev.StepID, len(st.observed[ev.StepID])}
			st.observed[ev.StepID] = append(st.observed[ev.StepID], acceptance.ToolCall{Name: d.Tool, Args: d.Args})
		case ledger.CallExecuted:
			var d ExecutedCall
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("run %s: executed call: %w", runID, err)
			}
			if at, ok := st.calls[d.DecisionID]; ok {
				st.observed[at.step][at.i].Executed = true
				h.Tool = st.observed[at.step][at.i].Name
			}
		case ledger.StepAttempt:
			var d Attempted
			if err := json.Unmarshal(ev.Data, &d); err != nil || d.Verdict == nil {
				return nil, fmt.Errorf("run %s: attempt event: %v", runID, err)
			}
			h.Verdict = d.Verdict
			st.apply(d.Verdict)
			// A terminal step without a contract has nothing to prove:
			// being accepted into it completes the run.
			accepted := d.Verdict.State == writ.VerdictAccepted || d.Verdict.State == writ.VerdictAcceptedWithWarnings
			if w := definedWorkflow(p, st.Run.WorkflowID); w != nil && accepted && st.Run.Status == writ.RunActive && w.Version == st.Run.WorkflowVersion {
				if s := w.Step(st.Run.CurrentStep); s != nil && s.Terminal && s.Verification == nil {
					st.Run.Status, st.Run.CurrentStep = writ.RunCompleted, ""
				}
			}
		}
		if st.Run == nil {
			return nil, fmt.Errorf("run %s: the first event is %s, not %s", runID, ev.Kind, ledger.RunStarted)
		}
		st.Run.History = append(st.Run.History, h)
	}
	return st, nil
}

// definedWorkflow is the pack's workflow id, or nil.
func definedWorkflow(p *pack.Pack, id string) *pack.Workflow {
	if p == nil {
		return nil
	}
	return p.Workflows[id]
}

// RetryAt is when the step may be attempted again: the time of its last
// attempt plus that verdict's retry_after, when that verdict was a retry
// with a backoff.
func (st *State) RetryAt(step string) (time.Time, bool) {
	h := st.Run.History
	for i := len(h) - 1; i >= 0; i-- {
		ev := h[i]
		if ev.Kind != ledger.StepAttempt || ev.StepID != step || ev.Verdict == nil {
			continue
		}
		if ev.Verdict.State != writ.VerdictRetry || ev.Verdict.RetryAfterMS <= 0 {
			return time.Time{}, false
		}
		return ev.At.Add(time.Duration(ev.Verdict.RetryAfterMS) * time.Millisecond), true
	}
	return time.Time{}, false
}

// apply moves the run by a verdict.
func (st *State) apply(v *writ.StepVerdict) {
	r := st.Run
	switch v.State {
	case writ.VerdictRetry:
		st.attempts = v.AttemptsUsed
	case writ.VerdictEscalated:
		r.Status, r.CurrentStep, st.attempts = writ.RunEscalated, "", 0
	default: // accepted, accepted with warnings, aborted
		st.attempts = 0
		switch {
		case v.NextStep != "":
			r.CurrentStep = v.NextStep
		case v.State == writ.VerdictAborted:
			r.Status, r.CurrentStep = writ.RunAborted, ""
		default:
			r.Status, r.CurrentStep = writ.RunCompleted, ""
		}
	}
}

// observedRecords lists the records behind the calls observed for a step.
func (st *State) observedRecords(step string) []string {
	var out []string
	for _, h := range st.Run.History {
		if h.Kind == ledger.CallObserved && h.StepID == step {
			out = append(out, h.RecordID)
		}
	}
	return out
}
