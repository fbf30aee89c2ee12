package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/writhq/writ"
)

// handleErase serves POST /v1/erasures: a subject's classified values
// erased, with the erasure's record sealed before the answer.
func (s *Server) handleErase(w http.ResponseWriter, r *http.Request) {
	serveBody(s, w, r, s.erasures, writ.Errorf(writ.ENOTFOUND, "this server erases nothing"), http.StatusOK,
		func(b *writ.EraseRequest) (tenant, trace *string) { return &b.TenantID, &b.TraceID },
		writ.Erasures.Erase)
}

var _ writ.Erasures = (*Client)(nil)

// Erase posts r to /v1/erasures.
func (c *Client) Erase(ctx context.Context, r *writ.EraseRequest) (*writ.Erasure, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty erasure request")
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode erasure: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, "/v1/erasures", nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, r.TraceID)
	var x writ.Erasure
	if err := c.doJSON(hreq, "erasure", &x); err != nil {
		return nil, err
	}
	return &x, nil
}
