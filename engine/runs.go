package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/workflow"
)

var _ writ.Workflows = (*Engine)(nil)

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
	started := workflow.Started{WorkflowID: w.WorkflowID, WorkflowVersion: w.Version, Pack: p.ID(), PackHash: p.Hash, Context: e.redactor.Map(ctxVals), Step: w.Root().ID}
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
	return st.Run, nil
}

// loadRun reads a run's events and folds them (workflow.Fold).
func (e *Engine) loadRun(ctx context.Context, tenantID, runID string) (*workflow.State, error) {
	if tenantID == "" || runID == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "tenant_id and run_id are required"}
	}
	evs, err := e.store.RunEvents(ctx, tenantID, runID)
	if err != nil {
		return nil, err
	}
	var p *pack.Pack
	if e.policy != nil {
		p = e.policy.Pack
	}
	return workflow.Fold(p, tenantID, runID, evs)
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
	r := st.Run
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
	if at, ok := st.RetryAt(req.StepID); ok && now.Before(at) {
		// The contract's backoff holds: an early attempt is refused before
		// it is evaluated, so it neither counts nor is recorded.
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("step %s may be attempted again from %s (the last verdict's retry_after_ms); this attempt was not counted", req.StepID, at.Format(time.RFC3339Nano))}
	}
	verdict, err := workflow.Evaluate(e.contracts, e.redactor, req, w, st)
	if err != nil {
		return nil, err
	}
	verdict.DecisionID, verdict.RecordID = e.newID("dec_", now), e.newID("dr_", now)
	if req.TraceID == "" {
		req.TraceID = e.newTraceID(now)
	}
	rec, envelope, err := workflow.VerdictRecord(p, e.redactor, req, w, st, verdict, now)
	if err != nil {
		return nil, err
	}
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: "the verdict record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	data, err := json.Marshal(workflow.Attempted{Verdict: verdict})
	if err != nil {
		return nil, err
	}
	receipt, _ := json.Marshal(verdict)
	entry := &ledger.Entry{Record: rec, Receipt: receipt,
		Envelope: envelope,
		RunEvent: &ledger.RunEvent{TenantID: req.TenantID, RunID: req.RunID, Kind: ledger.StepAttempt, StepID: req.StepID, At: now, Data: data}}
	if err := ledger.Bind(entry, st.Start); err != nil {
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
