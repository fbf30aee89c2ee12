package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/pack"
)

// Config configures a Server. The zero value of every field selects its
// default.
type Config struct {
	// MaxBodyBytes caps the size of a request body; a larger body is
	// answered with 413. Zero or less means 1 MiB.
	MaxBodyBytes int64
	// MaxInFlight caps the requests to the service, the ledger, the
	// workflows, the approvals and the replays (every route but the
	// public ones) served at once, authentication included; a request
	// beyond it is answered at once with 503 and Retry-After, never
	// queued. Health and the OpenAPI document are not counted, so probes
	// keep answering under load. Zero or less means 1024.
	MaxInFlight int
	// RateLimit limits each API key's request rate (every route but the
	// public ones); the zero value limits nothing. See RateLimit.
	RateLimit RateLimit
	// Logger receives one debug line per request (method, path, status,
	// duration; never bodies) and the real text of internal errors. Nil
	// means slog.Default().
	Logger *slog.Logger
	// Health reports the status of GET /healthz (liveness; readiness is
	// Ready): 200 when the report's status is "ok", 503 otherwise. Nil
	// means always {"status":"ok"}.
	Health func(ctx context.Context) HealthReport
	// Now is the clock used to time requests. Nil means time.Now.
	Now func() time.Time
	// Rand is the random source of span ids in traceparent responses.
	// Reads are serialized, so it need not be safe for concurrent use.
	// Nil means crypto/rand.Reader.
	Rand io.Reader
	// Ledger serves the ledger routes: checkpoints, inclusion and
	// consistency proofs. It is usually the engine that serves checks.
	// Nil means the server has no ledger: those routes answer 404.
	Ledger writ.Ledger
	// Workflows serves the run routes: start a workflow run, submit step
	// attempts, show a run. It is usually the engine that serves checks.
	// Nil means the server runs no workflows: those routes answer 404.
	Workflows writ.Workflows
	// Approvals serves the approval routes: list, show, approve and deny
	// approval requests. It is usually the engine that serves checks. Nil
	// means the server has no approval queue: those routes answer 404.
	Approvals writ.Approvals
	// Replays serves the replay routes: replay one record, or every
	// record of a trace, for auditors. It is usually a replay.Replayer
	// reading the engine's store. Nil means the server replays nothing:
	// those routes answer 404.
	Replays writ.Replays
	// Shadows serves GET /v1/shadow/report: what the shadow pack decided
	// against what was enforced. It is usually the same replay.Replayer.
	// Nil means the route answers 404.
	Shadows writ.ShadowReports
	// Lifecycle serves the decision routes: execution reports, resumes,
	// a decision's story and the decisions in flight. It is usually the
	// engine that serves checks. Nil means those routes answer 404.
	Lifecycle writ.Lifecycle
	// Params serves the tenant parameter routes (GET and PUT
	// /v1/params). It is usually the engine that serves checks. Nil
	// means those routes answer 404.
	Params writ.TenantParams
	// Annotations serves the routes of records about records: retract a
	// record, give feedback on it, replay it and record the result, and
	// what the ledger holds about it (GET /v1/records/{id}/links). It is
	// usually the engine that serves checks. Nil means those routes
	// answer 404.
	Annotations writ.Annotations
	// Erasures serves POST /v1/erasures (an admin erases a subject's
	// classified values). It is usually the engine that serves checks.
	// Nil answers 404.
	Erasures writ.Erasures
	// Evidence serves the evidence routes (POST /v1/evidence, GET
	// /v1/evidence/{id}, POST /v1/evidence/{id}/revoke). It is usually
	// the engine that serves checks. Nil means those routes answer 404.
	Evidence writ.EvidenceService
	// MaxWaiting caps the resumes that wait on approvals at once (POST
	// /v1/decisions/{id}/resume): they are counted here, not against
	// MaxInFlight, so waiting agents never crowd out checks. A resume
	// beyond it is answered at once with 503 and Retry-After. Zero or less
	// means 10000.
	MaxWaiting int
	// Authenticate returns the caller who holds the API key token (the
	// token of an "Authorization: Bearer" header, never empty). An unknown,
	// malformed or revoked key must be an EUNAUTHENTICATED error (401);
	// any other error means the keys cannot be checked now (503). When it
	// is set, every route but the public ones (GET /healthz, /readyz,
	// /.well-known/authzen-configuration and /v1/openapi.yaml) needs
	// a key holding one of the route's roles, and is confined to the key's
	// tenant. Nil means development mode: no one is authenticated, every
	// caller may act for every tenant, and /healthz says so.
	Authenticate func(ctx context.Context, token string) (*writ.Principal, error)
	// VerifyDelegation verifies a delegation token (the JWT of a
	// Writ-Delegation header) for the API key's tenant, and returns the
	// delegated user it authenticates; a token it refuses is an
	// EFORBIDDEN error saying why (403), any other error means tokens
	// cannot be checked now (503). Nil means the server trusts no issuer:
	// a request that sends the header is refused (403). The header is
	// honoured in keyed mode only (Authenticate set); see docs/trust.md.
	VerifyDelegation func(ctx context.Context, tenantID, token string) (*writ.Delegation, error)
	// Envelopes returns the request envelope stored with the tenant's
	// record seq whose content address ("sha256:…") is hash, or
	// ENOTFOUND (ledger.Store.Envelope). It serves GET
	// /v1/records/{id}/envelope. Nil means that route answers 404.
	Envelopes func(ctx context.Context, tenantID string, seq int64, hash string) ([]byte, error)
	// VerifierKeys returns the public keys that sign the tenant's records
	// and checkpoints, retired and revoked ones included. It serves GET
	// /v1/ledger/keys. Nil means that route answers 404.
	VerifierKeys func(ctx context.Context, tenantID string) ([]keyring.Key, error)
	// APIKeys, when set, serves the admin's API-key routes (GET /v1/keys,
	// POST /v1/keys, POST /v1/keys/{id}/revoke); without it they answer
	// 404.
	APIKeys *KeyAdmin
	// Pack, when set, is the pack the server enforces, which GET /v1/pack
	// describes; without it the route answers 404.
	Pack *pack.Pack
	// Metrics serves GET /metrics: the Prometheus metrics (package
	// telemetry). It needs a key with the admin role; the handler reads
	// the key's principal from the request's context, to serve that
	// tenant's series only (telemetry.Metrics.TenantHandler). Nil means
	// the server exports no metrics: the route answers 404.
	Metrics http.Handler
	// Latency returns the check latencies and append lags the server
	// measured for a tenant in recent windows (telemetry.Metrics.Latency).
	// It serves GET /v1/stats/latency. Nil means that route answers 404.
	Latency func(ctx context.Context, tenantID string) (*writ.LatencyStats, error)
	// Witnesses returns where the tenant's ledger stands with the
	// witnesses the server submits checkpoints to: its latest checkpoint
	// (nil before the first) and each witness's lag behind it
	// (witness.Report). It serves GET /v1/ledger/witnesses. Nil means that
	// route answers 404.
	Witnesses func(ctx context.Context, tenantID string) (*writ.LedgerWitnesses, error)
	// Ready reports readiness for GET /readyz: 200 when every check
	// passes, 503 otherwise. Nil means always ready.
	Ready func(ctx context.Context) ReadyReport
}

// ReadyReport is the body of GET /readyz.
type ReadyReport struct {
	// Status is HealthOK when every check passed; "unavailable" when a
	// check failed that is not Degraded; else "degraded".
	Status string `json:"status"`
	// Checks are the readiness checks, each passed or failed.
	Checks []ReadyCheck `json:"checks"`
}

// ReadyCheck is one readiness check.
type ReadyCheck struct {
	// Name says what was checked: "store", "commits", "signing_key" or
	// "pack".
	Name string `json:"name"`
	// OK is whether it passed.
	OK bool `json:"ok"`
	// Error says why it failed; never secrets.
	Error string `json:"error,omitempty"`
	// Degraded marks a failed check that does not stop the server taking
	// checks (a witness conflict): the report's status is then
	// "degraded", and /readyz still answers 200.
	Degraded bool `json:"degraded,omitempty"`
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxInFlight  = 1024
	DefaultMaxWaiting   = 10000
)

// HealthOK is the HealthReport status of a server ready to take work.
const HealthOK = "ok"

// HealthReport is the body of GET /healthz.
type HealthReport struct {
	// Status is HealthOK when the server is ready; any other value (for
	// example "degraded" or "unavailable") answers 503.
	Status string `json:"status"`
	// Version is the writ build version.
	Version string `json:"version,omitempty"`
	// Pack is the pinned pack as name@version, and PackHash its content hash.
	Pack     string `json:"pack,omitempty"`
	PackHash string `json:"pack_hash,omitempty"`
	// Store names the storage kind, such as "sqlite" or "postgres".
	Store string `json:"store,omitempty"`
	// Auth says how the server authenticates callers: AuthAPIKeys, or
	// AuthDisabled in development mode. The server sets it, whatever
	// Config.Health reports.
	Auth string `json:"auth"`
	// Warning is set in development mode, to say so where operators look.
	Warning string `json:"warning,omitempty"`
}

// Values of HealthReport.Auth.
const (
	AuthAPIKeys  = "api_keys"
	AuthDisabled = "disabled"
)

// devModeWarning is the HealthReport.Warning of a server in development
// mode.
const devModeWarning = "development mode: this server authenticates no one, so every caller may act for every tenant; configure API keys before exposing it"

// Server serves a writ.Service, and optionally a writ.Ledger,
// writ.Workflows, writ.Approvals and writ.Replays, over HTTP. It
// implements http.Handler; create one with NewServer.
type Server struct {
	svc         writ.Service
	ledger      writ.Ledger          // nil when the server has no ledger
	workflows   writ.Workflows       // nil when the server runs no workflows
	approvals   writ.Approvals       // nil when the server has no approval queue
	replays     writ.Replays         // nil when the server replays nothing
	shadows     writ.ShadowReports   // nil when the server reports no shadow decisions
	lifecycle   writ.Lifecycle       // nil when the server carries no decision past its receipt
	params      writ.TenantParams    // nil when the server serves no tenant parameters
	annotations writ.Annotations     // nil when the server seals no records about records
	erasures    writ.Erasures        // nil when the server erases nothing
	evidence    writ.EvidenceService // nil when the server serves no evidence store
	cfg         Config
	log         *slog.Logger
	rand        io.Reader
	mux         *http.ServeMux
	routes      []route
	inflight    chan struct{}
	waiting     chan struct{} // resumes holding a connection open
	rates       *keyLimiter   // per-key request rates; nil when unlimited
}

// route is one method and path pattern the server answers, and who may
// call it.
type route struct {
	method, path string
	// roles are the roles of which an API key must hold one to call the
	// route when the server authenticates callers. Nil marks a public
	// route: served without a key, and not counted against MaxInFlight.
	roles []writ.Role
	serve func(*Server, http.ResponseWriter, *http.Request)
}

// longPolls are the routes that may hold their connection open: counted
// against MaxWaiting instead of MaxInFlight.
var longPolls = map[string]bool{http.MethodPost + " /v1/decisions/{id}/resume": true}

// routes lists every route the server answers with the roles that may
// call it. It is the one place that says who may do what: the OpenAPI
// document repeats it per operation (x-writ-roles), and tests hold both
// to it.
var routes = []route{
	{http.MethodPost, "/v1/check", []writ.Role{writ.RoleAgent}, (*Server).handleCheck},
	{http.MethodGet, "/v1/records/{id}", []writ.Role{writ.RoleAuditor}, (*Server).handleRecord},
	{http.MethodGet, "/v1/records", []writ.Role{writ.RoleAuditor}, (*Server).handleRecords},
	{http.MethodGet, "/v1/records/{id}/envelope", []writ.Role{writ.RoleApprover, writ.RoleAuditor}, (*Server).handleEnvelope},
	{http.MethodGet, "/v1/records/{id}/proof", []writ.Role{writ.RoleAuditor}, (*Server).handleInclusionProof},
	{http.MethodGet, "/v1/ledger/checkpoint", []writ.Role{writ.RoleAuditor}, (*Server).handleCheckpoint},
	{http.MethodGet, "/v1/ledger/keys", []writ.Role{writ.RoleApprover, writ.RoleAuditor}, (*Server).handleVerifierKeys},
	{http.MethodPost, "/v1/ledger/checkpoint", []writ.Role{writ.RoleAdmin}, (*Server).handleIssueCheckpoint},
	{http.MethodGet, "/v1/ledger/consistency", []writ.Role{writ.RoleAuditor}, (*Server).handleConsistencyProof},
	{http.MethodGet, "/v1/ledger/witnesses", []writ.Role{writ.RoleAuditor}, (*Server).handleWitnesses},
	{http.MethodGet, "/v1/records/{id}/replay", []writ.Role{writ.RoleAuditor}, (*Server).handleReplay},
	{http.MethodGet, "/v1/replay", []writ.Role{writ.RoleAuditor}, (*Server).handleReplayTrace},
	{http.MethodPost, "/v1/records/{id}/replay", []writ.Role{writ.RoleAuditor}, (*Server).handleRecordReplay},
	{http.MethodPost, "/v1/records/{id}/retract", []writ.Role{writ.RoleAuditor, writ.RoleAdmin}, (*Server).handleRetract},
	{http.MethodPost, "/v1/records/{id}/feedback", []writ.Role{writ.RoleApprover, writ.RoleAuditor}, (*Server).handleFeedback},
	{http.MethodGet, "/v1/records/{id}/links", []writ.Role{writ.RoleApprover, writ.RoleAuditor}, (*Server).handleLinks},
	{http.MethodGet, "/v1/shadow/report", []writ.Role{writ.RoleAuditor}, (*Server).handleShadowReport},
	{http.MethodGet, "/v1/stats/latency", []writ.Role{writ.RoleAuditor}, (*Server).handleLatency},
	{http.MethodPost, "/v1/runs", []writ.Role{writ.RoleAgent}, (*Server).handleStartRun},
	{http.MethodGet, "/v1/runs", []writ.Role{writ.RoleAgent, writ.RoleAuditor}, (*Server).handleRuns},
	{http.MethodGet, "/v1/runs/{id}", []writ.Role{writ.RoleAgent, writ.RoleAuditor}, (*Server).handleRun},
	{http.MethodPost, "/v1/runs/{id}/steps/{step}/attempts", []writ.Role{writ.RoleAgent}, (*Server).handleAttempt},
	{http.MethodGet, "/v1/approvals", []writ.Role{writ.RoleApprover, writ.RoleAuditor}, (*Server).handleApprovals},
	{http.MethodGet, "/v1/approvals/{id}", []writ.Role{writ.RoleApprover, writ.RoleAuditor}, (*Server).handleApproval},
	{http.MethodPost, "/v1/approvals/{id}/approve", []writ.Role{writ.RoleApprover}, (*Server).handleApprove},
	{http.MethodPost, "/v1/approvals/{id}/deny", []writ.Role{writ.RoleApprover}, (*Server).handleDeny},
	{http.MethodPost, "/v1/approvals/{id}/withdraw", []writ.Role{writ.RoleAgent}, (*Server).handleWithdraw},
	{http.MethodGet, "/v1/decisions/{id}", []writ.Role{writ.RoleAgent, writ.RoleApprover, writ.RoleAuditor}, (*Server).handleDecision},
	{http.MethodGet, "/v1/decisions/in_flight", []writ.Role{writ.RoleAuditor}, (*Server).handleInFlight},
	{http.MethodPost, "/v1/decisions/{id}/execution", []writ.Role{writ.RoleAgent}, (*Server).handleReport},
	{http.MethodPost, "/v1/decisions/{id}/resume", []writ.Role{writ.RoleAgent}, (*Server).handleResume},
	{http.MethodPost, pathAuthZENEvaluation, []writ.Role{writ.RoleAgent}, (*Server).handleAuthZENEvaluation},
	{http.MethodPost, pathAuthZENEvaluations, []writ.Role{writ.RoleAgent}, (*Server).handleAuthZENEvaluations},
	{http.MethodGet, pathAuthZENMetadata, nil, (*Server).handleAuthZENMetadata},
	{http.MethodGet, "/v1/params", []writ.Role{writ.RoleAdmin, writ.RoleAuditor}, (*Server).handleParams},
	{http.MethodPut, "/v1/params", []writ.Role{writ.RoleAdmin}, (*Server).handleSetParams},
	{http.MethodPost, "/v1/erasures", []writ.Role{writ.RoleAdmin}, (*Server).handleErase},
	// Any key of the tenant may carry in a signed item (jws); the engine
	// refuses an unsigned one from a key without the issuer role.
	{http.MethodPost, "/v1/evidence", writ.Roles, (*Server).handleAddEvidence},
	{http.MethodGet, "/v1/evidence/{id}", []writ.Role{writ.RoleAgent, writ.RoleIssuer, writ.RoleApprover, writ.RoleAuditor}, (*Server).handleEvidence},
	{http.MethodPost, "/v1/evidence/{id}/revoke", []writ.Role{writ.RoleIssuer}, (*Server).handleRevokeEvidence},
	{http.MethodGet, "/v1/pack", []writ.Role{writ.RoleApprover, writ.RoleAuditor, writ.RoleAdmin}, (*Server).handlePack},
	{http.MethodGet, "/v1/keys", []writ.Role{writ.RoleAdmin}, (*Server).handleKeys},
	{http.MethodPost, "/v1/keys", []writ.Role{writ.RoleAdmin}, (*Server).handleCreateKey},
	{http.MethodPost, "/v1/keys/{id}/revoke", []writ.Role{writ.RoleAdmin}, (*Server).handleRevokeKey},
	{http.MethodGet, "/v1/whoami", writ.Roles, (*Server).handleWhoAmI},
	{http.MethodGet, "/healthz", nil, (*Server).handleHealth},
	{http.MethodGet, "/readyz", nil, (*Server).handleReady},
	{http.MethodGet, "/metrics", []writ.Role{writ.RoleAdmin}, (*Server).handleMetrics},
	{http.MethodGet, "/v1/openapi.yaml", nil, (*Server).handleOpenAPI},
}

// NewServer returns a Server that answers the routes of the OpenAPI
// document with svc, the ledger routes with cfg.Ledger, the run routes
// with cfg.Workflows, the approval routes with cfg.Approvals and the
// replay routes with cfg.Replays.
func NewServer(svc writ.Service, cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = DefaultMaxWaiting
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
	s := &Server{
		svc:         svc,
		ledger:      cfg.Ledger,
		workflows:   cfg.Workflows,
		approvals:   cfg.Approvals,
		replays:     cfg.Replays,
		shadows:     cfg.Shadows,
		lifecycle:   cfg.Lifecycle,
		params:      cfg.Params,
		annotations: cfg.Annotations,
		erasures:    cfg.Erasures,
		evidence:    cfg.Evidence,
		cfg:         cfg,
		log:         cfg.Logger,
		rand:        &lockedReader{r: cfg.Rand},
		mux:         http.NewServeMux(),
		routes:      routes,
		inflight:    make(chan struct{}, cfg.MaxInFlight),
		waiting:     make(chan struct{}, cfg.MaxWaiting),
		rates:       newKeyLimiter(cfg.RateLimit),
	}
	for _, rt := range s.routes {
		s.mux.HandleFunc(rt.method+" "+rt.path, s.guard(rt))
	}
	return s
}

// guard returns the handler of rt. A route with roles counts against
// MaxInFlight, and then needs an API key holding one of them (when the
// server authenticates callers); its handler sees the key's principal in
// the request context.
func (s *Server) guard(rt route) http.HandlerFunc {
	if rt.roles == nil {
		return func(w http.ResponseWriter, r *http.Request) { rt.serve(s, w, r) }
	}
	slots := s.inflight
	if longPolls[rt.method+" "+rt.path] {
		slots = s.waiting
	}
	return s.limit(slots, func(w http.ResponseWriter, r *http.Request) {
		r, err := s.authorize(r, rt.roles)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !s.allowRate(w, r) {
			return
		}
		rt.serve(s, w, r)
	})
}

// ServeHTTP routes the request, answers unknown routes and methods with
// problems, recovers panics as internal errors, and logs the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("duration", s.cfg.Now().Sub(start)))
	}()
	defer s.recoverPanic(sw, r)
	// ServeMux would redirect a path holding ".", ".." or "//" segments
	// to its cleaned form (a 307 with an empty body, for a POST too):
	// such a path names nothing here, and a client that built it has a
	// bug it should hear of.
	if !cleanPath(r.URL.Path) {
		s.writeError(sw, r, writ.Errorf(writ.ENOTFOUND, "nothing is served at %q: a path with \".\", \"..\" or empty segments is never redirected; use the path it means", r.URL.Path))
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.unrouted(sw, r)
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// cleanPath reports whether p is an absolute path without ".", ".." or
// empty segments (a trailing slash aside), which ServeMux serves as is.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for seg := range strings.SplitSeq(strings.TrimSuffix(p[1:], "/"), "/") {
		if seg == "" && p != "/" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// recoverPanic turns a handler panic into an internal error. If the
// response has started, the connection is aborted instead, so a partial
// answer is never mistaken for a complete one.
func (s *Server) recoverPanic(w *statusWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler || w.status != 0 {
		s.log.ErrorContext(r.Context(), "panic serving request", slog.Any("panic", v), slog.String("path", r.URL.Path))
		panic(http.ErrAbortHandler)
	}
	s.writeError(w, r, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
}

// unrouted answers a request no route matches: 405 with Allow when the
// path exists under other methods, 404 otherwise.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host}
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		s.writeError(w, r, writ.Errorf(writ.ENOTFOUND, "nothing is served at %s", r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.writeProblem(w, r, http.StatusMethodNotAllowed,
		writ.Errorf(writ.EINVALID, "method %s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
}

// limit answers 503 at once when every slot is taken (MaxInFlight
// requests, or MaxWaiting long polls, are being served).
func (s *Server) limit(slots chan struct{}, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			s.writeError(w, r, writ.Errorf(writ.EUNAVAILABLE, "writ is serving %d requests; retry later", cap(slots)))
			return
		}
		h(w, r)
	}
}

// handleCheck serves POST /v1/check.
func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	tp, traced := requestTrace(r)
	if traced {
		s.setTraceparent(w, r, tp.TraceID, tp.Flags)
	}
	req, err := s.decodeCheckRequest(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if traced {
		req.TraceID = tp.TraceID
		if tp.State != "" {
			req.TraceState = tp.State
		}
	}
	rcpt, err := s.svc.Check(r.Context(), req)
	if !traced {
		s.setTraceparent(w, r, responseTraceID(rcpt, req), sampledFlag)
	}
	s.writeReceipt(w, r, rcpt, err)
}

// writeReceipt answers what a check (or a resume) returned: the receipt,
// a fail-closed receipt as a 503, or the error. A receipt that permits
// execution without naming its record is an internal error, never sent.
func (s *Server) writeReceipt(w http.ResponseWriter, r *http.Request, rcpt *writ.Receipt, err error) {
	switch {
	case rcpt != nil && err != nil:
		s.writeFailClosed(w, r, rcpt, err)
	case err != nil:
		s.writeError(w, r, err)
	case rcpt == nil:
		s.writeError(w, r, errors.New("service returned neither a receipt nor an error"))
	case rcpt.SafeToExecute && rcpt.Metadata.RecordID == "":
		s.writeError(w, r, fmt.Errorf("service permitted decision %s without a record id", rcpt.DecisionID))
	default:
		s.writeJSON(w, r, http.StatusOK, wireReceipt(rcpt))
	}
}

// decodeCheckRequest reads and strictly decodes the body of a check. It
// checks only what needs no pack: the shape, and the tenant.
func (s *Server) decodeCheckRequest(w http.ResponseWriter, r *http.Request) (*writ.CheckRequest, error) {
	return decodeTenantBody(s, w, r, func(req *writ.CheckRequest) *string { return &req.TenantID })
}

// decodeTenantBody reads and strictly decodes a request body that names
// its tenant (a route without query parameters), and scopes the tenant
// that tenantOf points to (see scopeTenant): required in development
// mode, the API key's when authenticated.
func decodeTenantBody[T any](s *Server, w http.ResponseWriter, r *http.Request, tenantOf func(*T) *string) (*T, error) {
	if err := noQuery(r); err != nil {
		return nil, err
	}
	body, err := readJSONBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	var req T
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	tenant := tenantOf(&req)
	if *tenant, err = scopeTenant(r.Context(), *tenant); err != nil {
		return nil, err
	}
	return &req, nil
}

// serveBody answers a route that hands its JSON body to one call of a
// service, the shape of the routes that seal a record of the body (a
// parameter change, an erasure, an evidence item): off, when the server
// has no such service (svc is nil); else the body, decoded strictly
// (decodeTenantBody) with the tenant and trace id that fields points at,
// given to call with svc, and call's answer written as JSON with status,
// or its error as a problem. The body's trace id is the request's
// traceparent's, which is answered at once (nil trace: the body carries
// none). A route whose body must agree with its path checks it in call.
func serveBody[S, Req, Resp any](s *Server, w http.ResponseWriter, r *http.Request, svc S, off error, status int,
	fields func(*Req) (tenant, trace *string), call func(S, context.Context, *Req) (Resp, error)) {
	if any(svc) == nil {
		s.writeError(w, r, off)
		return
	}
	tp, traced := requestTrace(r)
	if traced {
		s.setTraceparent(w, r, tp.TraceID, tp.Flags)
	}
	req, err := decodeTenantBody(s, w, r, func(b *Req) *string { tenant, _ := fields(b); return tenant })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, trace := fields(req); traced && trace != nil {
		*trace = tp.TraceID
	}
	resp, err := call(svc, r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, status, resp)
}

// writeFailClosed answers a receipt whose record was not committed: 503
// with the receipt as the body, so the caller sees why, and may retry.
// Whatever the service put in it, that receipt permits nothing.
func (s *Server) writeFailClosed(w http.ResponseWriter, r *http.Request, rcpt *writ.Receipt, err error) {
	s.log.WarnContext(r.Context(), "fail-closed receipt: decision record not committed",
		slog.String("decision_id", rcpt.DecisionID), slog.Any("error", err))
	body := wireReceipt(rcpt)
	body.SafeToExecute = false
	body.Disposition.DownstreamAllowed = false
	body.Metadata.FailClosed = true
	w.Header().Set("Retry-After", "1")
	s.writeJSON(w, r, http.StatusServiceUnavailable, body)
}

// handleRecord serves GET /v1/records/{id}: the record's sealed bytes.
func (s *Server) handleRecord(w http.ResponseWriter, r *http.Request) {
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.svc.Record(r.Context(), tenantID, r.PathValue("id"))
	if err == nil && (rec == nil || !json.Valid(rec.Raw)) {
		err = errors.New("service returned a record without valid raw JSON")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeBody(w, http.StatusOK, mediaJSON, rec.Raw)
}

// handleRecords serves GET /v1/records: a page of sealed records.
func (s *Server) handleRecords(w http.ResponseWriter, r *http.Request) {
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := parseRecordQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.svc.Records(r.Context(), q)
	if err == nil && page == nil {
		err = errors.New("service returned neither a page nor an error")
	}
	var body []byte
	if err == nil {
		body, err = recordPageJSON(page)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeBody(w, http.StatusOK, mediaJSON, body)
}

// handleHealth serves GET /healthz. It says how callers are
// authenticated, and warns of development mode.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	report := HealthReport{Status: HealthOK}
	if s.cfg.Health != nil {
		report = s.cfg.Health(r.Context())
	}
	report.Auth, report.Warning = AuthAPIKeys, ""
	if s.cfg.Authenticate == nil {
		report.Auth, report.Warning = AuthDisabled, devModeWarning
	}
	status := http.StatusOK
	if report.Status == "unavailable" {
		status = http.StatusServiceUnavailable
	}
	s.writeJSON(w, r, status, report)
}

// Identity is the answer of GET /v1/whoami: the API key the request
// presented, as the server authenticated it.
type Identity struct {
	// Auth is AuthAPIKeys, or AuthDisabled in development mode (and then
	// nothing else is set).
	Auth     string      `json:"auth"`
	TenantID string      `json:"tenant_id,omitempty"`
	KeyID    string      `json:"key_id,omitempty"`
	Subject  string      `json:"subject,omitempty"`
	Roles    []writ.Role `json:"roles,omitempty"`
	// ActorType is the actor type the key acts as (AGENT, HUMAN or
	// SERVICE) and ActsFor the principals it may act for
	// (docs/trust.md).
	ActorType string   `json:"actor_type,omitempty"`
	ActsFor   []string `json:"acts_for,omitempty"`
}

// handleWhoAmI serves GET /v1/whoami: whose key the request presented
// (a gateway in front of the server learns its callers' tenant and
// subject this way). Any role may ask.
func (s *Server) handleWhoAmI(w http.ResponseWriter, r *http.Request) {
	id := Identity{Auth: AuthDisabled}
	if p := writ.PrincipalFrom(r.Context()); p != nil {
		id = Identity{Auth: AuthAPIKeys, TenantID: p.TenantID, KeyID: p.KeyID, Subject: p.Subject, Roles: p.Roles, ActorType: p.Actor().Type, ActsFor: p.ActsFor}
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, id)
}

// handleReady serves GET /readyz: whether the server can take checks
// now (Config.Ready's checks).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	report := ReadyReport{Status: HealthOK, Checks: []ReadyCheck{}}
	if s.cfg.Ready != nil {
		report = s.cfg.Ready(r.Context())
	}
	report.Status = HealthOK
	for _, c := range report.Checks {
		switch {
		case c.OK:
		case c.Degraded && report.Status == HealthOK:
			report.Status = "degraded"
		case !c.Degraded:
			report.Status = "unavailable"
		}
	}
	report.Checks = nonNil(report.Checks)
	status := http.StatusOK
	if report.Status == "unavailable" {
		status = http.StatusServiceUnavailable
	}
	s.writeJSON(w, r, status, report)
}

// handleMetrics serves GET /metrics with Config.Metrics.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.writeError(w, r, writ.Errorf(writ.ENOTFOUND, "this server exports no metrics"))
		return
	}
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// Route returns the route pattern that serves r ("POST /v1/check"), or ""
// when none does. Its values are bounded by the route table, so it may
// name spans and label metrics.
func (s *Server) Route(r *http.Request) string {
	_, pattern := s.mux.Handler(r)
	return pattern
}

// handleOpenAPI serves GET /v1/openapi.yaml.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	writeBody(w, http.StatusOK, "application/yaml", openAPIDocument)
}

// writeJSON answers with v encoded as JSON.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	writeBody(w, status, mediaJSON, body)
}

// setTraceparent sets the response's traceparent: traceID with a fresh
// span id, and the request's tracestate when the answer continues the
// request's trace. An invalid traceID sets nothing.
func (s *Server) setTraceparent(w http.ResponseWriter, r *http.Request, traceID string, flags byte) {
	if !writ.ValidTraceID(traceID) {
		return
	}
	tp, err := formatTraceparent(traceID, flags, s.rand)
	if err != nil {
		s.log.WarnContext(r.Context(), "cannot set traceparent", slog.Any("error", err))
		return
	}
	w.Header().Set("traceparent", tp)
	// The answer continues the request's trace: its tracestate goes with
	// it unchanged, as Trace Context asks of a participant that adds no
	// entry of its own.
	if in, ok := requestTrace(r); ok && in.TraceID == traceID && in.State != "" {
		w.Header().Set("tracestate", in.State)
	}
}

// responseTraceID is the trace id a check answer carries when the request
// had no valid traceparent: the receipt's, else the request body's.
func responseTraceID(rcpt *writ.Receipt, req *writ.CheckRequest) string {
	if rcpt != nil && rcpt.Metadata.TraceID != "" {
		return rcpt.Metadata.TraceID
	}
	return req.TraceID
}

// wireReceipt returns rcpt with nil lists replaced by empty ones, so every
// list the receipt contract names is a JSON array on the wire.
func wireReceipt(rcpt *writ.Receipt) *writ.Receipt {
	c := *rcpt
	c.Reasons = nonNil(c.Reasons)
	c.SafeNextSteps = nonNil(c.SafeNextSteps)
	c.ViewerGuidance = nonNil(c.ViewerGuidance)
	c.WhatWouldChangeThis = nonNil(c.WhatWouldChangeThis)
	c.WhatWouldChangeThisConditions = nonNil(c.WhatWouldChangeThisConditions)
	c.ResumeContract.ResumeWhen = nonNil(c.ResumeContract.ResumeWhen)
	c.ResumeContract.ResumeWhenConditions = nonNil(c.ResumeContract.ResumeWhenConditions)
	return &c
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// recordPageJSON renders a page with each record's sealed bytes spliced in
// unchanged. (json.Marshal would compact json.RawMessage values.)
func recordPageJSON(page *writ.RecordPage) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"records":[`)
	for i, rec := range page.Records {
		if !json.Valid(rec.Raw) {
			return nil, fmt.Errorf("record %d of the page has no valid raw JSON", i)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(rec.Raw)
	}
	b.WriteByte(']')
	if page.NextCursor != "" {
		cursor, err := json.Marshal(page.NextCursor)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"next_cursor":`)
		b.Write(cursor)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// parseQuery parses the request's query string; a malformed one is
// EINVALID (r.URL.Query would drop the bad parts silently).
func parseQuery(r *http.Request) (url.Values, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, writ.Errorf(writ.EINVALID, "malformed query string: %v", err)
	}
	return values, nil
}

// noQuery rejects query parameters on a route that takes none.
func noQuery(r *http.Request) error {
	values, err := parseQuery(r)
	if err != nil {
		return err
	}
	p := queryParser{values: values}
	p.allow()
	return p.err()
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

// lockedReader serializes reads of a random source.
type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}
