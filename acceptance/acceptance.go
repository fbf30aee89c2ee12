// Package acceptance decides whether a workflow step's attempt is
// accepted: the acceptance state machine of a step's verification
// contract.
//
//	parse the result payload → evaluate every rule → accept or reject →
//	retry with retryPrompt while budget remains, else onFailure
//
// Compile type-checks every CEL condition of a pack's workflows once.
// Evaluate is pure: it does no I/O, reads no clock and uses no global
// randomness. Its verdict is a deterministic function of the compiled
// pack, the workflow and step, the attempt, the number of prior attempts,
// the run context and a jitter seed, so a recorded verdict can be
// replayed exactly.
//
// # Evidence
//
// An evidence rule reads the value at a dotted path of the result payload
// ("a.b[0].c"). The payload is read in its JSON form: numbers are
// float64, and a JSON null counts as absent (expect: present fails on
// null, expect: absent passes on it). The expectations:
//
//	expect: true / false   the value is exactly that bool (not "true", not 1)
//	expect: present        the path exists and is not null
//	expect: absent         the path does not exist, or is null
//	equals: <json>         deep equality, numbers compared as float64
//	pattern: <re2>         the value is a string that matches
//	cel: <condition>       the condition holds over value (null when the
//	                       path is missing), result and context
//
// A CEL condition that cannot be evaluated (an error, the cost limit, a
// non-bool result) fails its rule: writ fails closed.
//
// # Tool calls: observed versus claimed
//
// A call writ itself saw for the run and step (its boundary checks, the
// MCP gateway) is observed; a call only reported in the payload is
// claimed. A rule counts observed calls only, and when the only matches
// are claimed its check says so. A rule that writes observed: false
// counts both, and a call listed in both (same name, deeply equal
// arguments) is counted once.
//
// Since issue 31 a rule counts observed calls only unless it writes
// observed: false, and on a mutating step that is not exempted it counts
// observed calls only even then. Every verdict lists the claimed calls
// (Verdict.Claimed).
//
// # Self-reported success
//
// The agent's own view of its work is advisory. Fields such as success:
// true or status: "done" in the payload have no effect unless a rule
// reads them; Verdict.SelfReportIgnored says when the payload carried
// such a field that no evidence rule read.
//
// # Verdicts
//
// Every rule is checked (no short-circuit), so a verdict lists every
// failed check with its rejectMessage. When all pass the step is
// accepted and the next step is the first goto whose condition holds,
// else the step's next, else none; a goto condition that cannot be
// evaluated is an error, not a guess. When some fail, onMissingEvidence
// decides: warn accepts with warnings (and routes as above);
// reject-and-retry retries while budget remains, then applies onFailure;
// reject-and-abort applies onFailure at once. The budget is the number of
// retries after the first attempt (0 without a retry block), at most the
// workflow policies' retry.maxBudget. onFailure abort (or none) aborts
// the step; escalate hands it to a reviewer; goto aborts this step and
// the run continues at the named step (State aborted, NextStep that
// step): there is no sixth state.
//
// A step the workflow policies count as mutating must carry a contract
// with at least one rule (an empty one proves nothing) unless it is
// exempted or the policies do not require verification: Evaluate refuses
// it rather than accept it without proof.
package acceptance

import (
	"fmt"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Verdict states.
const (
	// Accepted: every check passed.
	Accepted = "accepted"
	// AcceptedWithWarnings: some checks failed under onMissingEvidence warn.
	AcceptedWithWarnings = "accepted_with_warnings"
	// Retry: some checks failed and the retry budget has room; the agent
	// tries the step again with RetryPrompt after RetryAfter.
	Retry = "retry"
	// Aborted: the step failed. NextStep is set when onFailure is goto:
	// the run continues there.
	Aborted = "aborted"
	// Escalated: the step failed and is handed to EscalateTo.
	Escalated = "escalated"
)

// Check kinds.
const (
	KindEvidence = "evidence"
	KindToolCall = "tool_call"
)

// Attempt is one attempt at a step: the result payload the agent
// returned, the tool calls it claims in that payload, and the tool calls
// writ itself observed for the same run and step.
type Attempt struct {
	Result   map[string]any `json:"result"`
	Claimed  []ToolCall     `json:"claimed,omitempty"`
	Observed []ToolCall     `json:"observed,omitempty"`
}

// ToolCall is one tool call.
type ToolCall struct {
	Name   string         `json:"name"`
	Args   map[string]any `json:"args,omitempty"`
	Result any            `json:"result,omitempty"`
	// Executed is set on an observed call whose execution was reported
	// succeeded under its decision.
	Executed bool `json:"executed,omitempty"`
}

// Check is the outcome of one rule of a verification contract.
type Check struct {
	Kind          string `json:"kind"`   // KindEvidence or KindToolCall
	Target        string `json:"target"` // the evidence path or the tool name
	Passed        bool   `json:"passed"`
	RejectMessage string `json:"reject_message,omitempty"`
	// Detail says what was found, e.g. "value is false" or
	// "open_simple_browser: 0 observed calls, need 1; 1 claimed call that
	// writ did not observe does not count".
	Detail string `json:"detail"`
}

// Verdict is the acceptance decision on one attempt at a step.
type Verdict struct {
	State string `json:"state"`
	// Checks holds every rule's check, evidence rules then tool-call
	// rules, in contract order; Failed the ones that did not pass.
	Checks []Check `json:"checks"`
	Failed []Check `json:"failed"`
	// AttemptsUsed counts this attempt. AttemptsLeft is the number of
	// attempts the step may still make: non-zero only in state retry.
	AttemptsUsed int `json:"attempts_used"`
	AttemptsLeft int `json:"attempts_left"`
	// RetryPrompt (state retry) is the contract's retryPrompt, or the
	// failed checks' reject messages when it gives none.
	RetryPrompt string `json:"retry_prompt,omitempty"`
	// RetryAfter (state retry) is the backoff before the next attempt,
	// in nanoseconds in JSON.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// NextStep is where the run goes: the next step when accepted, this
	// step on retry, the onFailure step of a goto, or "" (the run ends
	// or waits on a reviewer).
	NextStep   string `json:"next_step,omitempty"`
	EscalateTo string `json:"escalate_to,omitempty"`
	// Exempt is set when the step is mutating and the workflow policies
	// exempt it from the verification requirement.
	Exempt *pack.Exemption `json:"exempt,omitempty"`
	// Claimed lists, by name in the payload's order, the tool calls the
	// agent reported that writ did not observe for the run and step
	// (none: empty, never nil, unless compiled leniently). They count
	// only toward a rule that writes observed: false on a step that is
	// not mutating, or is exempted.
	Claimed []string `json:"claimed"`
	// SelfReportIgnored says the payload carried a top-level
	// self-assessment field (success, ok, done, status, ...) that no
	// evidence rule reads: it played no part in the verdict.
	SelfReportIgnored bool `json:"self_report_ignored,omitempty"`
}

// Evaluate decides an attempt at step stepID of workflow workflowID
// (its workflow_id). priorAttempts counts the attempts at this step
// before this one; ctx is the run context; seed drives the backoff
// jitter. Evaluate refuses (EINVALID) an unknown workflow or step, a
// payload that is not JSON, and a mutating step that has no verification
// contract and no exemption.
func (c *Contracts) Evaluate(workflowID, stepID string, a Attempt, priorAttempts int, ctx map[string]any, seed uint64) (*Verdict, error) {
	w := c.workflows[workflowID]
	if w == nil {
		return nil, writ.Errorf(writ.EINVALID, "unknown workflow %q", workflowID)
	}
	s := w.steps[stepID]
	if s == nil {
		return nil, writ.Errorf(writ.EINVALID, "workflow %s has no step %q", workflowID, stepID)
	}
	if priorAttempts < 0 {
		return nil, writ.Errorf(writ.EINVALID, "prior attempts %d is negative", priorAttempts)
	}
	if s.refuse != nil {
		return nil, s.refuse
	}
	in, err := newInput(a, ctx)
	if err != nil {
		return nil, err
	}

	v := &Verdict{Checks: []Check{}, Failed: []Check{}, AttemptsUsed: priorAttempts + 1, Exempt: s.exempt}
	for _, r := range s.evidence {
		v.Checks = append(v.Checks, r.check(in))
	}
	for _, r := range s.toolCalls {
		v.Checks = append(v.Checks, r.check(in))
	}
	for _, ch := range v.Checks {
		if !ch.Passed {
			v.Failed = append(v.Failed, ch)
		}
	}
	v.SelfReportIgnored = s.selfReportIgnored(in.result)
	if !c.lenient {
		v.Claimed = claimedOnly(in)
	}

	if len(v.Failed) == 0 {
		v.State = Accepted
		if v.NextStep, err = s.next(in); err != nil {
			return nil, err
		}
		return v, nil
	}
	ver := s.s.Verification // non-nil: a step without one has no checks
	switch ver.OnMissingEvidence {
	case "warn":
		v.State = AcceptedWithWarnings
		if v.NextStep, err = s.next(in); err != nil {
			return nil, err
		}
	case "reject-and-abort":
		s.fail(v)
	default: // reject-and-retry
		budget := s.budget()
		if priorAttempts >= budget {
			s.fail(v)
			break
		}
		v.State = Retry
		v.NextStep = s.s.ID
		v.AttemptsLeft = budget - priorAttempts
		v.RetryPrompt = retryPrompt(ver.RetryPrompt, v.Failed)
		v.RetryAfter = backoff(ver.Retry, priorAttempts+1, seed)
	}
	return v, nil
}

// budget is the step's retry budget: its retry.budget, at most the
// workflow policies' retry.maxBudget; 0 without a retry block.
func (s *step) budget() int {
	r := s.s.Verification.Retry
	if r == nil {
		return 0
	}
	if m := s.maxBudget; m != nil && *m < r.Budget {
		return *m
	}
	return r.Budget
}

// fail applies the step's onFailure action.
func (s *step) fail(v *Verdict) {
	v.State = Aborted
	f := s.s.Verification.OnFailure
	if f == nil {
		return
	}
	switch f.Action {
	case "escalate":
		v.State = Escalated
		v.EscalateTo = f.TargetHint
	case "goto":
		// This step is aborted; the run continues at f.Step.
		v.NextStep = f.Step
	}
}

// next picks the step after an accepted one: the first goto whose
// condition holds over result and context, else next, else none. A goto
// condition that cannot be evaluated is an error: writ does not guess
// where a run goes.
func (s *step) next(in *input) (string, error) {
	if s.s.Terminal {
		return "", nil
	}
	for _, g := range s.gotos {
		ok, err := evalBool(g.prg, map[string]any{"result": in.result, "context": in.context})
		if err != nil {
			return "", &writ.Error{
				Code:    writ.EINVALID,
				Message: fmt.Sprintf("step %s: the goto condition %q could not be evaluated: %v", s.s.ID, g.g.When, err),
				Details: []writ.Detail{{File: g.g.Pos.File, Line: g.g.Pos.Line, Message: err.Error()}},
				Err:     err,
			}
		}
		if ok {
			return g.g.Step, nil
		}
	}
	return s.s.Next, nil
}

func retryPrompt(prompt string, failed []Check) string {
	if prompt != "" {
		return prompt
	}
	var b strings.Builder
	b.WriteString("The step was not accepted:")
	for _, f := range failed {
		msg := f.RejectMessage
		if msg == "" {
			msg = f.Target + ": " + f.Detail
		}
		b.WriteString("\n- " + msg)
	}
	return b.String()
}

// selfReportFields are top-level payload fields in which agents
// customarily report their own success.
var selfReportFields = []string{"success", "succeeded", "ok", "done", "complete", "completed", "status", "passed", "verified", "validated"}

func (s *step) selfReportIgnored(result map[string]any) bool {
	if s.readsAll {
		return false
	}
	for _, k := range selfReportFields {
		if _, ok := result[k]; ok && !s.reads[k] {
			return true
		}
	}
	return false
}

// input is an attempt and a run context in their JSON form.
type input struct {
	result, context   map[string]any
	claimed, observed []ToolCall
}

func newInput(a Attempt, ctx map[string]any) (*input, error) {
	in := new(input)
	var err error
	if in.result, err = jsonObject("the result payload", a.Result); err != nil {
		return nil, err
	}
	if in.context, err = jsonObject("the run context", ctx); err != nil {
		return nil, err
	}
	if in.claimed, err = jsonCalls("claimed", a.Claimed); err != nil {
		return nil, err
	}
	if in.observed, err = jsonCalls("observed", a.Observed); err != nil {
		return nil, err
	}
	return in, nil
}

func jsonCalls(what string, calls []ToolCall) ([]ToolCall, error) {
	out := make([]ToolCall, len(calls))
	for i, c := range calls {
		args, err := jsonObject(fmt.Sprintf("%s call %d (%s) arguments", what, i, c.Name), c.Args)
		if err != nil {
			return nil, err
		}
		res, err := jsonValue(c.Result)
		if err != nil {
			return nil, writ.Errorf(writ.EINVALID, "%s call %d (%s) result is not JSON: %v", what, i, c.Name, err)
		}
		out[i] = ToolCall{Name: c.Name, Args: args, Result: res, Executed: c.Executed}
	}
	return out, nil
}

func jsonObject(what string, m map[string]any) (map[string]any, error) {
	if len(m) == 0 {
		return map[string]any{}, nil
	}
	v, err := jsonValue(m)
	if err != nil {
		return nil, writ.Errorf(writ.EINVALID, "%s is not JSON: %v", what, err)
	}
	return v.(map[string]any), nil
}
