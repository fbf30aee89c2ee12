package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"golang.org/x/net/netutil"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/console"
	"github.com/writhq/writ/delegation"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/readiness"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/telemetry"
	"github.com/writhq/writ/webhook"
	"github.com/writhq/writ/witness"
)

// serveGCPercent is the garbage collector's target for writ serve when
// GOGC is not set (see docs/scale.md, "What a check costs").
const serveGCPercent = 400

// serveConfig is what writ serve runs with: its flags, parsed (see
// serveFlags for what each field means). Tests build servers from it
// too.
type serveConfig struct {
	Addr       string // address to listen on
	Data       string // data directory
	StoreURL   string // PostgreSQL store; "" for the embedded SQLite one in Data
	PackDir    string // the pack to pin (required)
	ShadowDir  string // a candidate pack decided in shadow, or ""
	KeysDir    string // signing key ring; "" for Data/keys
	BindingKey string // file of the binding key; "" for Data/binding.key

	LedgerName         string
	CheckpointEvery    int64
	CheckpointInterval time.Duration
	WitnessesFile      string // "": no witnesses
	WitnessPoll        time.Duration

	MaxBody           int64
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	CommitTimeout     time.Duration
	MaxConns          int     // 0: no limit
	RateLimit         float64 // 0: no limit
	RateBurst         int

	ReplaySample float64 // 0: no sampled replays
	ReplayEvery  time.Duration

	LogLevel, LogFormat string
	Metrics             bool
	MetricsAddr         string // "": no address of the metrics' own

	EvidenceIssuers   string // JSON file; "": none
	DelegationIssuers string // JSON file; "": none
	CPUProfile        string // "": no profile
}

// serveFlags defines writ serve's flags on fs, each setting a field of c.
func serveFlags(fs *flag.FlagSet, c *serveConfig) {
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.Data, "data", defaultDataDir, "data directory: the embedded SQLite store, the signing keys and the binding key")
	fs.StringVar(&c.StoreURL, "store", "", storeUsage)
	fs.StringVar(&c.PackDir, "pack", "", "pack directory to pin (required)")
	fs.StringVar(&c.ShadowDir, "shadow-pack", "", "candidate pack directory to decide every check under in shadow: its decisions are stored beside the records, never enforced (see writ shadow report)")
	fs.StringVar(&c.KeysDir, "keys", "", "signing key ring directory (default DATA/keys; its first key is generated on first start); WRIT_SIGNING_KEY overrides it")
	fs.StringVar(&c.LedgerName, "ledger-name", "writ", "ledger name, the first part of checkpoint origins")
	fs.Int64Var(&c.CheckpointEvery, "checkpoint-every", 1000, "sign a checkpoint after this many new records of a tenant")
	fs.DurationVar(&c.CheckpointInterval, "checkpoint-interval", time.Second, "or at most this long after a tenant's first record not yet covered")
	fs.StringVar(&c.WitnessesFile, "witnesses", "", "a JSON file of the witnesses to submit each tenant's newest checkpoint to, for their cosignatures (docs/operations.md); checks never wait for them")
	fs.DurationVar(&c.WitnessPoll, "witness-poll", time.Second, "how often to look for checkpoints the witnesses have not cosigned yet")
	fs.StringVar(&c.BindingKey, "binding-key", "", "file holding the secret that keys argument bindings (default: DATA/binding.key, created on first use)")
	fs.Int64Var(&c.MaxBody, "max-body", httpapi.DefaultMaxBodyBytes, "largest request body accepted, in bytes")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 5*time.Second, "close a connection whose request headers take longer than this to arrive (slow clients)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", 30*time.Second, "close a connection whose whole request (headers and body) takes longer than this to arrive")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 30*time.Second, "give up on a response not written this long after its request was read")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 2*time.Minute, "close a keep-alive connection idle this long")
	fs.DurationVar(&c.CommitTimeout, "commit-timeout", 10*time.Second, "answer a check fail-closed (commit_timeout) when its record's commit has not returned this long after it was queued; a record still queued then is dropped; a commit already under way is not cancelled and may still land (0: wait as long as the client does)")
	fs.IntVar(&c.MaxConns, "max-conns", 4096, "connections open at once; more wait to be accepted (0: no limit)")
	fs.Float64Var(&c.RateLimit, "rate-limit", 0, "requests a second each API key (each client IP without authentication) may send; more are answered 429 (0: no limit)")
	fs.Float64Var(&c.ReplaySample, "replay-sample", 0, "replay this sample of every tenant's records (0 to 1; the same records every time) and seal each result as a record, every --replay-every")
	fs.DurationVar(&c.ReplayEvery, "replay-every", time.Hour, "with --replay-sample: how often to replay the sampled records appended since the last pass")
	fs.IntVar(&c.RateBurst, "rate-burst", 0, "requests a key may send at once after being idle (default: the rate limit, at least 1)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "log format: json (one object a line) or text")
	fs.BoolVar(&c.Metrics, "metrics", true, "export Prometheus metrics at GET /metrics (admin keys only; each sees its own tenant's series)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "also serve GET /metrics, every tenant's series, without a key, on this address of its own (for the operator's scraper; keep it off the tenants' network)")
	fs.StringVar(&c.EvidenceIssuers, "evidence-issuers", "", "JSON file naming, per tenant, the issuers of signed evidence items writ trusts and their public keys: {\"tenants\": {\"acme\": [{\"issuer\": \"idv.acme.example\", \"jwks_file\": \"idv.jwks.json\"}]}}; an item one of those keys signed (a JWS over its canonical JSON) is issued, whoever carries it in (docs/trust.md). Default: none")
	fs.StringVar(&c.DelegationIssuers, "delegation-issuers", "", "JSON file naming, per tenant, the issuers of delegation tokens (Writ-Delegation: <JWT>) writ trusts: their JWKS (file or URL), audience and tenant claim; a verified token's subject is the delegated user, authenticated (docs/trust.md). Default: no issuer, so a delegated user is claimed and the header is refused")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the server's run to this file (for performance work)")
}

// check reports, as a usage error, the first value of c no server can
// run with.
func (c *serveConfig) check() error {
	switch {
	case c.PackDir == "":
		return usagef("serve needs --pack DIR")
	case c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0 || c.MaxConns < 0 || c.RateLimit < 0 || c.RateBurst < 0 || c.CommitTimeout < 0:
		return usagef("serve: timeouts must be positive, and --commit-timeout, --max-conns, --rate-limit and --rate-burst not negative")
	case c.ReplaySample < 0 || c.ReplaySample > 1 || c.ReplayEvery <= 0:
		return usagef("--replay-sample must be from 0 to 1 and --replay-every positive")
	case c.MetricsAddr != "" && !c.Metrics:
		return usagef("--metrics-addr needs the metrics on (it was given with --metrics=false)")
	}
	return nil
}

func (m *Main) serve(ctx context.Context, args []string) error {
	var c serveConfig
	fs := m.flags("serve", "--pack DIR [--addr ADDR] [--data DIR]")
	serveFlags(fs, &c)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve takes no arguments, got %q", fs.Args())
	}
	s, err := m.newServer(ctx, &c)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(m.Stdout, "writ %s listening on http://%s (pack %s %s, data %s); console at http://%s/console/\n", version, s.Addr(), s.pack.ID(), s.pack.Hash, c.Data, s.Addr())
	if s.metricsLn != nil {
		fmt.Fprintf(m.Stdout, "writ metrics of every tenant at http://%s/metrics\n", s.metricsLn.Addr())
	}
	return s.Run(ctx)
}

// writServer is a writ serve built from a serveConfig: its store,
// engine, background work and listeners. Run serves until its context
// ends; Close then releases what was built, last built first.
type writServer struct {
	c         *serveConfig
	log       *slog.Logger
	pack      *pack.Pack
	st        ledger.Store
	eng       *engine.Engine
	replayer  *replay.Replayer
	http      *http.Server
	ln        net.Listener
	metrics   *http.Server // nil without --metrics-addr
	metricsLn net.Listener
	// readyExtra are readiness checks beyond the store's, the engine's
	// and the keys' (the witnesses').
	readyExtra []func() httpapi.ReadyCheck
	closers    []func() // run by Close, last first
}

// newServer builds the server c describes, listening but not yet
// serving. Everything it starts is stopped by the server's Close, or
// before it returns an error.
func (m *Main) newServer(ctx context.Context, c *serveConfig) (_ *writServer, err error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	s := &writServer{c: c}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.log, err = m.formatLogger(c.LogLevel, c.LogFormat); err != nil {
		return nil, err
	}
	var obs observability
	if err := s.startProcess(ctx, m, &obs); err != nil {
		return nil, err
	}
	pol, err := loadPolicy(c.PackDir)
	if err != nil {
		return nil, err
	}
	s.pack = pol.Pack
	if s.st, err = openStore(c.Data, c.StoreURL); err != nil {
		return nil, err
	}
	s.onClose(func() { s.st.Close() })
	keysDir := c.KeysDir
	if keysDir == "" {
		keysDir = defaultKeysDir(c.Data)
	}
	keys, ring, err := m.openSigningKeys(keysDir, time.Now(), s.log)
	if err != nil {
		return nil, err
	}
	authenticate, err := m.authMode(ctx, s.st, ring, c.Addr, s.log)
	if err != nil {
		return nil, err
	}
	cfg, err := s.engineConfig(m, pol, keys)
	if err != nil {
		return nil, err
	}
	// The metrics exist before the engine, whose commits they observe;
	// their gauges read the engine only when scraped.
	if c.Metrics {
		obs.metrics = newMetrics(func() *engine.Engine { return s.eng }, s.st, ring)
	}
	cfg.Appender.Observe = obs.observeCommits()
	s.onClose(func() { obs.close(s.log) }) // after the engine's Close, before tracing stops
	if obs.tracing {
		cfg.TracerProvider = telemetry.TracerProvider()
	}
	api := httpapi.Config{
		Authenticate: authenticate,
		RateLimit:    httpapi.RateLimit{PerSecond: c.RateLimit, Burst: c.RateBurst},
		Envelopes:    s.st.Envelope,
		VerifierKeys: func(context.Context, string) ([]keyring.Key, error) { return ring.Keys(), nil },
		APIKeys:      apiKeyAdmin(s.st, keys, ring),
		Pack:         s.pack,
		MaxBodyBytes: c.MaxBody,
		Logger:       s.log,
	}
	if err := s.startWitnesses(&cfg, &api, obs.metrics); err != nil {
		return nil, err
	}
	if s.eng, err = openEngine(ctx, cfg, c.Data, c.BindingKey); err != nil {
		return nil, err
	}
	s.onClose(func() { s.eng.Close() })
	srv, err := s.newAPI(ctx, api, pol, keys, &obs)
	if err != nil {
		return nil, err
	}
	if err := s.listen(s.handler(srv, authenticate, obs.tracing), obs.metrics); err != nil {
		return nil, err
	}
	return s, nil
}

// onClose has Close run f, before whatever was registered earlier.
func (s *writServer) onClose(f func()) { s.closers = append(s.closers, f) }

// Close stops what the server started and releases what it opened, last
// first: the listeners, the engine (which signs the last checkpoints),
// the witnesses, the webhook, the store, the profile and the traces.
func (s *writServer) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Addr is the address the server listens on.
func (s *writServer) Addr() net.Addr { return s.ln.Addr() }

// startProcess turns on what concerns the whole process: traces (as the
// OTEL_* environment asks), the CPU profile, and the collector's target.
func (s *writServer) startProcess(ctx context.Context, m *Main, obs *observability) error {
	tracing, stopTracing, err := m.startTracing(ctx, s.log)
	if err != nil {
		return err
	}
	obs.tracing = tracing
	s.onClose(stopTracing)
	if s.c.CPUProfile != "" {
		stop, err := startCPUProfile(s.c.CPUProfile)
		if err != nil {
			return err
		}
		s.onClose(stop)
	}
	if m.Getenv("GOGC") == "" {
		// A check leaves a few dozen KiB of short-lived garbage (request,
		// record, canonical bytes, receipt) over a small live heap, so
		// the default GOGC=100 collects very often. 400 cut writ's CPU
		// per check by about a tenth under writ bench, for a heap that
		// stays within tens of MiB. GOGC in the environment wins.
		debug.SetGCPercent(serveGCPercent)
	}
	return nil
}

// engineConfig returns the engine's configuration: the pinned pack
// pol, the store, keys, checkpoints, trusted evidence issuers, the
// shadow pack and the approval webhook (started here).
func (s *writServer) engineConfig(m *Main, pol *policy.Policy, keys ledger.KeySource) (engine.Config, error) {
	c := s.c
	cfg := engine.Config{Policy: pol, Store: s.st, Logger: s.log, Keys: keys, LedgerName: c.LedgerName,
		Checkpoints: ledger.CheckpointPolicy{Every: c.CheckpointEvery, Interval: c.CheckpointInterval}, CommitTimeout: c.CommitTimeout}
	if c.EvidenceIssuers != "" {
		is, err := delegation.LoadEvidenceIssuers(c.EvidenceIssuers)
		if err != nil {
			return cfg, err
		}
		cfg.EvidenceIssuers = is
	}
	if c.StoreURL != "" {
		// Other servers may decide the approvals that resumes here wait on.
		cfg.ResumeSweep = 2 * time.Second
	}
	if c.ShadowDir != "" {
		var err error
		if cfg.Shadow, err = loadPolicy(c.ShadowDir); err != nil {
			return cfg, fmt.Errorf("shadow pack: %w", err)
		}
		if cfg.Shadow.Pack.Hash == pol.Pack.Hash {
			return cfg, usagef("the shadow pack is the enforced pack (%s); shadow a candidate", pol.Pack.Hash)
		}
		s.log.Info("deciding in shadow", "pack", cfg.Shadow.Pack.ID(), "pack_hash", cfg.Shadow.Pack.Hash)
	}
	if wh := pol.Pack.ApprovalWebhook; wh != nil {
		secret := m.Getenv(wh.SecretEnv)
		if secret == "" {
			return cfg, fmt.Errorf("pack %s announces approvals to a webhook signed with $%s, which is not set", pol.Pack.ID(), wh.SecretEnv)
		}
		n, err := webhook.New(webhook.Config{URL: wh.URL, Secret: []byte(secret), Logger: s.log})
		if err != nil {
			return cfg, fmt.Errorf("approval webhook: %w", err)
		}
		whCtx, stopWebhook := context.WithCancel(context.Background())
		s.onClose(stopWebhook)
		go n.Run(whCtx)
		cfg.Announce, cfg.AnnounceDecided = n.Announce, n.AnnounceDecided
	}
	return cfg, nil
}

// startWitnesses starts submitting checkpoints to the witnesses of
// --witnesses, before the engine, so that the checkpointer can tell them
// of each checkpoint; they stop after the engine's Close, which signs the
// last checkpoints. Without witnesses, GET /v1/ledger/witnesses still
// answers the tenant's latest checkpoint, and an empty list.
func (s *writServer) startWitnesses(cfg *engine.Config, api *httpapi.Config, metrics *telemetry.Metrics) error {
	if s.c.WitnessesFile == "" {
		st := s.st
		api.Witnesses = func(ctx context.Context, tenantID string) (*writ.LedgerWitnesses, error) {
			rs, ok := st.(witness.ReportStore)
			if !ok {
				return nil, fmt.Errorf("the store (%T) keeps no cosignatures", st)
			}
			return witness.Report(ctx, rs, tenantID, nil)
		}
		return nil
	}
	wc, stop, err := startWitnesses(s.c.WitnessesFile, s.st, s.c.WitnessPoll, metrics, s.log)
	if err != nil {
		return err
	}
	s.onClose(stop)
	cfg.Checkpoints.Issued = func(*ledger.Checkpoint) { wc.Notify() }
	s.readyExtra = append(s.readyExtra, func() httpapi.ReadyCheck { return witnessReadiness(wc) })
	api.Witnesses = wc.Report
	return nil
}

// newAPI returns the HTTP API over the engine, given api with what
// newServer already set: the engine's services (instrumented when
// metrics or traces are on), replays, delegation tokens, health and
// readiness.
func (s *writServer) newAPI(ctx context.Context, api httpapi.Config, pol *policy.Policy, keys ledger.KeySource, obs *observability) (*httpapi.Server, error) {
	eng := s.eng
	var svc writ.Service = eng
	api.Ledger, api.Workflows, api.Approvals, api.Lifecycle = eng, eng, eng, eng
	api.Params, api.Annotations, api.Erasures, api.Evidence = eng, eng, eng, eng
	if obs.metrics != nil {
		api.Metrics = obs.metrics.TenantHandler()
		api.Latency = func(_ context.Context, tenantID string) (*writ.LatencyStats, error) {
			return obs.metrics.Latency(tenantID), nil
		}
	}
	if obs.metrics != nil || obs.tracing {
		svc = telemetry.Service(eng, obs.metrics)
		api.Workflows = telemetry.Workflows(eng, obs.metrics)
		api.Approvals = telemetry.Approvals(eng, obs.metrics)
	}
	if obs.tracing {
		api.Lifecycle = telemetry.Lifecycle(eng)
	}
	s.replayer = replay.New(s.st, replay.Options{})
	api.Replays, api.Shadows = s.replayer, s.replayer
	if s.c.DelegationIssuers != "" {
		if api.Authenticate == nil {
			return nil, usagef("--delegation-issuers needs API keys: in development mode every actor is claimed")
		}
		v, err := delegation.Load(ctx, s.c.DelegationIssuers)
		if err != nil {
			return nil, err
		}
		// Tokens are checked against the engine's clock.
		api.VerifyDelegation = func(ctx context.Context, tenantID, token string) (*writ.Delegation, error) {
			return v.Verify(ctx, tenantID, token, time.Now())
		}
	}
	p, storeKind := s.pack, "sqlite"
	if s.c.StoreURL != "" {
		storeKind = "postgres"
	}
	api.Health = func(context.Context) httpapi.HealthReport {
		return httpapi.HealthReport{Status: "ok", Version: version, Pack: p.ID(), PackHash: p.Hash, Store: storeKind}
	}
	api.Ready = readiness.Report(s.st, newCommitHealth(eng, s.st, s.log), keys, pol, s.log, s.readyExtra...)
	return httpapi.NewServer(svc, api), nil
}

// handler returns the server's handler: the API, and the web console
// beside it, which calls the API in process. In development mode (no
// authentication) it answers only requests for a loopback host, so that
// no page of another site reaches it by DNS rebinding.
func (s *writServer) handler(api *httpapi.Server, authenticate func(context.Context, string) (*writ.Principal, error), tracing bool) http.Handler {
	var apiHandler http.Handler = api
	if tracing {
		apiHandler = tracedHandler(api)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", console.New(console.Config{API: apiHandler, Authenticate: authenticate, Logger: s.log}))
	mux.Handle("/console", http.RedirectHandler(console.Prefix, http.StatusMovedPermanently))
	mux.Handle("/", apiHandler)
	if authenticate == nil {
		return console.LoopbackOnly(mux)
	}
	return mux
}

// listen opens the server's listeners: the API's on --addr, and the
// metrics' own on --metrics-addr.
func (s *writServer) listen(h http.Handler, metrics *telemetry.Metrics) error {
	c := s.c
	s.http = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	s.onClose(func() { s.http.Close(); ln.Close() })
	if c.MaxConns > 0 {
		// Connections beyond the limit wait in the kernel's backlog rather
		// than each taking a goroutine and buffers; slow clients are cut
		// off by the timeouts above, which frees their places.
		ln = netutil.LimitListener(ln, c.MaxConns)
	}
	s.ln = ln
	if c.MetricsAddr != "" {
		if s.metrics, s.metricsLn, err = metricsListener(c.MetricsAddr, metrics.Handler()); err != nil {
			return err
		}
		s.onClose(func() { s.metrics.Close(); s.metricsLn.Close() })
	}
	return nil
}

// Run serves until ctx ends or a listener fails, replaying the sampled
// records meanwhile (--replay-sample). When ctx ends, it lets the checks
// in flight finish (for at most 15 seconds) and returns nil.
func (s *writServer) Run(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.http.Serve(s.ln) }()
	if s.metrics != nil {
		go func() { errc <- s.metrics.Serve(s.metricsLn) }()
	}
	if s.c.ReplaySample > 0 {
		stop := startSampledReplays(ctx, s.st, s.replayer, s.eng, s.c.ReplaySample, s.c.ReplayEvery, s.log)
		defer stop()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: finishing in-flight checks")
	s.eng.StopWaiting() // waiting resumes answer "still waiting" now
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.http.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// apiKeyAdmin returns what the admin's API-key routes need: the store's
// keys, signed with the signing key valid at the time (as writ keys create
// signs them) and checked against ring. A store that keeps no keys
// serves none (the routes answer 404).
func apiKeyAdmin(st ledger.Store, keys ledger.KeySource, ring ringView) *httpapi.KeyAdmin {
	ks, ok := st.(auth.Store)
	if !ok {
		return nil
	}
	return &httpapi.KeyAdmin{Store: ks, Verifier: ring, Signer: func(at time.Time) (auth.Signer, error) { return keys(at) }}
}

// authMode decides how the server authenticates callers. With API keys in
// the store (revoked ones count: keys once issued mean the deployment
// authenticates), every request needs one, and a key is accepted only if
// its signature verifies under ring. Without any, the server runs in
// development mode, unauthenticated, and only on a loopback address, so
// the quick start works and nothing unauthenticated is ever exposed.
func (m *Main) authMode(ctx context.Context, st ledger.Store, ring ringView, addr string, log *slog.Logger) (func(context.Context, string) (*writ.Principal, error), error) {
	ks, ok := st.(auth.Store)
	if !ok {
		return nil, fmt.Errorf("this store keeps no API keys")
	}
	keys, err := ks.APIKeys(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read API keys: %w", err)
	}
	if len(keys) > 0 {
		// Say at the start which keys will be refused, not only when
		// one is presented.
		for _, k := range keys {
			if k.RevokedAt != nil {
				continue
			}
			if err := auth.Verify(k, ring); errors.Is(err, auth.ErrUnsigned) {
				log.Warn("API key has no signature, so it is refused: if writ created it (before keys were signed), sign it with 'writ keys sign "+k.ID+"'",
					"key", k.ID, "tenant", k.TenantID, "subject", k.Subject)
			} else if err != nil {
				log.Error("API key's signature does not verify, so it is refused: its row was changed outside writ", "key", k.ID, "tenant", k.TenantID, "error", err)
			}
		}
		a := auth.NewAuthenticator(ks, ring, func(k *auth.Key, err error) {
			log.Error("refused a request with an API key whose stored row its signature does not bear out (unsigned, or changed outside writ)",
				"key", k.ID, "tenant", k.TenantID, "error", err)
		})
		return func(ctx context.Context, token string) (*writ.Principal, error) {
			return a.Authenticate(ctx, token, time.Now())
		}, nil
	}
	if !loopback(addr) {
		return nil, fmt.Errorf("refusing to serve on %s without authentication: create an API key first (writ keys create --tenant T --subject WHO --role ROLE), or listen on a loopback address for development", addr)
	}
	log.Warn("DEVELOPMENT MODE: no API keys exist, so this server authenticates no one; it listens on loopback only. Create keys with 'writ keys create' and restart to require them.")
	return nil, nil
}

// loopback reports whether addr (host:port) names only a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// metricsListener listens on addr and serves GET /metrics there with h,
// every tenant's series and no key: the operator's own address, apart
// from the API that tenants reach.
func metricsListener(addr string, h http.Handler) (*http.Server, net.Listener, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln, nil
}

// startSampledReplays replays, every every, the records of every tenant
// appended since the last pass that are in the sample of rate
// (replay.Sampled), and seals each result as a record. The first pass
// starts at each chain's beginning. It returns a function that stops it
// and waits for the pass under way.
func startSampledReplays(ctx context.Context, st interface {
	Tenants(context.Context) ([]string, error)
}, rp *replay.Replayer, ann writ.Annotations, rate float64, every time.Duration, log *slog.Logger) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		after := map[string]int64{}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			tenants, err := st.Tenants(ctx)
			if err != nil && ctx.Err() == nil {
				log.Warn("sampled replays: list tenants", slog.Any("error", err))
			}
			for _, tenant := range tenants {
				sum, last, err := rp.Sample(ctx, tenant, rate, after[tenant], func(res *replay.Result) error {
					_, err := ann.RecordReplay(ctx, res)
					if writ.ErrorCode(err) == writ.ECONFLICT {
						return nil
					}
					return err
				})
				if err != nil {
					if ctx.Err() == nil {
						log.Warn("sampled replays", slog.String("tenant", tenant), slog.Any("error", err))
					}
					continue
				}
				after[tenant] = last
				if sum.Records > 0 {
					log.Info("sampled replays", slog.String("tenant", tenant), slog.Int64("records", sum.Records),
						slog.Int64("replay_equal", sum.Equal), slog.Int64("diff", sum.Diff), slog.Int64("error", sum.Errors))
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
