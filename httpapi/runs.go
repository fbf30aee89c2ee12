package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/writhq/writ"
)

// errNoWorkflows answers the run routes of a server that runs no
// workflows.
var errNoWorkflows = writ.Errorf(writ.ENOTFOUND, "this server runs no workflows")

// attemptBody is the body of POST /v1/runs/{id}/steps/{step}/attempts: a
// writ.AttemptRequest without the tenant, the run and the step, which the
// query and the path name.
type attemptBody struct {
	Actor     writ.Actor           `json:"actor"`
	Result    map[string]any       `json:"result"`
	ToolCalls []writ.ToolCallClaim `json:"tool_calls,omitempty"`
	TraceID   string               `json:"trace_id,omitempty"`
}

// attemptBodyOf returns the body of req: all of it but the tenant, the
// run and the step.
func attemptBodyOf(req *writ.AttemptRequest) attemptBody {
	return attemptBody{Actor: req.Actor, Result: req.Result, ToolCalls: req.ToolCalls, TraceID: req.TraceID}
}

// addressed says, for each member of writ.AttemptRequest that an attempt
// body must not hold, where the server takes it from instead.
var addressed = map[string]string{
	paramTenantID: "must not be in the body: the tenant is the query parameter tenant_id",
	"run_id":      "must not be in the body: the path names the run",
	"step_id":     "must not be in the body: the path names the step",
}

// explainAddressed rewrites the "unknown field" error of a body member
// that the path or the query names instead: msgs maps such members to
// what to say.
func explainAddressed(err error, msgs map[string]string) error {
	var werr *writ.Error
	if errors.As(err, &werr) && len(werr.Details) == 1 && werr.Details[0].Message == "unknown field" {
		if msg, ok := msgs[werr.Details[0].Field]; ok {
			werr.Details[0].Message = msg
		}
	}
	return err
}

// runPath is the path of a run, as the Location of a started run.
func runPath(runID string) string {
	return "/v1/runs/" + url.PathEscape(runID)
}

// attemptPath is the path attempts at a run's step are posted to.
func attemptPath(runID, stepID string) string {
	return runPath(runID) + "/steps/" + url.PathEscape(stepID) + "/attempts"
}

// handleStartRun serves POST /v1/runs: start a run, answered with 201 and
// the run's Location.
func (s *Server) handleStartRun(w http.ResponseWriter, r *http.Request) {
	if s.workflows == nil {
		s.writeError(w, r, errNoWorkflows)
		return
	}
	req, err := s.decodeStartRunRequest(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	run, err := s.workflows.StartRun(r.Context(), req)
	switch {
	case err != nil:
	case run == nil:
		err = errors.New("workflows returned neither a run nor an error")
	case run.TenantID != req.TenantID || run.RunID == "" || (req.RunID != "" && run.RunID != req.RunID):
		err = fmt.Errorf("workflows answered the start of run %q of tenant %q with run %q of tenant %q", req.RunID, req.TenantID, run.RunID, run.TenantID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", runPath(run.RunID)+"?"+url.Values{paramTenantID: {run.TenantID}}.Encode())
	s.writeJSON(w, r, http.StatusCreated, wireRun(run))
}

// decodeStartRunRequest reads and strictly decodes the body of POST
// /v1/runs. It checks only what needs no pack: the shape, and the
// tenant.
func (s *Server) decodeStartRunRequest(w http.ResponseWriter, r *http.Request) (*writ.StartRunRequest, error) {
	return decodeTenantBody(s, w, r, func(req *writ.StartRunRequest) *string { return &req.TenantID })
}

// handleRun serves GET /v1/runs/{id}: the run and its history.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	if s.workflows == nil {
		s.writeError(w, r, errNoWorkflows)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	runID := r.PathValue("id")
	run, err := s.workflows.Run(r.Context(), tenantID, runID)
	switch {
	case err != nil:
	case run == nil:
		err = errors.New("workflows returned neither a run nor an error")
	case run.TenantID != tenantID || run.RunID != runID:
		err = fmt.Errorf("workflows answered run %q of tenant %q with run %q of tenant %q", runID, tenantID, run.RunID, run.TenantID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wireRun(run))
}

// handleRuns serves GET /v1/runs: a page of the tenant's runs, without
// their histories.
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	if s.workflows == nil {
		s.writeError(w, r, errNoWorkflows)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := parseRunQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.workflows.Runs(r.Context(), q)
	if err == nil && page == nil {
		err = errors.New("workflows returned neither a page of runs nor an error")
	}
	if err == nil {
		for _, run := range page.Runs {
			if run.TenantID != q.TenantID {
				err = fmt.Errorf("workflows answered a query of tenant %q with run %q of tenant %q", q.TenantID, run.RunID, run.TenantID)
				break
			}
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c := *page
	c.Runs = nonNil(c.Runs)
	s.writeJSON(w, r, http.StatusOK, &c)
}

// handleAttempt serves POST /v1/runs/{id}/steps/{step}/attempts: decide
// one attempt at a step.
func (s *Server) handleAttempt(w http.ResponseWriter, r *http.Request) {
	if s.workflows == nil {
		s.writeError(w, r, errNoWorkflows)
		return
	}
	tp, traced := requestTrace(r)
	if traced {
		s.setTraceparent(w, r, tp.TraceID, tp.Flags)
	}
	req, err := s.decodeAttempt(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if traced {
		req.TraceID = tp.TraceID
	} else {
		s.setTraceparent(w, r, req.TraceID, sampledFlag)
	}
	v, err := s.workflows.SubmitAttempt(r.Context(), req)
	switch {
	case err != nil:
	case v == nil:
		err = errors.New("workflows returned neither a step verdict nor an error")
	case v.RunID != req.RunID || v.StepID != req.StepID:
		err = fmt.Errorf("workflows answered the attempt at step %q of run %q with a verdict on step %q of run %q", req.StepID, req.RunID, v.StepID, v.RunID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wireVerdict(v))
}

// decodeAttempt reads an attempt: the tenant from the query, the run and
// the step from the path, and the rest strictly from the body. A body
// that names the tenant, the run or the step is refused, so that no
// attempt is ever filed under a run its caller did not address.
func (s *Server) decodeAttempt(w http.ResponseWriter, r *http.Request) (*writ.AttemptRequest, error) {
	tenantID, err := queryTenant(r)
	if err != nil {
		return nil, err
	}
	body, err := readJSONBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	var b attemptBody
	if err := decodeStrict(body, &b); err != nil {
		return nil, explainAddressed(err, addressed)
	}
	return &writ.AttemptRequest{
		TenantID:  tenantID,
		RunID:     r.PathValue("id"),
		StepID:    r.PathValue("step"),
		Actor:     b.Actor,
		Result:    b.Result,
		ToolCalls: b.ToolCalls,
		TraceID:   b.TraceID,
	}, nil
}

// wireRun returns run with nil lists and maps replaced by empty ones, so
// that what the Run schema requires is an array or an object on the wire.
func wireRun(run *writ.Run) *writ.Run {
	c := *run
	if c.Context == nil {
		c.Context = map[string]any{}
	}
	c.History = make([]writ.RunEvent, len(run.History))
	for i, ev := range run.History {
		if ev.Verdict != nil {
			ev.Verdict = wireVerdict(ev.Verdict)
		}
		c.History[i] = ev
	}
	return &c
}

// wireVerdict returns v with nil lists replaced by empty ones.
func wireVerdict(v *writ.StepVerdict) *writ.StepVerdict {
	c := *v
	c.Checks = nonNil(c.Checks)
	c.Failed = nonNil(c.Failed)
	return &c
}
