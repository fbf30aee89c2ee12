package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// testLog is a concurrency-safe log buffer.
type testLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newTestServer returns a server of svc that logs at debug level to the
// returned log.
func newTestServer(svc writ.Service, cfg Config) (*Server, *testLog) {
	log := &testLog{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.Metrics == nil {
		cfg.Metrics = testMetrics
	}
	if f, ok := svc.(*fakeService); ok && cfg.Latency == nil {
		cfg.Latency = f.Latency
	}
	return NewServer(svc, cfg), log
}

// testMetrics stands in for the Prometheus handler of package telemetry.
var testMetrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte("# TYPE writ_checks_total counter\nwrit_checks_total 0\n"))
})

// newRequest returns a request; a non-empty body is declared as JSON.
func newRequest(method, target, body string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// readProblem checks that rec is a problem with the given status and code
// and returns it.
func readProblem(t *testing.T, rec *httptest.ResponseRecorder, req *http.Request, status int, code string) problem {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("%s %s: status = %d, want %d; body: %s", req.Method, req.URL, rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != mediaProblem {
		t.Fatalf("%s %s: Content-Type = %q, want %q", req.Method, req.URL, ct, mediaProblem)
	}
	var p problem
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s %s: decode problem: %v", req.Method, req.URL, err)
	}
	want := problem{
		Type: problemTypePrefix + code, Title: problemKinds[code].title, Status: status,
		Detail: p.Detail, Instance: req.URL.Path, Code: code, Errors: p.Errors,
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("%s %s: problem = %+v, want %+v", req.Method, req.URL, p, want)
	}
	if p.Detail == "" {
		t.Errorf("%s %s: problem has no detail", req.Method, req.URL)
	}
	return p
}

// hasDetail reports whether p names field with a message containing msg.
func hasDetail(p problem, field, msg string) bool {
	for _, d := range p.Errors {
		if d.Field == field && strings.Contains(d.Message, msg) {
			return true
		}
	}
	return false
}

func TestCheckBadInput(t *testing.T) {
	const limit = 512
	big := `{"tenant_id":"t","intent_ref":"` + strings.Repeat("x", limit) + `"}`
	tests := []struct {
		name        string
		contentType string // "-" leaves it unset
		body        string
		unknownLen  bool // send without Content-Length
		target      string
		status      int
		code        string
		field       string // a detail must name this field (when set)
		msg         string // ... with this message (or the detail says it, when field is empty)
	}{
		{name: "malformed JSON", body: `{"tenant_id": "t",}`, status: 400, code: writ.EINVALID, msg: "malformed JSON at line 1, column 19"},
		{name: "malformed JSON on line 2", body: "{\"tenant_id\": \"t\",\n \"x\" 1}", status: 400, code: writ.EINVALID, msg: "line 2, column 6"},
		{name: "truncated", body: `{"tenant_id": "t"`, status: 400, code: writ.EINVALID, msg: "ends in the middle of a value"},
		{name: "empty body", body: "", contentType: mediaJSON, status: 400, code: writ.EINVALID, msg: "request body is empty"},
		{name: "blank body", body: " \n\t", status: 400, code: writ.EINVALID, msg: "request body is empty"},
		{name: "trailing value", body: `{"tenant_id":"t"} {"tenant_id":"u"}`, status: 400, code: writ.EINVALID, msg: "single JSON value; unexpected data after it at line 1, column 19"},
		{name: "trailing garbage", body: `{"tenant_id":"t"}x`, status: 400, code: writ.EINVALID, msg: "single JSON value"},
		{name: "unknown top-level field", body: `{"tenant_id":"t","foo":1}`, status: 400, code: writ.EINVALID, field: "foo", msg: "unknown field"},
		{name: "field name in another case", body: `{"Tenant_ID":"t"}`, status: 400, code: writ.EINVALID, field: "Tenant_ID", msg: "unknown field"},
		{name: "unknown nested field", body: `{"tenant_id":"t","actor":{"type":"AGENT","id":"a","role":"x"}}`, status: 400, code: writ.EINVALID, field: "actor.role", msg: "unknown field"},
		{name: "unknown field in array element", body: `{"tenant_id":"t","evidence":[{"kind":"k","id":"1"},{"kind":"k","id":"2","bogus":{"a":[1]}}]}`, status: 400, code: writ.EINVALID, field: "evidence[1].bogus", msg: "unknown field"},
		{name: "duplicate field", body: `{"tenant_id":"a","tenant_id":"b"}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "duplicate field"},
		{name: "duplicate member in arguments", body: `{"tenant_id":"a","arguments":{"x":{"y":1,"y":2}}}`, status: 400, code: writ.EINVALID, field: "arguments.x.y", msg: "duplicate field"},
		{name: "tenant_id a number", body: `{"tenant_id":42}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "must be a string, not a number"},
		{name: "subject_ids a string", body: `{"tenant_id":"t","subject_ids":"customer:1"}`, status: 400, code: writ.EINVALID, field: "subject_ids", msg: "must be an array, not a string"},
		{name: "subject_ids element a number", body: `{"tenant_id":"t","subject_ids":["a",7]}`, status: 400, code: writ.EINVALID, field: "subject_ids[1]", msg: "must be a string, not a number"},
		{name: "actor an array", body: `{"tenant_id":"t","actor":[{"type":"AGENT"}]}`, status: 400, code: writ.EINVALID, field: "actor", msg: "must be an object, not an array"},
		{name: "arguments a string", body: `{"tenant_id":"t","arguments":"x"}`, status: 400, code: writ.EINVALID, field: "arguments", msg: "must be an object, not a string"},
		{name: "tokens a fraction", body: `{"tenant_id":"t","usage":{"tokens":1.5}}`, status: 400, code: writ.EINVALID, field: "usage.tokens", msg: "must be an integer"},
		{name: "scorecard value a string", body: `{"tenant_id":"t","scorecard":{"policy":"high"}}`, status: 400, code: writ.EINVALID, field: "scorecard.policy", msg: "must be a number, not a string"},
		{name: "observed_at not RFC 3339", body: `{"tenant_id":"t","evidence":[{"kind":"k","id":"1","observed_at":"yesterday"}]}`, status: 400, code: writ.EINVALID, field: "evidence[0].observed_at", msg: "RFC 3339"},
		{name: "body an array", body: `[{"tenant_id":"t"}]`, status: 400, code: writ.EINVALID, msg: "must be a JSON object, not an array"},
		{name: "body null", body: `null`, status: 400, code: writ.EINVALID, msg: "must be a JSON object, not null"},
		{name: "missing tenant_id", body: `{"actor":{"type":"AGENT","id":"a"}}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "is required"},
		{name: "empty tenant_id", body: `{"tenant_id":""}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "is required"},
		{name: "query parameter", body: `{"tenant_id":"t"}`, target: "/v1/check?tenant_id=t", status: 400, code: writ.EINVALID, field: "tenant_id", msg: "unknown query parameter"},
		{name: "oversized body", body: big, status: 413, code: writ.ETOOLARGE, msg: "exceeds 512 bytes"},
		{name: "oversized body without length", body: big, unknownLen: true, status: 413, code: writ.ETOOLARGE, msg: "exceeds 512 bytes"},
		{name: "text/plain", contentType: "text/plain", body: `{"tenant_id":"t"}`, status: 415, code: writ.EINVALID, msg: "application/json"},
		{name: "no content type", contentType: "-", body: `{"tenant_id":"t"}`, status: 415, code: writ.EINVALID, msg: "application/json"},
		{name: "not utf-8", contentType: "application/json; charset=latin1", body: `{"tenant_id":"t"}`, status: 415, code: writ.EINVALID, msg: "application/json"},
		{name: "form", contentType: "application/x-www-form-urlencoded", body: `tenant_id=t`, status: 415, code: writ.EINVALID, msg: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeService{receipt: fullReceipt()}
			s, log := newTestServer(fake, Config{MaxBodyBytes: limit})
			target := tt.target
			if target == "" {
				target = "/v1/check"
			}
			req := newRequest(http.MethodPost, target, tt.body)
			switch tt.contentType {
			case "":
			case "-":
				req.Header.Del("Content-Type")
			default:
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.unknownLen {
				req.ContentLength = -1
			}
			rec := serve(s, req)
			p := readProblem(t, rec, req, tt.status, tt.code)
			switch {
			case tt.field != "" && !hasDetail(p, tt.field, tt.msg):
				t.Errorf("POST %s %s: errors = %+v, want one on %q saying %q", target, tt.body, p.Errors, tt.field, tt.msg)
			case tt.field == "" && !strings.Contains(p.Detail, tt.msg) && !hasDetail(p, "", tt.msg):
				t.Errorf("POST %s %s: detail = %q, errors = %+v, want %q", target, tt.body, p.Detail, p.Errors, tt.msg)
			}
			if n := fake.calls(); n != 0 {
				t.Errorf("POST %s %s: service called %d times, want 0", target, tt.body, n)
			}
			if tt.body != "" && len(tt.body) < 100 && strings.Contains(log.String(), tt.body) {
				t.Errorf("POST %s: the log contains the request body:\n%s", target, log)
			}
		})
	}
}

func TestCheckAcceptsFullRequest(t *testing.T) {
	want := fullCheckRequest()
	body, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeService{receipt: fullReceipt()}
	s, _ := newTestServer(fake, Config{})
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		req := newRequest(http.MethodPost, "/v1/check", string(body))
		req.Header.Set("Content-Type", ct)
		rec := serve(s, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("POST /v1/check (Content-Type %s) = %d, want 200; body: %s", ct, rec.Code, rec.Body)
		}
		if got := rec.Header().Get("Content-Type"); got != mediaJSON {
			t.Errorf("POST /v1/check: Content-Type = %q, want %q", got, mediaJSON)
		}
		if got := fake.lastCheck(); !reflect.DeepEqual(got, want) {
			t.Errorf("POST /v1/check: service got\n%+v\nwant\n%+v", got, want)
		}
		var got writ.Receipt
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, fake.receipt) {
			t.Errorf("POST /v1/check: receipt = %+v, want %+v", got, fake.receipt)
		}
	}
}

func TestCheckReceiptListsAreArrays(t *testing.T) {
	rcpt := &writ.Receipt{
		ReceiptType: writ.ReceiptType, DecisionID: "d", Outcome: writ.OutcomeAllow, ActionClass: "memory_write", SafeToExecute: true,
		Disposition: writ.Disposition{Mode: writ.ModeContinueDownstream, DownstreamAllowed: true},
		Routing:     writ.Routing{Direction: writ.DirectionDownstream},
		Metadata:    writ.Metadata{RecordID: "r"},
	}
	s, _ := newTestServer(&fakeService{receipt: rcpt}, Config{})
	rec := serve(s, newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /v1/check = %d; body: %s", rec.Code, rec.Body)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	resume := got["resume_contract"].(map[string]any)
	lists := map[string]any{
		"reasons": got["reasons"], "safe_next_steps": got["safe_next_steps"], "viewer_guidance": got["viewer_guidance"],
		"what_would_change_this": got["what_would_change_this"], "what_would_change_this_conditions": got["what_would_change_this_conditions"],
		"resume_contract.resume_when": resume["resume_when"], "resume_contract.resume_when_conditions": resume["resume_when_conditions"],
	}
	for name, v := range lists {
		if a, ok := v.([]any); !ok || len(a) != 0 {
			t.Errorf("receipt %s = %#v, want []", name, v)
		}
	}
	if rcpt.Reasons != nil {
		t.Errorf("the server modified the service's receipt: reasons = %#v", rcpt.Reasons)
	}
}

func TestTraceparent(t *testing.T) {
	const (
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID = "00f067aa0ba902b7"
		bodyID   = "11111111111111111111111111111111"
		rcptID   = "22222222222222222222222222222222"
	)
	tests := []struct {
		name        string
		headers     []string
		wantReqID   string // the trace id the service sees
		wantRespTP  string // the response traceparent
		receiptHasT bool
	}{
		{name: "valid sampled", headers: []string{"00-" + traceID + "-" + parentID + "-01"}, wantReqID: traceID, wantRespTP: "00-" + traceID + "-0102030405060708-01"},
		{name: "valid not sampled", headers: []string{"00-" + traceID + "-" + parentID + "-00"}, wantReqID: traceID, wantRespTP: "00-" + traceID + "-0102030405060708-00"},
		{name: "future version with more fields", headers: []string{"cc-" + traceID + "-" + parentID + "-09-what-the-future-holds"}, wantReqID: traceID, wantRespTP: "00-" + traceID + "-0102030405060708-01"},
		{name: "absent: the receipt's trace id", receiptHasT: true, wantReqID: bodyID, wantRespTP: "00-" + rcptID + "-0102030405060708-01"},
		{name: "absent: the body's trace id", wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "uppercase", headers: []string{"00-" + strings.ToUpper(traceID) + "-" + parentID + "-01"}, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "zero trace id", headers: []string{"00-00000000000000000000000000000000-" + parentID + "-01"}, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "zero parent id", headers: []string{"00-" + traceID + "-0000000000000000-01"}, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "version ff", headers: []string{"ff-" + traceID + "-" + parentID + "-01"}, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "version 00 with extra field", headers: []string{"00-" + traceID + "-" + parentID + "-01-00"}, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "two headers", headers: []string{"00-" + traceID + "-" + parentID + "-01", "00-" + traceID + "-" + parentID + "-01"}, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "garbage", headers: []string{"hello"}, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcpt := fullReceipt()
			rcpt.Metadata.TraceID = ""
			if tt.receiptHasT {
				rcpt.Metadata.TraceID = rcptID
			}
			fake := &fakeService{receipt: rcpt}
			s, _ := newTestServer(fake, Config{Rand: bytes.NewReader([]byte{1, 2, 3, 4, 5, 6, 7, 8})})
			req := newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t","trace_id":"`+bodyID+`"}`)
			for _, h := range tt.headers {
				req.Header.Add("traceparent", h)
			}
			rec := serve(s, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("POST /v1/check traceparent %q = %d; body %s", tt.headers, rec.Code, rec.Body)
			}
			if got := fake.lastCheck().TraceID; got != tt.wantReqID {
				t.Errorf("POST /v1/check traceparent %q: service saw trace id %q, want %q", tt.headers, got, tt.wantReqID)
			}
			if got := rec.Header().Get("traceparent"); got != tt.wantRespTP {
				t.Errorf("POST /v1/check traceparent %q: response traceparent %q, want %q", tt.headers, got, tt.wantRespTP)
			}
		})
	}
}

func TestTraceparentOnErrors(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	s, _ := newTestServer(&fakeService{}, Config{Rand: bytes.NewReader([]byte{9, 9, 9, 9, 9, 9, 9, 9})})
	req := newRequest(http.MethodPost, "/v1/check", `{"tenant_id":1}`)
	req.Header.Set("traceparent", tp)
	rec := serve(s, req)
	readProblem(t, rec, req, http.StatusBadRequest, writ.EINVALID)
	if got, want := rec.Header().Get("traceparent"), "00-4bf92f3577b34da6a3ce929d0e0e4736-0909090909090909-01"; got != want {
		t.Errorf("POST /v1/check (bad body) traceparent = %q, want %q", got, want)
	}
}

func TestCheckFailClosed(t *testing.T) {
	rcpt := fullReceipt()
	rcpt.SafeToExecute = false
	rcpt.Disposition.DownstreamAllowed = false
	rcpt.Metadata.FailClosed = true
	fake := &fakeService{receipt: rcpt, err: writ.Errorf(writ.EUNAVAILABLE, "ledger: disk full")}
	s, log := newTestServer(fake, Config{})
	rec := serve(s, newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("POST /v1/check (fail-closed) = %d, want 503; body %s", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Content-Type"); got != mediaJSON {
		t.Errorf("POST /v1/check (fail-closed): Content-Type = %q, want %q", got, mediaJSON)
	}
	if got := rec.Header().Get("Retry-After"); got != "1" {
		t.Errorf("POST /v1/check (fail-closed): Retry-After = %q, want 1", got)
	}
	var got writ.Receipt
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("POST /v1/check (fail-closed): body is not a receipt: %v", err)
	}
	if !reflect.DeepEqual(&got, rcpt) {
		t.Errorf("POST /v1/check (fail-closed): receipt = %+v, want %+v", got, rcpt)
	}
	if !strings.Contains(log.String(), "disk full") {
		t.Errorf("the fail-closed error was not logged:\n%s", log)
	}
}

func TestErrorMapping(t *testing.T) {
	details := []writ.Detail{{Field: "evidence[0].kind", Message: "unknown evidence kind"}, {File: "specs/refund.yaml", Line: 12, Message: "bad rule"}}
	tests := []struct {
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{&writ.Error{Code: writ.EINVALID, Message: "the request breaks the contract", Details: details}, 400, writ.EINVALID, ""},
		{&writ.Error{Code: writ.ENOTFOUND, Message: "no decision spec support.refund", Details: details}, 404, writ.ENOTFOUND, ""},
		{&writ.Error{Code: writ.ECONFLICT, Message: "idempotency key reused with other arguments", Details: details}, 409, writ.ECONFLICT, ""},
		{&writ.Error{Code: writ.ETOOLARGE, Message: "too many evidence items", Details: details}, 413, writ.ETOOLARGE, ""},
		{&writ.Error{Code: writ.EUNAVAILABLE, Message: "store unavailable", Details: details}, 503, writ.EUNAVAILABLE, "1"},
		{fmtWrap(&writ.Error{Code: writ.ECONFLICT, Message: "wrapped conflict", Details: details}), 409, writ.ECONFLICT, ""},
		{&writ.Error{Code: writ.EFORBIDDEN, Message: "maria asked for approval apr_1 and may not approve it", Details: details}, 403, writ.EFORBIDDEN, ""},
		{&writ.Error{Code: writ.EUNAUTHENTICATED, Message: "the API key is not valid", Details: details}, 401, writ.EUNAUTHENTICATED, ""},
	}
	for _, tt := range tests {
		fake := &fakeService{err: tt.err}
		s, _ := newTestServer(fake, Config{Ledger: fake, Workflows: fake, Approvals: fake, Replays: fake})
		for _, req := range slices.Concat([]*http.Request{
			newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`),
			newRequest(http.MethodGet, "/v1/records/r1?tenant_id=t", ""),
			newRequest(http.MethodGet, "/v1/records?tenant_id=t", ""),
		}, ledgerRequests(), runRequests(), approvalRequests(), replayRequests()) {
			rec := serve(s, req)
			p := readProblem(t, rec, req, tt.status, tt.code)
			if p.Detail != writ.ErrorMessage(tt.err) || !reflect.DeepEqual(p.Errors, details) {
				t.Errorf("%s %s with service error %v: problem detail %q errors %+v, want %q %+v",
					req.Method, req.URL, tt.err, p.Detail, p.Errors, writ.ErrorMessage(tt.err), details)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("%s %s with service error %v: Retry-After = %q, want %q", req.Method, req.URL, tt.err, got, tt.retryAfter)
			}
		}
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "context: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func fmtWrap(err error) error { return wrapped{err} }

func TestInternalErrorsAreNotShown(t *testing.T) {
	const secret = "password=hunter2"
	tests := []struct {
		name string
		svc  *fakeService
	}{
		{"plain error", &fakeService{err: errors.New("dial tcp: " + secret)}},
		{"EINTERNAL writ error", &fakeService{err: &writ.Error{Code: writ.EINTERNAL, Message: secret, Details: []writ.Detail{{Message: secret}}}}},
		{"unknown code", &fakeService{err: &writ.Error{Code: "exploded", Message: secret}}},
		{"panic", &fakeService{panicWith: secret}},
		{"neither result nor error", &fakeService{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, log := newTestServer(tt.svc, Config{Ledger: tt.svc, Workflows: tt.svc, Approvals: tt.svc, Replays: tt.svc})
			for _, req := range slices.Concat([]*http.Request{
				newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`),
				newRequest(http.MethodGet, "/v1/records/r1?tenant_id=t", ""),
				newRequest(http.MethodGet, "/v1/records?tenant_id=t", ""),
			}, ledgerRequests(), runRequests(), approvalRequests(), replayRequests()) {
				rec := serve(s, req)
				body := rec.Body.String()
				p := readProblem(t, rec, req, http.StatusInternalServerError, writ.EINTERNAL)
				if p.Detail != "internal error" || p.Errors != nil {
					t.Errorf("%s %s: problem detail %q errors %+v, want only \"internal error\"", req.Method, req.URL, p.Detail, p.Errors)
				}
				if strings.Contains(body, "hunter2") {
					t.Errorf("%s %s: response leaks the internal error: %s", req.Method, req.URL, body)
				}
			}
			if tt.name != "neither result nor error" && !strings.Contains(log.String(), "hunter2") {
				t.Errorf("the internal error was not logged:\n%s", log)
			}
		})
	}
}

func TestRoutingProblems(t *testing.T) {
	tests := []struct {
		method, target string
		status         int
		code           string
		allow          string
	}{
		{http.MethodGet, "/v1/check", 405, writ.EINVALID, "POST"},
		{http.MethodPut, "/v1/check", 405, writ.EINVALID, "POST"},
		{http.MethodPost, "/healthz", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodDelete, "/v1/records/r1", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodPost, "/v1/records", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodGet, "/", 404, writ.ENOTFOUND, ""},
		{http.MethodGet, "/v1/nope", 404, writ.ENOTFOUND, ""},
		{http.MethodPost, "/v1/checks", 404, writ.ENOTFOUND, ""},
		{http.MethodGet, "/v1/records/r1/proofs", 404, writ.ENOTFOUND, ""},
		{http.MethodGet, "/v1/ledger", 404, writ.ENOTFOUND, ""},
		{http.MethodPut, "/v1/ledger/checkpoint", 405, writ.EINVALID, "GET, HEAD, POST"},
		{http.MethodDelete, "/v1/ledger/checkpoint", 405, writ.EINVALID, "GET, HEAD, POST"},
		{http.MethodPost, "/v1/ledger/consistency", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodPost, "/v1/records/r1/proof", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodDelete, "/v1/runs", 405, writ.EINVALID, "GET, HEAD, POST"},
		{http.MethodPost, "/v1/runs/run_1", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodDelete, "/v1/runs/run_1", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodGet, "/v1/runs/run_1/steps/s/attempts", 405, writ.EINVALID, "POST"},
		{http.MethodGet, "/v1/runs/", 404, writ.ENOTFOUND, ""},
		{http.MethodPost, "/v1/runs/run_1/steps/s", 404, writ.ENOTFOUND, ""},
		{http.MethodPost, "/v1/runs/run_1/attempts", 404, writ.ENOTFOUND, ""},
		{http.MethodPost, "/v1/approvals", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodDelete, "/v1/approvals/apr_1", 405, writ.EINVALID, "GET, HEAD"},
		{http.MethodGet, "/v1/approvals/apr_1/approve", 405, writ.EINVALID, "POST"},
		{http.MethodPut, "/v1/approvals/apr_1/deny", 405, writ.EINVALID, "POST"},
		{http.MethodPost, "/v1/approvals/apr_1/decide", 404, writ.ENOTFOUND, ""},
	}
	for _, tt := range tests {
		fake := fullLedger()
		s, _ := newTestServer(fake, Config{Ledger: fake, Workflows: fake, Approvals: fake})
		req := newRequest(tt.method, tt.target, "")
		rec := serve(s, req)
		readProblem(t, rec, req, tt.status, tt.code)
		if got := rec.Header().Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.target, got, tt.allow)
		}
		if fake.calls() != 0 {
			t.Errorf("%s %s: service was called", tt.method, tt.target)
		}
	}
}

func TestRecordsBadQuery(t *testing.T) {
	tests := []struct {
		target string
		field  string
		msg    string
	}{
		{"/v1/records", "tenant_id", "is required"},
		{"/v1/records?tenant_id=", "tenant_id", "is required"},
		{"/v1/records?tenant_id=t&from=yesterday", "from", "RFC 3339"},
		{"/v1/records?tenant_id=t&to=2026-13-01T00:00:00Z", "to", "RFC 3339"},
		{"/v1/records?tenant_id=t&from=2026-05-02T00:00:00Z&to=2026-05-01T00:00:00Z", "to", "must be after from"},
		{"/v1/records?tenant_id=t&limit=0", "limit", "from 1 to 1000"},
		{"/v1/records?tenant_id=t&limit=5000", "limit", "from 1 to 1000"},
		{"/v1/records?tenant_id=t&limit=ten", "limit", "from 1 to 1000"},
		{"/v1/records?tenant_id=t&limit=-1", "limit", "from 1 to 1000"},
		{"/v1/records?tenant_id=t&foo=1", "foo", "unknown query parameter"},
		{"/v1/records?tenant_id=t&TENANT_ID=u", "TENANT_ID", "unknown query parameter"},
		{"/v1/records?tenant_id=t&status=DONE", "status", "must be one of"},
		{"/v1/records?tenant_id=t&outcome=permit", "outcome", "must be one of"},
		{"/v1/records?tenant_id=t&outcome=ALLOW", "outcome", "must be one of"},
		{"/v1/records?tenant_id=t&approval_mode_effective=write", "approval_mode_effective", "must be one of read_only"},
		{"/v1/records?tenant_id=t&scorecard=passed", "scorecard", "must be failed"},
		{"/v1/records?tenant_id=t&scorecard=FAILED", "scorecard", "must be failed"},
		{"/v1/records?tenant_id=t&approver=a&approver=b", "approver", "at most once"},
		{"/v1/records?tenant_id=t&tenant_id=u", "tenant_id", "at most once"},
		{"/v1/records?tenant_id=t&limit=%zz", "", "malformed query string"},
		{"/v1/records/r1", "tenant_id", "is required"},
		{"/v1/records/r1?tenant_id=t&limit=3", "limit", "unknown query parameter"},
	}
	for _, tt := range tests {
		fake := &fakeService{page: &writ.RecordPage{}, record: storedRecord(fullRecord())}
		s, _ := newTestServer(fake, Config{})
		req := newRequest(http.MethodGet, tt.target, "")
		p := readProblem(t, serve(s, req), req, http.StatusBadRequest, writ.EINVALID)
		switch {
		case tt.field != "" && !hasDetail(p, tt.field, tt.msg):
			t.Errorf("GET %s: errors = %+v, want one on %q saying %q", tt.target, p.Errors, tt.field, tt.msg)
		case tt.field != "" && !strings.Contains(p.Detail, tt.field):
			t.Errorf("GET %s: detail %q does not name the parameter %q", tt.target, p.Detail, tt.field)
		case tt.field == "" && !strings.Contains(p.Detail, tt.msg):
			t.Errorf("GET %s: detail = %q, want %q", tt.target, p.Detail, tt.msg)
		}
		if fake.calls() != 0 {
			t.Errorf("GET %s: service was called", tt.target)
		}
	}
}

func TestRecordServesRawBytes(t *testing.T) {
	stored := storedRecord(fullRecord())
	fake := &fakeService{record: stored}
	s, _ := newTestServer(fake, Config{})
	req := newRequest(http.MethodGet, "/v1/records/rec%2F1%20x?tenant_id=acme", "")
	rec := serve(s, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d; body %s", req.URL, rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Content-Type"); got != mediaJSON {
		t.Errorf("GET %s: Content-Type = %q, want %q", req.URL, got, mediaJSON)
	}
	if !bytes.Equal(rec.Body.Bytes(), stored.Raw) {
		t.Errorf("GET %s: body\n%s\nwant the raw bytes\n%s", req.URL, rec.Body, stored.Raw)
	}
	if got, want := fake.recordArgs(), [][2]string{{"acme", "rec/1 x"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("GET %s: service Record calls = %q, want %q", req.URL, got, want)
	}
}

func TestRecordRefusesInvalidRaw(t *testing.T) {
	fake := &fakeService{record: &writ.StoredRecord{Raw: []byte(`{"record_id":`)}, page: &writ.RecordPage{Records: []writ.StoredRecord{{Raw: []byte("nope")}}}}
	s, _ := newTestServer(fake, Config{})
	for _, target := range []string{"/v1/records/r1?tenant_id=t", "/v1/records?tenant_id=t"} {
		req := newRequest(http.MethodGet, target, "")
		readProblem(t, serve(s, req), req, http.StatusInternalServerError, writ.EINTERNAL)
	}
}

func TestRecordsPage(t *testing.T) {
	r1, r2 := storedRecord(fullRecord()), storedRecord(fullRecord())
	r2.Raw = append([]byte(" \n"), r2.Raw...)
	tests := []struct {
		page *writ.RecordPage
		want string
	}{
		{&writ.RecordPage{}, `{"records":[]}`},
		{&writ.RecordPage{Records: []writ.StoredRecord{*r1}}, `{"records":[` + string(r1.Raw) + `]}`},
		{&writ.RecordPage{Records: []writ.StoredRecord{*r1, *r2}, NextCursor: `c"1`}, `{"records":[` + string(r1.Raw) + `,` + string(r2.Raw) + `],"next_cursor":"c\"1"}`},
	}
	for _, tt := range tests {
		fake := &fakeService{page: tt.page}
		s, _ := newTestServer(fake, Config{})
		target := "/v1/records?tenant_id=acme&decision_key=k&status=REJECTED&outcome=replan_required&subject_id=s&trace_id=abc&approval_mode_effective=destructive&policy_decision_id=pd:refunds@3:R_LIMIT:deny&approver=user:ops%20lead&scorecard=failed&from=2026-05-01T00:00:00Z&to=2026-05-02T00:00:00.5%2B02:00&limit=10&cursor=c0"
		rec := serve(s, newRequest(http.MethodGet, target, ""))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d; body %s", target, rec.Code, rec.Body)
		}
		if got := rec.Body.String(); got != tt.want {
			t.Errorf("GET %s: body\n%s\nwant\n%s", target, got, tt.want)
		}
		wantQ := writ.RecordQuery{
			TenantID: "acme", DecisionKey: "k", Status: writ.StatusRejected, Outcome: writ.OutcomeReplanRequired, SubjectID: "s", TraceID: "abc",
			ApprovalMode: writ.ModeDestructive, PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny", Approver: "user:ops lead", Scorecard: writ.ScorecardFailedQuery,
			From: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 5, 1, 22, 0, 0, 5e8, time.UTC),
			Limit: 10, Cursor: "c0",
		}
		gotQ := fake.recordQueries()[0]
		if !gotQ.From.Equal(wantQ.From) || !gotQ.To.Equal(wantQ.To) {
			t.Errorf("GET %s: from, to = %v, %v; want %v, %v", target, gotQ.From, gotQ.To, wantQ.From, wantQ.To)
		}
		gotQ.From, gotQ.To, wantQ.From, wantQ.To = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if gotQ != wantQ {
			t.Errorf("GET %s: service query = %+v, want %+v", target, gotQ, wantQ)
		}
	}
}

func TestMaxInFlight(t *testing.T) {
	fake := &fakeService{receipt: fullReceipt(), entered: make(chan struct{}), release: make(chan struct{})}
	s, _ := newTestServer(fake, Config{MaxInFlight: 1, Ledger: fake, Workflows: fake, Approvals: fake, Replays: fake})

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- serve(s, newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`)) }()
	<-fake.entered // the first check holds the only slot

	for _, req := range slices.Concat([]*http.Request{
		newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`),
		newRequest(http.MethodGet, "/v1/records?tenant_id=t", ""),
	}, ledgerRequests(), runRequests(), approvalRequests(), replayRequests()) {
		rec := serve(s, req)
		readProblem(t, rec, req, http.StatusServiceUnavailable, writ.EUNAVAILABLE)
		if got := rec.Header().Get("Retry-After"); got != "1" {
			t.Errorf("%s %s over capacity: Retry-After = %q, want 1", req.Method, req.URL, got)
		}
	}
	if rec := serve(s, newRequest(http.MethodGet, "/healthz", "")); rec.Code != http.StatusOK {
		t.Errorf("GET /healthz over capacity = %d, want 200", rec.Code)
	}
	if n := fake.calls(); n != 1 {
		t.Errorf("service called %d times while over capacity, want 1", n)
	}

	close(fake.release)
	if rec := <-first; rec.Code != http.StatusOK {
		t.Errorf("first POST /v1/check = %d, want 200; body %s", rec.Code, rec.Body)
	}
	fake.entered = nil // the slot is free again: the next check runs
	if rec := serve(s, newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`)); rec.Code != http.StatusOK {
		t.Errorf("POST /v1/check after the slot freed = %d, want 200; body %s", rec.Code, rec.Body)
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		health func(context.Context) HealthReport
		status int
		body   string
	}{
		{nil, 200, `{"status":"ok","auth":"api_keys"}`},
		{func(context.Context) HealthReport {
			return HealthReport{Status: HealthOK, Version: "v0.1.0", Pack: "acme@3", PackHash: "sha256:ab", Store: "sqlite"}
		}, 200, `{"status":"ok","version":"v0.1.0","pack":"acme@3","pack_hash":"sha256:ab","store":"sqlite","auth":"api_keys"}`},
		{func(context.Context) HealthReport { return HealthReport{Status: "unavailable", Store: "postgres"} }, 503, `{"status":"unavailable","store":"postgres","auth":"api_keys"}`},
	}
	for _, tt := range tests {
		s, _ := newTestServer(&fakeService{}, Config{Health: tt.health, Authenticate: testKeys.authenticate})
		rec := serve(s, newRequest(http.MethodGet, "/healthz", ""))
		if rec.Code != tt.status || rec.Body.String() != tt.body || rec.Header().Get("Content-Type") != mediaJSON {
			t.Errorf("GET /healthz = %d %s %s, want %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, tt.status, mediaJSON, tt.body)
		}
	}
}

func TestServesOpenAPI(t *testing.T) {
	s, _ := newTestServer(&fakeService{}, Config{})
	rec := serve(s, newRequest(http.MethodGet, "/v1/openapi.yaml", ""))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /v1/openapi.yaml = %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !bytes.Equal(rec.Body.Bytes(), OpenAPI()) || len(OpenAPI()) == 0 {
		t.Errorf("GET /v1/openapi.yaml did not serve the embedded document")
	}
}

func TestRequestLog(t *testing.T) {
	clock := testTime
	now := func() time.Time {
		clock = clock.Add(5 * time.Millisecond)
		return clock
	}
	s, log := newTestServer(&fakeService{receipt: fullReceipt()}, Config{Now: now})
	serve(s, newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"secret-tenant-body"}`))
	for _, want := range []string{"level=DEBUG", "method=POST", "path=/v1/check", "status=200", "duration=5ms"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("request log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log.String(), "secret-tenant-body") {
		t.Errorf("request log contains the body:\n%s", log)
	}
}

// TestCheckNeverPermitsWithoutRecord checks the server's own fail-closed
// guards: a receipt sent with 503 permits nothing, and a permit without a
// record id is never sent.
func TestCheckNeverPermitsWithoutRecord(t *testing.T) {
	permit := fullReceipt()
	permit.SafeToExecute, permit.Disposition.DownstreamAllowed, permit.Metadata.FailClosed = true, true, false
	fake := &fakeService{receipt: permit, err: writ.Errorf(writ.EUNAVAILABLE, "not committed")}
	s, _ := newTestServer(fake, Config{})
	rec := serve(s, newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`))
	var got writ.Receipt
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("POST /v1/check (permit + EUNAVAILABLE) = %d %s", rec.Code, rec.Body)
	}
	if got.SafeToExecute || got.Disposition.DownstreamAllowed || !got.Metadata.FailClosed {
		t.Errorf("POST /v1/check (permit + EUNAVAILABLE): safe_to_execute %v, downstream_allowed %v, fail_closed %v; want false, false, true",
			got.SafeToExecute, got.Disposition.DownstreamAllowed, got.Metadata.FailClosed)
	}
	if !permit.SafeToExecute {
		t.Errorf("the server modified the service's receipt")
	}

	noRecord := fullReceipt()
	noRecord.SafeToExecute, noRecord.Metadata.RecordID = true, ""
	s, _ = newTestServer(&fakeService{receipt: noRecord}, Config{})
	req := newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`)
	readProblem(t, serve(s, req), req, http.StatusInternalServerError, writ.EINTERNAL)
}

// TestClientAbortIsNotAnInternalError: a request whose client went away
// (its context canceled) is logged as the client's doing, at INFO, not as
// an internal error; the same error with the client still there is one.
func TestClientAbortIsNotAnInternalError(t *testing.T) {
	canceled := fmt.Errorf("wait for approval: %w", context.Canceled)
	for _, gone := range []bool{true, false} {
		svc := &fakeService{err: canceled}
		s, log := newTestServer(svc, Config{Ledger: svc, Workflows: svc, Approvals: svc, Replays: svc})
		for _, req := range slices.Concat([]*http.Request{
			newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`),
			newRequest(http.MethodGet, "/v1/records?tenant_id=t", ""),
		}, approvalRequests()) {
			if gone {
				ctx, cancel := context.WithCancel(req.Context())
				cancel()
				req = req.WithContext(ctx)
			}
			serve(s, req)
		}
		out := log.String()
		switch {
		case gone && (strings.Contains(out, "level=ERROR") || !strings.Contains(out, `level=INFO msg="client closed the request"`)):
			t.Errorf("a client's abort is logged as:\n%s\nwant INFO \"client closed the request\" and no ERROR", out)
		case !gone && (!strings.Contains(out, `level=ERROR msg="internal error"`) || strings.Contains(out, "client closed")):
			t.Errorf("context.Canceled with the client still there is logged as:\n%s\nwant an internal error", out)
		}
	}
}

// TestDotPathsAreNeverRedirected: a path with ".", ".." or empty segments
// is a 404 problem, never ServeMux's 307 to the cleaned path (issue 38:
// POST /v1/approvals/x/../../check answered 307 Location: /v1/check),
// through a real server on loopback.
func TestDotPathsAreNeverRedirected(t *testing.T) {
	fake := &fakeService{receipt: &writ.Receipt{}}
	s, _ := newTestServer(fake, Config{})
	ts := httptest.NewServer(s)
	defer ts.Close()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct{ method, path string }{
		{"POST", "/v1/approvals/x/../../check"},
		{"POST", "/v1//check"},
		{"POST", "/v1/./check"},
		{"GET", "/v1/records/."},
		{"GET", "/v1/records/.."},
		{"GET", "//healthz"},
		{"GET", "/healthz/."},
	} {
		req, err := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" || resp.Header.Get("Content-Type") != mediaProblem {
			t.Errorf("%s %s = %d (Location %q, Content-Type %q), want a 404 problem", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Content-Type"))
		}
		if !bytes.Contains(body, []byte("never redirected")) {
			t.Errorf("%s %s: body %s does not say why", tt.method, tt.path, body)
		}
	}
	if fake.calls() != 0 {
		t.Errorf("a dot path reached the service %d times", fake.calls())
	}
}

// TestTracestate: a tracestate that goes with a valid traceparent reaches
// the check (kept in its envelope) and comes back on the answer; without
// a valid traceparent it is ignored, and the body's trace_state stands.
func TestTracestate(t *testing.T) {
	const (
		tp    = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		state = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	)
	tests := []struct {
		name        string
		traceparent string
		tracestate  []string
		body        string
		wantReq     string // the trace_state the service sees
		wantResp    string // the answer's tracestate header
	}{
		{name: "with a traceparent", traceparent: tp, tracestate: []string{state}, wantReq: state, wantResp: state},
		{name: "two headers", traceparent: tp, tracestate: []string{"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7"}, wantReq: state, wantResp: state},
		{name: "header over body", traceparent: tp, tracestate: []string{state}, body: `,"trace_state":"other=1"`, wantReq: state, wantResp: state},
		{name: "invalid header: the body's stands", traceparent: tp, tracestate: []string{"Not Valid"}, body: `,"trace_state":"other=1"`, wantReq: "other=1"},
		{name: "no traceparent: ignored", tracestate: []string{state}},
		{name: "invalid traceparent: ignored", traceparent: "garbage", tracestate: []string{state}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeService{receipt: fullReceipt()}
			s, _ := newTestServer(fake, Config{})
			req := newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"`+tt.body+`}`)
			if tt.traceparent != "" {
				req.Header.Set("traceparent", tt.traceparent)
			}
			for _, v := range tt.tracestate {
				req.Header.Add("tracestate", v)
			}
			rec := serve(s, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("POST /v1/check = %d; body %s", rec.Code, rec.Body)
			}
			if got := fake.lastCheck().TraceState; got != tt.wantReq {
				t.Errorf("service saw trace_state %q, want %q", got, tt.wantReq)
			}
			if got := rec.Header().Get("tracestate"); got != tt.wantResp {
				t.Errorf("answer tracestate %q, want %q", got, tt.wantResp)
			}
		})
	}
}
