package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/writhq/writ"
)

var errNoLatency = writ.Errorf(writ.ENOTFOUND, "this server measures no latencies (it runs with --metrics=false)")

// handleLatency serves GET /v1/stats/latency: the check latencies and
// append lags this server measured for the caller's tenant in recent
// windows (Config.Latency), none of another tenant's.
func (s *Server) handleLatency(w http.ResponseWriter, r *http.Request) {
	st, ok := tenantReport(s, w, r, "latency", errNoLatency, s.cfg.Latency, func(st *writ.LatencyStats) string { return st.TenantID })
	if !ok {
		return
	}
	c := *st
	c.Windows = nonNil(c.Windows)
	s.writeJSON(w, r, http.StatusOK, &c)
}

// tenantReport reads what fetch reports about the tenant a scoped query
// names (the caller's own unless it may read others), for the tenant
// reads that answer one report per tenant (latency, witnesses). A nil
// fetch is unset: the server answers unset. A report of another tenant,
// or none, is an internal error, never shown. It writes the error and
// returns false when there is nothing to answer.
func tenantReport[T any](s *Server, w http.ResponseWriter, r *http.Request, what string, unset error,
	fetch func(context.Context, string) (*T, error), tenantOf func(*T) string) (*T, bool) {
	if fetch == nil {
		s.writeError(w, r, unset)
		return nil, false
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	tenantID, err := parseTenantQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	rep, err := fetch(r.Context(), tenantID)
	switch {
	case err != nil:
	case rep == nil:
		err = fmt.Errorf("%s returned no report for tenant %q", what, tenantID)
	case tenantOf(rep) != tenantID:
		err = fmt.Errorf("%s answered tenant %q with the report of tenant %q", what, tenantID, tenantOf(rep))
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	return rep, true
}
