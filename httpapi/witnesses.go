package httpapi

import (
	"net/http"

	"github.com/writhq/writ"
)

var errNoWitnesses = writ.Errorf(writ.ENOTFOUND, "this server reports no witnesses")

// handleWitnesses serves GET /v1/ledger/witnesses: the caller's tenant's
// latest checkpoint (null before the first) and each witness's latest
// cosignature of the tenant and lag behind that checkpoint
// (Config.Witnesses), none of another tenant's.
func (s *Server) handleWitnesses(w http.ResponseWriter, r *http.Request) {
	rep, ok := tenantReport(s, w, r, "witnesses", errNoWitnesses, s.cfg.Witnesses, func(rep *writ.LedgerWitnesses) string { return rep.TenantID })
	if !ok {
		return
	}
	c := *rep
	c.Witnesses = nonNil(c.Witnesses)
	w.Header().Set("Cache-Control", cacheLatest)
	s.writeJSON(w, r, http.StatusOK, &c)
}
