package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// approvalRequests returns one valid request of each approval route, in
// development mode.
func approvalRequests() []*http.Request {
	return []*http.Request{
		newRequest(http.MethodGet, "/v1/approvals?tenant_id=acme", ""),
		newRequest(http.MethodGet, "/v1/approvals/apr_1?tenant_id=acme", ""),
		newRequest(http.MethodPost, "/v1/approvals/apr_1/approve", `{"tenant_id":"acme","approver":"maria","reason":"ok"}`),
		newRequest(http.MethodPost, "/v1/approvals/apr_1/deny", `{"tenant_id":"acme","approver":"maria","reason":"no"}`),
	}
}

func TestListApprovals(t *testing.T) {
	now := testTime
	tests := []struct {
		target string
		want   writ.ApprovalQuery
	}{
		{"/v1/approvals?tenant_id=acme", writ.ApprovalQuery{TenantID: "acme"}},
		{"/v1/approvals?tenant_id=acme&state=&gate_id=&decision_key=&older_than=&limit=&cursor=", writ.ApprovalQuery{TenantID: "acme"}},
		{"/v1/approvals?tenant_id=acme+%26+co&state=pending&gate_id=escalation%3AR1&decision_key=support.refund.execute&older_than=1h30m&limit=1000&cursor=c%2B1",
			writ.ApprovalQuery{TenantID: "acme & co", State: writ.ApprovalPending, GateID: "escalation:R1", DecisionKey: "support.refund.execute",
				CreatedBefore: now.Add(-90 * time.Minute), Limit: 1000, Cursor: "c+1"}},
		{"/v1/approvals?tenant_id=acme&state=expired&older_than=30m", writ.ApprovalQuery{TenantID: "acme", State: writ.ApprovalExpired, CreatedBefore: now.Add(-30 * time.Minute)}},
		{"/v1/approvals?tenant_id=acme&created_before=2026-05-09T10:00:00%2B02:00&limit=1", writ.ApprovalQuery{TenantID: "acme", CreatedBefore: time.Date(2026, 5, 9, 8, 0, 0, 0, time.UTC), Limit: 1}},
	}
	for _, tt := range tests {
		fake := fullApprovals()
		for i := range fake.approvals.Approvals {
			fake.approvals.Approvals[i].TenantID = tt.want.TenantID
		}
		s, _ := newTestServer(fake, Config{Approvals: fake, Now: func() time.Time { return now }})
		rec := serve(s, newRequest(http.MethodGet, tt.target, ""))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d, want 200; body %s", tt.target, rec.Code, rec.Body)
		}
		qs := fake.approvalQueries()
		if len(qs) != 1 {
			t.Fatalf("GET %s: Approvals called %d times, want once", tt.target, len(qs))
		}
		got := qs[0]
		if !got.CreatedBefore.Equal(tt.want.CreatedBefore) {
			t.Errorf("GET %s: created before %v, want %v", tt.target, got.CreatedBefore, tt.want.CreatedBefore)
		}
		got.CreatedBefore, tt.want.CreatedBefore = time.Time{}, time.Time{}
		if got != tt.want {
			t.Errorf("GET %s: Approvals(%+v), want %+v", tt.target, got, tt.want)
		}
		if got := decodeBody(t, rec.Body.Bytes(), fake.approvals); !reflect.DeepEqual(got, fake.approvals) {
			t.Errorf("GET %s: body = %+v, want %+v", tt.target, got, fake.approvals)
		}
	}
}

func TestGetApproval(t *testing.T) {
	fake := fullApprovals()
	s, _ := newTestServer(fake, Config{Approvals: fake})
	req := newRequest(http.MethodGet, "/v1/approvals/apr_1?tenant_id=acme", "")
	rec := serve(s, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200; body %s", req.URL, rec.Code, rec.Body)
	}
	if got := decodeBody(t, rec.Body.Bytes(), fake.approval); !reflect.DeepEqual(got, fake.approval) {
		t.Errorf("GET %s: body = %+v, want %+v", req.URL, got, fake.approval)
	}
	if got, want := fake.approvalArgs(), [][2]string{{"acme", "apr_1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("GET %s: Approval calls = %q, want %q", req.URL, got, want)
	}
}

func TestDecideApproval(t *testing.T) {
	tests := []struct {
		name   string
		target string
		body   string
		key    string // "" in development mode
		want   *writ.DecideApprovalRequest
	}{
		{"approve in development mode", "/v1/approvals/apr_1/approve", `{"tenant_id":"acme","approver":"maria","reason":"Invoice checked.","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`, "",
			&writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: "apr_1", Decision: writ.ApprovalApproved, Approver: "maria", Reason: "Invoice checked.", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}},
		{"deny in development mode", "/v1/approvals/apr_1/deny", `{"tenant_id":"acme","approver":"maria","reason":"No invoice."}`, "",
			&writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: "apr_1", Decision: writ.ApprovalDenied, Approver: "maria", Reason: "No invoice."}},
		{"approve with a key", "/v1/approvals/apr_1/approve", `{"reason":"Invoice checked."}`, "approver-key",
			&writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: "apr_1", Decision: writ.ApprovalApproved, Reason: "Invoice checked."}},
		{"deny with a key, naming the approver", "/v1/approvals/apr_1/deny", `{"tenant_id":"acme","approver":"approver@acme.example","reason":"No."}`, "approver-key",
			&writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: "apr_1", Decision: writ.ApprovalDenied, Approver: "approver@acme.example", Reason: "No."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fullApprovals()
			cfg := Config{Approvals: fake}
			if tt.key != "" {
				cfg.Authenticate = testKeys.authenticate
			}
			s, _ := newTestServer(fake, cfg)
			req := newRequest(http.MethodPost, tt.target, tt.body)
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			rec := serve(s, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("POST %s %s = %d, want 200; body %s", tt.target, tt.body, rec.Code, rec.Body)
			}
			if got := fake.decisionArgs(); len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("POST %s %s: DecideApproval calls %+v, want one with %+v", tt.target, tt.body, got, tt.want)
			}
			if got := decodeBody(t, rec.Body.Bytes(), fake.approval); !reflect.DeepEqual(got, fake.approval) {
				t.Errorf("POST %s: body = %+v, want %+v", tt.target, got, fake.approval)
			}
			// The engine reads the approver from the principal: it must get there.
			p := fake.seen()[0]
			if (tt.key == "") != (p == nil) || (p != nil && p.Subject != testKeys[tt.key].Subject) {
				t.Errorf("POST %s: DecideApproval saw principal %+v, want the key's (%q)", tt.target, p, tt.key)
			}
		})
	}
}

func TestDecideApprovalTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	fake := fullApprovals()
	s, _ := newTestServer(fake, Config{Approvals: fake})
	req := newRequest(http.MethodPost, "/v1/approvals/apr_1/approve", `{"tenant_id":"acme","approver":"maria","reason":"ok","trace_id":"11111111111111111111111111111111"}`)
	req.Header.Set("traceparent", tp)
	rec := serve(s, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s = %d; body %s", req.URL, rec.Code, rec.Body)
	}
	if got := fake.decisionArgs()[0].TraceID; got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("POST %s with traceparent: DecideApproval got trace id %q, want the header's", req.URL, got)
	}
	if got := rec.Header().Get("traceparent"); !strings.HasPrefix(got, "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
		t.Errorf("POST %s: response traceparent %q, want the header's trace id", req.URL, got)
	}
}

// TestApprovalsBadInput: every malformed request is a 400 (or 415) that
// names what is wrong, and reaches nothing.
func TestApprovalsBadInput(t *testing.T) {
	const approve = "/v1/approvals/apr_1/approve"
	const dev = `"tenant_id":"acme","approver":"maria",`
	tests := []struct {
		name        string
		method      string
		target      string
		body        string
		contentType string
		key         string // with this API key; "" in development mode
		status      int
		field       string // a detail must name this field (when set)
		msg         string // ... with this message (or the detail says it, when field is empty)
	}{
		{name: "list: bad state", method: "GET", target: "/v1/approvals?tenant_id=acme&state=open", status: 400, field: "state", msg: "must be one of pending, approved, denied, expired"},
		{name: "list: state in another case", method: "GET", target: "/v1/approvals?tenant_id=acme&state=PENDING", status: 400, field: "state", msg: "must be one of"},
		{name: "list: older_than not a duration", method: "GET", target: "/v1/approvals?tenant_id=acme&older_than=soon", status: 400, field: "older_than", msg: "positive duration"},
		{name: "list: older_than without a unit", method: "GET", target: "/v1/approvals?tenant_id=acme&older_than=30", status: 400, field: "older_than", msg: "positive duration"},
		{name: "list: older_than negative", method: "GET", target: "/v1/approvals?tenant_id=acme&older_than=-1h", status: 400, field: "older_than", msg: "positive duration"},
		{name: "list: older_than zero", method: "GET", target: "/v1/approvals?tenant_id=acme&older_than=0s", status: 400, field: "older_than", msg: "positive duration"},
		{name: "list: older_than in days", method: "GET", target: "/v1/approvals?tenant_id=acme&older_than=2d", status: 400, field: "older_than", msg: "positive duration"},
		{name: "list: older_than and created_before", method: "GET", target: "/v1/approvals?tenant_id=acme&older_than=1h&created_before=2026-05-09T00:00:00Z", status: 400, field: "older_than", msg: "not both"},
		{name: "list: created_before not RFC 3339", method: "GET", target: "/v1/approvals?tenant_id=acme&created_before=yesterday", status: 400, field: "created_before", msg: "RFC 3339"},
		{name: "list: limit 0", method: "GET", target: "/v1/approvals?tenant_id=acme&limit=0", status: 400, field: "limit", msg: "from 1 to 1000"},
		{name: "list: limit too large", method: "GET", target: "/v1/approvals?tenant_id=acme&limit=1001", status: 400, field: "limit", msg: "from 1 to 1000"},
		{name: "list: limit not a number", method: "GET", target: "/v1/approvals?tenant_id=acme&limit=ten", status: 400, field: "limit", msg: "from 1 to 1000"},
		{name: "list: unknown parameter", method: "GET", target: "/v1/approvals?tenant_id=acme&gate=G", status: 400, field: "gate", msg: "unknown query parameter"},
		{name: "list: repeated parameter", method: "GET", target: "/v1/approvals?tenant_id=acme&state=pending&state=denied", status: 400, field: "state", msg: "at most once"},
		{name: "list: no tenant in development mode", method: "GET", target: "/v1/approvals?state=pending", status: 400, field: "tenant_id", msg: "is required"},
		{name: "list: malformed query", method: "GET", target: "/v1/approvals?tenant_id=acme&x=%zz", status: 400, msg: "malformed query string"},
		{name: "list: bad state with a key", method: "GET", target: "/v1/approvals?state=open", key: "approver-key", status: 400, field: "state", msg: "must be one of"},
		{name: "show: no tenant", method: "GET", target: "/v1/approvals/apr_1", status: 400, field: "tenant_id", msg: "is required"},
		{name: "show: unknown parameter", method: "GET", target: "/v1/approvals/apr_1?tenant_id=acme&state=pending", status: 400, field: "state", msg: "unknown query parameter"},

		{name: "decide: unknown field", method: "POST", target: approve, body: `{` + dev + `"reason":"ok","comment":"x"}`, status: 400, field: "comment", msg: "unknown field"},
		{name: "decide: field name in another case", method: "POST", target: approve, body: `{` + dev + `"Reason":"ok"}`, status: 400, field: "Reason", msg: "unknown field"},
		{name: "decide: approval_id in the body", method: "POST", target: approve, body: `{` + dev + `"reason":"ok","approval_id":"apr_2"}`, status: 400, field: "approval_id", msg: "the path names the approval"},
		{name: "decide: decision in the body", method: "POST", target: approve, body: `{` + dev + `"reason":"ok","decision":"denied"}`, status: 400, field: "decision", msg: "the path decides"},
		{name: "decide: missing reason", method: "POST", target: approve, body: `{"tenant_id":"acme","approver":"maria"}`, status: 400, field: "reason", msg: "is required"},
		{name: "decide: blank reason", method: "POST", target: approve, body: `{` + dev + `"reason":"  "}`, status: 400, field: "reason", msg: "is required"},
		{name: "decide: missing reason with a key", method: "POST", target: approve, body: `{}`, key: "approver-key", status: 400, field: "reason", msg: "is required"},
		{name: "decide: no approver in development mode", method: "POST", target: approve, body: `{"tenant_id":"acme","reason":"ok"}`, status: 400, field: "approver", msg: "development mode"},
		{name: "decide: no tenant in development mode", method: "POST", target: approve, body: `{"approver":"maria","reason":"ok"}`, status: 400, field: "tenant_id", msg: "is required"},
		{name: "decide: reason a number", method: "POST", target: approve, body: `{` + dev + `"reason":42}`, status: 400, field: "reason", msg: "must be a string, not a number"},
		{name: "decide: duplicate field", method: "POST", target: approve, body: `{` + dev + `"reason":"a","reason":"b"}`, status: 400, field: "reason", msg: "duplicate field"},
		{name: "decide: malformed JSON", method: "POST", target: approve, body: `{"reason":"ok",}`, status: 400, msg: "malformed JSON"},
		{name: "decide: an array", method: "POST", target: approve, body: `[{"reason":"ok"}]`, status: 400, msg: "must be a JSON object, not an array"},
		{name: "decide: empty body", method: "POST", target: approve, contentType: mediaJSON, status: 400, msg: "request body is empty"},
		{name: "decide: query parameter", method: "POST", target: approve + "?tenant_id=acme", body: `{` + dev + `"reason":"ok"}`, status: 400, field: "tenant_id", msg: "unknown query parameter"},
		{name: "decide: not JSON", method: "POST", target: approve, body: `reason=ok`, contentType: "application/x-www-form-urlencoded", status: 415, msg: "application/json"},
		{name: "decide: text/plain", method: "POST", target: "/v1/approvals/apr_1/deny", body: `{"reason":"ok"}`, contentType: "text/plain", status: 415, msg: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fullApprovals()
			cfg := Config{Approvals: fake}
			if tt.key != "" {
				cfg.Authenticate = testKeys.authenticate
			}
			s, _ := newTestServer(fake, cfg)
			req := newRequest(tt.method, tt.target, tt.body)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			p := readProblem(t, serve(s, req), req, tt.status, writ.EINVALID)
			switch {
			case tt.field != "" && !hasDetail(p, tt.field, tt.msg):
				t.Errorf("%s %s %s: errors = %+v, want one on %q saying %q", tt.method, tt.target, tt.body, p.Errors, tt.field, tt.msg)
			case tt.field != "" && tt.method == http.MethodGet && !strings.Contains(p.Detail, tt.field):
				t.Errorf("%s %s: detail %q does not name the parameter %q", tt.method, tt.target, p.Detail, tt.field)
			case tt.field == "" && !strings.Contains(p.Detail, tt.msg) && !hasDetail(p, "", tt.msg):
				t.Errorf("%s %s %s: detail = %q, errors = %+v, want %q", tt.method, tt.target, tt.body, p.Detail, p.Errors, tt.msg)
			}
			if n := fake.calls(); n != 0 {
				t.Errorf("%s %s %s: approvals called %d times, want 0", tt.method, tt.target, tt.body, n)
			}
		})
	}
}

func TestNoApprovals(t *testing.T) {
	fake := fullApprovals()
	s, _ := newTestServer(fake, Config{}) // the service has approvals, but the server was given none
	reqs := append(approvalRequests(),
		newRequest(http.MethodGet, "/v1/approvals?state=bogus", ""),
		newRequest(http.MethodPost, "/v1/approvals/apr_1/deny", "{}"),
	)
	for _, req := range reqs {
		p := readProblem(t, serve(s, req), req, http.StatusNotFound, writ.ENOTFOUND)
		if p.Detail != "this server has no approval queue" {
			t.Errorf("%s %s: detail = %q, want %q", req.Method, req.URL, p.Detail, "this server has no approval queue")
		}
	}
	if n := fake.calls(); n != 0 {
		t.Errorf("a server without approvals called the service %d times", n)
	}
}

// TestApprovalAnswerGuards: an answer about another tenant's or another
// approval request than asked for is never sent; it is an internal error.
func TestApprovalAnswerGuards(t *testing.T) {
	other := func(f func(*writ.ApprovalRequest)) *writ.ApprovalRequest {
		a := fullApproval()
		f(a)
		return a
	}
	tests := []struct {
		name string
		fake *fakeService
		req  *http.Request
	}{
		{"list: another tenant's request", &fakeService{approvals: &writ.ApprovalPage{Approvals: []writ.ApprovalRequest{*fullApproval(), *other(func(a *writ.ApprovalRequest) { a.TenantID = "globex" })}}}, approvalRequests()[0]},
		{"list: no page", &fakeService{}, approvalRequests()[0]},
		{"show: another tenant", &fakeService{approval: other(func(a *writ.ApprovalRequest) { a.TenantID = "globex" })}, approvalRequests()[1]},
		{"show: another request", &fakeService{approval: other(func(a *writ.ApprovalRequest) { a.ApprovalID = "apr_2" })}, approvalRequests()[1]},
		{"show: nothing", &fakeService{}, approvalRequests()[1]},
		{"approve: another tenant", &fakeService{approval: other(func(a *writ.ApprovalRequest) { a.TenantID = "globex" })}, approvalRequests()[2]},
		{"deny: another request", &fakeService{approval: other(func(a *writ.ApprovalRequest) { a.ApprovalID = "apr_2" })}, approvalRequests()[3]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, log := newTestServer(tt.fake, Config{Approvals: tt.fake})
			rec := serve(s, tt.req)
			p := readProblem(t, rec, tt.req, http.StatusInternalServerError, writ.EINTERNAL)
			if p.Detail != "internal error" || strings.Contains(rec.Body.String(), "globex") {
				t.Errorf("%s %s: answer %s, want only \"internal error\"", tt.req.Method, tt.req.URL, rec.Body)
			}
			if !strings.Contains(log.String(), "approvals answered") && !strings.Contains(log.String(), "approvals returned") {
				t.Errorf("%s %s: the mismatch was not logged:\n%s", tt.req.Method, tt.req.URL, log)
			}
		})
	}
}

func TestApprovalListsAreArrays(t *testing.T) {
	bare := &writ.ApprovalRequest{ApprovalID: "apr_1", TenantID: "acme", State: writ.ApprovalPending}
	fake := &fakeService{approval: bare, approvals: &writ.ApprovalPage{Approvals: []writ.ApprovalRequest{*bare}}}
	s, _ := newTestServer(fake, Config{Approvals: fake})
	for _, req := range approvalRequests() {
		rec := serve(s, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s %s = %d; body %s", req.Method, req.URL, rec.Code, rec.Body)
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if list, ok := body["approvals"].([]any); ok {
			body = list[0].(map[string]any)
		}
		for _, name := range []string{"subject_ids", "reasons", "events"} {
			if a, ok := body[name].([]any); !ok || len(a) != 0 {
				t.Errorf("%s %s: %s = %#v, want []", req.Method, req.URL, name, body[name])
			}
		}
		if a, ok := body["binding"].(map[string]any)["bundle_revisions"].([]any); !ok || len(a) != 0 {
			t.Errorf("%s %s: binding.bundle_revisions = %#v, want []", req.Method, req.URL, body["binding"])
		}
	}
	if bare.Events != nil || fake.approvals.Approvals[0].Reasons != nil {
		t.Errorf("the server modified the service's answer")
	}
	empty := &fakeService{approvals: &writ.ApprovalPage{}}
	s, _ = newTestServer(empty, Config{Approvals: empty})
	if rec := serve(s, approvalRequests()[0]); rec.Body.String() != `{"approvals":[]}` {
		t.Errorf("GET /v1/approvals of an empty page = %s, want {\"approvals\":[]}", rec.Body)
	}
}

// TestDecideBodyIsDecideApprovalRequest keeps decideBody in step with
// writ.DecideApprovalRequest: the same members, less those the path names.
func TestDecideBodyIsDecideApprovalRequest(t *testing.T) {
	body, _ := goFields(reflect.TypeFor[decideBody]())
	req, _ := goFields(reflect.TypeFor[writ.DecideApprovalRequest]())
	pathNamed := slices.Sorted(maps.Keys(decidePathNames))
	without := slices.DeleteFunc(slices.Clone(req), func(n string) bool { return slices.Contains(pathNamed, n) })
	if !slices.Equal(body, without) {
		t.Errorf("decideBody members = %q, want those of writ.DecideApprovalRequest but %q: %q", body, pathNamed, without)
	}
	full := &writ.DecideApprovalRequest{TenantID: "t", ApprovalID: "apr_1", Decision: writ.ApprovalDenied, Approver: "a", Reason: "r", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	b := decideBodyOf(full)
	back := &writ.DecideApprovalRequest{TenantID: b.TenantID, ApprovalID: full.ApprovalID, Decision: full.Decision, Approver: b.Approver, Reason: b.Reason, TraceID: b.TraceID}
	if !reflect.DeepEqual(back, full) {
		t.Errorf("decideBodyOf loses members: %+v from %+v", back, full)
	}
}
