package console

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// fakeAPI records what the console forwards to the API.
type fakeAPI struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

func (f *fakeAPI) calls() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.seen...)
}

// The test keys: the token is the key's name.
var principals = map[string]*writ.Principal{
	"approver-key": {KeyID: "key_a", TenantID: "acme", Subject: "maria", Roles: []writ.Role{writ.RoleApprover}},
	"auditor-key":  {KeyID: "key_o", TenantID: "acme", Subject: "olga", Roles: []writ.Role{writ.RoleAuditor}},
	"admin-key":    {KeyID: "key_d", TenantID: "acme", Subject: "dora", Roles: []writ.Role{writ.RoleAdmin}},
	"agent-key":    {KeyID: "key_b", TenantID: "acme", Subject: "support-bot", Roles: []writ.Role{writ.RoleAgent}},
	"mixed-key":    {KeyID: "key_s", TenantID: "acme", Subject: "sam", Roles: []writ.Role{writ.RoleAgent, writ.RoleApprover}},
}

func authenticate(_ context.Context, token string) (*writ.Principal, error) {
	if token == "down-key" {
		return nil, errors.New("store is down: hunter2")
	}
	if p, ok := principals[token]; ok {
		return p, nil
	}
	return nil, writ.Errorf(writ.EUNAUTHENTICATED, "unknown key")
}

// clock is a controllable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	c     *Console
	api   *fakeAPI
	clock *clock
	log   *bytes.Buffer
	dev   bool
}

func newEnv(t *testing.T, dev bool, mod ...func(*Config)) *env {
	t.Helper()
	e := &env{api: &fakeAPI{}, clock: &clock{now: time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)}, log: &bytes.Buffer{}, dev: dev}
	cfg := Config{API: e.api, Now: e.clock.Now, Logger: slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if !dev {
		cfg.Authenticate = authenticate
	}
	for _, m := range mod {
		m(&cfg)
	}
	e.c = New(cfg)
	return e
}

func (e *env) do(r *http.Request) *httptest.ResponseRecorder {
	if e.dev && r.Host == "example.com" {
		// httptest's default host; development mode answers loopback
		// hosts only.
		r.Host = "127.0.0.1:4100"
	}
	w := httptest.NewRecorder()
	e.c.ServeHTTP(w, r)
	return w
}

func signInRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/console/session", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// signIn signs in with key and returns the session cookie and the CSRF
// token.
func (e *env) signIn(t *testing.T, body string) (*http.Cookie, string) {
	t.Helper()
	w := e.do(signInRequest(body))
	if w.Code != http.StatusOK {
		t.Fatalf("sign in with %s = %d %s", body, w.Code, w.Body)
	}
	var info SessionInfo
	if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != CookieName {
		t.Fatalf("sign in set cookies %v, want one %s", cookies, CookieName)
	}
	return cookies[0], info.CSRFToken
}

func TestSignIn(t *testing.T) {
	for _, tt := range []struct {
		name   string
		body   string
		ctype  string
		origin string
		status int
		roles  []writ.Role
	}{
		{"approver", `{"api_key":"approver-key"}`, "application/json", "", 200, []writ.Role{writ.RoleApprover}},
		{"auditor", `{"api_key":"auditor-key"}`, "application/json", "", 200, []writ.Role{writ.RoleAuditor}},
		{"admin", `{"api_key":"admin-key"}`, "application/json", "", 200, []writ.Role{writ.RoleAdmin}},
		{"agent and approver: the console roles only", `{"api_key":"mixed-key"}`, "application/json", "", 200, []writ.Role{writ.RoleApprover}},
		{"agent key refused", `{"api_key":"agent-key"}`, "application/json", "", 403, nil},
		{"unknown key", `{"api_key":"nope"}`, "application/json", "", 401, nil},
		{"store down", `{"api_key":"down-key"}`, "application/json", "", 503, nil},
		{"no key", `{}`, "application/json", "", 400, nil},
		{"unknown field", `{"api_key":"approver-key","role":"admin"}`, "application/json", "", 400, nil},
		{"two objects", `{"api_key":"approver-key"} {"api_key":"admin-key"}`, "application/json", "", 400, nil},
		{"not JSON", `api_key=approver-key`, "application/x-www-form-urlencoded", "", 415, nil},
		{"cross-origin", `{"api_key":"approver-key"}`, "application/json", "https://evil.example", 403, nil},
		{"same origin", `{"api_key":"approver-key"}`, "application/json", "http://example.com", 200, []writ.Role{writ.RoleApprover}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			r := signInRequest(tt.body)
			r.Header.Set("Content-Type", tt.ctype)
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			w := e.do(r)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			cookies := w.Result().Cookies()
			if tt.status != 200 {
				if len(cookies) != 0 || e.c.Sessions() != 0 {
					t.Errorf("a refused sign-in set cookies %v and left %d sessions", cookies, e.c.Sessions())
				}
				if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json") {
					t.Errorf("a refusal is not a problem: %s", w.Header().Get("Content-Type"))
				}
				if strings.Contains(w.Body.String(), "hunter2") {
					t.Errorf("the answer leaks the authenticator's error: %s", w.Body)
				}
				return
			}
			var info SessionInfo
			if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil {
				t.Fatal(err)
			}
			if !equalRoles(info.Roles, tt.roles) || info.TenantID != "acme" || info.CSRFToken == "" || info.DevMode {
				t.Errorf("session info = %+v, want roles %v of acme with a CSRF token", info, tt.roles)
			}
			ck := cookies[0]
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != Prefix || ck.Secure || ck.MaxAge != 0 {
				t.Errorf("cookie = %+v, want HttpOnly, SameSite=Strict, Path=%s, not Secure over plain HTTP, a session cookie", ck, Prefix)
			}
			if strings.Contains(ck.Value, "key") || len(ck.Value) < 40 {
				t.Errorf("cookie value %q is not a random session id", ck.Value)
			}
		})
	}
}

func equalRoles(a, b []writ.Role) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSecureCookieOverTLS(t *testing.T) {
	e := newEnv(t, false)
	r := signInRequest(`{"api_key":"approver-key"}`)
	r.TLS = &tls.ConnectionState{}
	w := e.do(r)
	if ck := w.Result().Cookies(); len(ck) != 1 || !ck[0].Secure {
		t.Errorf("over TLS the cookie is %+v, want Secure", ck)
	}
}

func TestForwardUsesTheSessionsKey(t *testing.T) {
	e := newEnv(t, false)
	ck, _ := e.signIn(t, `{"api_key":"auditor-key"}`)
	r := httptest.NewRequest(http.MethodGet, "/console/api/v1/records?tenant_id=acme&status=DECIDED", nil)
	r.AddCookie(ck)
	r.Header.Set("Authorization", "Bearer smuggled")
	w := e.do(r)
	if w.Code != 200 {
		t.Fatalf("forward = %d %s", w.Code, w.Body)
	}
	calls := e.api.calls()
	if len(calls) != 1 {
		t.Fatalf("the API was called %d times, want 1", len(calls))
	}
	got := calls[0]
	if got.URL.Path != "/v1/records" || got.URL.RawQuery != "tenant_id=acme&status=DECIDED" {
		t.Errorf("forwarded %s?%s, want /v1/records?tenant_id=acme&status=DECIDED", got.URL.Path, got.URL.RawQuery)
	}
	if a := got.Header.Values("Authorization"); len(a) != 1 || a[0] != "Bearer auditor-key" {
		t.Errorf("forwarded Authorization %q, want the session's key only", a)
	}
	if got.Header.Get("Cookie") != "" {
		t.Errorf("the session cookie was forwarded to the API")
	}
	if w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Errorf("an API answer through the console has headers %v", w.Header())
	}
}

func TestForwardNeedsASession(t *testing.T) {
	e := newEnv(t, false)
	for _, ck := range []*http.Cookie{nil, {Name: CookieName, Value: "made-up"}} {
		r := httptest.NewRequest(http.MethodGet, "/console/api/v1/records", nil)
		if ck != nil {
			r.AddCookie(ck)
		}
		if w := e.do(r); w.Code != http.StatusUnauthorized {
			t.Errorf("without a session (cookie %v) = %d, want 401", ck, w.Code)
		}
	}
	if n := len(e.api.calls()); n != 0 {
		t.Errorf("the API was called %d times without a session", n)
	}
}

// TestForwardOnlyWhatPeopleDo: reads and the two decisions are forwarded,
// decisions only with the CSRF token and from this origin; agent and
// admin routes never are.
func TestForwardOnlyWhatPeopleDo(t *testing.T) {
	for _, tt := range []struct {
		name, method, path string
		csrf               string // "ok" sends the session's
		origin             string
		status             int
		forwarded          bool
	}{
		{"read", "GET", "/console/api/v1/approvals", "", "", 200, true},
		{"health", "GET", "/console/api/healthz", "", "", 200, true},
		{"approve", "POST", "/console/api/v1/approvals/apr_1/approve", "ok", "", 200, true},
		{"deny from this origin", "POST", "/console/api/v1/approvals/apr_1/deny", "ok", "http://example.com", 200, true},
		{"approve without CSRF", "POST", "/console/api/v1/approvals/apr_1/approve", "", "", 403, false},
		{"approve with a wrong CSRF", "POST", "/console/api/v1/approvals/apr_1/approve", "wrong", "", 403, false},
		{"approve cross-origin", "POST", "/console/api/v1/approvals/apr_1/approve", "ok", "https://evil.example", 403, false},
		{"check", "POST", "/console/api/v1/check", "ok", "", 404, false},
		{"start a run", "POST", "/console/api/v1/runs", "ok", "", 404, false},
		{"issue a checkpoint", "POST", "/console/api/v1/ledger/checkpoint", "ok", "", 404, false},
		{"create a key", "POST", "/console/api/v1/keys", "ok", "", 200, true},
		{"revoke a key", "POST", "/console/api/v1/keys/key_1/revoke", "ok", "", 200, true},
		{"create a key without CSRF", "POST", "/console/api/v1/keys", "", "", 403, false},
		{"revoke a key cross-origin", "POST", "/console/api/v1/keys/key_1/revoke", "ok", "https://evil.example", 403, false},
		{"revoke two keys", "POST", "/console/api/v1/keys/key_1/revoke/x", "ok", "", 404, false},
		{"outside the API", "GET", "/console/api/debug/pprof", "", "", 404, false},
		{"dot segments", "POST", "/console/api/v1/approvals/apr_1/approve/../../../check", "ok", "", 404, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			ck, csrf := e.signIn(t, `{"api_key":"approver-key"}`)
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(`{"reason":"ok"}`))
			r.AddCookie(ck)
			switch tt.csrf {
			case "ok":
				r.Header.Set(CSRFHeader, csrf)
			case "":
			default:
				r.Header.Set(CSRFHeader, tt.csrf)
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			w := e.do(r)
			if w.Code != tt.status {
				t.Errorf("%s %s = %d, want %d; %s", tt.method, tt.path, w.Code, tt.status, w.Body)
			}
			calls := e.api.calls()
			if got := len(calls) == 1; got != tt.forwarded {
				t.Fatalf("forwarded = %v (%d calls), want %v", got, len(calls), tt.forwarded)
			}
			if tt.forwarded && calls[0].Header.Get(CSRFHeader) != "" {
				t.Errorf("the CSRF token was forwarded to the API")
			}
		})
	}
}

// TestARevokedKeyEndsTheSession: once the API refuses the session's key,
// the session is gone.
func TestARevokedKeyEndsTheSession(t *testing.T) {
	e := newEnv(t, false)
	e.c.cfg.API = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	ck, _ := e.signIn(t, `{"api_key":"approver-key"}`)
	r := httptest.NewRequest(http.MethodGet, "/console/api/v1/approvals", nil)
	r.AddCookie(ck)
	if w := e.do(r); w.Code != http.StatusUnauthorized {
		t.Fatalf("forward = %d, want the API's 401", w.Code)
	}
	if n := e.c.Sessions(); n != 0 {
		t.Errorf("%d sessions live after the API refused the key, want 0", n)
	}
}

func TestSessionsExpire(t *testing.T) {
	e := newEnv(t, false, func(c *Config) { c.IdleTimeout = 10 * time.Minute; c.MaxAge = 30 * time.Minute })
	// signedIn reads GET /console/session: 200 whether or not a session
	// is live (no session is not a failure), {"signed_in":false} and
	// nothing else without one.
	signedIn := func(ck *http.Cookie) bool {
		r := httptest.NewRequest(http.MethodGet, "/console/session", nil)
		r.AddCookie(ck)
		w := e.do(r)
		var info SessionInfo
		if err := json.Unmarshal(w.Body.Bytes(), &info); w.Code != 200 || err != nil {
			t.Fatalf("GET /console/session = %d %s, want 200 and JSON", w.Code, w.Body)
		}
		if !info.SignedIn && w.Body.String() != `{"signed_in":false}` {
			t.Fatalf("GET /console/session without a session = %s, want only signed_in false", w.Body)
		}
		if info.SignedIn && (info.Subject == "" || info.CSRFToken == "") {
			t.Fatalf("GET /console/session of a live session = %s, want who and the CSRF token", w.Body)
		}
		return info.SignedIn
	}
	ck, _ := e.signIn(t, `{"api_key":"approver-key"}`)
	e.clock.advance(9 * time.Minute)
	if !signedIn(ck) {
		t.Fatalf("after 9 idle minutes: signed out, want signed in")
	}
	e.clock.advance(10 * time.Minute)
	if signedIn(ck) {
		t.Fatalf("after 10 idle minutes: signed in, want signed out")
	}
	ck, _ = e.signIn(t, `{"api_key":"approver-key"}`)
	for i := 0; i < 3; i++ {
		e.clock.advance(9 * time.Minute)
		if !signedIn(ck) {
			t.Fatalf("in use after %d minutes: signed out, want signed in", 9*(i+1))
		}
	}
	e.clock.advance(4 * time.Minute)
	if signedIn(ck) {
		t.Fatalf("31 minutes after sign-in: signed in, want signed out (MaxAge)")
	}
}

func TestSignOut(t *testing.T) {
	e := newEnv(t, false)
	ck, csrf := e.signIn(t, `{"api_key":"approver-key"}`)
	r := httptest.NewRequest(http.MethodDelete, "/console/session", nil)
	r.AddCookie(ck)
	if w := e.do(r); w.Code != http.StatusForbidden {
		t.Fatalf("sign-out without CSRF = %d, want 403", w.Code)
	}
	r = httptest.NewRequest(http.MethodDelete, "/console/session", nil)
	r.AddCookie(ck)
	r.Header.Set(CSRFHeader, csrf)
	w := e.do(r)
	if w.Code != http.StatusNoContent {
		t.Fatalf("sign-out = %d, want 204", w.Code)
	}
	if c := w.Result().Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("sign-out cookies %v, want the session cookie cleared", c)
	}
	r = httptest.NewRequest(http.MethodGet, "/console/api/v1/records", nil)
	r.AddCookie(ck)
	if w := e.do(r); w.Code != http.StatusUnauthorized {
		t.Errorf("after sign-out the old cookie = %d, want 401", w.Code)
	}
}

func TestTooManySessions(t *testing.T) {
	e := newEnv(t, false, func(c *Config) { c.MaxSessions = 1; c.IdleTimeout = time.Minute })
	e.signIn(t, `{"api_key":"approver-key"}`)
	if w := e.do(signInRequest(`{"api_key":"auditor-key"}`)); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a second session over the cap = %d, want 503", w.Code)
	}
	e.clock.advance(2 * time.Minute) // the first expires
	e.signIn(t, `{"api_key":"auditor-key"}`)
}

func TestDevelopmentMode(t *testing.T) {
	e := newEnv(t, true)
	if w := e.do(signInRequest(`{"tenant_id":"acme"}`)); w.Code != http.StatusBadRequest {
		t.Fatalf("dev sign-in without a name = %d, want 400", w.Code)
	}
	ck, _ := e.signIn(t, `{"tenant_id":"acme","subject":"maria"}`)
	r := httptest.NewRequest(http.MethodGet, "/console/session", nil)
	r.AddCookie(ck)
	var info SessionInfo
	json.Unmarshal(e.do(r).Body.Bytes(), &info)
	if !info.DevMode || info.Subject != "maria" || info.TenantID != "acme" || len(info.Roles) != 3 {
		t.Errorf("dev session = %+v", info)
	}
	r = httptest.NewRequest(http.MethodGet, "/console/api/v1/records?tenant_id=acme", nil)
	r.AddCookie(ck)
	e.do(r)
	if calls := e.api.calls(); len(calls) != 1 || calls[0].Header.Get("Authorization") != "" {
		t.Errorf("dev mode forwarded %v, want one call without Authorization", calls)
	}
}

// TestDevelopmentModeLoopbackHostOnly: without authentication, a request
// for any other host than a loopback one is refused, sign-in first: a
// site whose name resolves to 127.0.0.1 (DNS rebinding) is same-origin
// with itself, so the Origin check alone would let it in.
func TestDevelopmentModeLoopbackHostOnly(t *testing.T) {
	e := newEnv(t, true)
	for _, tt := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:4100", 200},
		{"localhost:4100", 200},
		{"LOCALHOST", 200},
		{"127.9.8.7:80", 200},
		{"[::1]:4100", 200},
		{"rebind.evil.example:4100", 403},
		{"rebind.evil.example", 403},
		{"localhost.evil.example:4100", 403},
		{"127.0.0.1.nip.example:4100", 403},
		{"10.0.0.1:4100", 403},
		{"[::ffff:10.0.0.1]:4100", 403},
		{"", 403},
	} {
		r := signInRequest(`{"tenant_id":"acme","subject":"maria"}`)
		r.Host = tt.host
		r.Header.Set("Origin", "http://"+tt.host)
		if w := e.do(r); w.Code != tt.want {
			t.Errorf("dev sign-in for host %q = %d %s, want %d", tt.host, w.Code, w.Body, tt.want)
		}
		r = httptest.NewRequest(http.MethodGet, "/console/", nil)
		r.Host = tt.host
		if w := e.do(r); w.Code != tt.want {
			t.Errorf("dev page for host %q = %d, want %d", tt.host, w.Code, tt.want)
		}
		var served bool
		h := LoopbackOnly(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if served != (tt.want == 200) {
			t.Errorf("LoopbackOnly served host %q: %v, want %v", tt.host, served, tt.want == 200)
		}
	}
	// With authentication any host is served: keys protect it.
	a := newEnv(t, false)
	r := signInRequest(`{"api_key":"approver-key"}`)
	r.Host = "writ.acme.example"
	if w := a.do(r); w.Code != 200 {
		t.Errorf("keyed sign-in for a public host = %d, want 200", w.Code)
	}
}

// TestNoSecretInLogs: neither the API key nor the session id is ever
// logged.
func TestNoSecretInLogs(t *testing.T) {
	e := newEnv(t, false)
	ck, csrf := e.signIn(t, `{"api_key":"approver-key"}`)
	e.do(signInRequest(`{"api_key":"agent-key"}`))
	e.do(signInRequest(`{"api_key":"down-key"}`))
	r := httptest.NewRequest(http.MethodPost, "/console/api/v1/approvals/apr_1/approve", strings.NewReader(`{}`))
	r.AddCookie(ck)
	r.Header.Set(CSRFHeader, csrf)
	e.do(r)
	log := e.log.String()
	for _, secret := range []string{"approver-key", "agent-key", ck.Value, csrf} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds a secret %q:\n%s", secret, log)
		}
	}
	if !strings.Contains(log, "console sign-in") || !strings.Contains(log, "maria") {
		t.Errorf("the sign-in was not logged:\n%s", log)
	}
}

func TestPagesAndHeaders(t *testing.T) {
	e := newEnv(t, false)
	for _, tt := range []struct{ path, ctype, contains string }{
		{"/console/", "text/html", `src="/console/assets/app.js"`},
		{"/console/records/dr_1", "text/html", `<main id="main"`},
		{"/console/assets/app.js", "text/javascript", "verifyRecord"},
		{"/console/assets/verify.js", "text/javascript", "rootFromInclusion"},
		{"/console/assets/style.css", "text/css", "--fg"},
	} {
		w := e.do(httptest.NewRequest(http.MethodGet, tt.path, nil))
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), tt.ctype) || !strings.Contains(w.Body.String(), tt.contains) {
			t.Errorf("GET %s = %d %s, want %s holding %q", tt.path, w.Code, w.Header().Get("Content-Type"), tt.ctype, tt.contains)
		}
		h := w.Header()
		if h.Get("Content-Security-Policy") != ContentSecurityPolicy || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s headers %v, want the console's security headers", tt.path, h)
		}
	}
	if w := e.do(httptest.NewRequest(http.MethodGet, "/console/assets/nope.js", nil)); w.Code != 404 {
		t.Errorf("a missing asset = %d, want 404", w.Code)
	}
	if w := e.do(httptest.NewRequest(http.MethodPost, "/console/", nil)); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST to a page = %d, want 405", w.Code)
	}
	// No inline script or style anywhere in the page: the CSP forbids it.
	page := e.do(httptest.NewRequest(http.MethodGet, "/console/", nil)).Body.String()
	for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onload="} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html holds %q, which the CSP refuses", bad)
		}
	}
}
