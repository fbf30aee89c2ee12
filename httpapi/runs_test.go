package httpapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// runRequests returns one valid request of each run route.
func runRequests() []*http.Request {
	return []*http.Request{
		newRequest(http.MethodPost, "/v1/runs", `{"tenant_id":"acme","workflow_id":"ui.component.change"}`),
		newRequest(http.MethodGet, "/v1/runs/run_1?tenant_id=acme", ""),
		newRequest(http.MethodPost, "/v1/runs/run_1/steps/visual_check/attempts?tenant_id=acme", `{"actor":{"type":"AGENT","id":"a"},"result":{}}`),
	}
}

// decodeBody decodes a JSON body into a new value of want's type (a
// pointer), rejecting unknown fields, and returns it.
func decodeBody(t *testing.T, body []byte, want any) any {
	t.Helper()
	got := reflect.New(reflect.TypeOf(want).Elem())
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(got.Interface()); err != nil {
		t.Fatalf("decode body %s: %v", body, err)
	}
	return got.Interface()
}

func TestStartRun(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		want     *writ.StartRunRequest
		run      *writ.Run
		location string
	}{
		{name: "every field", body: string(mustJSON(t, fullStartRunRequest())), want: fullStartRunRequest(), run: fullRun(),
			location: "/v1/runs/run_1?tenant_id=acme"},
		{name: "a run id generated", body: `{"tenant_id":"acme","workflow_id":"ui.component.change"}`,
			want: &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change"}, run: fullRun(),
			location: "/v1/runs/run_1?tenant_id=acme"},
		{name: "ids that need escaping", body: `{"tenant_id":"acme & co","workflow_id":"w","run_id":"run/1 x?"}`,
			want:     &writ.StartRunRequest{TenantID: "acme & co", WorkflowID: "w", RunID: "run/1 x?"},
			run:      &writ.Run{TenantID: "acme & co", RunID: "run/1 x?", Status: writ.RunActive},
			location: "/v1/runs/run%2F1%20x%3F?tenant_id=acme+%26+co"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeService{run: tt.run}
			s, _ := newTestServer(fake, Config{Workflows: fake})
			rec := serve(s, newRequest(http.MethodPost, "/v1/runs", tt.body))
			if rec.Code != http.StatusCreated {
				t.Fatalf("POST /v1/runs %s = %d, want 201; body %s", tt.body, rec.Code, rec.Body)
			}
			if got := fake.startArgs(); len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("POST /v1/runs %s: StartRun calls = %+v, want one with %+v", tt.body, got, tt.want)
			}
			if got := rec.Header().Get("Content-Type"); got != mediaJSON {
				t.Errorf("POST /v1/runs: Content-Type = %q, want %q", got, mediaJSON)
			}
			if got := rec.Header().Get("Location"); got != tt.location {
				t.Errorf("POST /v1/runs %s: Location = %q, want %q", tt.body, got, tt.location)
			}
			if got := decodeBody(t, rec.Body.Bytes(), tt.run); !reflect.DeepEqual(got, wireRun(tt.run)) {
				t.Errorf("POST /v1/runs: body = %+v, want %+v", got, wireRun(tt.run))
			}

			// The Location is the run.
			rec = serve(s, newRequest(http.MethodGet, tt.location, ""))
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %s = %d, want 200; body %s", tt.location, rec.Code, rec.Body)
			}
			if got, want := fake.runArgs(), [][2]string{{tt.run.TenantID, tt.run.RunID}}; !reflect.DeepEqual(got, want) {
				t.Errorf("GET %s: Run calls = %q, want %q", tt.location, got, want)
			}
		})
	}
}

func TestGetRun(t *testing.T) {
	fake := fullWorkflows()
	s, _ := newTestServer(fake, Config{Workflows: fake})
	req := newRequest(http.MethodGet, "/v1/runs/run_1?tenant_id=acme", "")
	rec := serve(s, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200; body %s", req.URL, rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Content-Type"); got != mediaJSON {
		t.Errorf("GET %s: Content-Type = %q, want %q", req.URL, got, mediaJSON)
	}
	if got := decodeBody(t, rec.Body.Bytes(), fake.run); !reflect.DeepEqual(got, fake.run) {
		t.Errorf("GET %s: body = %+v, want %+v", req.URL, got, fake.run)
	}
	if got, want := fake.runArgs(), [][2]string{{"acme", "run_1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("GET %s: Run calls = %q, want %q", req.URL, got, want)
	}
}

func TestSubmitAttempt(t *testing.T) {
	want := fullAttemptRequest()
	want.TenantID, want.RunID, want.StepID = "acme & co", "run/1", "visual check"
	body := string(mustJSON(t, attemptBodyOf(want)))
	fake := &fakeService{verdict: fullVerdict()}
	fake.verdict.RunID, fake.verdict.StepID = want.RunID, want.StepID
	s, _ := newTestServer(fake, Config{Workflows: fake})
	for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
		req := newRequest(http.MethodPost, "/v1/runs/run%2F1/steps/visual%20check/attempts?tenant_id=acme+%26+co", body)
		req.Header.Set("Content-Type", ct)
		rec := serve(s, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("POST %s (Content-Type %s) = %d, want 200; body %s", req.URL, ct, rec.Code, rec.Body)
		}
		if got := fake.attemptArgs(); !reflect.DeepEqual(got[len(got)-1], want) {
			t.Errorf("POST %s: SubmitAttempt got\n%+v\nwant\n%+v", req.URL, got[len(got)-1], want)
		}
		if got := decodeBody(t, rec.Body.Bytes(), fake.verdict); !reflect.DeepEqual(got, fake.verdict) {
			t.Errorf("POST %s: body = %+v, want %+v", req.URL, got, fake.verdict)
		}
		if got, wantTP := rec.Header().Get("traceparent"), want.TraceID; !strings.Contains(got, wantTP) {
			t.Errorf("POST %s: traceparent = %q, want one carrying the body's trace id %s", req.URL, got, wantTP)
		}
	}
}

// TestAttemptBodyIsAttemptRequest keeps attemptBody in step with
// writ.AttemptRequest: the same members, less those the path and the
// query name.
func TestAttemptBodyIsAttemptRequest(t *testing.T) {
	body, bodyAlways := goFields(reflect.TypeFor[attemptBody]())
	req, reqAlways := goFields(reflect.TypeFor[writ.AttemptRequest]())
	addressedFields := slices.Sorted(maps.Keys(addressed))
	without := func(names []string) []string {
		return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(addressedFields, n) })
	}
	if !slices.Equal(body, without(req)) {
		t.Errorf("attemptBody members = %q, want those of writ.AttemptRequest but %q: %q", body, addressedFields, without(req))
	}
	if !slices.Equal(bodyAlways, without(reqAlways)) {
		t.Errorf("attemptBody always encodes %q, want %q as writ.AttemptRequest does", bodyAlways, without(reqAlways))
	}
	for _, f := range addressedFields {
		if !slices.Contains(req, f) {
			t.Errorf("addressed names %s, which writ.AttemptRequest does not have", f)
		}
	}
	// What attemptBodyOf leaves out is exactly what the path and the query carry.
	full := fullAttemptRequest()
	b := attemptBodyOf(full)
	back := &writ.AttemptRequest{TenantID: full.TenantID, RunID: full.RunID, StepID: full.StepID,
		Actor: b.Actor, Result: b.Result, ToolCalls: b.ToolCalls, TraceID: b.TraceID}
	if !reflect.DeepEqual(back, full) {
		t.Errorf("attemptBodyOf loses members: %+v from %+v", back, full)
	}
}

func TestRunBadInput(t *testing.T) {
	const limit = 512
	const attempt = "/v1/runs/run_1/steps/visual_check/attempts?tenant_id=acme"
	const actor = `"actor":{"type":"AGENT","id":"a"}`
	bigStart := `{"tenant_id":"t","workflow_id":"w","context":{"x":"` + strings.Repeat("x", limit) + `"}}`
	bigAttempt := `{` + actor + `,"result":{"x":"` + strings.Repeat("x", limit) + `"}}`
	tests := []struct {
		name        string
		method      string
		target      string
		contentType string // "-" leaves it unset
		body        string
		unknownLen  bool // send without Content-Length
		status      int
		code        string
		field       string // a detail must name this field (when set)
		msg         string // ... with this message (or the detail says it, when field is empty)
	}{
		{name: "start: malformed JSON", method: "POST", target: "/v1/runs", body: `{"tenant_id": "t",}`, status: 400, code: writ.EINVALID, msg: "malformed JSON at line 1, column 19"},
		{name: "start: truncated", method: "POST", target: "/v1/runs", body: `{"tenant_id": "t"`, status: 400, code: writ.EINVALID, msg: "ends in the middle of a value"},
		{name: "start: empty body", method: "POST", target: "/v1/runs", contentType: mediaJSON, status: 400, code: writ.EINVALID, msg: "request body is empty"},
		{name: "start: two objects", method: "POST", target: "/v1/runs", body: `{"tenant_id":"t"} {}`, status: 400, code: writ.EINVALID, msg: "single JSON value"},
		{name: "start: an array", method: "POST", target: "/v1/runs", body: `[{"tenant_id":"t"}]`, status: 400, code: writ.EINVALID, msg: "must be a JSON object, not an array"},
		{name: "start: null", method: "POST", target: "/v1/runs", body: `null`, status: 400, code: writ.EINVALID, msg: "must be a JSON object, not null"},
		{name: "start: unknown field", method: "POST", target: "/v1/runs", body: `{"tenant_id":"t","workflow":"w"}`, status: 400, code: writ.EINVALID, field: "workflow", msg: "unknown field"},
		{name: "start: field name in another case", method: "POST", target: "/v1/runs", body: `{"tenant_id":"t","Workflow_ID":"w"}`, status: 400, code: writ.EINVALID, field: "Workflow_ID", msg: "unknown field"},
		{name: "start: duplicate field", method: "POST", target: "/v1/runs", body: `{"tenant_id":"t","workflow_id":"a","workflow_id":"b"}`, status: 400, code: writ.EINVALID, field: "workflow_id", msg: "duplicate field"},
		{name: "start: duplicate member in context", method: "POST", target: "/v1/runs", body: `{"tenant_id":"t","context":{"a":1,"a":2}}`, status: 400, code: writ.EINVALID, field: "context.a", msg: "duplicate field"},
		{name: "start: workflow_id a number", method: "POST", target: "/v1/runs", body: `{"tenant_id":"t","workflow_id":7}`, status: 400, code: writ.EINVALID, field: "workflow_id", msg: "must be a string, not a number"},
		{name: "start: context an array", method: "POST", target: "/v1/runs", body: `{"tenant_id":"t","context":["a"]}`, status: 400, code: writ.EINVALID, field: "context", msg: "must be an object, not an array"},
		{name: "start: missing tenant_id", method: "POST", target: "/v1/runs", body: `{"workflow_id":"w"}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "is required"},
		{name: "start: query parameter", method: "POST", target: "/v1/runs?tenant_id=t", body: `{"tenant_id":"t"}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "unknown query parameter"},
		{name: "start: oversized", method: "POST", target: "/v1/runs", body: bigStart, status: 413, code: writ.ETOOLARGE, msg: "exceeds 512 bytes"},
		{name: "start: oversized without length", method: "POST", target: "/v1/runs", body: bigStart, unknownLen: true, status: 413, code: writ.ETOOLARGE, msg: "exceeds 512 bytes"},
		{name: "start: text/plain", method: "POST", target: "/v1/runs", contentType: "text/plain", body: `{"tenant_id":"t"}`, status: 415, code: writ.EINVALID, msg: "application/json"},
		{name: "start: no content type", method: "POST", target: "/v1/runs", contentType: "-", body: `{"tenant_id":"t"}`, status: 415, code: writ.EINVALID, msg: "application/json"},

		{name: "attempt: malformed JSON", method: "POST", target: attempt, body: `{` + actor + `,}`, status: 400, code: writ.EINVALID, msg: "malformed JSON"},
		{name: "attempt: an array", method: "POST", target: attempt, body: `[]`, status: 400, code: writ.EINVALID, msg: "must be a JSON object, not an array"},
		{name: "attempt: unknown field", method: "POST", target: attempt, body: `{` + actor + `,"result":{},"evidence":[]}`, status: 400, code: writ.EINVALID, field: "evidence", msg: "unknown field"},
		{name: "attempt: unknown nested field", method: "POST", target: attempt, body: `{` + actor + `,"result":{},"tool_calls":[{"name":"n","output":1}]}`, status: 400, code: writ.EINVALID, field: "tool_calls[0].output", msg: "unknown field"},
		{name: "attempt: tenant_id in the body", method: "POST", target: attempt, body: `{"tenant_id":"acme",` + actor + `,"result":{}}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "must not be in the body: the tenant is the query parameter tenant_id"},
		{name: "attempt: run_id in the body", method: "POST", target: attempt, body: `{` + actor + `,"result":{},"run_id":"run_1"}`, status: 400, code: writ.EINVALID, field: "run_id", msg: "must not be in the body: the path names the run"},
		{name: "attempt: step_id in the body", method: "POST", target: attempt, body: `{` + actor + `,"result":{},"step_id":""}`, status: 400, code: writ.EINVALID, field: "step_id", msg: "must not be in the body: the path names the step"},
		{name: "attempt: duplicate field", method: "POST", target: attempt, body: `{` + actor + `,"result":{},"result":{}}`, status: 400, code: writ.EINVALID, field: "result", msg: "duplicate field"},
		{name: "attempt: result a string", method: "POST", target: attempt, body: `{` + actor + `,"result":"done"}`, status: 400, code: writ.EINVALID, field: "result", msg: "must be an object, not a string"},
		{name: "attempt: tool_calls an object", method: "POST", target: attempt, body: `{` + actor + `,"result":{},"tool_calls":{"name":"n"}}`, status: 400, code: writ.EINVALID, field: "tool_calls", msg: "must be an array, not an object"},
		{name: "attempt: tool call name a number", method: "POST", target: attempt, body: `{` + actor + `,"result":{},"tool_calls":[{"name":1}]}`, status: 400, code: writ.EINVALID, field: "tool_calls[0].name", msg: "must be a string, not a number"},
		{name: "attempt: actor a string", method: "POST", target: attempt, body: `{"actor":"agent","result":{}}`, status: 400, code: writ.EINVALID, field: "actor", msg: "must be an object, not a string"},
		{name: "attempt: no tenant", method: "POST", target: "/v1/runs/run_1/steps/s/attempts", body: `{` + actor + `,"result":{}}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "is required"},
		{name: "attempt: tenant twice", method: "POST", target: attempt + "&tenant_id=b", body: `{` + actor + `,"result":{}}`, status: 400, code: writ.EINVALID, field: "tenant_id", msg: "at most once"},
		{name: "attempt: unknown query parameter", method: "POST", target: attempt + "&run_id=r", body: `{` + actor + `,"result":{}}`, status: 400, code: writ.EINVALID, field: "run_id", msg: "unknown query parameter"},
		{name: "attempt: malformed query", method: "POST", target: attempt + "&x=%zz", body: `{` + actor + `,"result":{}}`, status: 400, code: writ.EINVALID, msg: "malformed query string"},
		{name: "attempt: oversized", method: "POST", target: attempt, body: bigAttempt, status: 413, code: writ.ETOOLARGE, msg: "exceeds 512 bytes"},
		{name: "attempt: oversized without length", method: "POST", target: attempt, body: bigAttempt, unknownLen: true, status: 413, code: writ.ETOOLARGE, msg: "exceeds 512 bytes"},
		{name: "attempt: form", method: "POST", target: attempt, contentType: "application/x-www-form-urlencoded", body: `result=x`, status: 415, code: writ.EINVALID, msg: "application/json"},
		{name: "attempt: not utf-8", method: "POST", target: attempt, contentType: "application/json; charset=latin1", body: `{` + actor + `,"result":{}}`, status: 415, code: writ.EINVALID, msg: "application/json"},

		{name: "get: no tenant", method: "GET", target: "/v1/runs/run_1", status: 400, code: writ.EINVALID, field: "tenant_id", msg: "is required"},
		{name: "get: empty tenant", method: "GET", target: "/v1/runs/run_1?tenant_id=", status: 400, code: writ.EINVALID, field: "tenant_id", msg: "is required"},
		{name: "get: unknown query parameter", method: "GET", target: "/v1/runs/run_1?tenant_id=t&step=s", status: 400, code: writ.EINVALID, field: "step", msg: "unknown query parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fullWorkflows()
			s, log := newTestServer(fake, Config{MaxBodyBytes: limit, Workflows: fake})
			req := newRequest(tt.method, tt.target, tt.body)
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
				t.Errorf("%s %s %s: errors = %+v, want one on %q saying %q", tt.method, tt.target, tt.body, p.Errors, tt.field, tt.msg)
			case tt.field == "" && !strings.Contains(p.Detail, tt.msg) && !hasDetail(p, "", tt.msg):
				t.Errorf("%s %s %s: detail = %q, errors = %+v, want %q", tt.method, tt.target, tt.body, p.Detail, p.Errors, tt.msg)
			}
			if n := fake.calls(); n != 0 {
				t.Errorf("%s %s %s: workflows called %d times, want 0", tt.method, tt.target, tt.body, n)
			}
			if tt.body != "" && len(tt.body) < 100 && strings.Contains(log.String(), tt.body) {
				t.Errorf("%s %s: the log contains the request body:\n%s", tt.method, tt.target, log)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		reqs   []*http.Request
		status int
		code   string
	}{
		{"unknown run", &writ.Error{Code: writ.ENOTFOUND, Message: "run run_1 not found"}, runRequests()[1:], 404, writ.ENOTFOUND},
		{"step out of order", &writ.Error{Code: writ.ECONFLICT, Message: "step visual_check is out of order: run run_1 is at step implement"}, runRequests()[2:], 409, writ.ECONFLICT},
		{"finished run", &writ.Error{Code: writ.ECONFLICT, Message: "run run_1 is completed; it takes no more attempts"}, runRequests()[2:], 409, writ.ECONFLICT},
		{"run id taken", &writ.Error{Code: writ.ECONFLICT, Message: "run run_1 already exists"}, runRequests()[:1], 409, writ.ECONFLICT},
		{"undeclared context", &writ.Error{Code: writ.EINVALID, Message: "workflow declares no context key x", Details: []writ.Detail{{Field: "context", Message: "undeclared key"}}}, runRequests(), 400, writ.EINVALID},
		{"verdict not recorded", &writ.Error{Code: writ.EUNAVAILABLE, Message: "the verdict could not be recorded; the attempt did not count, retry it"}, runRequests(), 503, writ.EUNAVAILABLE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeService{err: tt.err}
			s, _ := newTestServer(fake, Config{Workflows: fake})
			for _, req := range tt.reqs {
				rec := serve(s, req)
				p := readProblem(t, rec, req, tt.status, tt.code)
				if p.Detail != writ.ErrorMessage(tt.err) || !reflect.DeepEqual(p.Errors, writ.ErrorDetails(tt.err)) {
					t.Errorf("%s %s: problem %q %+v, want the service's %q %+v", req.Method, req.URL, p.Detail, p.Errors, writ.ErrorMessage(tt.err), writ.ErrorDetails(tt.err))
				}
				if got := rec.Header().Get("Location"); got != "" {
					t.Errorf("%s %s: a %d has Location %q", req.Method, req.URL, rec.Code, got)
				}
			}
			if n := fake.calls(); n != len(tt.reqs) {
				t.Errorf("workflows called %d times, want %d", n, len(tt.reqs))
			}
		})
	}
}

func TestNoWorkflows(t *testing.T) {
	fake := fullWorkflows()
	s, _ := newTestServer(fake, Config{}) // the service runs workflows, but the server was given none
	bad := newRequest(http.MethodPost, "/v1/runs/r/steps/s/attempts", "nonsense")
	bad.Header.Set("Content-Type", "text/plain")
	reqs := append(runRequests(),
		newRequest(http.MethodPost, "/v1/runs?x=1", `{"tenant_id":1}`),
		newRequest(http.MethodGet, "/v1/runs/r", ""),
		bad,
	)
	for _, req := range reqs {
		rec := serve(s, req)
		p := readProblem(t, rec, req, http.StatusNotFound, writ.ENOTFOUND)
		if p.Detail != "this server runs no workflows" {
			t.Errorf("%s %s: detail = %q, want %q", req.Method, req.URL, p.Detail, "this server runs no workflows")
		}
	}
	if n := fake.calls(); n != 0 {
		t.Errorf("a server that runs no workflows called the service %d times", n)
	}
}

func TestAttemptTraceparent(t *testing.T) {
	const (
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID = "00f067aa0ba902b7"
		bodyID   = "11111111111111111111111111111111"
	)
	tests := []struct {
		name       string
		headers    []string
		bodyID     string
		wantReqID  string // the trace id the service sees
		wantRespTP string // the response traceparent
	}{
		{name: "valid sampled", headers: []string{"00-" + traceID + "-" + parentID + "-01"}, bodyID: bodyID, wantReqID: traceID, wantRespTP: "00-" + traceID + "-0102030405060708-01"},
		{name: "valid not sampled, no body trace id", headers: []string{"00-" + traceID + "-" + parentID + "-00"}, wantReqID: traceID, wantRespTP: "00-" + traceID + "-0102030405060708-00"},
		{name: "absent: the body's trace id", bodyID: bodyID, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "absent, none in the body"},
		{name: "invalid: ignored", headers: []string{"00-" + strings.ToUpper(traceID) + "-" + parentID + "-01"}, bodyID: bodyID, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
		{name: "two headers: ignored", headers: []string{"00-" + traceID + "-" + parentID + "-01", "00-" + traceID + "-" + parentID + "-01"}, bodyID: bodyID, wantReqID: bodyID, wantRespTP: "00-" + bodyID + "-0102030405060708-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fullWorkflows()
			s, _ := newTestServer(fake, Config{Workflows: fake, Rand: bytes.NewReader([]byte{1, 2, 3, 4, 5, 6, 7, 8})})
			body := `{"actor":{"type":"AGENT","id":"a"},"result":{}}`
			if tt.bodyID != "" {
				body = `{"actor":{"type":"AGENT","id":"a"},"result":{},"trace_id":"` + tt.bodyID + `"}`
			}
			req := newRequest(http.MethodPost, "/v1/runs/run_1/steps/visual_check/attempts?tenant_id=acme", body)
			for _, h := range tt.headers {
				req.Header.Add("traceparent", h)
			}
			rec := serve(s, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("POST %s traceparent %q = %d; body %s", req.URL, tt.headers, rec.Code, rec.Body)
			}
			if got := fake.attemptArgs()[0].TraceID; got != tt.wantReqID {
				t.Errorf("traceparent %q: service saw trace id %q, want %q", tt.headers, got, tt.wantReqID)
			}
			if got := rec.Header().Get("traceparent"); got != tt.wantRespTP {
				t.Errorf("traceparent %q: response traceparent %q, want %q", tt.headers, got, tt.wantRespTP)
			}
		})
	}

	// A valid traceparent is answered on a bad body too, as on /v1/check.
	fake := fullWorkflows()
	s, _ := newTestServer(fake, Config{Workflows: fake, Rand: bytes.NewReader([]byte{9, 9, 9, 9, 9, 9, 9, 9})})
	req := newRequest(http.MethodPost, "/v1/runs/run_1/steps/visual_check/attempts?tenant_id=acme", `{"run_id":"x"}`)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	rec := serve(s, req)
	readProblem(t, rec, req, http.StatusBadRequest, writ.EINVALID)
	if got, want := rec.Header().Get("traceparent"), "00-"+traceID+"-0909090909090909-01"; got != want {
		t.Errorf("POST %s (bad body) traceparent = %q, want %q", req.URL, got, want)
	}
}

// TestRunListsAreArrays checks that the lists and objects the Run and
// StepVerdict schemas require are sent as such when the service leaves
// them nil, without modifying what the service returned.
func TestRunListsAreArrays(t *testing.T) {
	run := &writ.Run{TenantID: "acme", RunID: "run_1", Status: writ.RunActive, History: []writ.RunEvent{
		{Seq: 1, Kind: "step_attempt", Verdict: &writ.StepVerdict{RunID: "run_1", StepID: "s", State: writ.VerdictAccepted}},
	}}
	verdict := &writ.StepVerdict{RunID: "run_1", StepID: "visual_check", State: writ.VerdictAccepted}
	fake := &fakeService{run: run, verdict: verdict}
	s, _ := newTestServer(fake, Config{Workflows: fake})
	for _, req := range runRequests() {
		rec := serve(s, req)
		if rec.Code/100 != 2 {
			t.Fatalf("%s %s = %d; body %s", req.Method, req.URL, rec.Code, rec.Body)
		}
		var got map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		v := got
		if _, isRun := got["history"]; isRun {
			if c, ok := got["context"].(map[string]any); !ok || len(c) != 0 {
				t.Errorf("%s %s: context = %#v, want {}", req.Method, req.URL, got["context"])
			}
			v = got["history"].([]any)[0].(map[string]any)["verdict"].(map[string]any)
		}
		for _, name := range []string{"checks", "failed"} {
			if a, ok := v[name].([]any); !ok || len(a) != 0 {
				t.Errorf("%s %s: verdict %s = %#v, want []", req.Method, req.URL, name, v[name])
			}
		}
	}
	empty := &writ.Run{TenantID: "acme", RunID: "run_1", Status: writ.RunActive}
	fake.run = empty
	rec := serve(s, newRequest(http.MethodGet, "/v1/runs/run_1?tenant_id=acme", ""))
	if !strings.Contains(rec.Body.String(), `"history":[]`) {
		t.Errorf("GET /v1/runs/run_1 of a run without history: body %s, want history []", rec.Body)
	}
	if run.Context != nil || run.History[0].Verdict.Checks != nil || verdict.Failed != nil || empty.History != nil {
		t.Errorf("the server modified the service's run or verdict")
	}
}

// TestRunAnswerGuards checks that an answer about another run, tenant or
// step than the one asked for is never sent: it is an internal error.
func TestRunAnswerGuards(t *testing.T) {
	other := func(f func(*writ.Run)) *writ.Run {
		r := fullRun()
		f(r)
		return r
	}
	otherVerdict := func(f func(*writ.StepVerdict)) *writ.StepVerdict {
		v := fullVerdict()
		f(v)
		return v
	}
	tests := []struct {
		name string
		fake *fakeService
		req  *http.Request
	}{
		{"start: another tenant", &fakeService{run: other(func(r *writ.Run) { r.TenantID = "globex" })}, runRequests()[0]},
		{"start: no run id", &fakeService{run: other(func(r *writ.Run) { r.RunID = "" })}, runRequests()[0]},
		{"start: another run id than asked", &fakeService{run: fullRun()}, newRequest(http.MethodPost, "/v1/runs", `{"tenant_id":"acme","workflow_id":"w","run_id":"run_2"}`)},
		{"get: another run", &fakeService{run: fullRun()}, newRequest(http.MethodGet, "/v1/runs/run_2?tenant_id=acme", "")},
		{"get: another tenant", &fakeService{run: fullRun()}, newRequest(http.MethodGet, "/v1/runs/run_1?tenant_id=globex", "")},
		{"list: another tenant", &fakeService{runs: func() *writ.RunPage {
			p := fullRunPage()
			p.Runs[0].TenantID = "globex"
			return p
		}()}, newRequest(http.MethodGet, "/v1/runs?tenant_id=acme", "")},
		{"attempt: another step", &fakeService{verdict: otherVerdict(func(v *writ.StepVerdict) { v.StepID = "implement" })}, runRequests()[2]},
		{"attempt: another run", &fakeService{verdict: otherVerdict(func(v *writ.StepVerdict) { v.RunID = "run_2" })}, runRequests()[2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, log := newTestServer(tt.fake, Config{Workflows: tt.fake})
			rec := serve(s, tt.req)
			p := readProblem(t, rec, tt.req, http.StatusInternalServerError, writ.EINTERNAL)
			if p.Detail != "internal error" {
				t.Errorf("%s %s: detail %q, want only \"internal error\"", tt.req.Method, tt.req.URL, p.Detail)
			}
			if !strings.Contains(log.String(), "workflows answered") {
				t.Errorf("%s %s: the mismatch was not logged:\n%s", tt.req.Method, tt.req.URL, log)
			}
		})
	}
}
