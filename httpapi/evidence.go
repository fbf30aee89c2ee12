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

// errNoEvidence answers the evidence routes of a server without an
// evidence store.
var errNoEvidence = writ.Errorf(writ.ENOTFOUND, "this server does not serve an evidence store")

// handleAddEvidence serves POST /v1/evidence: a new evidence item of the
// tenant, sealed before the answer (201).
func (s *Server) handleAddEvidence(w http.ResponseWriter, r *http.Request) {
	serveBody(s, w, r, s.evidence, errNoEvidence, http.StatusCreated,
		func(b *writ.AddEvidenceRequest) (tenant, trace *string) { return &b.TenantID, &b.TraceID },
		writ.EvidenceService.AddEvidence)
}

// handleEvidence serves GET /v1/evidence/{id}: an item by id or content
// address, with its revocation.
func (s *Server) handleEvidence(w http.ResponseWriter, r *http.Request) {
	if s.evidence == nil {
		s.writeError(w, r, errNoEvidence)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	se, err := s.evidence.Evidence(r.Context(), tenantID, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, se)
}

// handleRevokeEvidence serves POST /v1/evidence/{id}/revoke: the item's
// revocation, a record of its own. The body may leave the item's id out;
// if it names one, it is the path's.
func (s *Server) handleRevokeEvidence(w http.ResponseWriter, r *http.Request) {
	serveBody(s, w, r, s.evidence, errNoEvidence, http.StatusOK,
		func(b *writ.RevokeEvidenceRequest) (tenant, trace *string) { return &b.TenantID, &b.TraceID },
		func(es writ.EvidenceService, ctx context.Context, req *writ.RevokeEvidenceRequest) (*writ.StoredEvidence, error) {
			switch id := r.PathValue("id"); {
			case req.ID == "":
				req.ID = id
			case req.ID != id:
				return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("the body names item %q, the path %q", req.ID, id), Details: []writ.Detail{{Field: "id", Message: "not the path's"}}}
			}
			return es.RevokeEvidence(ctx, req)
		})
}

var _ writ.EvidenceService = (*Client)(nil)

// AddEvidence posts r to /v1/evidence.
func (c *Client) AddEvidence(ctx context.Context, r *writ.AddEvidenceRequest) (*writ.StoredEvidence, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty evidence item")
	}
	var se writ.StoredEvidence
	if err := c.postEvidence(ctx, "/v1/evidence", r, r.TraceID, &se); err != nil {
		return nil, err
	}
	return &se, nil
}

// Evidence gets /v1/evidence/{id} of the tenant.
func (c *Client) Evidence(ctx context.Context, tenantID, id string) (*writ.StoredEvidence, error) {
	var se writ.StoredEvidence
	if err := c.getJSON(ctx, "/v1/evidence/"+url.PathEscape(id), url.Values{paramTenantID: {tenantID}}, "evidence item", &se); err != nil {
		return nil, err
	}
	return &se, nil
}

// RevokeEvidence posts r to /v1/evidence/{id}/revoke.
func (c *Client) RevokeEvidence(ctx context.Context, r *writ.RevokeEvidenceRequest) (*writ.StoredEvidence, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty revocation")
	}
	var se writ.StoredEvidence
	if err := c.postEvidence(ctx, "/v1/evidence/"+url.PathEscape(r.ID)+"/revoke", r, r.TraceID, &se); err != nil {
		return nil, err
	}
	return &se, nil
}

func (c *Client) postEvidence(ctx context.Context, path string, body any, traceID string, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("httpapi: encode evidence request: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, path, nil, bytes.NewReader(b))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, traceID)
	resp, err := c.do(hreq)
	if err != nil {
		return err
	}
	// An item is stored 201, a revocation answered 200.
	if resp.status != http.StatusOK && resp.status != http.StatusCreated {
		return resp.error()
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("httpapi: decode evidence item: %w", err)
	}
	return nil
}
