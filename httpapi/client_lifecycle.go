package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/writhq/writ"
)

var _ writ.Lifecycle = (*Client)(nil)

// ReportExecution posts r to /v1/decisions/{decision_id}/execution and
// returns the acknowledgement: a new one (201), or the first report's
// with Repeated set (200).
func (c *Client) ReportExecution(ctx context.Context, r *writ.ExecutionReport) (*writ.ExecutionAck, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty execution report")
	}
	if err := requirePathIDs([2]string{"decision_id", r.DecisionID}); err != nil {
		return nil, err
	}
	body := *r
	body.DecisionID = "" // the path names it
	b, err := json.Marshal(&body)
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode execution report: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, decisionPath(r.DecisionID)+"/execution", nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, r.TraceID)
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK && resp.status != http.StatusCreated {
		return nil, resp.error()
	}
	var ack writ.ExecutionAck
	if err := json.Unmarshal(resp.body, &ack); err != nil {
		return nil, fmt.Errorf("httpapi: decode execution acknowledgement: %w", err)
	}
	return &ack, nil
}

// Resume posts r to /v1/decisions/{decision_id}/resume. Like Check, a
// fail-closed receipt comes back with an EUNAVAILABLE error. The HTTP
// client's own timeout must allow for r.Wait.
func (c *Client) Resume(ctx context.Context, r *writ.ResumeRequest) (*writ.Receipt, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty resume")
	}
	if err := requirePathIDs([2]string{"decision_id", r.DecisionID}); err != nil {
		return nil, err
	}
	body := resumeBody{TenantID: r.TenantID, Request: r.Request}
	if r.Wait > 0 {
		body.Wait = r.Wait.Round(time.Millisecond).String()
	}
	b, err := json.Marshal(&body)
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode resume: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, decisionPath(r.DecisionID)+"/resume", nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	if r.Request != nil {
		setTraceparent(hreq, r.Request.TraceID)
	}
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	var rcpt writ.Receipt
	switch {
	case resp.status == http.StatusOK:
		if err := json.Unmarshal(resp.body, &rcpt); err != nil {
			return nil, fmt.Errorf("httpapi: decode receipt: %w", err)
		}
		return &rcpt, nil
	case resp.status == http.StatusServiceUnavailable && resp.mediaType == mediaJSON:
		if err := json.Unmarshal(resp.body, &rcpt); err == nil && rcpt.ReceiptType != "" {
			return &rcpt, writ.Errorf(writ.EUNAVAILABLE, "writ could not commit the decision record; the receipt is fail-closed")
		}
	}
	return nil, resp.error()
}

// Decision gets the whole story of one decision.
func (c *Client) Decision(ctx context.Context, tenantID, decisionID string) (*writ.DecisionStory, error) {
	if err := requirePathIDs([2]string{"decision_id", decisionID}); err != nil {
		return nil, err
	}
	var st writ.DecisionStory
	if err := c.getJSON(ctx, decisionPath(decisionID), tenantValues(tenantID), "decision", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// InFlight lists the tenant's decisions in flight.
func (c *Client) InFlight(ctx context.Context, q writ.InFlightQuery) (*writ.InFlightPage, error) {
	v := tenantValues(q.TenantID)
	if !q.ExpiredBy.IsZero() {
		v.Set(paramExpiredBy, q.ExpiredBy.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set(paramLimit, fmt.Sprint(q.Limit))
	}
	if q.Cursor != "" {
		v.Set(paramCursor, q.Cursor)
	}
	var page writ.InFlightPage
	if err := c.getJSON(ctx, "/v1/decisions/in_flight", v, "decisions in flight", &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// tenantValues is the query naming a tenant, empty for "" (the API key's).
func tenantValues(tenantID string) url.Values {
	v := url.Values{}
	if tenantID != "" {
		v.Set(paramTenantID, tenantID)
	}
	return v
}
