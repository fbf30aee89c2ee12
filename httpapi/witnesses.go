package httpapi

import (
	"fmt"
	"net/http"

	"github.com/writhq/writ"
)

var errNoWitnesses = writ.Errorf(writ.ENOTFOUND, "this server reports no witnesses")

// handleWitnesses serves GET /v1/ledger/witnesses: the caller's tenant's
// latest checkpoint (null before the first) and each witness's latest
// cosignature of the tenant and lag behind that checkpoint
// (Config.Witnesses), none of another tenant's.
func (s *Server) handleWitnesses(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Witnesses == nil {
		s.writeError(w, r, errNoWitnesses)
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
	rep, err := s.cfg.Witnesses(r.Context(), tenantID)
	switch {
	case err != nil:
	case rep == nil:
		err = fmt.Errorf("witnesses returned no report for tenant %q", tenantID)
	case rep.TenantID != tenantID:
		err = fmt.Errorf("witnesses answered tenant %q with the report of tenant %q", tenantID, rep.TenantID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c := *rep
	c.Witnesses = nonNil(c.Witnesses)
	w.Header().Set("Cache-Control", cacheLatest)
	s.writeJSON(w, r, http.StatusOK, &c)
}
