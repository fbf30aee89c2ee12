package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// Query parameters of GET /v1/records. recordQueryValues and
// parseRecordQuery are inverses; keep them next to each other.
const (
	paramTenantID    = "tenant_id"
	paramDecisionKey = "decision_key"
	paramStatus      = "status"
	paramOutcome     = "outcome"
	paramSubjectID   = "subject_id"
	// paramDecisionKeyPrefix and paramSubjectPrefix search by prefix;
	// paramOrder is "newest" for newest first ("chain", the default,
	// is chain order).
	paramDecisionKeyPrefix = "decision_key_prefix"
	paramSubjectPrefix     = "subject_prefix"
	paramOrder             = "order"
	paramTraceID           = "trace_id"
	paramApprovalMode      = "approval_mode_effective"
	paramPolicyDecisionID  = "policy_decision_id"
	paramApprover          = "approver"
	paramRefersTo          = "refers_to"
	paramScorecard         = "scorecard"
	paramFrom              = "from"
	paramTo                = "to"
	paramLimit             = "limit"
	paramCursor            = "cursor"
)

// maxPageLimit is the largest page GET /v1/records and GET /v1/approvals
// serve.
const maxPageLimit = 1000

var recordStatuses = []writ.Status{
	writ.StatusDecided, writ.StatusDeferred, writ.StatusRejected,
	writ.StatusEscalated, writ.StatusInFlight, writ.StatusClosed,
}

// recordQueryValues encodes q as the query of GET /v1/records. Zero
// fields are left out.
func recordQueryValues(q writ.RecordQuery) url.Values {
	v := url.Values{}
	set := func(key, value string) {
		if value != "" {
			v.Set(key, value)
		}
	}
	set(paramTenantID, q.TenantID)
	set(paramDecisionKey, q.DecisionKey)
	set(paramStatus, string(q.Status))
	set(paramOutcome, string(q.Outcome))
	set(paramSubjectID, q.SubjectID)
	set(paramTraceID, q.TraceID)
	set(paramDecisionKeyPrefix, q.DecisionKeyPrefix)
	set(paramSubjectPrefix, q.SubjectPrefix)
	set(paramApprovalMode, string(q.ApprovalMode))
	set(paramPolicyDecisionID, q.PolicyDecisionID)
	set(paramApprover, q.Approver)
	set(paramRefersTo, q.RefersTo)
	set(paramScorecard, q.Scorecard)
	if q.Newest {
		v.Set(paramOrder, orderNewest)
	}
	if !q.From.IsZero() {
		v.Set(paramFrom, q.From.Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set(paramTo, q.To.Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set(paramLimit, strconv.Itoa(q.Limit))
	}
	set(paramCursor, q.Cursor)
	return v
}

// Values of paramOrder.
const (
	orderChain  = "chain"
	orderNewest = "newest"
)

// parseRecordQuery decodes the query of GET /v1/records. Every problem
// names its parameter; unknown and repeated parameters are errors. Empty
// values do not filter.
func parseRecordQuery(v url.Values) (writ.RecordQuery, error) {
	p := queryParser{values: v}
	p.allow(paramTenantID, paramDecisionKey, paramStatus, paramOutcome, paramSubjectID, paramTraceID,
		paramDecisionKeyPrefix, paramSubjectPrefix, paramApprovalMode, paramPolicyDecisionID, paramApprover, paramRefersTo,
		paramScorecard, paramOrder, paramFrom, paramTo, paramLimit, paramCursor)
	q := writ.RecordQuery{
		TenantID:          p.required(paramTenantID),
		DecisionKey:       p.get(paramDecisionKey),
		Status:            writ.Status(p.get(paramStatus)),
		Outcome:           writ.Outcome(p.get(paramOutcome)),
		SubjectID:         p.get(paramSubjectID),
		TraceID:           p.get(paramTraceID),
		DecisionKeyPrefix: p.get(paramDecisionKeyPrefix),
		SubjectPrefix:     p.get(paramSubjectPrefix),
		ApprovalMode:      writ.ApprovalMode(p.get(paramApprovalMode)),
		PolicyDecisionID:  p.get(paramPolicyDecisionID),
		Approver:          p.get(paramApprover),
		RefersTo:          p.get(paramRefersTo),
		Scorecard:         p.get(paramScorecard),
		From:              p.time(paramFrom),
		To:                p.time(paramTo),
		Cursor:            p.get(paramCursor),
	}
	if q.Status != "" && !slices.Contains(recordStatuses, q.Status) {
		p.fail(paramStatus, "must be one of DECIDED, DEFERRED, REJECTED, ESCALATED, IN_FLIGHT, CLOSED")
	}
	if q.Outcome != "" && !slices.Contains(writ.Outcomes, q.Outcome) {
		p.fail(paramOutcome, "must be one of allow, allow_with_warning, replan_required, goal_fail_terminal")
	}
	if q.ApprovalMode != "" && q.ApprovalMode.Rank() < 0 {
		p.fail(paramApprovalMode, ledger.ApprovalModesMessage)
	}
	if q.Scorecard != "" && q.Scorecard != writ.ScorecardFailedQuery {
		p.fail(paramScorecard, "must be failed")
	}
	switch p.get(paramOrder) {
	case "", orderChain:
	case orderNewest:
		q.Newest = true
	default:
		p.fail(paramOrder, "must be chain (the default) or newest")
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		p.fail(paramTo, "must be after from")
	}
	q.Limit = p.limit()
	return q, p.err()
}

// parseTenantQuery decodes the query of GET /v1/records/{id}, GET
// /v1/records/{id}/replay, POST /v1/ledger/checkpoint, GET
// /v1/runs/{id}, POST /v1/runs/{id}/steps/{step}/attempts and GET
// /v1/approvals/{id}: the tenant alone.
// queryTenant reads the tenant of a request whose query names nothing
// else: the key's tenant when the server authenticates (see scopedQuery).
func queryTenant(r *http.Request) (string, error) {
	values, err := scopedQuery(r)
	if err != nil {
		return "", err
	}
	return parseTenantQuery(values)
}

func parseTenantQuery(v url.Values) (tenantID string, err error) {
	p := queryParser{values: v}
	p.allow(paramTenantID)
	tenantID = p.required(paramTenantID)
	return tenantID, p.err()
}

// Query parameters of GET /v1/approvals, besides tenant_id,
// decision_key, limit and cursor. approvalQueryValues and
// parseApprovalQuery are inverses, but for older_than, which people
// write and the client never sends: it is created_before relative to the
// server's clock.
const (
	paramState         = "state"
	paramGateID        = "gate_id"
	paramOlderThan     = "older_than"
	paramCreatedBefore = "created_before"
)

// approvalParams are the query parameters GET /v1/approvals takes.
var approvalParams = []string{paramTenantID, paramState, paramGateID, paramDecisionKey,
	paramOlderThan, paramCreatedBefore, paramLimit, paramCursor}

var approvalStates = []string{writ.ApprovalPending, writ.ApprovalApproved, writ.ApprovalDenied, writ.ApprovalWithdrawn, writ.ApprovalExpired}

// approvalQueryValues encodes q as the query of GET /v1/approvals. Zero
// fields are left out.
func approvalQueryValues(q writ.ApprovalQuery) url.Values {
	v := url.Values{}
	set := func(key, value string) {
		if value != "" {
			v.Set(key, value)
		}
	}
	set(paramTenantID, q.TenantID)
	set(paramState, q.State)
	set(paramGateID, q.GateID)
	set(paramDecisionKey, q.DecisionKey)
	if !q.CreatedBefore.IsZero() {
		v.Set(paramCreatedBefore, q.CreatedBefore.Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set(paramLimit, strconv.Itoa(q.Limit))
	}
	set(paramCursor, q.Cursor)
	return v
}

// parseApprovalQuery decodes the query of GET /v1/approvals. older_than,
// a Go duration, keeps requests created before now minus it; it and
// created_before, an instant, exclude each other. Every problem names its
// parameter; unknown and repeated parameters are errors. Empty values do
// not filter.
func parseApprovalQuery(v url.Values, now time.Time) (writ.ApprovalQuery, error) {
	p := queryParser{values: v}
	p.allow(approvalParams...)
	q := writ.ApprovalQuery{
		TenantID:      p.required(paramTenantID),
		State:         p.get(paramState),
		GateID:        p.get(paramGateID),
		DecisionKey:   p.get(paramDecisionKey),
		CreatedBefore: p.time(paramCreatedBefore),
		Limit:         p.limit(),
		Cursor:        p.get(paramCursor),
	}
	if q.State != "" && !slices.Contains(approvalStates, q.State) {
		p.fail(paramState, "must be one of pending, approved, denied, expired")
	}
	if s := p.get(paramOlderThan); s != "" {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil || d <= 0:
			p.fail(paramOlderThan, "must be a positive duration, such as 30m, 2h or 1h30m")
		case !q.CreatedBefore.IsZero():
			p.fail(paramOlderThan, "give older_than or created_before, not both")
		default:
			q.CreatedBefore = now.Add(-d)
		}
	}
	return q, p.err()
}

// Query parameters of GET /v1/runs, besides tenant_id, status, limit and
// cursor. runQueryValues and parseRunQuery are inverses.
const paramWorkflowID = "workflow_id"

// runQueryValues encodes q as the query of GET /v1/runs. Zero fields are
// left out.
func runQueryValues(q writ.RunQuery) url.Values {
	v := url.Values{}
	set := func(key, value string) {
		if value != "" {
			v.Set(key, value)
		}
	}
	set(paramTenantID, q.TenantID)
	set(paramWorkflowID, q.WorkflowID)
	set(paramStatus, q.Status)
	if q.Limit != 0 {
		v.Set(paramLimit, strconv.Itoa(q.Limit))
	}
	set(paramCursor, q.Cursor)
	return v
}

// parseRunQuery decodes the query of GET /v1/runs. Every problem names
// its parameter; unknown and repeated parameters are errors. Empty values
// do not filter.
func parseRunQuery(v url.Values) (writ.RunQuery, error) {
	p := queryParser{values: v}
	p.allow(paramTenantID, paramWorkflowID, paramStatus, paramLimit, paramCursor)
	q := writ.RunQuery{
		TenantID:   p.required(paramTenantID),
		WorkflowID: p.get(paramWorkflowID),
		Status:     p.get(paramStatus),
		Limit:      p.limit(),
		Cursor:     p.get(paramCursor),
	}
	if q.Status != "" && !slices.Contains(writ.RunStatuses, q.Status) {
		p.fail(paramStatus, "must be one of active, completed, aborted, escalated")
	}
	return q, p.err()
}

// Query parameters of the ledger routes, besides tenant_id, from and to.
const (
	paramSize   = "size"
	paramFormat = "format"
)

// Values of the format parameter of GET /v1/ledger/checkpoint.
const (
	formatJSON = "json"
	formatNote = "note"
)

// The query parameters each ledger route takes. The encoders and parsers
// below are inverses; keep them next to each other.
var (
	checkpointParams  = []string{paramTenantID, paramSize, paramFormat}
	proofParams       = []string{paramTenantID, paramSize}
	consistencyParams = []string{paramTenantID, paramFrom, paramTo}
)

// treeSizeValues encodes the query of GET /v1/ledger/checkpoint and GET
// /v1/records/{id}/proof: the tenant and, unless it is 0 (the latest),
// the tree size.
func treeSizeValues(tenantID string, size int64) url.Values {
	v := url.Values{paramTenantID: {tenantID}}
	if size != 0 {
		v.Set(paramSize, strconv.FormatInt(size, 10))
	}
	return v
}

// consistencyValues encodes the query of GET /v1/ledger/consistency. from
// is always sent, so that the server reports a bad one; to is left out
// when it is 0 (the latest).
func consistencyValues(tenantID string, from, to int64) url.Values {
	v := url.Values{paramTenantID: {tenantID}, paramFrom: {strconv.FormatInt(from, 10)}}
	if to != 0 {
		v.Set(paramTo, strconv.FormatInt(to, 10))
	}
	return v
}

// parseCheckpointQuery decodes the query of GET /v1/ledger/checkpoint:
// the tenant, the tree size (0 for the latest) and the format ("" when
// the Accept header decides).
func parseCheckpointQuery(v url.Values) (tenantID string, size int64, format string, err error) {
	p := queryParser{values: v}
	p.allow(checkpointParams...)
	tenantID = p.required(paramTenantID)
	size = p.treeSize(paramSize, p.get(paramSize), 0)
	format = p.get(paramFormat)
	if format != "" && format != formatJSON && format != formatNote {
		p.fail(paramFormat, `must be "json" or "note"`)
	}
	return tenantID, size, format, p.err()
}

// parseProofQuery decodes the query of GET /v1/records/{id}/proof: the
// tenant and the tree size (0 for the latest).
func parseProofQuery(v url.Values) (tenantID string, size int64, err error) {
	p := queryParser{values: v}
	p.allow(proofParams...)
	tenantID = p.required(paramTenantID)
	size = p.treeSize(paramSize, p.get(paramSize), 0)
	return tenantID, size, p.err()
}

// parseConsistencyQuery decodes the query of GET /v1/ledger/consistency:
// the tenant, the old tree size (required) and the new one (0 for the
// latest), which must not be smaller.
func parseConsistencyQuery(v url.Values) (tenantID string, from, to int64, err error) {
	p := queryParser{values: v}
	p.allow(consistencyParams...)
	tenantID = p.required(paramTenantID)
	from = p.treeSize(paramFrom, p.required(paramFrom), 1)
	to = p.treeSize(paramTo, p.get(paramTo), 0)
	if from != 0 && to != 0 && to < from {
		p.fail(paramTo, "must not be smaller than from")
	}
	return tenantID, from, to, p.err()
}

// replayTraceParams are the query parameters GET /v1/replay takes.
// replayTraceValues and parseReplayTraceQuery are inverses.
var replayTraceParams = []string{paramTenantID, paramTraceID}

// replayTraceValues encodes the query of GET /v1/replay. Both parameters
// are always sent, so that the server reports a missing one.
func replayTraceValues(tenantID, traceID string) url.Values {
	return url.Values{paramTenantID: {tenantID}, paramTraceID: {traceID}}
}

// parseReplayTraceQuery decodes the query of GET /v1/replay: the tenant
// and the trace, whose id is required and must be a W3C trace id.
func parseReplayTraceQuery(v url.Values) (tenantID, traceID string, err error) {
	p := queryParser{values: v}
	p.allow(replayTraceParams...)
	tenantID = p.required(paramTenantID)
	traceID = p.required(paramTraceID)
	if traceID != "" && !writ.ValidTraceID(traceID) {
		p.fail(paramTraceID, "must be a W3C trace id: 32 lowercase hex digits, not all zeros")
	}
	return tenantID, traceID, p.err()
}

// queryParser reads query parameters and collects what is wrong with them.
type queryParser struct {
	values  url.Values
	details []writ.Detail
}

func (p *queryParser) fail(param, msg string) {
	p.details = append(p.details, writ.Detail{Field: param, Message: msg})
}

// allow reports every parameter that is not one of names.
func (p *queryParser) allow(names ...string) {
	for _, k := range slices.Sorted(maps.Keys(p.values)) {
		if !slices.Contains(names, k) {
			p.fail(k, "unknown query parameter")
		}
	}
}

// get returns the parameter's value; a repeated parameter is an error.
func (p *queryParser) get(name string) string {
	vs := p.values[name]
	if len(vs) > 1 {
		p.fail(name, "must be given at most once")
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func (p *queryParser) required(name string) string {
	s := p.get(name)
	if s == "" {
		p.fail(name, "is required")
	}
	return s
}

func (p *queryParser) time(name string) time.Time {
	s := p.get(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.fail(name, "must be an RFC 3339 date-time, such as 2026-05-09T09:31:42Z")
	}
	return t
}

// limit reads the page size parameter: 1 to maxPageLimit, or 0 when it
// is absent (the service's default).
func (p *queryParser) limit() int {
	s := p.get(paramLimit)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxPageLimit {
		p.fail(paramLimit, fmt.Sprintf("must be an integer from 1 to %d", maxPageLimit))
		return 0
	}
	return n
}

// treeSize reads s, the value of the parameter name, as a tree size: a
// whole number in decimal, at least min. "" is 0 (a required parameter
// has already been reported).
func (p *queryParser) treeSize(name, s string, min int64) int64 {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < min || s != strconv.FormatInt(n, 10) {
		if min == 0 {
			p.fail(name, "must be a tree size: a whole number, 0 for the latest")
		} else {
			p.fail(name, fmt.Sprintf("must be a tree size: a whole number, at least %d", min))
		}
		return 0
	}
	return n
}

// err returns the collected problems as one EINVALID error, or nil.
func (p *queryParser) err() error {
	if len(p.details) == 0 {
		return nil
	}
	msg := "invalid query parameter " + strconv.Quote(p.details[0].Field)
	if len(p.details) > 1 {
		msg = "invalid query parameters"
	}
	return &writ.Error{Code: writ.EINVALID, Message: msg, Details: p.details}
}
