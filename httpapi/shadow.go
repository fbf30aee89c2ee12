package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/writhq/writ"
)

// errNoShadows answers GET /v1/shadow/report on a server that reports no
// shadow decisions.
var errNoShadows = writ.Errorf(writ.ENOTFOUND, "this server reports no shadow decisions")

// Query parameters of GET /v1/shadow/report, besides tenant_id,
// decision_key, from and to. shadowQueryValues and parseShadowQuery are
// inverses.
const (
	paramPackHash = "pack_hash"
	paramExamples = "examples"
)

// maxExamples is the most example record ids a transition of a shadow
// report lists.
const maxExamples = 100

// handleShadowReport serves GET /v1/shadow/report: the tenant's shadow
// decisions against what was enforced, as outcome transitions.
func (s *Server) handleShadowReport(w http.ResponseWriter, r *http.Request) {
	if s.shadows == nil {
		s.writeError(w, r, errNoShadows)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := parseShadowQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rep, err := s.shadows.ShadowReport(r.Context(), q)
	switch {
	case err != nil:
	case rep == nil:
		err = errors.New("shadows returned neither a report nor an error")
	case rep.TenantID != q.TenantID:
		err = fmt.Errorf("shadows answered a report of tenant %q with one of tenant %q", q.TenantID, rep.TenantID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c := *rep
	c.Packs = nonNil(c.Packs)
	c.Transitions = nonNil(c.Transitions)
	for i, t := range c.Transitions {
		t2 := *t
		t2.Examples = nonNil(t2.Examples)
		c.Transitions[i] = &t2
	}
	s.writeJSON(w, r, http.StatusOK, &c)
}

// shadowQueryValues encodes q as the query of GET /v1/shadow/report.
// Zero fields are left out.
func shadowQueryValues(q writ.ShadowQuery) url.Values {
	v := url.Values{}
	set := func(key, value string) {
		if value != "" {
			v.Set(key, value)
		}
	}
	set(paramTenantID, q.TenantID)
	set(paramPackHash, q.PackHash)
	set(paramDecisionKey, q.DecisionKey)
	if !q.From.IsZero() {
		v.Set(paramFrom, q.From.Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set(paramTo, q.To.Format(time.RFC3339Nano))
	}
	if q.Examples != 0 {
		v.Set(paramExamples, strconv.Itoa(q.Examples))
	}
	return v
}

// parseShadowQuery decodes the query of GET /v1/shadow/report. Every
// problem names its parameter; unknown and repeated parameters are
// errors. Empty values do not filter.
func parseShadowQuery(v url.Values) (writ.ShadowQuery, error) {
	p := queryParser{values: v}
	p.allow(paramTenantID, paramPackHash, paramDecisionKey, paramFrom, paramTo, paramExamples)
	q := writ.ShadowQuery{
		TenantID:    p.required(paramTenantID),
		PackHash:    p.get(paramPackHash),
		DecisionKey: p.get(paramDecisionKey),
		From:        p.time(paramFrom),
		To:          p.time(paramTo),
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		p.fail(paramTo, "must be after from")
	}
	if s := p.get(paramExamples); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxExamples {
			p.fail(paramExamples, fmt.Sprintf("must be an integer from 1 to %d", maxExamples))
		}
		q.Examples = n
	}
	return q, p.err()
}
