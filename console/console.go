// Package console serves writ's web console: the pages approvers use to
// decide approval requests and auditors use to explore, replay and verify
// records, in a browser.
//
// The console decides nothing. It is a client of the public HTTP API
// (package httpapi): its pages call the API through the console's own
// /console/api/ prefix, which forwards each call, in process, to the API
// handler with the session's API key as the bearer token. The API keeps
// every rule: roles, tenants, separation of duties.
//
// # Sessions
//
// A person signs in with an API key (POST /console/session). The key is
// checked with the same authenticator as the API, must hold the approver,
// auditor or admin role (an agent-only key is refused), and is then kept
// in server memory only, behind a random session id sent as the cookie
// writ_console: HttpOnly, SameSite=Strict, Path=/console/, and Secure when
// the request came over TLS. The key never appears in a URL, a cookie or
// a log line. A session ends after IdleTimeout without a request, after
// MaxAge in any case, at sign-out, and when the server restarts.
//
// Every state-changing request (approve, deny, sign out) must carry the
// session's CSRF token in the X-Writ-CSRF header, and an Origin header,
// when present, must name this server. Sign-in needs a JSON body, which a
// cross-site form cannot send.
//
// In development mode (no authenticator: the server has no API keys and
// listens on loopback only), sign-in takes a tenant and a name instead
// of a key, as the API then takes them in each request. The console then
// answers only requests whose Host names a loopback address (localhost,
// 127.0.0.0/8, [::1]): a page of another site whose name was made to
// resolve to 127.0.0.1 (DNS rebinding) is same-origin with itself, not
// with the console, and is refused (LoopbackOnly does the same for a
// whole server).
//
// # Responses
//
// Every console response carries a strict Content-Security-Policy (no
// inline script or style, nothing from other origins), and the pages
// render every value from the API as text, never as HTML.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Defaults of Config.
const (
	DefaultIdleTimeout = 15 * time.Minute
	DefaultMaxAge      = 8 * time.Hour
	DefaultMaxSessions = 10000
)

// CookieName is the name of the session cookie.
const CookieName = "writ_console"

// CSRFHeader is the header that carries a session's CSRF token on every
// state-changing request.
const CSRFHeader = "X-Writ-CSRF"

// ContentSecurityPolicy is set on every console response: scripts,
// styles, images and API calls from the console's own origin only, no
// inline script or style, no frames, no plugins.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Config configures a Console.
type Config struct {
	// API is the HTTP API handler (an httpapi.Server) the console's pages
	// call through /console/api/. Required.
	API http.Handler
	// Authenticate checks an API key, as httpapi.Config.Authenticate
	// does. Nil means development mode: sign-in takes a tenant and a
	// name, and no key.
	Authenticate func(ctx context.Context, token string) (*writ.Principal, error)
	// IdleTimeout ends a session unused for this long. Zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxAge ends a session this long after sign-in, used or not. Zero
	// means DefaultMaxAge.
	MaxAge time.Duration
	// MaxSessions caps the live sessions; a sign-in beyond it is answered
	// 503. Zero means DefaultMaxSessions.
	MaxSessions int
	// Logger receives sign-ins, sign-in refusals and sign-outs (subject,
	// key id, tenant; never a key or a session id). Nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of session expiry. Nil means time.Now.
	Now func() time.Time
	// Rand is the source of session ids and CSRF tokens. Nil means
	// crypto/rand.Reader.
	Rand io.Reader
}

// Console serves the web console under Prefix. Create one with New.
type Console struct {
	cfg    Config
	log    *slog.Logger
	static http.Handler
	mu     sync.Mutex
	// sessions are keyed by the SHA-256 of their id, so that the map
	// holds nothing a cookie could be made from.
	sessions map[[32]byte]*session
}

// session is a signed-in person.
type session struct {
	token     string // the API key; empty in development mode
	csrf      string
	info      SessionInfo
	created   time.Time
	lastUsed  time.Time
	principal *writ.Principal
}

// SessionInfo is the body of GET and POST /console/session: who is signed
// in, and the CSRF token the pages send back. GET answers {"signed_in":
// false} and nothing else when no session is live: not being signed in
// is the page's normal state before sign-in, not a failure.
type SessionInfo struct {
	// SignedIn is true for a live session.
	SignedIn  bool        `json:"signed_in"`
	Subject   string      `json:"subject"`
	TenantID  string      `json:"tenant_id"`
	KeyID     string      `json:"key_id,omitempty"`
	Roles     []writ.Role `json:"roles"`
	CSRFToken string      `json:"csrf_token"`
	ExpiresAt time.Time   `json:"expires_at"`
	// DevMode is true when the server authenticates no one.
	DevMode bool `json:"dev_mode"`
}

// New returns a Console.
func New(cfg Config) *Console {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return &Console{cfg: cfg, log: cfg.Logger, static: http.FileServerFS(sub), sessions: map[[32]byte]*session{}}
}

// consoleRoles are the roles that may sign in.
var consoleRoles = []writ.Role{writ.RoleApprover, writ.RoleAuditor, writ.RoleAdmin}

// ServeHTTP serves the console: the session routes, the API forwarder and
// the static pages.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if c.cfg.Authenticate == nil && !LoopbackHost(r.Host) {
		refuseHost(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	switch {
	case rest == "session":
		h.Set("Cache-Control", "no-store")
		switch r.Method {
		case http.MethodGet:
			c.whoami(w, r)
		case http.MethodPost:
			c.signIn(w, r)
		case http.MethodDelete:
			c.signOut(w, r)
		default:
			h.Set("Allow", "GET, POST, DELETE")
			problem(w, http.StatusMethodNotAllowed, writ.EINVALID, "use GET, POST or DELETE on /console/session")
		}
	case strings.HasPrefix(rest, "api/"):
		h.Set("Cache-Control", "no-store")
		c.forward(w, r, "/"+strings.TrimPrefix(rest, "api/"))
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		h.Set("Allow", "GET, HEAD")
		problem(w, http.StatusMethodNotAllowed, writ.EINVALID, "the console's pages are read with GET")
	default:
		// Every page is the one document; the script routes by the
		// fragment. Assets are under assets/.
		if !strings.HasPrefix(rest, "assets/") {
			r = cloneWithPath(r, "/")
		} else {
			r = cloneWithPath(r, "/"+strings.TrimPrefix(rest, "assets/"))
		}
		h.Set("Cache-Control", "no-cache")
		c.static.ServeHTTP(w, r)
	}
}

// cloneWithPath returns r for another path.
func cloneWithPath(r *http.Request, p string) *http.Request {
	r2 := r.Clone(r.Context())
	r2.URL = &url.URL{Path: p, RawQuery: r.URL.RawQuery}
	r2.RequestURI = ""
	return r2
}

// signInBody is the body of POST /console/session.
type signInBody struct {
	// APIKey is the key to sign in with (with an authenticator).
	APIKey string `json:"api_key"`
	// TenantID and Subject name the tenant and the person in development
	// mode.
	TenantID string `json:"tenant_id"`
	Subject  string `json:"subject"`
}

// maxSignInBody caps a sign-in body: a key is about a hundred bytes.
const maxSignInBody = 4096

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		problem(w, http.StatusForbidden, writ.EFORBIDDEN, err.Error())
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		problem(w, http.StatusUnsupportedMediaType, writ.EINVALID, "sign in with a JSON body")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxSignInBody+1))
	if err != nil || len(raw) > maxSignInBody {
		problem(w, http.StatusBadRequest, writ.EINVALID, "the sign-in body is unreadable or too large")
		return
	}
	var body signInBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() {
		problem(w, http.StatusBadRequest, writ.EINVALID, "the sign-in body must be a JSON object with api_key (or, in development mode, tenant_id and subject)")
		return
	}
	now := c.cfg.Now()
	s := &session{created: now, lastUsed: now}
	if c.cfg.Authenticate == nil {
		body.TenantID, body.Subject = strings.TrimSpace(body.TenantID), strings.TrimSpace(body.Subject)
		if body.TenantID == "" || body.Subject == "" {
			problem(w, http.StatusBadRequest, writ.EINVALID, "development mode: name the tenant and yourself (tenant_id and subject)")
			return
		}
		s.info = SessionInfo{Subject: body.Subject, TenantID: body.TenantID, Roles: consoleRoles, DevMode: true}
	} else {
		if body.APIKey == "" {
			problem(w, http.StatusBadRequest, writ.EINVALID, "sign in with an API key (api_key)")
			return
		}
		p, err := c.cfg.Authenticate(r.Context(), body.APIKey)
		switch {
		case writ.ErrorCode(err) == writ.EUNAUTHENTICATED:
			c.log.InfoContext(r.Context(), "console sign-in refused: unknown or revoked API key")
			problem(w, http.StatusUnauthorized, writ.EUNAUTHENTICATED, "this API key is unknown or revoked")
			return
		case err != nil:
			c.log.WarnContext(r.Context(), "console sign-in: the authenticator failed", slog.Any("error", err))
			problem(w, http.StatusServiceUnavailable, writ.EUNAVAILABLE, "API keys cannot be checked now; retry later")
			return
		case p == nil || p.TenantID == "":
			problem(w, http.StatusInternalServerError, writ.EINTERNAL, "the authenticator accepted a key without its principal")
			return
		}
		var roles []writ.Role
		for _, role := range consoleRoles {
			if p.Has(role) {
				roles = append(roles, role)
			}
		}
		if len(roles) == 0 {
			c.log.InfoContext(r.Context(), "console sign-in refused: no console role", slog.String("key_id", p.KeyID), slog.String("tenant_id", p.TenantID))
			problem(w, http.StatusForbidden, writ.EFORBIDDEN, "this API key may not open the console: that needs the role approver, auditor or admin (an agent key checks boundaries, it does not decide them)")
			return
		}
		s.token, s.principal = body.APIKey, p
		s.info = SessionInfo{Subject: p.Subject, TenantID: p.TenantID, KeyID: p.KeyID, Roles: roles}
	}
	id, err := c.random()
	if err == nil {
		s.csrf, err = c.random()
	}
	if err != nil {
		problem(w, http.StatusInternalServerError, writ.EINTERNAL, "cannot make a session id")
		return
	}
	s.info.CSRFToken = s.csrf
	if !c.put(id, s) {
		problem(w, http.StatusServiceUnavailable, writ.EUNAVAILABLE, "too many console sessions; retry later")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: Prefix, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.log.InfoContext(r.Context(), "console sign-in", slog.String("subject", s.info.Subject), slog.String("tenant_id", s.info.TenantID), slog.String("key_id", s.info.KeyID))
	writeJSON(w, http.StatusOK, c.infoOf(s))
}

// infoOf returns the session's info with its current expiry.
func (c *Console) infoOf(s *session) SessionInfo {
	info := s.info
	info.SignedIn = true
	info.ExpiresAt = s.lastUsed.Add(c.cfg.IdleTimeout)
	if end := s.created.Add(c.cfg.MaxAge); end.Before(info.ExpiresAt) {
		info.ExpiresAt = end
	}
	info.ExpiresAt = info.ExpiresAt.UTC()
	return info
}

func (c *Console) whoami(w http.ResponseWriter, r *http.Request) {
	s, _ := c.session(r)
	if s == nil {
		writeJSON(w, http.StatusOK, struct {
			SignedIn bool `json:"signed_in"`
		}{})
		return
	}
	writeJSON(w, http.StatusOK, c.infoOf(s))
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	s, key := c.session(r)
	if s == nil {
		problem(w, http.StatusUnauthorized, writ.EUNAUTHENTICATED, "not signed in")
		return
	}
	if err := checkCSRF(r, s); err != nil {
		problem(w, http.StatusForbidden, writ.EFORBIDDEN, err.Error())
		return
	}
	c.mu.Lock()
	delete(c.sessions, key)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.log.InfoContext(r.Context(), "console sign-out", slog.String("subject", s.info.Subject), slog.String("tenant_id", s.info.TenantID), slog.String("key_id", s.info.KeyID))
	w.WriteHeader(http.StatusNoContent)
}

// forwardable is what the console forwards to the API: reads, the two
// decisions an approver makes, and an admin's creating and revoking of
// the tenant's API keys (the API checks the roles). Agent routes (checks,
// runs' attempts) and the other admin routes are never reachable from a
// console page.
var forwardable = regexp.MustCompile(`^(/v1/approvals/[^/]+/(approve|deny)|/v1/keys|/v1/keys/[^/]+/revoke)$`)

// forward calls the API with the session's key.
func (c *Console) forward(w http.ResponseWriter, r *http.Request, apiPath string) {
	s, key := c.session(r)
	if s == nil {
		problem(w, http.StatusUnauthorized, writ.EUNAUTHENTICATED, "not signed in, or the session ended: sign in again")
		return
	}
	// Decide on the path the API will see.
	apiPath = path.Clean(apiPath)
	switch {
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (strings.HasPrefix(apiPath, "/v1/") || apiPath == "/healthz"):
	case r.Method == http.MethodPost && forwardable.MatchString(apiPath):
		if err := checkCSRF(r, s); err != nil {
			problem(w, http.StatusForbidden, writ.EFORBIDDEN, err.Error())
			return
		}
	default:
		problem(w, http.StatusNotFound, writ.ENOTFOUND, "the console does not serve "+r.Method+" "+apiPath)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL = &url.URL{Path: apiPath, RawQuery: r.URL.RawQuery}
	r2.RequestURI = ""
	r2.Header.Del("Cookie")
	r2.Header.Del("Authorization")
	r2.Header.Del(CSRFHeader)
	if s.token != "" {
		r2.Header.Set("Authorization", "Bearer "+s.token)
	}
	sw := &statusWriter{ResponseWriter: w}
	c.cfg.API.ServeHTTP(sw, r2)
	if sw.status == http.StatusUnauthorized && s.token != "" {
		// The API no longer accepts the key (revoked): the session ends
		// with it.
		c.mu.Lock()
		delete(c.sessions, key)
		c.mu.Unlock()
		c.log.InfoContext(r.Context(), "console session ended: the API refused its key", slog.String("subject", s.info.Subject), slog.String("key_id", s.info.KeyID))
	}
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// session returns the request's live session (and its map key), touching
// it; nil when there is none.
func (c *Console) session(r *http.Request) (*session, [32]byte) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, [32]byte{}
	}
	key := sha256.Sum256([]byte(ck.Value))
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[key]
	if s == nil {
		return nil, key
	}
	if c.expired(s, now) {
		delete(c.sessions, key)
		return nil, key
	}
	s.lastUsed = now
	return s, key
}

func (c *Console) expired(s *session, now time.Time) bool {
	return !now.Before(s.lastUsed.Add(c.cfg.IdleTimeout)) || !now.Before(s.created.Add(c.cfg.MaxAge))
}

// put stores a new session, dropping expired ones first; false when the
// store is full.
func (c *Console) put(id string, s *session) bool {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.cfg.MaxSessions {
		for k, old := range c.sessions {
			if c.expired(old, now) {
				delete(c.sessions, k)
			}
		}
		if len(c.sessions) >= c.cfg.MaxSessions {
			return false
		}
	}
	c.sessions[sha256.Sum256([]byte(id))] = s
	return true
}

// Sessions returns the number of live sessions.
func (c *Console) Sessions() int {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sessions {
		if !c.expired(s, now) {
			n++
		}
	}
	return n
}

func (c *Console) random() (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(c.cfg.Rand, b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// checkCSRF checks a state-changing request: the session's token in the
// CSRF header, and a same-origin Origin when one is sent.
func checkCSRF(r *http.Request, s *session) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		return errors.New("this request needs the session's CSRF token in " + CSRFHeader + "; reload the console")
	}
	return nil
}

// sameOrigin refuses a request whose Origin header names another host.
func sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host != r.Host {
		return errors.New("cross-origin request refused")
	}
	return nil
}

// LoopbackHost reports whether host (a Host header: a name or an address,
// with or without a port) names the loopback interface: localhost, an
// address of 127.0.0.0/8 or ::1.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// LoopbackOnly answers only requests whose Host is a loopback one
// (LoopbackHost), and refuses others with 403. A server that
// authenticates no one (development mode) is wrapped in it: listening on
// 127.0.0.1 is not enough, since a site whose name an attacker makes
// resolve to 127.0.0.1 (DNS rebinding) would be same-origin with it.
func LoopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !LoopbackHost(r.Host) {
			refuseHost(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func refuseHost(w http.ResponseWriter, r *http.Request) {
	problem(w, http.StatusForbidden, writ.EFORBIDDEN, fmt.Sprintf("development mode answers only requests for localhost, 127.0.0.1 or [::1], not for host %q (a DNS rebinding attempt?); open the console at http://127.0.0.1:PORT/console/", r.Host))
}

// problem answers an RFC 9457 problem, as the API does.
func problem(w http.ResponseWriter, status int, code, detail string) {
	// A 401 carries no WWW-Authenticate: the console signs in with a
	// form, not with an HTTP challenge a browser would prompt for.
	body, _ := json.Marshal(map[string]any{
		"type": "urn:writ:problem:" + code, "title": http.StatusText(status),
		"status": status, "detail": detail, "code": code,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		problem(w, http.StatusInternalServerError, writ.EINTERNAL, "cannot encode the answer")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
