package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/writhq/writ"
)

// errNoLifecycle answers the decision routes of a server that does not
// carry decisions past their receipts.
var errNoLifecycle = writ.Errorf(writ.ENOTFOUND, "this server does not serve decisions' lifecycles")

// decisionPath is the path of a decision's story.
func decisionPath(decisionID string) string {
	return "/v1/decisions/" + url.PathEscape(decisionID)
}

// resumeBody is the body of POST /v1/decisions/{id}/resume. Wait is a Go
// duration ("30s"); tenant_id may be left out when the request is
// authenticated.
type resumeBody struct {
	TenantID string             `json:"tenant_id,omitempty"`
	Request  *writ.CheckRequest `json:"request"`
	Wait     string             `json:"wait,omitempty"`
}

// checkRequired refuses a resume without the check request it resumes,
// as the OpenAPI document requires, before anything is read.
func (b *resumeBody) checkRequired() error {
	if b.Request == nil {
		return &writ.Error{Code: writ.EINVALID, Message: "a resume carries the check request it resumes", Details: []writ.Detail{{Field: "request", Message: "required"}}}
	}
	return nil
}

// handleReport serves POST /v1/decisions/{id}/execution: 201 with the
// acknowledgement of a new report, 200 with the first one's for the same
// report again.
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	if s.lifecycle == nil {
		s.writeError(w, r, errNoLifecycle)
		return
	}
	req, err := decodeTenantBody(s, w, r, func(req *writ.ExecutionReport) *string { return &req.TenantID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if req.DecisionID != "" && req.DecisionID != id {
		s.writeError(w, r, &writ.Error{Code: writ.EINVALID, Message: "decision_id in the body differs from the path's", Details: []writ.Detail{{Field: "decision_id", Message: "leave it out: the path names the decision"}}})
		return
	}
	req.DecisionID = id
	ack, err := s.lifecycle.ReportExecution(r.Context(), req)
	if err == nil && (ack == nil || ack.DecisionID != id || ack.TenantID != req.TenantID) {
		err = errors.New("ReportExecution returned no acknowledgement of this decision")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.setTraceparent(w, r, ack.TraceID, sampledFlag)
	status := http.StatusCreated
	if ack.Repeated != "" {
		status = http.StatusOK
	}
	if ack.Findings == nil {
		ack.Findings = []writ.Reason{}
	}
	s.writeJSON(w, r, status, ack)
}

// handleDecision serves GET /v1/decisions/{id}: the decision's story.
func (s *Server) handleDecision(w http.ResponseWriter, r *http.Request) {
	if s.lifecycle == nil {
		s.writeError(w, r, errNoLifecycle)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	st, err := s.lifecycle.Decision(r.Context(), tenantID, id)
	if err == nil && (st == nil || st.TenantID != tenantID || st.DecisionID != id) {
		err = fmt.Errorf("Decision answered decision %q of tenant %q with another story", id, tenantID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if st.Records == nil {
		st.Records = []writ.StoryRecord{}
	}
	approvals := make([]*writ.ApprovalRequest, len(st.Approvals))
	for i := range st.Approvals {
		approvals[i] = wireApproval(&st.Approvals[i])
	}
	s.writeJSON(w, r, http.StatusOK, struct {
		*writ.DecisionStory
		Approvals []*writ.ApprovalRequest `json:"approvals"`
	}{st, approvals})
}

// handleResume serves POST /v1/decisions/{id}/resume: the fresh receipt,
// or the blocked one again when a wait ended with nothing decided.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	if s.lifecycle == nil {
		s.writeError(w, r, errNoLifecycle)
		return
	}
	tp, traced := parseTraceparent(r.Header.Values("traceparent"))
	body, err := decodeTenantBody(s, w, r, func(b *resumeBody) *string { return &b.TenantID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req := &writ.ResumeRequest{TenantID: body.TenantID, DecisionID: r.PathValue("id"), Request: body.Request}
	if body.Wait != "" {
		d, err := time.ParseDuration(body.Wait)
		if err != nil || d < 0 || d > writ.MaxResumeWait {
			s.writeError(w, r, &writ.Error{Code: writ.EINVALID, Message: "invalid wait", Details: []writ.Detail{{Field: "wait", Message: fmt.Sprintf("must be a duration such as 30s, at most %s", writ.MaxResumeWait)}}})
			return
		}
		req.Wait = d
	}
	if req.Request != nil && traced {
		req.Request.TraceID = tp.TraceID
	}
	if req.Wait > 0 {
		// The server's write timeout is for answers that come at once; a
		// resume answers once its wait is over.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(req.Wait + 30*time.Second)) // the wall clock: a socket deadline
	}
	rcpt, err := s.lifecycle.Resume(r.Context(), req)
	if rcpt != nil {
		s.setTraceparent(w, r, rcpt.Metadata.TraceID, sampledFlag)
	}
	s.writeReceipt(w, r, rcpt, err)
}

// Query parameters of GET /v1/decisions/in_flight.
const paramExpiredBy = "expired_by"

// handleInFlight serves GET /v1/decisions/in_flight: the tenant's permits
// still awaiting their execution reports, oldest first.
func (s *Server) handleInFlight(w http.ResponseWriter, r *http.Request) {
	if s.lifecycle == nil {
		s.writeError(w, r, errNoLifecycle)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := queryParser{values: values}
	p.allow(paramTenantID, paramExpiredBy, paramLimit, paramCursor)
	q := writ.InFlightQuery{TenantID: p.required(paramTenantID), Limit: p.limit(), Cursor: p.get(paramCursor)}
	if strings.EqualFold(p.get(paramExpiredBy), "now") {
		q.ExpiredBy = s.cfg.Now()
	} else {
		q.ExpiredBy = p.time(paramExpiredBy)
	}
	if err := p.err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.lifecycle.InFlight(r.Context(), q)
	if err == nil && page == nil {
		err = errors.New("InFlight returned neither a page nor an error")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if page.Decisions == nil {
		page.Decisions = []writ.InFlightDecision{}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}
