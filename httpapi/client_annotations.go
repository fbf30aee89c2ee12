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

var _ writ.Annotations = (*Client)(nil)

// recordPath is the path of a record.
func recordPath(recordID string) string { return "/v1/records/" + url.PathEscape(recordID) }

// postAnnotation posts body to path and decodes the acknowledgement.
func (c *Client) postAnnotation(ctx context.Context, path string, query url.Values, body any, traceID, what string) (*writ.AnnotationAck, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("httpapi: encode %s: %w", what, err)
		}
		rd = bytes.NewReader(b)
	}
	var hreq *http.Request
	var err error
	if rd != nil {
		hreq, err = c.newRequest(ctx, http.MethodPost, path, query, rd)
	} else {
		hreq, err = c.newRequest(ctx, http.MethodPost, path, query, nil)
	}
	if err != nil {
		return nil, err
	}
	if rd != nil {
		hreq.Header.Set("Content-Type", mediaJSON)
	}
	setTraceparent(hreq, traceID)
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusCreated {
		return nil, resp.error()
	}
	if path[len(path)-len("/replay"):] == "/replay" {
		var rr recordedReplay
		if err := json.Unmarshal(resp.body, &rr); err != nil || rr.Record == nil {
			return nil, fmt.Errorf("httpapi: decode %s: %v", what, err)
		}
		return rr.Record, nil
	}
	var ack writ.AnnotationAck
	if err := json.Unmarshal(resp.body, &ack); err != nil {
		return nil, fmt.Errorf("httpapi: decode %s: %w", what, err)
	}
	return &ack, nil
}

// Retract posts r to /v1/records/{record_id}/retract.
func (c *Client) Retract(ctx context.Context, r *writ.RetractRequest) (*writ.AnnotationAck, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty retraction")
	}
	if err := requirePathIDs([2]string{"record_id", r.RecordID}); err != nil {
		return nil, err
	}
	body := *r
	body.RecordID = "" // the path names it
	return c.postAnnotation(ctx, recordPath(r.RecordID)+"/retract", nil, &body, r.TraceID, "retraction")
}

// Feedback posts r to /v1/records/{record_id}/feedback.
func (c *Client) Feedback(ctx context.Context, r *writ.FeedbackRequest) (*writ.AnnotationAck, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty feedback")
	}
	if err := requirePathIDs([2]string{"record_id", r.RecordID}); err != nil {
		return nil, err
	}
	body := *r
	body.RecordID = ""
	return c.postAnnotation(ctx, recordPath(r.RecordID)+"/feedback", nil, &body, r.TraceID, "feedback")
}

// RecordReplay asks the server to replay res's record and record the
// result (POST /v1/records/{record_id}/replay): the server replays it
// itself, so only res's tenant and record id are sent.
func (c *Client) RecordReplay(ctx context.Context, res *writ.ReplayResult) (*writ.AnnotationAck, error) {
	if res == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty replay result")
	}
	if err := requirePathIDs([2]string{"record_id", res.RecordID}); err != nil {
		return nil, err
	}
	return c.postAnnotation(ctx, recordPath(res.RecordID)+"/replay", tenantValues(res.TenantID), nil, "", "recorded replay")
}

// Links gets /v1/records/{record_id}/links.
func (c *Client) Links(ctx context.Context, tenantID, recordID string) (*writ.RecordLinks, error) {
	if err := requirePathIDs([2]string{"record_id", recordID}); err != nil {
		return nil, err
	}
	var l writ.RecordLinks
	if err := c.getJSON(ctx, recordPath(recordID)+"/links", tenantValues(tenantID), "record links", &l); err != nil {
		return nil, err
	}
	return &l, nil
}
