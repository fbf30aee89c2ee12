package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/writhq/writ"
)

// errNoApprovals answers the approval routes of a server without an
// approval queue.
var errNoApprovals = writ.Errorf(writ.ENOTFOUND, "this server has no approval queue")

// decideBody is the body of POST /v1/approvals/{id}/approve and
// /v1/approvals/{id}/deny: a writ.DecideApprovalRequest without the
// approval id and the decision, which the path names. tenant_id may be
// left out when the request is authenticated.
type decideBody struct {
	TenantID string `json:"tenant_id,omitempty"`
	Approver string `json:"approver,omitempty"`
	Reason   string `json:"reason"`
	TraceID  string `json:"trace_id,omitempty"`
}

// decideBodyOf returns the body of req: all of it but the approval id and
// the decision.
func decideBodyOf(req *writ.DecideApprovalRequest) decideBody {
	return decideBody{TenantID: req.TenantID, Approver: req.Approver, Reason: req.Reason, TraceID: req.TraceID}
}

// decidePathNames says, for each member of writ.DecideApprovalRequest
// that a decision body must not hold, where the server takes it from.
var decidePathNames = map[string]string{
	"approval_id": "must not be in the body: the path names the approval",
	"decision":    "must not be in the body: the path decides, /approve or /deny",
}

// approvalPath is the path of an approval request.
func approvalPath(approvalID string) string {
	return "/v1/approvals/" + url.PathEscape(approvalID)
}

// decidePath is the path that approves or denies an approval request:
// decision is writ.ApprovalApproved or writ.ApprovalDenied.
func decidePath(approvalID, decision string) string {
	if decision == writ.ApprovalDenied {
		return approvalPath(approvalID) + "/deny"
	}
	return approvalPath(approvalID) + "/approve"
}

// handleApprovals serves GET /v1/approvals: a page of the tenant's
// approval requests.
func (s *Server) handleApprovals(w http.ResponseWriter, r *http.Request) {
	if s.approvals == nil {
		s.writeError(w, r, errNoApprovals)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := parseApprovalQuery(values, s.cfg.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.approvals.Approvals(r.Context(), q)
	if err == nil && page == nil {
		err = errors.New("approvals returned neither a page nor an error")
	}
	if err == nil {
		for _, a := range page.Approvals {
			if a.TenantID != q.TenantID {
				err = fmt.Errorf("approvals answered a query of tenant %q with approval %q of tenant %q", q.TenantID, a.ApprovalID, a.TenantID)
				break
			}
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wireApprovalPage(page))
}

// handleApproval serves GET /v1/approvals/{id}: one approval request with
// its events.
func (s *Server) handleApproval(w http.ResponseWriter, r *http.Request) {
	if s.approvals == nil {
		s.writeError(w, r, errNoApprovals)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	a, err := s.approvals.Approval(r.Context(), tenantID, id)
	if err == nil {
		err = checkApproval(a, tenantID, id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wireApproval(a))
}

// handleApprove serves POST /v1/approvals/{id}/approve.
func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request) {
	s.handleDecide(w, r, writ.ApprovalApproved)
}

// handleDeny serves POST /v1/approvals/{id}/deny.
func (s *Server) handleDeny(w http.ResponseWriter, r *http.Request) {
	s.handleDecide(w, r, writ.ApprovalDenied)
}

// handleDecide approves or denies an approval request, as decision says,
// and answers with the request as it now stands.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request, decision string) {
	if s.approvals == nil {
		s.writeError(w, r, errNoApprovals)
		return
	}
	tp, traced := requestTrace(r)
	if traced {
		s.setTraceparent(w, r, tp.TraceID, tp.Flags)
	}
	req, err := s.decodeDecision(w, r, decision)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.answerApproval(w, r, tp, traced, &req.TraceID, req.TenantID, req.ApprovalID, func() (*writ.ApprovalRequest, error) {
		return s.approvals.DecideApproval(r.Context(), req)
	})
}

// answerApproval ends a handler that changes an approval request (approve,
// deny, withdraw): the trace id from the traceparent header or else the
// body's, the change, and the request as it now stands, checked to be the
// one asked for.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request, tp traceparent, traced bool, traceID *string, tenantID, approvalID string, change func() (*writ.ApprovalRequest, error)) {
	if traced {
		*traceID = tp.TraceID
	} else {
		s.setTraceparent(w, r, *traceID, sampledFlag)
	}
	a, err := change()
	if err == nil {
		err = checkApproval(a, tenantID, approvalID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wireApproval(a))
}

// decodeDecision reads a decision: the approval from the path, the rest
// strictly from the body. The body must say why (reason); in development
// mode it must also name the approver, whom no API key names.
func (s *Server) decodeDecision(w http.ResponseWriter, r *http.Request, decision string) (*writ.DecideApprovalRequest, error) {
	b, err := decodeTenantBody(s, w, r, func(b *decideBody) *string { return &b.TenantID })
	if err != nil {
		return nil, explainAddressed(err, decidePathNames)
	}
	var details []writ.Detail
	if strings.TrimSpace(b.Reason) == "" {
		details = append(details, writ.Detail{Field: "reason", Message: "is required: say why, for the record"})
	}
	if writ.PrincipalFrom(r.Context()) == nil && strings.TrimSpace(b.Approver) == "" {
		details = append(details, writ.Detail{Field: "approver", Message: "is required when the server authenticates no one (development mode)"})
	}
	if len(details) > 0 {
		msg := details[0].Field + " is required"
		if len(details) > 1 {
			msg = "reason and approver are required"
		}
		return nil, &writ.Error{Code: writ.EINVALID, Message: msg, Details: details}
	}
	return &writ.DecideApprovalRequest{
		TenantID:   b.TenantID,
		ApprovalID: r.PathValue("id"),
		Decision:   decision,
		Approver:   b.Approver,
		Reason:     b.Reason,
		TraceID:    b.TraceID,
	}, nil
}

// withdrawBody is the body of POST /v1/approvals/{id}/withdraw: a
// writ.WithdrawApprovalRequest without the approval id, which the path
// names. tenant_id may be left out when the request is authenticated; an
// empty body ({}) withdraws without a reason.
type withdrawBody struct {
	TenantID string `json:"tenant_id,omitempty"`
	Reason   string `json:"reason,omitempty"`
	TraceID  string `json:"trace_id,omitempty"`
}

// withdrawPathNames says where a withdrawal takes what its body must not
// hold.
var withdrawPathNames = map[string]string{
	"approval_id": "must not be in the body: the path names the approval",
}

// withdrawPath is the path that withdraws an approval request.
func withdrawPath(approvalID string) string {
	return approvalPath(approvalID) + "/withdraw"
}

// handleWithdraw serves POST /v1/approvals/{id}/withdraw: the requester
// takes back a pending approval request, answered with the request as it
// now stands (state withdrawn).
func (s *Server) handleWithdraw(w http.ResponseWriter, r *http.Request) {
	if s.approvals == nil {
		s.writeError(w, r, errNoApprovals)
		return
	}
	tp, traced := requestTrace(r)
	if traced {
		s.setTraceparent(w, r, tp.TraceID, tp.Flags)
	}
	b, err := decodeTenantBody(s, w, r, func(b *withdrawBody) *string { return &b.TenantID })
	if err != nil {
		s.writeError(w, r, explainAddressed(err, withdrawPathNames))
		return
	}
	req := &writ.WithdrawApprovalRequest{TenantID: b.TenantID, ApprovalID: r.PathValue("id"), Reason: b.Reason, TraceID: b.TraceID}
	s.answerApproval(w, r, tp, traced, &req.TraceID, req.TenantID, req.ApprovalID, func() (*writ.ApprovalRequest, error) {
		return s.approvals.WithdrawApproval(r.Context(), req)
	})
}

// checkApproval checks that the approvals answered with the request asked
// for: an answer about another tenant's request must never be sent.
func checkApproval(a *writ.ApprovalRequest, tenantID, approvalID string) error {
	switch {
	case a == nil:
		return errors.New("approvals returned neither an approval request nor an error")
	case a.TenantID != tenantID || a.ApprovalID != approvalID:
		return fmt.Errorf("approvals answered approval %q of tenant %q with approval %q of tenant %q", approvalID, tenantID, a.ApprovalID, a.TenantID)
	}
	return nil
}

// wireApproval returns a with nil lists replaced by empty ones, so that
// what the ApprovalRequest schema requires is an array on the wire.
func wireApproval(a *writ.ApprovalRequest) *writ.ApprovalRequest {
	c := *a
	c.Binding.BundleRevisions = nonNil(c.Binding.BundleRevisions)
	c.SubjectIDs = nonNil(c.SubjectIDs)
	c.Reasons = nonNil(c.Reasons)
	c.Events = nonNil(c.Events)
	return &c
}

// wireApprovalPage returns page with every list an array on the wire.
func wireApprovalPage(page *writ.ApprovalPage) *writ.ApprovalPage {
	c := &writ.ApprovalPage{NextCursor: page.NextCursor, Approvals: make([]writ.ApprovalRequest, len(page.Approvals))}
	for i := range page.Approvals {
		c.Approvals[i] = *wireApproval(&page.Approvals[i])
	}
	return c
}
