package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
)

var _ writ.Workflows = (*Engine)(nil)

// runStarted is the data of a run's first event.
type runStarted struct {
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

// callObserved is the data of a call writ allowed for a run's step.
type callObserved struct {
	Tool       string         `json:"tool"`
	Args       map[string]any `json:"args,omitempty"`
	DecisionID string         `json:"decision_id"`
}

// stepAttempt is the data of a step attempt.
type stepAttempt struct {
	Verdict *writ.StepVerdict `json:"verdict"`
}

// runState is a run folded from its events.
type runState struct {
	run      *writ.Run
	attempts int                              // attempts at the current step since it became current
	observed map[string][]acceptance.ToolCall // calls writ observed, by step
	calls    map[string]callAt                // observed calls by decision id
	start    *ledger.RunEvent                 // the run's start event, which its records bind
}

// callAt places an observed call in runState.observed.
type callAt struct {
	step string
	i    int
}

// callExecuted is the data of an execution report of an observed call.
type callExecuted struct {
	DecisionID string `json:"decision_id"`
	RecordID   string `json:"record_id"` // the report's record
}

// runLocks serialise attempts of one run: an attempt reads the run's
// state and appends to it, so two at once could both spend the same
// retry. An entry lives while its lock is held or waited for, so the map
// holds only the runs in progress, not every run the engine has seen.
type runLocks struct {
	mu sync.Mutex
	m  map[string]*runLock
}

type runLock struct {
	sync.Mutex
	refs int // holders and waiters, under runLocks.mu
}

func (l *runLocks) lock(key string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*runLock{}
	}
	m, ok := l.m[key]
	if !ok {
		m = &runLock{}
		l.m[key] = m
	}
	m.refs++
	l.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		l.mu.Lock()
		if m.refs--; m.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

func (e *Engine) workflow(id string) (*pack.Workflow, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	w, ok := e.policy.Pack.Workflows[id]
	if !ok {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("workflow %q is not defined in pack %s", id, e.policy.Pack.ID()), Details: []writ.Detail{{Field: "workflow_id", Message: "unknown workflow"}}}
	}
	return w, nil
}

// StartRun starts a run; see writ.Workflows.
func (e *Engine) StartRun(ctx context.Context, req *writ.StartRunRequest) (*writ.Run, error) {
	if req == nil || req.TenantID == "" || !tenantPattern.MatchString(req.TenantID) {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "a valid tenant_id is required", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	w, err := e.workflow(req.WorkflowID)
	if err != nil {
		return nil, err
	}
	p := e.policy.Pack
	if req.Pack != "" && req.Pack != p.ID() && req.Pack != p.Hash {
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("the run asks for pack %s; this server pins %s (%s)", req.Pack, p.ID(), p.Hash)}
	}
	var unknown []string
	for k := range req.Context {
		if !slices.Contains(w.Context, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("workflow %s declares no context key %s (it declares %v)", w.WorkflowID, strings.Join(unknown, ", "), w.Context), Details: []writ.Detail{{Field: "context", Message: "undeclared key"}}}
	}
	now := e.now().UTC()
	runID := req.RunID
	if runID == "" {
		runID = e.newID("run_", now)
	} else if !tenantPattern.MatchString(runID) {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "run_id must be 1-128 letters, digits, '_', '.', ':' or '-'", Details: []writ.Detail{{Field: "run_id", Message: "invalid"}}}
	}
	ctxVals := maps.Clone(req.Context)
	if ctxVals == nil {
		ctxVals = map[string]any{}
	}
	started := runStarted{WorkflowID: w.WorkflowID, WorkflowVersion: w.Version, Pack: p.ID(), PackHash: p.Hash, Context: e.redactor.Map(ctxVals), Step: w.Root().ID}
	if writ.PrincipalFrom(ctx) != nil {
		by, err := writ.BindActor(ctx, req.TenantID, writ.Actor{})
		if err != nil {
			return nil, err
		}
		by = record.RedactActor(e.redactor, by)
		started.StartedBy = &by
	}
	data, err := json.Marshal(started)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "context: " + err.Error()}
	}
	ev := &ledger.RunEvent{TenantID: req.TenantID, RunID: runID, Kind: ledger.RunStarted, StepID: w.Root().ID, At: now, Data: data}
	if err := e.store.StartRun(ctx, ev); err != nil {
		return nil, err
	}
	return e.Run(ctx, req.TenantID, runID)
}

// Run returns a run with its history; see writ.Workflows.
func (e *Engine) Run(ctx context.Context, tenantID, runID string) (*writ.Run, error) {
	st, err := e.loadRun(ctx, tenantID, runID)
	if err != nil {
		return nil, err
	}
	return st.run, nil
}

func (e *Engine) loadRun(ctx context.Context, tenantID, runID string) (*runState, error) {
	if tenantID == "" || runID == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "tenant_id and run_id are required"}
	}
	evs, err := e.store.RunEvents(ctx, tenantID, runID)
	if err != nil {
		return nil, err
	}
	return e.foldRun(tenantID, runID, evs)
}

// foldRun folds a run's events, in seq order, into its state.
func (e *Engine) foldRun(tenantID, runID string, evs []ledger.RunEvent) (*runState, error) {
	st := &runState{observed: map[string][]acceptance.ToolCall{}, calls: map[string]callAt{}}
	for _, ev := range evs {
		h := writ.RunEvent{Seq: ev.Seq, Kind: ev.Kind, StepID: ev.StepID, At: ev.At, RecordID: ev.RecordID}
		switch ev.Kind {
		case ledger.RunStarted:
			st.start = &ev
			var d runStarted
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("run %s: start event: %w", runID, err)
			}
			st.run = &writ.Run{TenantID: tenantID, RunID: runID, WorkflowID: d.WorkflowID, WorkflowVersion: d.WorkflowVersion,
				Pack: d.Pack, PackHash: d.PackHash, Status: writ.RunActive, CurrentStep: d.Step, Context: d.Context, StartedAt: ev.At, StartedBy: d.StartedBy}
		case ledger.CallObserved:
			var d callObserved
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("run %s: observed call: %w", runID, err)
			}
			h.Tool = d.Tool
			st.calls[d.DecisionID] = callAt{ev.StepID, len(st.observed[ev.StepID])}
			st.observed[ev.StepID] = append(st.observed[ev.StepID], acceptance.ToolCall{Name: d.Tool, Args: d.Args})
		case ledger.CallExecuted:
			var d callExecuted
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("run %s: executed call: %w", runID, err)
			}
			if at, ok := st.calls[d.DecisionID]; ok {
				st.observed[at.step][at.i].Executed = true
				h.Tool = st.observed[at.step][at.i].Name
			}
		case ledger.StepAttempt:
			var d stepAttempt
			if err := json.Unmarshal(ev.Data, &d); err != nil || d.Verdict == nil {
				return nil, fmt.Errorf("run %s: attempt event: %v", runID, err)
			}
			h.Verdict = d.Verdict
			st.apply(d.Verdict)
			// A terminal step without a contract has nothing to prove:
			// being accepted into it completes the run.
			accepted := d.Verdict.State == writ.VerdictAccepted || d.Verdict.State == writ.VerdictAcceptedWithWarnings
			if w, err := e.workflow(st.run.WorkflowID); err == nil && accepted && st.run.Status == writ.RunActive && w.Version == st.run.WorkflowVersion {
				if s := w.Step(st.run.CurrentStep); s != nil && s.Terminal && s.Verification == nil {
					st.run.Status, st.run.CurrentStep = writ.RunCompleted, ""
				}
			}
		}
		if st.run == nil {
			return nil, fmt.Errorf("run %s: the first event is %s, not %s", runID, ev.Kind, ledger.RunStarted)
		}
		st.run.History = append(st.run.History, h)
	}
	return st, nil
}

// retryAt is when the step may be attempted again: the time of its last
// attempt plus that verdict's retry_after, when that verdict was a retry
// with a backoff.
func (st *runState) retryAt(step string) (time.Time, bool) {
	h := st.run.History
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
func (st *runState) apply(v *writ.StepVerdict) {
	r := st.run
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

// SubmitAttempt decides one step attempt and records the verdict; see
// writ.Workflows.
func (e *Engine) SubmitAttempt(ctx context.Context, req *writ.AttemptRequest) (*writ.StepVerdict, error) {
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty attempt")
	}
	// The attempt's actor is bound to its credentials (writ.BindActor).
	actor, err := writ.BindActor(ctx, req.TenantID, req.Actor)
	if err != nil {
		return nil, err
	}
	bound := *req
	bound.Actor = actor
	req = &bound
	if err := validateAttempt(req); err != nil {
		return nil, err
	}
	unlock := e.runs.lock(req.TenantID + "\x00" + req.RunID)
	defer unlock()
	st, err := e.loadRun(ctx, req.TenantID, req.RunID)
	if err != nil {
		return nil, err
	}
	r := st.run
	// Only the key that started the run (or one that may act for its
	// principal) submits its attempts; a run started in development mode
	// has no owner to hold it to.
	if r.StartedBy != nil {
		if err := writ.MayActOn(ctx, "run "+r.RunID, *r.StartedBy); err != nil {
			return nil, err
		}
	}
	w, err := e.workflow(r.WorkflowID)
	if err != nil {
		return nil, err
	}
	p := e.policy.Pack
	if r.PackHash != p.Hash || w.Version != r.WorkflowVersion {
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("run %s was started under pack %s (%s); this server pins %s (%s)", r.RunID, r.Pack, r.PackHash, p.ID(), p.Hash)}
	}
	if w.Step(req.StepID) == nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("workflow %s has no step %q", w.WorkflowID, req.StepID), Details: []writ.Detail{{Field: "step_id", Message: "unknown step"}}}
	}
	if r.Status != writ.RunActive {
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("run %s is %s; it takes no more attempts", r.RunID, r.Status)}
	}
	if req.StepID != r.CurrentStep {
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("step %s is out of order: run %s is at step %s", req.StepID, r.RunID, r.CurrentStep)}
	}
	now := e.now().UTC()
	if at, ok := st.retryAt(req.StepID); ok && now.Before(at) {
		// The contract's backoff holds: an early attempt is refused before
		// it is evaluated, so it neither counts nor is recorded.
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("step %s may be attempted again from %s (the last verdict's retry_after_ms); this attempt was not counted", req.StepID, at.Format(time.RFC3339Nano))}
	}
	verdict, err := e.evaluate(req, w, st)
	if err != nil {
		return nil, err
	}
	verdict.DecisionID, verdict.RecordID = e.newID("dec_", now), e.newID("dr_", now)
	rec, envelope, err := e.verdictRecord(req, w, st, verdict, now)
	if err != nil {
		return nil, err
	}
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: "the verdict record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	data, err := json.Marshal(stepAttempt{Verdict: verdict})
	if err != nil {
		return nil, err
	}
	receipt, _ := json.Marshal(verdict)
	entry := &ledger.Entry{Record: rec, Receipt: receipt,
		Envelope: envelope,
		RunEvent: &ledger.RunEvent{TenantID: req.TenantID, RunID: req.RunID, Kind: ledger.StepAttempt, StepID: req.StepID, At: now, Data: data}}
	if err := ledger.Bind(entry, st.start); err != nil {
		return nil, err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, fmt.Errorf("canonicalize verdict record: %w", err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		return nil, notRecorded("the verdict", err)
	}
	return verdict, nil
}

// evaluate decides an attempt at the run's current step with the
// step's contract: the verdict, without its ids. It is pure, so replay
// rebuilds a recorded verdict with it (see Rebuilder).
func (e *Engine) evaluate(req *writ.AttemptRequest, w *pack.Workflow, st *runState) (*writ.StepVerdict, error) {
	// Claimed calls are compared with observed ones, whose arguments
	// were stored redacted: redact the claims alike.
	claimed := make([]acceptance.ToolCall, len(req.ToolCalls))
	for i, c := range req.ToolCalls {
		claimed[i] = acceptance.ToolCall{Name: c.Name, Args: e.redactor.Map(c.Args), Result: c.Result}
	}
	seed := fnv.New64a()
	fmt.Fprintf(seed, "%s\x00%s\x00%s\x00%d", req.TenantID, req.RunID, req.StepID, st.attempts)
	v, err := e.contracts.Evaluate(w.WorkflowID, req.StepID, acceptance.Attempt{Result: req.Result, Claimed: claimed, Observed: st.observed[req.StepID]}, st.attempts, st.run.Context, seed.Sum64())
	if err != nil {
		return nil, err
	}
	verdict := &writ.StepVerdict{
		RunID: st.run.RunID, StepID: req.StepID, State: v.State, Checks: checks(v.Checks), Failed: checks(v.Failed),
		AttemptsUsed: v.AttemptsUsed, AttemptsLeft: v.AttemptsLeft, RetryPrompt: v.RetryPrompt, RetryAfterMS: v.RetryAfter.Milliseconds(),
		NextStep: v.NextStep, EscalateTo: v.EscalateTo, SelfReportIgnored: v.SelfReportIgnored, ClaimedCalls: v.Claimed,
	}
	// Details quote the payload: redact them before they are stored.
	for _, list := range [][]writ.VerdictCheck{verdict.Checks, verdict.Failed} {
		for i := range list {
			list[i].Detail = e.redactor.String(list[i].Detail)
		}
	}
	if v.Exempt != nil {
		verdict.Exemption = v.Exempt.Reason
	}
	return verdict, nil
}

func checks(cs []acceptance.Check) []writ.VerdictCheck {
	out := make([]writ.VerdictCheck, len(cs))
	for i, c := range cs {
		out[i] = writ.VerdictCheck{Kind: c.Kind, Target: c.Target, Passed: c.Passed, RejectMessage: c.RejectMessage, Detail: c.Detail}
	}
	return out
}

func validateAttempt(req *writ.AttemptRequest) error {
	var ds []writ.Detail
	bad := func(field, msg string) { ds = append(ds, writ.Detail{Field: field, Message: msg}) }
	if req.TenantID == "" || !tenantPattern.MatchString(req.TenantID) {
		bad("tenant_id", "a valid tenant_id is required")
	}
	if req.RunID == "" {
		bad("run_id", "required")
	}
	if req.StepID == "" {
		bad("step_id", "required")
	}
	if req.Result == nil {
		bad("result", "required: the step's result payload, a JSON object")
	}
	switch req.Actor.Type {
	case writ.ActorAgent, writ.ActorHuman, writ.ActorService:
	default:
		bad("actor.type", "must be AGENT, HUMAN or SERVICE")
	}
	if req.Actor.ID == "" {
		bad("actor.id", "required")
	}
	for i, c := range req.ToolCalls {
		if c.Name == "" {
			bad(fmt.Sprintf("tool_calls[%d].name", i), "required")
		}
	}
	if req.TraceID != "" && !writ.ValidTraceID(req.TraceID) {
		bad("trace_id", "must be a W3C trace id")
	}
	if len(ds) == 0 {
		return nil
	}
	return &writ.Error{Code: writ.EINVALID, Message: "invalid attempt: " + detailsSummary(ds), Details: ds}
}

// verdictStatus maps a verdict to the record status.
var verdictStatus = map[string]writ.Status{
	writ.VerdictAccepted:             writ.StatusDecided,
	writ.VerdictAcceptedWithWarnings: writ.StatusDecided,
	writ.VerdictRetry:                writ.StatusDeferred,
	writ.VerdictAborted:              writ.StatusRejected,
	writ.VerdictEscalated:            writ.StatusEscalated,
}

// verdictRecord builds the decision record of a step verdict: its
// decision key names the workflow and the step, its policy decisions are
// the contract's checks, its evidence the payload's digest and the
// records of the calls writ observed.
func (e *Engine) verdictRecord(req *writ.AttemptRequest, w *pack.Workflow, st *runState, v *writ.StepVerdict, now time.Time) (*writ.Record, []byte, error) {
	p := e.policy.Pack
	rq := *req
	if rq.TraceID == "" {
		rq.TraceID = e.newTraceID(now)
	}
	envelope, err := record.EnvelopeOf(&rq, e.redactor)
	if err != nil {
		return nil, nil, err
	}
	if hasNUL(envelope) {
		return nil, nil, errNUL
	}
	payload, err := record.CanonicalDigest(e.redactor.Map(req.Result))
	if err != nil {
		return nil, nil, &writ.Error{Code: writ.EINVALID, Message: "result: " + err.Error()}
	}
	spec := "workflow:" + w.ID() + "/" + req.StepID
	rec := &writ.Record{
		RecordID: v.RecordID, DecisionID: v.DecisionID, TenantID: req.TenantID,
		DecisionKey: "workflow:" + w.WorkflowID + "/" + req.StepID, DecisionVersion: w.Version,
		Timestamp: now, Status: verdictStatus[v.State], ActionClass: w.Step(req.StepID).ActionClass,
		Actor:      record.RedactActor(e.redactor, req.Actor),
		SubjectIDs: []string{"run:" + req.RunID},
		InputsRefs: writ.InputsRefs{Request: record.Digest(envelope)},
		Outputs: map[string]any{
			"outcome": v.State, "attempts_used": v.AttemptsUsed, "attempts_left": v.AttemptsLeft,
			"next_step": v.NextStep, "failed": len(v.Failed),
		},
		EvidenceRefs:    []string{"result:" + payload},
		Approvals:       []writ.Approval{},
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: redactionIDs(p)},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: spec},
		TraceID:         rq.TraceID,
		PolicyDecisions: []writ.PolicyDecision{},
	}
	if v.Exemption != "" {
		rec.Outputs["exemption"] = v.Exemption
	}
	if v.ClaimedCalls != nil {
		// Set on every verdict decided under issue 31's defaults (an
		// empty list when every call was observed): replay reads it to
		// rebuild older verdicts under the defaults they had.
		rec.Outputs["claimed_calls"] = v.ClaimedCalls
	}
	for _, c := range st.observedRecords(req.StepID) {
		rec.EvidenceRefs = append(rec.EvidenceRefs, "record:"+c)
	}
	for _, c := range v.Checks {
		verdict := "allow"
		if !c.Passed {
			verdict = "reject"
		}
		rec.PolicyDecisions = append(rec.PolicyDecisions, writ.PolicyDecision{
			PolicyDecisionID: "pd:" + spec + ":" + c.Kind + ":" + c.Target + ":" + verdict,
			BundleID:         "workflow:" + w.ID(), RuleIDs: []string{c.Kind + ":" + c.Target}, Verdict: verdict,
		})
	}
	if len(v.Checks) == 0 {
		id := "no_contract"
		if v.Exemption != "" {
			id = "exempt"
		}
		rec.PolicyDecisions = append(rec.PolicyDecisions, writ.PolicyDecision{PolicyDecisionID: "pd:" + spec + ":" + id + ":allow", BundleID: "workflow:" + w.ID(), RuleIDs: []string{id}, Verdict: "allow"})
	}
	ctxHash, _ := record.CanonicalDigest(map[string]any{"pack_hash": p.Hash, "workflow": w.ID(), "step": req.StepID})
	rec.Replay = writ.Replay{ReplayPacketID: record.Digest(envelope), CompiledContextHash: ctxHash, EvidenceSnapshotHash: payload, ArgumentsDigest: payload}
	return rec, envelope, nil
}

func redactionIDs(p *pack.Pack) []string {
	out := []string{}
	for _, r := range p.Controls.Redaction {
		out = append(out, r.ID)
	}
	return out
}

// observedRecords lists the records behind the calls observed for a step.
func (st *runState) observedRecords(step string) []string {
	var out []string
	for _, h := range st.run.History {
		if h.Kind == ledger.CallObserved && h.StepID == step {
			out = append(out, h.RecordID)
		}
	}
	return out
}
