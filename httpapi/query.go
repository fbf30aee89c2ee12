package httpapi

import (
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/writhq/writ"
)

// Query parameters of GET /v1/records. recordQueryValues and
// parseRecordQuery are inverses; keep them next to each other.
const (
	paramTenantID    = "tenant_id"
	paramDecisionKey = "decision_key"
	paramStatus      = "status"
	paramSubjectID   = "subject_id"
	paramTraceID     = "trace_id"
	paramFrom        = "from"
	paramTo          = "to"
	paramLimit       = "limit"
	paramCursor      = "cursor"
)

// maxRecordsLimit is the largest page GET /v1/records serves.
const maxRecordsLimit = 1000

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
	set(paramSubjectID, q.SubjectID)
	set(paramTraceID, q.TraceID)
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

// parseRecordQuery decodes the query of GET /v1/records. Every problem
// names its parameter; unknown and repeated parameters are errors. Empty
// values do not filter.
func parseRecordQuery(v url.Values) (writ.RecordQuery, error) {
	p := queryParser{values: v}
	p.allow(paramTenantID, paramDecisionKey, paramStatus, paramSubjectID, paramTraceID,
		paramFrom, paramTo, paramLimit, paramCursor)
	q := writ.RecordQuery{
		TenantID:    p.required(paramTenantID),
		DecisionKey: p.get(paramDecisionKey),
		Status:      writ.Status(p.get(paramStatus)),
		SubjectID:   p.get(paramSubjectID),
		TraceID:     p.get(paramTraceID),
		From:        p.time(paramFrom),
		To:          p.time(paramTo),
		Cursor:      p.get(paramCursor),
	}
	if q.Status != "" && !slices.Contains(recordStatuses, q.Status) {
		p.fail(paramStatus, "must be one of DECIDED, DEFERRED, REJECTED, ESCALATED, IN_FLIGHT, CLOSED")
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		p.fail(paramTo, "must be after from")
	}
	if s := p.get(paramLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxRecordsLimit {
			p.fail(paramLimit, "must be an integer from 1 to 1000")
		}
		q.Limit = n
	}
	return q, p.err()
}

// parseRecordParams decodes the query of GET /v1/records/{id}: the tenant.
func parseRecordParams(v url.Values) (tenantID string, err error) {
	p := queryParser{values: v}
	p.allow(paramTenantID)
	tenantID = p.required(paramTenantID)
	return tenantID, p.err()
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
