package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/writhq/writ"
)

// errNoParams answers the parameter routes of a server without tenant
// parameters.
var errNoParams = writ.Errorf(writ.ENOTFOUND, "this server does not serve tenant parameters")

// handleParams serves GET /v1/params: the tenant's parameters as they
// stand.
func (s *Server) handleParams(w http.ResponseWriter, r *http.Request) {
	if s.params == nil {
		s.writeError(w, r, errNoParams)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.params.Params(r.Context(), tenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, st)
}

// handleSetParams serves PUT /v1/params: a new parameter change of the
// tenant, sealed before the answer.
func (s *Server) handleSetParams(w http.ResponseWriter, r *http.Request) {
	serveBody(s, w, r, s.params, errNoParams, http.StatusOK,
		func(b *writ.SetParamsRequest) (tenant, trace *string) { return &b.TenantID, &b.TraceID },
		writ.TenantParams.SetParams)
}

var _ writ.TenantParams = (*Client)(nil)

// Params gets /v1/params for the tenant.
func (c *Client) Params(ctx context.Context, tenantID string) (*writ.ParamsState, error) {
	var st writ.ParamsState
	if err := c.getJSON(ctx, "/v1/params", url.Values{paramTenantID: {tenantID}}, "tenant parameters", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// SetParams puts r to /v1/params.
func (c *Client) SetParams(ctx context.Context, r *writ.SetParamsRequest) (*writ.ParamsState, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty parameter change")
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode parameter change: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPut, "/v1/params", nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, r.TraceID)
	var st writ.ParamsState
	if err := c.doJSON(hreq, "tenant parameters", &st); err != nil {
		return nil, err
	}
	return &st, nil
}
