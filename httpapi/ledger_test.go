package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

func TestLedgerRoutes(t *testing.T) {
	cp, ip, cons := fullCheckpoint(7), fullInclusionProof(), fullConsistencyProof()
	tests := []struct {
		name   string
		method string
		target string
		accept string
		call   ledgerCall
		want   any    // the JSON body's value, or
		note   string // the note text body
		cache  string // Cache-Control
	}{
		{name: "latest checkpoint", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "checkpoint of size 0", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme&size=0",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "checkpoint of an empty size", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme&size=",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "checkpoint of size 7", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme%20%26%20co&size=7",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme & co", sizes: [2]int64{7}}, want: cp, cache: cacheImmutable},
		{name: "checkpoint, Accept: application/json", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme&size=7", accept: "application/json",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme", sizes: [2]int64{7}}, want: cp, cache: cacheImmutable},
		{name: "checkpoint note, Accept: text/plain", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "text/plain",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, note: cp.Note, cache: "no-cache"},
		{name: "checkpoint note of size 7, Accept: text/plain", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme&size=7", accept: "text/plain",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme", sizes: [2]int64{7}}, note: cp.Note, cache: cacheImmutable},
		{name: "checkpoint note, Accept: text/*", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "text/*",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, note: cp.Note, cache: "no-cache"},
		{name: "checkpoint note, Accept: text/plain over */*", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "text/plain, */*",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, note: cp.Note, cache: "no-cache"},
		{name: "checkpoint note, Accept: JSON ranked lower", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "application/json;q=0.5, text/plain;q=0.9",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, note: cp.Note, cache: "no-cache"},
		{name: "checkpoint JSON, Accept: text/plain ranked lower", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "text/plain;q=0.5, application/json",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "checkpoint JSON, Accept: a tie", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "text/plain, application/json",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "checkpoint JSON, Accept: */*", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "*/*",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "checkpoint JSON, Accept: text/plain;q=0", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "text/plain;q=0",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "checkpoint note, format=note", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme&size=7&format=note", accept: "application/json",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme", sizes: [2]int64{7}}, note: cp.Note, cache: cacheImmutable},
		{name: "checkpoint JSON, format=json", method: "GET", target: "/v1/ledger/checkpoint?tenant_id=acme&format=json", accept: "text/plain",
			call: ledgerCall{method: "Checkpoint", tenantID: "acme"}, want: cp, cache: "no-cache"},
		{name: "issue checkpoint", method: "POST", target: "/v1/ledger/checkpoint?tenant_id=acme",
			call: ledgerCall{method: "IssueCheckpoint", tenantID: "acme"}, want: cp},
		{name: "issue checkpoint, Accept: text/plain", method: "POST", target: "/v1/ledger/checkpoint?tenant_id=acme", accept: "text/plain",
			call: ledgerCall{method: "IssueCheckpoint", tenantID: "acme"}, want: cp},
		{name: "latest inclusion proof", method: "GET", target: "/v1/records/rec%2F1%20x/proof?tenant_id=acme",
			call: ledgerCall{method: "InclusionProof", tenantID: "acme", recordID: "rec/1 x"}, want: ip, cache: "no-cache"},
		{name: "inclusion proof of size 7", method: "GET", target: "/v1/records/r1/proof?tenant_id=acme&size=7",
			call: ledgerCall{method: "InclusionProof", tenantID: "acme", recordID: "r1", sizes: [2]int64{7}}, want: ip, cache: cacheImmutable},
		{name: "consistency to the latest", method: "GET", target: "/v1/ledger/consistency?tenant_id=acme&from=3",
			call: ledgerCall{method: "ConsistencyProof", tenantID: "acme", sizes: [2]int64{3, 0}}, want: cons, cache: "no-cache"},
		{name: "consistency to 0", method: "GET", target: "/v1/ledger/consistency?tenant_id=acme&from=3&to=0",
			call: ledgerCall{method: "ConsistencyProof", tenantID: "acme", sizes: [2]int64{3, 0}}, want: cons, cache: "no-cache"},
		{name: "consistency from 3 to 7", method: "GET", target: "/v1/ledger/consistency?tenant_id=acme&from=3&to=7",
			call: ledgerCall{method: "ConsistencyProof", tenantID: "acme", sizes: [2]int64{3, 7}}, want: cons, cache: cacheImmutable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fullLedger()
			s, _ := newTestServer(fake, Config{Ledger: fake})
			req := newRequest(tt.method, tt.target, "")
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			rec := serve(s, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s %s = %d, want 200; body %s", tt.method, tt.target, rec.Code, rec.Body)
			}
			if got := fake.ledgerArgs(); !reflect.DeepEqual(got, []ledgerCall{tt.call}) {
				t.Errorf("%s %s: ledger calls = %+v, want %+v", tt.method, tt.target, got, []ledgerCall{tt.call})
			}
			if got := rec.Header().Get("Cache-Control"); got != tt.cache {
				t.Errorf("%s %s: Cache-Control = %q, want %q", tt.method, tt.target, got, tt.cache)
			}
			wantVary := ""
			if tt.method == "GET" && strings.HasPrefix(tt.target, "/v1/ledger/checkpoint") {
				wantVary = "Accept"
			}
			if got := rec.Header().Get("Vary"); got != wantVary {
				t.Errorf("%s %s: Vary = %q, want %q", tt.method, tt.target, got, wantVary)
			}
			if tt.note != "" {
				if got := rec.Header().Get("Content-Type"); got != "text/plain; charset=utf-8" {
					t.Errorf("%s %s: Content-Type = %q, want text/plain; charset=utf-8", tt.method, tt.target, got)
				}
				if got := rec.Body.String(); got != tt.note {
					t.Errorf("%s %s: body\n%q\nwant the note\n%q", tt.method, tt.target, got, tt.note)
				}
				return
			}
			if got := rec.Header().Get("Content-Type"); got != mediaJSON {
				t.Errorf("%s %s: Content-Type = %q, want %q", tt.method, tt.target, got, mediaJSON)
			}
			got := reflect.New(reflect.TypeOf(tt.want).Elem())
			dec := json.NewDecoder(rec.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(got.Interface()); err != nil {
				t.Fatalf("%s %s: decode body: %v", tt.method, tt.target, err)
			}
			if !reflect.DeepEqual(got.Interface(), tt.want) {
				t.Errorf("%s %s: body = %+v, want %+v", tt.method, tt.target, got.Interface(), tt.want)
			}
		})
	}
}

func TestLedgerBadInput(t *testing.T) {
	tests := []struct {
		method string
		target string
		body   string
		field  string // a detail must name this parameter (when set)
		msg    string // ... with this message (or the detail says it, when field is empty)
	}{
		{"GET", "/v1/ledger/checkpoint", "", "tenant_id", "is required"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=", "", "tenant_id", "is required"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&tenant_id=u", "", "tenant_id", "at most once"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=-1", "", "size", "a whole number"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=abc", "", "size", "a whole number"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=1.5", "", "size", "a whole number"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=%2B3", "", "size", "a whole number"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=07", "", "size", "a whole number"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=1e3", "", "size", "a whole number"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=99999999999999999999", "", "size", "a whole number"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=1&size=2", "", "size", "at most once"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&format=xml", "", "format", `"json" or "note"`},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&from=1", "", "from", "unknown query parameter"},
		{"GET", "/v1/ledger/checkpoint?tenant_id=t&size=%zz", "", "", "malformed query string"},
		{"POST", "/v1/ledger/checkpoint", "", "tenant_id", "is required"},
		{"POST", "/v1/ledger/checkpoint?tenant_id=t&size=3", "", "size", "unknown query parameter"},
		{"POST", "/v1/ledger/checkpoint?tenant_id=t", "{}", "", "takes no request body"},
		{"POST", "/v1/ledger/checkpoint?tenant_id=t", " ", "", "takes no request body"},
		{"GET", "/v1/records/r1/proof", "", "tenant_id", "is required"},
		{"GET", "/v1/records/r1/proof?tenant_id=t&size=-7", "", "size", "a whole number"},
		{"GET", "/v1/records/r1/proof?tenant_id=t&size=seven", "", "size", "a whole number"},
		{"GET", "/v1/records/r1/proof?tenant_id=t&format=note", "", "format", "unknown query parameter"},
		{"GET", "/v1/ledger/consistency?from=1", "", "tenant_id", "is required"},
		{"GET", "/v1/ledger/consistency?tenant_id=t", "", "from", "is required"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=", "", "from", "is required"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=0", "", "from", "at least 1"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=-2", "", "from", "at least 1"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=x", "", "from", "at least 1"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=1&to=-1", "", "to", "a whole number"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=1&to=y", "", "to", "a whole number"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=5&to=3", "", "to", "must not be smaller than from"},
		{"GET", "/v1/ledger/consistency?tenant_id=t&from=1&size=3", "", "size", "unknown query parameter"},
	}
	for _, tt := range tests {
		fake := fullLedger()
		s, log := newTestServer(fake, Config{Ledger: fake})
		req := newRequest(tt.method, tt.target, tt.body)
		if tt.body != "" {
			req.Header.Del("Content-Type")
		}
		rec := serve(s, req)
		p := readProblem(t, rec, req, http.StatusBadRequest, writ.EINVALID)
		switch {
		case tt.field != "" && !hasDetail(p, tt.field, tt.msg):
			t.Errorf("%s %s: errors = %+v, want one on %q saying %q", tt.method, tt.target, p.Errors, tt.field, tt.msg)
		case tt.field != "" && len(p.Errors) == 1 && !strings.Contains(p.Detail, tt.field):
			t.Errorf("%s %s: detail %q does not name the parameter %q", tt.method, tt.target, p.Detail, tt.field)
		case tt.field == "" && !strings.Contains(p.Detail, tt.msg):
			t.Errorf("%s %s: detail = %q, want %q", tt.method, tt.target, p.Detail, tt.msg)
		}
		if got := rec.Header().Get("Cache-Control"); got != "" {
			t.Errorf("%s %s: a 400 has Cache-Control %q", tt.method, tt.target, got)
		}
		if n := fake.calls(); n != 0 {
			t.Errorf("%s %s: ledger called %d times, want 0", tt.method, tt.target, n)
		}
		if !strings.Contains(log.String(), "status=400") {
			t.Errorf("%s %s: request not logged as 400:\n%s", tt.method, tt.target, log)
		}
	}
}

func TestIssueCheckpointBodyOfUnknownLength(t *testing.T) {
	for _, tt := range []struct {
		body   string
		status int
		calls  int
	}{{"", 200, 1}, {"x", 400, 0}} {
		fake := fullLedger()
		s, _ := newTestServer(fake, Config{Ledger: fake})
		req := newRequest(http.MethodPost, "/v1/ledger/checkpoint?tenant_id=t", "")
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(tt.body)), -1
		rec := serve(s, req)
		if rec.Code != tt.status {
			t.Errorf("POST /v1/ledger/checkpoint with the chunked body %q = %d, want %d; body %s", tt.body, rec.Code, tt.status, rec.Body)
		}
		if fake.calls() != tt.calls {
			t.Errorf("POST /v1/ledger/checkpoint with the chunked body %q: ledger called %d times, want %d", tt.body, fake.calls(), tt.calls)
		}
	}
}

// ledgerRequests returns one valid request of each ledger route.
func ledgerRequests() []*http.Request {
	return []*http.Request{
		newRequest(http.MethodGet, "/v1/ledger/checkpoint?tenant_id=t", ""),
		newRequest(http.MethodGet, "/v1/ledger/checkpoint?tenant_id=t&size=7&format=note", ""),
		newRequest(http.MethodPost, "/v1/ledger/checkpoint?tenant_id=t", ""),
		newRequest(http.MethodGet, "/v1/records/r1/proof?tenant_id=t&size=7", ""),
		newRequest(http.MethodGet, "/v1/ledger/consistency?tenant_id=t&from=3&to=7", ""),
	}
}

func TestLedgerNotFound(t *testing.T) {
	fake := &fakeService{err: writ.Errorf(writ.ENOTFOUND, "no checkpoint of tree size 7")}
	s, _ := newTestServer(fake, Config{Ledger: fake})
	for _, req := range ledgerRequests() {
		rec := serve(s, req)
		p := readProblem(t, rec, req, http.StatusNotFound, writ.ENOTFOUND)
		if p.Detail != "no checkpoint of tree size 7" {
			t.Errorf("%s %s: detail = %q, want the ledger's", req.Method, req.URL, p.Detail)
		}
		if got := rec.Header().Get("Cache-Control"); got != "" {
			t.Errorf("%s %s: a 404 has Cache-Control %q; it must not be kept", req.Method, req.URL, got)
		}
	}
	if n := fake.calls(); n != len(ledgerRequests()) {
		t.Errorf("ledger called %d times, want %d", n, len(ledgerRequests()))
	}
}

func TestNoLedger(t *testing.T) {
	fake := fullLedger()
	s, _ := newTestServer(fake, Config{}) // the service has a ledger, but the server was given none
	reqs := append(ledgerRequests(),
		newRequest(http.MethodGet, "/v1/ledger/checkpoint?size=-1", ""),
		newRequest(http.MethodPost, "/v1/ledger/checkpoint", "{}"),
	)
	for _, req := range reqs {
		rec := serve(s, req)
		p := readProblem(t, rec, req, http.StatusNotFound, writ.ENOTFOUND)
		if p.Detail != "this server has no ledger" {
			t.Errorf("%s %s: detail = %q, want %q", req.Method, req.URL, p.Detail, "this server has no ledger")
		}
	}
	if n := fake.calls(); n != 0 {
		t.Errorf("a server without a ledger called the service %d times", n)
	}
}

// TestLedgerAnswerOfOtherSize checks the guard that keeps a wrong answer
// from being cached as immutable: an answer for another tree size than
// the one asked for is an internal error.
func TestLedgerAnswerOfOtherSize(t *testing.T) {
	for _, target := range []string{
		"/v1/ledger/checkpoint?tenant_id=t&size=6",
		"/v1/ledger/checkpoint?tenant_id=t&size=6&format=note",
		"/v1/records/r1/proof?tenant_id=t&size=6",
		"/v1/ledger/consistency?tenant_id=t&from=2",
		"/v1/ledger/consistency?tenant_id=t&from=3&to=6",
	} {
		fake := fullLedger()
		s, log := newTestServer(fake, Config{Ledger: fake})
		req := newRequest(http.MethodGet, target, "")
		rec := serve(s, req)
		readProblem(t, rec, req, http.StatusInternalServerError, writ.EINTERNAL)
		if rec.Header().Get("Cache-Control") != "" {
			t.Errorf("GET %s: the 500 has Cache-Control %q", target, rec.Header().Get("Cache-Control"))
		}
		if !strings.Contains(log.String(), "ledger answered") {
			t.Errorf("GET %s: the mismatch was not logged:\n%s", target, log)
		}
	}
}

func TestPrefersNote(t *testing.T) {
	tests := []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"text/plain"}, true},
		{[]string{"TEXT/Plain; charset=utf-8"}, true},
		{[]string{"text/*"}, true},
		{[]string{"*/*"}, false},
		{[]string{"application/json"}, false},
		{[]string{"application/*, text/plain"}, true},
		{[]string{"application/json, text/plain"}, false},
		{[]string{"application/json", "text/plain"}, false},
		{[]string{"text/plain, */*;q=0.8"}, true},
		{[]string{"text/plain;q=0.4, */*;q=0.8"}, false},
		{[]string{"text/plain;q=0.9", "application/json;q=0.8"}, true},
		{[]string{"text/plain;q=bogus"}, false},
		{[]string{"text/plain;q=2"}, false},
		{[]string{"text/plain;q=0, */*"}, false},
		{[]string{"text/*;q=0.1, text/plain;q=1, application/json;q=0.5"}, true},
		{[]string{"image/png"}, false},
		{[]string{"nonsense, text/plain"}, true},
		{[]string{"application/problem+json, text/plain"}, true},
	}
	for _, tt := range tests {
		if got := prefersNote(tt.accept); got != tt.want {
			t.Errorf("prefersNote(%q) = %v, want %v", tt.accept, got, tt.want)
		}
	}
}
