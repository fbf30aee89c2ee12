package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/writhq/writ"
)

// AuthZEN 1.0 (OpenID AuthZEN Authorization API 1.0) is served as an
// adapter over Service.Check: each evaluation is mapped onto a check
// request and decided, sealed and recorded like any other check. There is
// no second decision path. docs/http-api.md, "AuthZEN", states the
// mapping.

// Paths of the AuthZEN routes.
const (
	pathAuthZENEvaluation  = "/access/v1/evaluation"
	pathAuthZENEvaluations = "/access/v1/evaluations"
	pathAuthZENMetadata    = "/.well-known/authzen-configuration"
)

// Evaluation semantics of a batch (options.evaluations_semantic).
const (
	semanticExecuteAll          = "execute_all"
	semanticDenyOnFirstDeny     = "deny_on_first_deny"
	semanticPermitOnFirstPermit = "permit_on_first_permit"
)

// azSubject is an AuthZEN subject: the actor of the check.
type azSubject struct {
	Type       string               `json:"type"`
	ID         string               `json:"id"`
	Properties *azSubjectProperties `json:"properties,omitempty"`
}

// azSubjectProperties are the actor fields a subject may carry.
type azSubjectProperties struct {
	WorkloadIdentity string `json:"workload_identity,omitempty"`
	DelegatedUserID  string `json:"delegated_user_id,omitempty"`
}

// azAction is an AuthZEN action: the tool called, with its arguments.
type azAction struct {
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties,omitempty"`
}

// azResource is an AuthZEN resource: the business object acted on, the
// check's first subject id ("type:id"), and any other business objects
// the check is about (properties.subject_ids).
type azResource struct {
	Type       string                `json:"type"`
	ID         string                `json:"id"`
	Properties *azResourceProperties `json:"properties,omitempty"`
}

// azResourceProperties are the resource properties writ reads.
type azResourceProperties struct {
	// SubjectIDs are more subject ids of the check, after "type:id".
	SubjectIDs []string `json:"subject_ids,omitempty"`
}

// azEvaluation is one AuthZEN access evaluation request. Context holds
// the rest of the check request: every field of a check but those the
// subject, action and resource stand for.
type azEvaluation struct {
	Subject  *azSubject         `json:"subject"`
	Action   *azAction          `json:"action"`
	Resource *azResource        `json:"resource"`
	Context  *writ.CheckRequest `json:"context,omitempty"`
}

// azOptions are the options of a batch. Options other than
// evaluations_semantic are accepted and ignored, as the specification
// allows.
type azOptions struct {
	EvaluationsSemantic string         `json:"evaluations_semantic,omitempty"`
	Others              map[string]any `json:",embed"`
}

// azEvaluations is an AuthZEN access evaluations (batch) request. Its
// top-level subject, action, resource and context are the defaults of
// every evaluation; an evaluation's own value replaces the default whole.
type azEvaluations struct {
	Subject     *azSubject         `json:"subject,omitempty"`
	Action      *azAction          `json:"action,omitempty"`
	Resource    *azResource        `json:"resource,omitempty"`
	Context     *writ.CheckRequest `json:"context,omitempty"`
	Evaluations []azEvaluation     `json:"evaluations"`
	Options     *azOptions         `json:"options,omitempty"`
}

// azDecision is an AuthZEN access evaluation response.
type azDecision struct {
	Decision bool       `json:"decision"`
	Context  *azContext `json:"context,omitempty"`
}

// azContext is the context of writ's AuthZEN answers: the sealed
// decision behind it, or the error that stopped one evaluation of a
// batch.
type azContext struct {
	DecisionID string        `json:"decision_id,omitempty"`
	RecordID   string        `json:"record_id,omitempty"`
	Outcome    writ.Outcome  `json:"outcome,omitempty"`
	Receipt    *writ.Receipt `json:"receipt,omitempty"`
	Error      *azError      `json:"error,omitempty"`
}

// azError is the error of one evaluation of a batch.
type azError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// azBatchResponse is an AuthZEN access evaluations response.
type azBatchResponse struct {
	Evaluations []azDecision `json:"evaluations"`
}

// AuthZENMetadata is the body of GET /.well-known/authzen-configuration.
type AuthZENMetadata struct {
	Issuer                    string `json:"issuer"`
	AccessEvaluationEndpoint  string `json:"access_evaluation_endpoint"`
	AccessEvaluationsEndpoint string `json:"access_evaluations_endpoint"`
}

// handleAuthZENEvaluation serves POST /access/v1/evaluation.
func (s *Server) handleAuthZENEvaluation(w http.ResponseWriter, r *http.Request) {
	echoRequestID(w, r)
	var ev azEvaluation
	if err := s.decodeAuthZEN(w, r, &ev); err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := checkOfEvaluation(r, ev, "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.continueTrace(w, r, req)
	rcpt, err := s.svc.Check(r.Context(), req)
	d, err := azDecisionOf(rcpt, err)
	if err != nil {
		if rcpt != nil {
			s.log.WarnContext(r.Context(), "fail-closed AuthZEN evaluation: decision record not committed",
				"decision_id", rcpt.DecisionID, "error", err)
		}
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, d)
}

// handleAuthZENEvaluations serves POST /access/v1/evaluations. Every
// evaluation is mapped and checked before any is decided, so a malformed
// batch is refused whole and writes nothing. The evaluations are then
// decided in order; an evaluation that fails (for example, its record
// cannot be committed) is a denial with the error in its context, and the
// batch's semantic may stop at it.
func (s *Server) handleAuthZENEvaluations(w http.ResponseWriter, r *http.Request) {
	echoRequestID(w, r)
	var batch azEvaluations
	if err := s.decodeAuthZEN(w, r, &batch); err != nil {
		s.writeError(w, r, err)
		return
	}
	semantic := semanticExecuteAll
	if batch.Options != nil && batch.Options.EvaluationsSemantic != "" {
		semantic = batch.Options.EvaluationsSemantic
	}
	switch semantic {
	case semanticExecuteAll, semanticDenyOnFirstDeny, semanticPermitOnFirstPermit:
	default:
		s.writeError(w, r, &writ.Error{Code: writ.EINVALID, Message: msgSchema, Details: []writ.Detail{{
			Field:   "options.evaluations_semantic",
			Message: fmt.Sprintf("must be %s, %s or %s, not %q", semanticExecuteAll, semanticDenyOnFirstDeny, semanticPermitOnFirstPermit, semantic)}}})
		return
	}
	if len(batch.Evaluations) == 0 {
		s.writeError(w, r, &writ.Error{Code: writ.EINVALID, Message: msgSchema, Details: []writ.Detail{{
			Field: "evaluations", Message: "must hold at least one evaluation"}}})
		return
	}
	reqs := make([]*writ.CheckRequest, len(batch.Evaluations))
	for i, ev := range batch.Evaluations {
		if ev.Subject == nil {
			ev.Subject = batch.Subject
		}
		if ev.Action == nil {
			ev.Action = batch.Action
		}
		if ev.Resource == nil {
			ev.Resource = batch.Resource
		}
		if ev.Context == nil && batch.Context != nil {
			c := *batch.Context // each check gets its own copy
			ev.Context = &c
		}
		req, err := checkOfEvaluation(r, ev, fmt.Sprintf("evaluations[%d].", i))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		reqs[i] = req
	}
	for _, req := range reqs {
		s.continueTrace(w, r, req)
	}
	resp := azBatchResponse{Evaluations: []azDecision{}}
	for _, req := range reqs {
		rcpt, err := s.svc.Check(r.Context(), req)
		d, err := azDecisionOf(rcpt, err)
		if err != nil {
			if writ.ErrorCode(err) == writ.EINTERNAL && clientGone(r, err) {
				s.logClientGone(r, err)
				return
			}
			if writ.ErrorCode(err) == writ.EINTERNAL {
				s.log.ErrorContext(r.Context(), "internal error in an AuthZEN evaluation", "error", err)
				err = writ.Errorf(writ.EINTERNAL, "internal error")
			}
			code := writ.ErrorCode(err)
			d = &azDecision{Context: &azContext{Error: &azError{Status: statusOf(code), Code: code, Message: writ.ErrorMessage(err)}}}
			if rcpt != nil {
				d.Context.DecisionID = rcpt.DecisionID
			}
		}
		resp.Evaluations = append(resp.Evaluations, *d)
		if d.Decision && semantic == semanticPermitOnFirstPermit || !d.Decision && semantic == semanticDenyOnFirstDeny {
			break
		}
	}
	s.writeJSON(w, r, http.StatusOK, resp)
}

// handleAuthZENMetadata serves GET /.well-known/authzen-configuration.
// The issuer is the URL the request reached, so the metadata a client
// fetched names the server it fetched it from.
func (s *Server) handleAuthZENMetadata(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	issuer := scheme + "://" + r.Host
	s.writeJSON(w, r, http.StatusOK, AuthZENMetadata{
		Issuer:                    issuer,
		AccessEvaluationEndpoint:  issuer + pathAuthZENEvaluation,
		AccessEvaluationsEndpoint: issuer + pathAuthZENEvaluations,
	})
}

// decodeAuthZEN reads and strictly decodes an AuthZEN request body.
func (s *Server) decodeAuthZEN(w http.ResponseWriter, r *http.Request, v any) error {
	if err := noQuery(r); err != nil {
		return err
	}
	body, err := readJSONBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

// continueTrace gives req the trace of the request's traceparent, if it
// carries a valid one, and answers with it.
func (s *Server) continueTrace(w http.ResponseWriter, r *http.Request, req *writ.CheckRequest) {
	if tp, ok := requestTrace(r); ok {
		req.TraceID = tp.TraceID
		if w.Header().Get("traceparent") == "" {
			s.setTraceparent(w, r, tp.TraceID, tp.Flags)
		}
	}
}

// checkOfEvaluation maps an AuthZEN evaluation onto a check request:
// subject → actor, action → tool and arguments, resource → the first
// subject id "type:id" (then resource.properties.subject_ids), context →
// every other field of the check. The
// fields the subject, action and resource stand for may not also be set
// in the context. field prefixes the names in errors (for a batch).
func checkOfEvaluation(r *http.Request, ev azEvaluation, field string) (*writ.CheckRequest, error) {
	var details []writ.Detail
	missing := func(name string) {
		details = append(details, writ.Detail{Field: field + name, Message: "is required"})
	}
	req := &writ.CheckRequest{}
	if ev.Context != nil {
		c := *ev.Context
		req = &c
		for name, set := range map[string]bool{
			"actor": req.Actor != (writ.Actor{}), "tool": req.Tool != "",
			"arguments": req.Arguments != nil, "subject_ids": req.SubjectIDs != nil,
		} {
			if set {
				details = append(details, writ.Detail{Field: field + "context." + name,
					Message: "is set by the AuthZEN subject, action and resource; leave it out of the context"})
			}
		}
	}
	switch s := ev.Subject; {
	case s == nil:
		missing("subject")
	default:
		typ, ok := actorTypeOf(s.Type)
		if !ok {
			details = append(details, writ.Detail{Field: field + "subject.type",
				Message: fmt.Sprintf("must be agent, user, human or service, not %q", s.Type)})
		}
		if s.ID == "" {
			missing("subject.id")
		}
		req.Actor = writ.Actor{Type: typ, ID: s.ID}
		if p := s.Properties; p != nil {
			req.Actor.WorkloadIdentity, req.Actor.DelegatedUserID = p.WorkloadIdentity, p.DelegatedUserID
		}
	}
	switch a := ev.Action; {
	case a == nil:
		missing("action")
	case a.Name == "":
		missing("action.name")
	default:
		req.Tool, req.Arguments = a.Name, a.Properties
	}
	switch res := ev.Resource; {
	case res == nil:
		missing("resource")
	case res.Type == "":
		missing("resource.type")
	case res.ID == "":
		missing("resource.id")
	default:
		req.SubjectIDs = []string{res.Type + ":" + res.ID}
		if res.Properties != nil {
			req.SubjectIDs = append(req.SubjectIDs, res.Properties.SubjectIDs...)
		}
	}
	if len(details) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: msgSchema, Details: details}
	}
	tenant, err := scopeTenant(r.Context(), req.TenantID)
	if err != nil {
		var e *writ.Error
		if errors.As(err, &e) && len(e.Details) == 1 && e.Details[0].Field == paramTenantID {
			e = &writ.Error{Code: e.Code, Message: "context.tenant_id is required",
				Details: []writ.Detail{{Field: field + "context.tenant_id", Message: "is required"}}}
			return nil, e
		}
		return nil, err
	}
	req.TenantID = tenant
	return req, nil
}

// actorTypeOf maps an AuthZEN subject type onto a writ actor type.
func actorTypeOf(t string) (string, bool) {
	switch strings.ToLower(t) {
	case "agent":
		return writ.ActorAgent, true
	case "user", "human":
		return writ.ActorHuman, true
	case "service":
		return writ.ActorService, true
	}
	return "", false
}

// azDecisionOf turns a check's answer into an AuthZEN decision: true
// exactly when the receipt is safe to execute. A fail-closed receipt or
// any other error is returned as an error.
func azDecisionOf(rcpt *writ.Receipt, err error) (*azDecision, error) {
	switch {
	case err != nil:
		return nil, err
	case rcpt == nil:
		return nil, errors.New("service returned neither a receipt nor an error")
	case rcpt.SafeToExecute && rcpt.Metadata.RecordID == "":
		return nil, fmt.Errorf("service permitted decision %s without a record id", rcpt.DecisionID)
	}
	return &azDecision{Decision: rcpt.SafeToExecute, Context: &azContext{
		DecisionID: rcpt.DecisionID, RecordID: rcpt.Metadata.RecordID, Outcome: rcpt.Outcome, Receipt: wireReceipt(rcpt),
	}}, nil
}

// echoRequestID answers with the request's X-Request-ID, as AuthZEN asks.
func echoRequestID(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get("X-Request-ID"); id != "" {
		w.Header().Set("X-Request-ID", id)
	}
}
