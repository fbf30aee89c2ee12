package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/writhq/writ"
)

// Client is a writ.Service, a writ.Ledger, writ.Workflows,
// writ.Approvals and writ.Replays backed by a writ server's HTTP API.
// Errors the server reports come back as *writ.Error with the server's
// code and details, so writ.ErrorCode works as it does in-process.
// Transport failures are returned wrapped, as plain errors
// (writ.ErrorCode reports them as EINTERNAL); context errors stay visible
// to errors.Is.
type Client struct {
	baseURL string
	hc      *http.Client
	header  http.Header
}

var (
	_ writ.Service       = (*Client)(nil)
	_ writ.Ledger        = (*Client)(nil)
	_ writ.Workflows     = (*Client)(nil)
	_ writ.Approvals     = (*Client)(nil)
	_ writ.Replays       = (*Client)(nil)
	_ writ.ShadowReports = (*Client)(nil)
)

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithHTTPClient makes the client send requests with hc instead of
// http.DefaultClient.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *Client) { c.hc = hc }
}

// WithHeader adds a header to every request. For an API key, use
// WithAPIKey.
func WithHeader(key, value string) ClientOption {
	return func(c *Client) { c.header.Add(key, value) }
}

// WithAPIKey makes the client authenticate every request with the API key
// token, sent as "Authorization: Bearer <token>". A server that
// authenticates callers confines the client to the key's tenant: a
// request may then leave its tenant id empty, and the key's is used.
func WithAPIKey(token string) ClientOption {
	return func(c *Client) { c.header.Set("Authorization", "Bearer "+token) }
}

// NewClient returns a client of the writ server at baseURL (for example
// "http://localhost:8080"; a path prefix is kept).
func NewClient(baseURL string, opts ...ClientOption) *Client {
	c := &Client{
		baseURL: strings.TrimRight(baseURL, "/"),
		hc:      http.DefaultClient,
		header:  http.Header{},
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// WhoAmI returns the identity of the client's API key (GET /v1/whoami):
// its tenant, key id, subject and roles, or Auth "disabled" when the
// server is in development mode.
func (c *Client) WhoAmI(ctx context.Context) (*Identity, error) {
	var id Identity
	if err := c.getJSON(ctx, "/v1/whoami", nil, "whoami", &id); err != nil {
		return nil, err
	}
	return &id, nil
}

// Check posts req to /v1/check. A valid req.TraceID is also sent as a
// traceparent header. When the server answers with a fail-closed receipt
// (503 with a receipt body), Check returns that receipt together with an
// EUNAVAILABLE error, as the in-process service does.
func (c *Client) Check(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode check request: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, "/v1/check", nil, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, req.TraceID)
	return c.doReceipt(hreq)
}

// doReceipt sends hreq and reads the receipt it is answered with: a
// fail-closed receipt (503 with a receipt body) comes back together with
// an EUNAVAILABLE error, as from the in-process service.
func (c *Client) doReceipt(hreq *http.Request) (*writ.Receipt, error) {
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.status == http.StatusOK:
		var rcpt writ.Receipt
		if err := json.Unmarshal(resp.body, &rcpt); err != nil {
			return nil, fmt.Errorf("httpapi: decode receipt: %w", err)
		}
		return &rcpt, nil
	case resp.status == http.StatusServiceUnavailable && resp.mediaType == mediaJSON:
		var rcpt writ.Receipt
		if err := json.Unmarshal(resp.body, &rcpt); err == nil && rcpt.ReceiptType != "" {
			return &rcpt, writ.Errorf(writ.EUNAVAILABLE, "writ could not commit the decision record; the receipt is fail-closed")
		}
	}
	return nil, resp.error()
}

// Record gets one record of the tenant. Raw holds the bytes exactly as the
// server sent them; Record is parsed from Raw.
func (c *Client) Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error) {
	query := url.Values{paramTenantID: {tenantID}}
	hreq, err := c.newRequest(ctx, http.MethodGet, "/v1/records/"+url.PathEscape(recordID), query, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, resp.error()
	}
	return parseStoredRecord(resp.body)
}

// Envelope returns the stored request envelope the tenant's record pins
// (GET /v1/records/{id}/envelope), exactly as stored: the redacted
// request the check decided, with its evidence as writ resolved it. It
// checks that the bytes hash to replayPacketID, the record's
// replay.replay_packet_id, when that is given.
func (c *Client) Envelope(ctx context.Context, tenantID, recordID, replayPacketID string) ([]byte, error) {
	hreq, err := c.newRequest(ctx, http.MethodGet, "/v1/records/"+url.PathEscape(recordID)+"/envelope", url.Values{paramTenantID: {tenantID}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, resp.error()
	}
	sum := sha256.Sum256(resp.body)
	if got := "sha256:" + hex.EncodeToString(sum[:]); replayPacketID != "" && got != replayPacketID {
		return nil, &writ.Error{Code: writ.EINTERNAL, Err: writ.ErrIntegrity,
			Message: fmt.Sprintf("the request envelope of record %s hashes to %s, the record pins %s", recordID, got, replayPacketID)}
	}
	return resp.body, nil
}

// Records lists the tenant's records matching q.
func (c *Client) Records(ctx context.Context, q writ.RecordQuery) (*writ.RecordPage, error) {
	hreq, err := c.newRequest(ctx, http.MethodGet, "/v1/records", recordQueryValues(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, resp.error()
	}
	var wire struct {
		Records    []json.RawMessage `json:"records"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := json.Unmarshal(resp.body, &wire); err != nil {
		return nil, fmt.Errorf("httpapi: decode record page: %w", err)
	}
	page := &writ.RecordPage{NextCursor: wire.NextCursor, Records: make([]writ.StoredRecord, 0, len(wire.Records))}
	for _, raw := range wire.Records {
		rec, err := parseStoredRecord(raw)
		if err != nil {
			return nil, err
		}
		page.Records = append(page.Records, *rec)
	}
	return page, nil
}

// Checkpoint gets the tenant's checkpoint of the given tree size, or the
// latest when size is 0.
func (c *Client) Checkpoint(ctx context.Context, tenantID string, size int64) (*writ.Checkpoint, error) {
	var cp writ.Checkpoint
	if err := c.getJSON(ctx, "/v1/ledger/checkpoint", treeSizeValues(tenantID, size), "checkpoint", &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// IssueCheckpoint asks the server to sign a checkpoint of the tenant's
// tree now (it returns the latest if that already covers every record).
func (c *Client) IssueCheckpoint(ctx context.Context, tenantID string) (*writ.Checkpoint, error) {
	hreq, err := c.newRequest(ctx, http.MethodPost, "/v1/ledger/checkpoint", url.Values{paramTenantID: {tenantID}}, nil)
	if err != nil {
		return nil, err
	}
	var cp writ.Checkpoint
	if err := c.doJSON(hreq, "checkpoint", &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// InclusionProof gets the proof that a record is in the tenant's tree at
// treeSize (the latest checkpoint when treeSize is 0).
func (c *Client) InclusionProof(ctx context.Context, tenantID, recordID string, treeSize int64) (*writ.InclusionProof, error) {
	var p writ.InclusionProof
	if err := c.getJSON(ctx, "/v1/records/"+url.PathEscape(recordID)+"/proof", treeSizeValues(tenantID, treeSize), "inclusion proof", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ConsistencyProof gets the proof that the tenant's checkpoint of oldSize
// is consistent with that of newSize (the latest when newSize is 0).
func (c *Client) ConsistencyProof(ctx context.Context, tenantID string, oldSize, newSize int64) (*writ.ConsistencyProof, error) {
	var p writ.ConsistencyProof
	if err := c.getJSON(ctx, "/v1/ledger/consistency", consistencyValues(tenantID, oldSize, newSize), "consistency proof", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// StartRun posts req to /v1/runs and returns the run the server started.
func (c *Client) StartRun(ctx context.Context, req *writ.StartRunRequest) (*writ.Run, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode start run request: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, "/v1/runs", nil, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	resp, err := c.do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusCreated {
		return nil, resp.error()
	}
	var run writ.Run
	if err := json.Unmarshal(resp.body, &run); err != nil {
		return nil, fmt.Errorf("httpapi: decode run: %w", err)
	}
	return &run, nil
}

// ShadowReport gets the report of the tenant's shadow decisions against
// what was enforced (GET /v1/shadow/report).
func (c *Client) ShadowReport(ctx context.Context, q writ.ShadowQuery) (*writ.ShadowReport, error) {
	var rep writ.ShadowReport
	if err := c.getJSON(ctx, "/v1/shadow/report", shadowQueryValues(q), "shadow report", &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Runs lists a page of the tenant's runs, without their histories.
func (c *Client) Runs(ctx context.Context, q writ.RunQuery) (*writ.RunPage, error) {
	var page writ.RunPage
	if err := c.getJSON(ctx, "/v1/runs", runQueryValues(q), "run page", &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// SubmitAttempt posts an attempt at req.StepID of run req.RunID and
// returns the step's verdict. The tenant goes in the query and the run and
// the step in the path; a valid req.TraceID is also sent as a traceparent
// header.
func (c *Client) SubmitAttempt(ctx context.Context, req *writ.AttemptRequest) (*writ.StepVerdict, error) {
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty attempt")
	}
	if err := requirePathIDs([2]string{"run_id", req.RunID}, [2]string{"step_id", req.StepID}); err != nil {
		return nil, err
	}
	body, err := json.Marshal(attemptBodyOf(req))
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode attempt: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, attemptPath(req.RunID, req.StepID), url.Values{paramTenantID: {req.TenantID}}, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, req.TraceID)
	var v writ.StepVerdict
	if err := c.doJSON(hreq, "step verdict", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Run gets one run of the tenant, with its history.
func (c *Client) Run(ctx context.Context, tenantID, runID string) (*writ.Run, error) {
	if err := requirePathIDs([2]string{"run_id", runID}); err != nil {
		return nil, err
	}
	var run writ.Run
	if err := c.getJSON(ctx, runPath(runID), url.Values{paramTenantID: {tenantID}}, "run", &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Approvals lists the tenant's approval requests matching q, oldest
// first. CreatedBefore is sent as an instant (created_before), so the
// server's clock does not move it.
func (c *Client) Approvals(ctx context.Context, q writ.ApprovalQuery) (*writ.ApprovalPage, error) {
	var page writ.ApprovalPage
	if err := c.getJSON(ctx, "/v1/approvals", approvalQueryValues(q), "approval page", &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Approval gets one approval request of the tenant, with its events.
func (c *Client) Approval(ctx context.Context, tenantID, approvalID string) (*writ.ApprovalRequest, error) {
	if err := requirePathIDs([2]string{"approval_id", approvalID}); err != nil {
		return nil, err
	}
	var a writ.ApprovalRequest
	if err := c.getJSON(ctx, approvalPath(approvalID), url.Values{paramTenantID: {tenantID}}, "approval request", &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// WithdrawApproval withdraws a pending approval request its requester no
// longer needs, and returns the request as it now stands (state
// withdrawn). The approval id goes in the path, the rest as the body; a
// valid req.TraceID is also sent as a traceparent header.
func (c *Client) WithdrawApproval(ctx context.Context, req *writ.WithdrawApprovalRequest) (*writ.ApprovalRequest, error) {
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty approval withdrawal")
	}
	if err := requirePathIDs([2]string{"approval_id", req.ApprovalID}); err != nil {
		return nil, err
	}
	body, err := json.Marshal(withdrawBody{TenantID: req.TenantID, Reason: req.Reason, TraceID: req.TraceID})
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode approval withdrawal: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, withdrawPath(req.ApprovalID), nil, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, req.TraceID)
	var a writ.ApprovalRequest
	if err := c.doJSON(hreq, "approval request", &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// DecideApproval approves or denies an approval request, as req.Decision
// says, and returns the request as it now stands. The approval id and the
// decision go in the path, the rest as the body; a valid req.TraceID is
// also sent as a traceparent header.
func (c *Client) DecideApproval(ctx context.Context, req *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error) {
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty approval decision")
	}
	if err := requirePathIDs([2]string{"approval_id", req.ApprovalID}); err != nil {
		return nil, err
	}
	if req.Decision != writ.ApprovalApproved && req.Decision != writ.ApprovalDenied {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("decision must be %s or %s, not %q", writ.ApprovalApproved, writ.ApprovalDenied, req.Decision),
			Details: []writ.Detail{{Field: "decision", Message: "must be approved or denied"}}}
	}
	body, err := json.Marshal(decideBodyOf(req))
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode approval decision: %w", err)
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, decidePath(req.ApprovalID, req.Decision), nil, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mediaJSON)
	setTraceparent(hreq, req.TraceID)
	var a writ.ApprovalRequest
	if err := c.doJSON(hreq, "approval request", &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Replay asks the server to replay one record of the tenant on its
// pinned inputs. What the replay found (replay_equal, a diff, or an
// error deciding again) is the result's Status, not an error; a record
// the tenant does not have is ENOTFOUND.
func (c *Client) Replay(ctx context.Context, tenantID, recordID string) (*writ.ReplayResult, error) {
	if err := requirePathIDs([2]string{"record_id", recordID}); err != nil {
		return nil, err
	}
	var res writ.ReplayResult
	if err := c.getJSON(ctx, replayPath(recordID), url.Values{paramTenantID: {tenantID}}, "replay result", &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ReplayTrace asks the server to replay every record of the tenant with
// the trace id, and returns the results in chain order. A trace without
// records is ENOTFOUND; a trace id that is not a W3C trace id is EINVALID.
func (c *Client) ReplayTrace(ctx context.Context, tenantID, traceID string) ([]*writ.ReplayResult, error) {
	var body replayResults
	if err := c.getJSON(ctx, "/v1/replay", replayTraceValues(tenantID, traceID), "replay results", &body); err != nil {
		return nil, err
	}
	return body.Results, nil
}

// requirePathIDs checks that the ids a path is built from are set, as the
// engine would: an empty path segment cannot be sent. ids are pairs of a
// field name and its value.
func requirePathIDs(ids ...[2]string) error {
	var names []string
	var details []writ.Detail
	for _, id := range ids {
		if id[1] == "" {
			names = append(names, id[0])
			details = append(details, writ.Detail{Field: id[0], Message: "is required"})
		}
	}
	if len(details) == 0 {
		return nil
	}
	verb := " is required"
	if len(names) > 1 {
		verb = " are required"
	}
	return &writ.Error{Code: writ.EINVALID, Message: strings.Join(names, " and ") + verb, Details: details}
}

// setTraceparent sends traceID, when valid, as the request's traceparent.
func setTraceparent(hreq *http.Request, traceID string) {
	if !writ.ValidTraceID(traceID) {
		return
	}
	if tp, err := formatTraceparent(traceID, sampledFlag, rand.Reader); err == nil {
		hreq.Header.Set("traceparent", tp)
	}
}

// getJSON gets path with query and decodes a 200 answer into v; what
// names v in errors.
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, what string, v any) error {
	hreq, err := c.newRequest(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return err
	}
	return c.doJSON(hreq, what, v)
}

// doJSON sends hreq and decodes a 200 answer into v; any other answer is
// its error.
func (c *Client) doJSON(hreq *http.Request, what string, v any) error {
	resp, err := c.do(hreq)
	if err != nil {
		return err
	}
	if resp.status != http.StatusOK {
		return resp.error()
	}
	if err := json.Unmarshal(resp.body, v); err != nil {
		return fmt.Errorf("httpapi: decode %s: %w", what, err)
	}
	return nil
}

// parseStoredRecord keeps raw and parses the record from it.
func parseStoredRecord(raw []byte) (*writ.StoredRecord, error) {
	rec := &writ.StoredRecord{Raw: json.RawMessage(raw)}
	if err := json.Unmarshal(raw, &rec.Record); err != nil {
		return nil, fmt.Errorf("httpapi: decode record: %w", err)
	}
	return rec, nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %s %s: %w", method, path, err)
	}
	for k, vs := range c.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Accept", mediaJSON+", "+mediaProblem)
	return req, nil
}

// response is a server answer read in full.
type response struct {
	status    int
	mediaType string
	body      []byte
}

func (c *Client) do(req *http.Request) (*response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %s %s: read response: %w", req.Method, req.URL.Path, err)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return &response{status: resp.StatusCode, mediaType: mt, body: body}, nil
}

// error turns a non-success answer into a *writ.Error: the problem's code,
// detail and errors when the server sent a problem, else a code derived
// from the status.
func (r *response) error() error {
	var p problem
	if r.mediaType == mediaProblem && json.Unmarshal(r.body, &p) == nil && p.Code != "" {
		return &writ.Error{Code: p.Code, Message: p.Detail, Details: p.Errors}
	}
	return writ.Errorf(codeOf(r.status), "unexpected answer from writ server: HTTP %d", r.status)
}
