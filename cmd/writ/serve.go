package main

import (
	"context"
	"errors"
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
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/telemetry"
	"github.com/writhq/writ/webhook"
	"github.com/writhq/writ/witness"
)

// serveGCPercent is the garbage collector's target for writ serve when
// GOGC is not set (see docs/scale.md, "What a check costs").
const serveGCPercent = 400

func (m *Main) serve(ctx context.Context, args []string) error {
	fs := m.flags("serve", "--pack DIR [--addr ADDR] [--data DIR]")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	data := fs.String("data", defaultDataDir, "data directory: the embedded SQLite store, the signing keys and the binding key")
	storeURL := fs.String("store", "", storeUsage)
	packDir := fs.String("pack", "", "pack directory to pin (required)")
	shadowDir := fs.String("shadow-pack", "", "candidate pack directory to decide every check under in shadow: its decisions are stored beside the records, never enforced (see writ shadow report)")
	keysDir := fs.String("keys", "", "signing key ring directory (default DATA/keys; its first key is generated on first start); WRIT_SIGNING_KEY overrides it")
	ledgerName := fs.String("ledger-name", "writ", "ledger name, the first part of checkpoint origins")
	cpEvery := fs.Int64("checkpoint-every", 1000, "sign a checkpoint after this many new records of a tenant")
	cpInterval := fs.Duration("checkpoint-interval", time.Second, "or at most this long after a tenant's first record not yet covered")
	witnessesFile := fs.String("witnesses", "", "a JSON file of the witnesses to submit each tenant's newest checkpoint to, for their cosignatures (docs/operations.md); checks never wait for them")
	witnessPoll := fs.Duration("witness-poll", time.Second, "how often to look for checkpoints the witnesses have not cosigned yet")
	keyFile := fs.String("binding-key", "", "file holding the secret that keys argument bindings (default: DATA/binding.key, created on first use)")
	maxBody := fs.Int64("max-body", httpapi.DefaultMaxBodyBytes, "largest request body accepted, in bytes")
	readHeaderTimeout := fs.Duration("read-header-timeout", 5*time.Second, "close a connection whose request headers take longer than this to arrive (slow clients)")
	readTimeout := fs.Duration("read-timeout", 30*time.Second, "close a connection whose whole request (headers and body) takes longer than this to arrive")
	writeTimeout := fs.Duration("write-timeout", 30*time.Second, "give up on a response not written this long after its request was read")
	idleTimeout := fs.Duration("idle-timeout", 2*time.Minute, "close a keep-alive connection idle this long")
	commitTimeout := fs.Duration("commit-timeout", 10*time.Second, "answer a check fail-closed (commit_timeout) when its record's commit has not returned this long after it was queued; a record still queued then is dropped; a commit already under way is not cancelled and may still land (0: wait as long as the client does)")
	maxConns := fs.Int("max-conns", 4096, "connections open at once; more wait to be accepted (0: no limit)")
	rateLimit := fs.Float64("rate-limit", 0, "requests a second each API key (each client IP without authentication) may send; more are answered 429 (0: no limit)")
	replaySample := fs.Float64("replay-sample", 0, "replay this sample of every tenant's records (0 to 1; the same records every time) and seal each result as a record, every --replay-every")
	replayEvery := fs.Duration("replay-every", time.Hour, "with --replay-sample: how often to replay the sampled records appended since the last pass")
	rateBurst := fs.Int("rate-burst", 0, "requests a key may send at once after being idle (default: the rate limit, at least 1)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "json", "log format: json (one object a line) or text")
	metricsOn := fs.Bool("metrics", true, "export Prometheus metrics at GET /metrics (admin keys only; each sees its own tenant's series)")
	metricsAddr := fs.String("metrics-addr", "", "also serve GET /metrics, every tenant's series, without a key, on this address of its own (for the operator's scraper; keep it off the tenants' network)")
	evidenceIssuers := fs.String("evidence-issuers", "", "JSON file naming, per tenant, the issuers of signed evidence items writ trusts and their public keys: {\"tenants\": {\"acme\": [{\"issuer\": \"idv.acme.example\", \"jwks_file\": \"idv.jwks.json\"}]}}; an item one of those keys signed (a JWS over its canonical JSON) is issued, whoever carries it in (docs/trust.md). Default: none")
	delegationIssuers := fs.String("delegation-issuers", "", "JSON file naming, per tenant, the issuers of delegation tokens (Writ-Delegation: <JWT>) writ trusts: their JWKS (file or URL), audience and tenant claim; a verified token's subject is the delegated user, authenticated (docs/trust.md). Default: no issuer, so a delegated user is claimed and the header is refused")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server's run to this file (for performance work)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *packDir == "" {
		return usagef("serve needs --pack DIR")
	}
	if *readHeaderTimeout <= 0 || *readTimeout <= 0 || *writeTimeout <= 0 || *idleTimeout <= 0 || *maxConns < 0 || *rateLimit < 0 || *rateBurst < 0 || *commitTimeout < 0 {
		return usagef("serve: timeouts must be positive, and --commit-timeout, --max-conns, --rate-limit and --rate-burst not negative")
	}
	if fs.NArg() > 0 {
		return usagef("serve takes no arguments, got %q", fs.Args())
	}
	log, err := m.formatLogger(*logLevel, *logFormat)
	if err != nil {
		return err
	}
	var obs observability
	var stopTracing func()
	if obs.tracing, stopTracing, err = m.startTracing(ctx, log); err != nil {
		return err
	}
	defer stopTracing()
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if m.Getenv("GOGC") == "" {
		// A check leaves a few dozen KiB of short-lived garbage (request,
		// record, canonical bytes, receipt) over a small live heap, so
		// the default GOGC=100 collects very often. 400 cut writ's CPU
		// per check by about a tenth under writ bench, for a heap that
		// stays within tens of MiB. GOGC in the environment wins.
		debug.SetGCPercent(serveGCPercent)
	}
	pol, err := loadPolicy(*packDir)
	if err != nil {
		return err
	}
	st, err := openStore(*data, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if *keysDir == "" {
		*keysDir = defaultKeysDir(*data)
	}
	keys, ring, err := m.openSigningKeys(*keysDir, time.Now(), log)
	if err != nil {
		return err
	}
	authenticate, err := m.authMode(ctx, st, ring, *addr, log)
	if err != nil {
		return err
	}
	cfg := engine.Config{Policy: pol, Store: st, Logger: log, Keys: keys, LedgerName: *ledgerName,
		Checkpoints: ledger.CheckpointPolicy{Every: *cpEvery, Interval: *cpInterval}, CommitTimeout: *commitTimeout}
	if *evidenceIssuers != "" {
		is, err := delegation.LoadEvidenceIssuers(*evidenceIssuers)
		if err != nil {
			return err
		}
		cfg.EvidenceIssuers = is
	}
	if *storeURL != "" {
		// Other servers may decide the approvals that resumes here wait on.
		cfg.ResumeSweep = 2 * time.Second
	}
	if *shadowDir != "" {
		if cfg.Shadow, err = loadPolicy(*shadowDir); err != nil {
			return fmt.Errorf("shadow pack: %w", err)
		}
		if cfg.Shadow.Pack.Hash == pol.Pack.Hash {
			return usagef("the shadow pack is the enforced pack (%s); shadow a candidate", pol.Pack.Hash)
		}
		log.Info("deciding in shadow", "pack", cfg.Shadow.Pack.ID(), "pack_hash", cfg.Shadow.Pack.Hash)
	}
	if wh := pol.Pack.ApprovalWebhook; wh != nil {
		secret := m.Getenv(wh.SecretEnv)
		if secret == "" {
			return fmt.Errorf("pack %s announces approvals to a webhook signed with $%s, which is not set", pol.Pack.ID(), wh.SecretEnv)
		}
		n, err := webhook.New(webhook.Config{URL: wh.URL, Secret: []byte(secret), Logger: log})
		if err != nil {
			return fmt.Errorf("approval webhook: %w", err)
		}
		whCtx, stopWebhook := context.WithCancel(context.Background())
		defer stopWebhook()
		go n.Run(whCtx)
		cfg.Announce, cfg.AnnounceDecided = n.Announce, n.AnnounceDecided
	}
	// The metrics exist before the engine, whose commits they observe;
	// their gauges read the engine only when scraped.
	var eng *engine.Engine
	if *metricsOn {
		obs.metrics = newMetrics(func() *engine.Engine { return eng }, st, ring)
	}
	cfg.Appender.Observe = obs.observeCommits()
	defer obs.close(log) // after the engine's Close, before stopTracing
	if obs.tracing {
		cfg.TracerProvider = telemetry.TracerProvider()
	}
	var readyExtra []func() httpapi.ReadyCheck
	// GET /v1/ledger/witnesses: without witnesses configured, it still
	// answers the tenant's latest checkpoint, and an empty list.
	witnesses := func(ctx context.Context, tenantID string) (*writ.LedgerWitnesses, error) {
		rs, ok := st.(witness.ReportStore)
		if !ok {
			return nil, fmt.Errorf("the store (%T) keeps no cosignatures", st)
		}
		return witness.Report(ctx, rs, tenantID, nil)
	}
	if *witnessesFile != "" {
		// Started before the engine, so that the checkpointer can tell it
		// of each checkpoint; stopped after the engine's Close (defers run
		// last first), which signs the last checkpoints.
		wc, stopWitnesses, err := startWitnesses(*witnessesFile, st, *witnessPoll, obs.metrics, log)
		if err != nil {
			return err
		}
		defer stopWitnesses()
		cfg.Checkpoints.Issued = func(*ledger.Checkpoint) { wc.Notify() }
		readyExtra = append(readyExtra, func() httpapi.ReadyCheck { return witnessReadiness(wc) })
		witnesses = wc.Report
	}
	eng, err = openEngine(ctx, cfg, *data, *keyFile)
	if err != nil {
		return err
	}
	defer eng.Close()
	var svc writ.Service = eng
	var workflows writ.Workflows = eng
	var approvals writ.Approvals = eng
	var lifecycle writ.Lifecycle = eng
	var metricsHandler http.Handler
	var latency func(context.Context, string) (*writ.LatencyStats, error)
	if obs.metrics != nil {
		metricsHandler = obs.metrics.TenantHandler()
		latency = func(_ context.Context, tenantID string) (*writ.LatencyStats, error) {
			return obs.metrics.Latency(tenantID), nil
		}
	}
	if obs.metrics != nil || obs.tracing {
		svc = telemetry.Service(eng, obs.metrics)
		workflows = telemetry.Workflows(eng, obs.metrics)
		approvals = telemetry.Approvals(eng, obs.metrics)
	}
	if obs.tracing {
		lifecycle = telemetry.Lifecycle(eng)
	}

	p := pol.Pack
	storeKind := "sqlite"
	if *storeURL != "" {
		storeKind = "postgres"
	}
	replayer := replay.New(st, replay.Options{})
	var verifyDelegation func(context.Context, string, string) (*writ.Delegation, error)
	if *delegationIssuers != "" {
		if authenticate == nil {
			return usagef("--delegation-issuers needs API keys: in development mode every actor is claimed")
		}
		v, err := delegation.Load(ctx, *delegationIssuers)
		if err != nil {
			return err
		}
		// Tokens are checked against the engine's clock.
		verifyDelegation = func(ctx context.Context, tenantID, token string) (*writ.Delegation, error) {
			return v.Verify(ctx, tenantID, token, time.Now())
		}
	}
	api := httpapi.NewServer(svc, httpapi.Config{
		VerifyDelegation: verifyDelegation,
		Ledger:           eng,
		Workflows:        workflows,
		Approvals:        approvals,
		Replays:          replayer,
		Shadows:          replayer,
		Lifecycle:        lifecycle,
		Params:           eng,
		Annotations:      eng,
		Erasures:         eng,
		Evidence:         eng,
		Authenticate:     authenticate,
		RateLimit:        httpapi.RateLimit{PerSecond: *rateLimit, Burst: *rateBurst},
		Envelopes:        st.Envelope,
		VerifierKeys:     func(context.Context, string) ([]keyring.Key, error) { return ring.Keys(), nil },
		APIKeys:          apiKeyAdmin(st, keys, ring),
		Pack:             p,
		MaxBodyBytes:     *maxBody,
		Logger:           log,
		Health: func(context.Context) httpapi.HealthReport {
			return httpapi.HealthReport{Status: "ok", Version: version, Pack: p.ID(), PackHash: p.Hash, Store: storeKind}
		},
		Ready:     readiness(st, newCommitHealth(eng, st, log), keys, pol, log, readyExtra...),
		Metrics:   metricsHandler,
		Latency:   latency,
		Witnesses: witnesses,
	})
	var apiHandler http.Handler = api
	if obs.tracing {
		apiHandler = tracedHandler(api)
	}
	// The web console is served beside the API and calls it in process.
	mux := http.NewServeMux()
	mux.Handle("/console/", console.New(console.Config{API: apiHandler, Authenticate: authenticate, Logger: log}))
	mux.Handle("/console", http.RedirectHandler(console.Prefix, http.StatusMovedPermanently))
	mux.Handle("/", apiHandler)
	var handler http.Handler = mux
	if authenticate == nil {
		// Development mode: only requests for a loopback host, so that
		// no page of another site reaches it by DNS rebinding.
		handler = console.LoopbackOnly(mux)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: *readHeaderTimeout,
		ReadTimeout:       *readTimeout,
		WriteTimeout:      *writeTimeout,
		IdleTimeout:       *idleTimeout,
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *maxConns > 0 {
		// Connections beyond the limit wait in the kernel's backlog rather
		// than each taking a goroutine and buffers; slow clients are cut
		// off by the timeouts above, which frees their places.
		ln = netutil.LimitListener(ln, *maxConns)
	}
	fmt.Fprintf(m.Stdout, "writ %s listening on http://%s (pack %s %s, data %s); console at http://%s/console/\n", version, ln.Addr(), p.ID(), p.Hash, *data, ln.Addr())
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if *metricsAddr != "" {
		if obs.metrics == nil {
			return usagef("--metrics-addr needs the metrics on (it was given with --metrics=false)")
		}
		msrv, mln, err := metricsListener(*metricsAddr, obs.metrics.Handler())
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "writ metrics of every tenant at http://%s/metrics\n", mln.Addr())
		go func() { errc <- msrv.Serve(mln) }()
		defer msrv.Close()
	}
	if *replaySample < 0 || *replaySample > 1 || *replayEvery <= 0 {
		return usagef("--replay-sample must be from 0 to 1 and --replay-every positive")
	}
	if *replaySample > 0 {
		stop := startSampledReplays(ctx, st, replayer, eng, *replaySample, *replayEvery, log)
		defer stop()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight checks")
	eng.StopWaiting() // waiting resumes answer "still waiting" now
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
