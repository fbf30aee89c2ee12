package httpapi

import (
	"fmt"
	"net/http"

	"github.com/writhq/writ"
)

var errNoLatency = writ.Errorf(writ.ENOTFOUND, "this server measures no latencies (it runs with --metrics=false)")

// handleLatency serves GET /v1/stats/latency: the check latencies and
// append lags this server measured for the caller's tenant in recent
// windows (Config.Latency), none of another tenant's.
func (s *Server) handleLatency(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Latency == nil {
		s.writeError(w, r, errNoLatency)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenantID, err := parseTenantQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.cfg.Latency(r.Context(), tenantID)
	switch {
	case err != nil:
	case st == nil:
		err = fmt.Errorf("latency returned no stats for tenant %q", tenantID)
	case st.TenantID != tenantID:
		err = fmt.Errorf("latency answered tenant %q with the stats of tenant %q", tenantID, st.TenantID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c := *st
	c.Windows = nonNil(c.Windows)
	s.writeJSON(w, r, http.StatusOK, &c)
}
