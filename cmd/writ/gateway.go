package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"text/tabwriter"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/console"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/gateway"
	"github.com/writhq/writ/gateway/remote"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/telemetry"
)

// gatewayFlags are the flags of writ gateway.
type gatewayFlags struct {
	config, pack, data, store, keys, bindingKey, server, tenant, listen, api, logLevel, cpuProfile *string
	maxMessage                                                                                     *int64
	listTools                                                                                      *bool
}

func (m *Main) gatewayFlagSet(name, usage string) (*flag.FlagSet, gatewayFlags) {
	fs := m.flags(name, usage)
	return fs, gatewayFlags{
		config:     fs.String("config", "", "gateway configuration file (YAML; see docs/mcp.md) (required)"),
		pack:       fs.String("pack", "", "pack directory: its tool manifest says which tools are listed; in process, the pack decisions are made under (required)"),
		data:       fs.String("data", defaultDataDir, "data directory of the in-process engine: the embedded SQLite store, the signing keys and the binding key"),
		store:      fs.String("store", "", storeUsage),
		keys:       fs.String("keys", "", "signing key ring directory (default DATA/keys); WRIT_SIGNING_KEY overrides it"),
		bindingKey: fs.String("binding-key", "", "file holding the secret that keys argument bindings (default: DATA/binding.key)"),
		server:     fs.String("server", "", "decide on this writ server (URL) instead of in process: with --listen, each caller's own API key; over stdio, $WRIT_API_KEY"),
		tenant:     fs.String("tenant", "", "tenant of the checks of stdio and development-mode sessions (default: the configuration's tenant)"),
		listen:     fs.String("listen", "", "serve MCP over Streamable HTTP at this address (path /mcp) instead of stdio; API keys are bearer tokens"),
		api:        fs.String("api", "", "in process: also serve the writ HTTP API and console at this address, so approvers can decide (see docs/mcp.md)"),
		logLevel:   fs.String("log-level", "info", "log level (logs go to standard error): debug, info, warn or error"),
		maxMessage: fs.Int64("max-message", 4<<20, "largest MCP message accepted from the agent, in bytes"),
		listTools:  fs.Bool("list-tools", false, "list every upstream tool with its decision key and definition digest (to pin in tools.yaml), then exit"),
		cpuProfile: fs.String("cpuprofile", "", "write a CPU profile of the gateway's run to this file (for performance work)"),
	}
}

func (m *Main) gateway(ctx context.Context, args []string) error {
	fs, f := m.gatewayFlagSet("gateway", "--config FILE --pack DIR [--data DIR | --store URL | --server URL] [--listen ADDR] [--api ADDR] [--list-tools]")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("gateway takes no arguments, got %q", fs.Args())
	}
	if *f.listTools {
		return m.gatewayTools(ctx, f)
	}
	if *f.cpuProfile != "" {
		stop, err := startCPUProfile(*f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if m.Getenv("GOGC") == "" && *f.server == "" {
		// The in-process engine makes the same short-lived garbage per
		// check as writ serve's: the same collector target (serve.go).
		// GOGC in the environment wins.
		debug.SetGCPercent(serveGCPercent)
	}
	g, cleanup, err := m.openGateway(ctx, f)
	if err != nil {
		return err
	}
	defer cleanup()
	if *f.listen == "" {
		// stdio: standard output carries MCP messages only.
		// The gateway's own framing answers malformed messages, so no
		// input ends the session.
		t := &gateway.StdioTransport{Reader: m.Stdin, Writer: m.Stdout, MaxMessage: int(*f.maxMessage)}
		err := g.gw.Server().Run(ctx, t)
		if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed)) {
			return nil
		}
		return err
	}
	return m.serveGateway(ctx, g, f)
}

// openedGateway is a gateway with what it runs on.
type openedGateway struct {
	gw  *gateway.Gateway
	log *slog.Logger
	// In process: the engine and its store, for --api and HTTP keys.
	eng  *engine.Engine
	st   ledger.Store
	ring ringView
	keys ledger.KeySource
	// authenticate is nil in development mode.
	authenticate func(context.Context, string) (*writ.Principal, error)
	// remote: the callers' keys are forwarded to the writ server
	// (--server with --listen, on a server that has API keys).
	remote bool
}

func (m *Main) openGateway(ctx context.Context, f gatewayFlags) (*openedGateway, func(), error) {
	if *f.config == "" || *f.pack == "" {
		return nil, nil, usagef("gateway needs --config FILE and --pack DIR")
	}
	if *f.server != "" && (*f.store != "" || *f.api != "") {
		return nil, nil, usagef("--server decides on a writ server: --store and --api are for the in-process engine")
	}
	log, err := m.formatLogger(*f.logLevel, "json")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := gateway.LoadConfig(*f.config)
	if err != nil {
		return nil, nil, err
	}
	if *f.tenant != "" {
		cfg.Tenant = *f.tenant
	}
	pol, err := loadPolicy(*f.pack)
	if err != nil {
		return nil, nil, err
	}
	tracing, stopTracing, err := m.startTracing(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	og := &openedGateway{log: log}
	closers := []func(){stopTracing}
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var w gateway.Writ
	var capture gateway.Capturer
	if *f.server != "" {
		rw := remote.New(*f.server, m.client(serverFlags{server: f.server, tenant: f.tenant}))
		w, capture = rw, rw
		if cfg.Actor == nil && *f.listen == "" {
			// A stdio session checks with the gateway's own key
			// ($WRIT_API_KEY), whose principal the server makes the
			// actor (docs/trust.md): name it, rather than a default
			// actor the server would refuse as a mismatch.
			if who, err := rw.Own().WhoAmI(ctx); err == nil && who.Auth == httpapi.AuthAPIKeys {
				cfg.Actor = &gateway.ActorConfig{Type: who.ActorType, ID: who.Subject}
				if cfg.Tenant == "" {
					cfg.Tenant = who.TenantID
				}
			}
		}
		if cfg.User != "" {
			if who, err := rw.Own().WhoAmI(ctx); err == nil && who.Auth == httpapi.AuthAPIKeys {
				// The gateway would answer for its user with the key that
				// made the check: writ records that key's subject as the
				// approver and refuses the key that checked. So nobody is
				// asked a question whose answer cannot be recorded.
				log.Warn("the configuration names a user, but the writ server requires API keys and the gateway's own key ($WRIT_API_KEY) may not approve its own checks: the user is never asked; approvers decide in the console, the API or the CLI",
					"user", cfg.User, "server", rw.Base())
				w = withoutApprovals{rw}
			}
		}
		if *f.listen != "" {
			// A server with API keys authenticates each caller of the
			// gateway with its own key; one in development mode
			// authenticates no one, and the sessions are the
			// configuration's (loopback only, see serveGateway).
			who, err := httpapi.NewClient(rw.Base()).WhoAmI(ctx)
			switch {
			case err == nil && who.Auth == httpapi.AuthDisabled:
			case writ.ErrorCode(err) == writ.EUNAUTHENTICATED:
				og.authenticate, og.remote = rw.Authenticate, true
			case err == nil:
				err = fmt.Errorf("unexpected identity %+v", who)
				fallthrough
			default:
				cleanup()
				return nil, nil, fmt.Errorf("the writ server %s cannot say how it authenticates (GET /v1/whoami): %v", rw.Base(), err)
			}
		}
	} else {
		st, err := openStore(*f.data, *f.store)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		closers = append(closers, func() { st.Close() })
		if *f.keys == "" {
			*f.keys = defaultKeysDir(*f.data)
		}
		keys, ring, err := m.openSigningKeys(*f.keys, time.Now(), log)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		// Over stdio alone nothing listens, so nothing is authenticated:
		// the session is the configuration's tenant and actor.
		for _, addr := range []string{*f.listen, *f.api} {
			if addr == "" {
				continue
			}
			if og.authenticate, err = m.authMode(ctx, st, ring, addr, log); err != nil {
				cleanup()
				return nil, nil, err
			}
		}
		ecfg := engine.Config{Policy: pol, Store: st, Logger: log, Keys: keys}
		if tracing {
			ecfg.TracerProvider = telemetry.TracerProvider()
		}
		eng, err := openEngine(ctx, ecfg, *f.data, *f.bindingKey)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		closers = append(closers, func() { eng.Close() })
		og.eng, og.st, og.ring, og.keys = eng, st, ring, keys
		w, capture = gatewayWrit(eng, tracing), eng
	}
	gw, err := gateway.New(ctx, gateway.Options{Config: cfg, Writ: w, Capture: capture, Tools: pol.Pack.Tools, Gates: pol.Pack.Gates, Redaction: pol.Pack.Controls.Redaction, Logger: log})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	closers = append(closers, gw.Close)
	og.gw = gw
	if og.eng != nil && *f.api != "" {
		stop, err := m.serveAPI(og, *f.api, pol.Pack.ID(), pol.Pack.Hash)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		closers = append(closers, stop)
	}
	return og, cleanup, nil
}

// serveGateway serves MCP over Streamable HTTP at /mcp.
func (m *Main) serveGateway(ctx context.Context, g *openedGateway, f gatewayFlags) error {
	if g.eng == nil && g.authenticate == nil && !loopback(*f.listen) {
		return usagef("with --server on a writ server in development mode, --listen serves only a loopback address: it authenticates no one")
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.gw.Server() }, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: *f.maxMessage, Logger: g.log})
	if g.authenticate != nil {
		verify := func(ctx context.Context, token string, _ *http.Request) (*mcpauth.TokenInfo, error) {
			p, err := g.authenticate(ctx, token)
			if err != nil || p == nil {
				return nil, fmt.Errorf("%w: %v", mcpauth.ErrInvalidToken, err)
			}
			if !p.Has(writ.RoleAgent) {
				return nil, fmt.Errorf("%w: the key of %s lacks the agent role", mcpauth.ErrInvalidToken, p.Subject)
			}
			ti := &mcpauth.TokenInfo{UserID: p.Subject, Extra: map[string]any{gateway.TokenTenant: p.TenantID, gateway.TokenPrincipal: p}}
			if g.remote {
				ti.Extra[gateway.TokenRaw] = token // decided with the caller's own key
			}
			return ti, nil
		}
		h = mcpauth.RequireBearerToken(verify, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	ln, err := net.Listen("tcp", *f.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "writ gateway listening on http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// serveAPI serves the writ HTTP API and console of the in-process engine,
// as writ serve would, so approvers reach the approvals the gateway's
// checks ask for.
func (m *Main) serveAPI(g *openedGateway, addr, packID, packHash string) (func(), error) {
	api := httpapi.NewServer(g.eng, httpapi.Config{
		Ledger:       g.eng,
		Workflows:    g.eng,
		Approvals:    g.eng,
		Replays:      replay.New(g.st, replay.Options{}),
		Lifecycle:    g.eng,
		Params:       g.eng,
		Evidence:     g.eng,
		Authenticate: g.authenticate,
		Envelopes:    g.st.Envelope,
		VerifierKeys: func(context.Context, string) ([]keyring.Key, error) { return g.ring.Keys(), nil },
		Logger:       g.log,
		Health: func(context.Context) httpapi.HealthReport {
			return httpapi.HealthReport{Status: "ok", Version: version, Pack: packID, PackHash: packHash, Store: "gateway"}
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/console/", console.New(console.Config{API: api, Authenticate: g.authenticate, Logger: g.log}))
	mux.Handle("/", api)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	g.log.Info("writ API and console of the gateway", "url", "http://"+ln.Addr().String()+"/console/")
	return func() { srv.Close() }, nil
}

// gatewayTools lists the upstream tools with their decision keys and
// definition digests, to pin in the tool manifest.
func (m *Main) gatewayTools(ctx context.Context, f gatewayFlags) error {
	if *f.config == "" || *f.pack == "" {
		return usagef("gateway --list-tools needs --config FILE and --pack DIR")
	}
	config, packDir := f.config, f.pack
	cfg, err := gateway.LoadConfig(*config)
	if err != nil {
		return err
	}
	pol, err := loadPolicy(*packDir)
	if err != nil {
		return err
	}
	gw, err := gateway.New(ctx, gateway.Options{Config: cfg, Writ: noWrit{}, Tools: pol.Pack.Tools})
	if err != nil {
		return err
	}
	defer gw.Close()
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tUPSTREAM\tDECISION KEY\tDEFINITION DIGEST\tPIN")
	for _, t := range gw.Tools() {
		key, pin := t.DecisionKey, "-"
		switch {
		case key == "":
			key = "(unlisted: " + string(cfg.Unlisted) + ")"
		case t.Pinned == "":
			pin = "not pinned"
		case t.Pinned == t.Digest:
			pin = "pinned"
		default:
			pin = "CHANGED (pinned " + t.Pinned + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Upstream, key, t.Digest, pin)
	}
	return tw.Flush()
}

// noWrit decides nothing: writ gateway --list-tools only lists.
type noWrit struct{}

func (noWrit) Check(context.Context, *writ.CheckRequest) (*writ.Receipt, error) {
	return nil, writ.Errorf(writ.EUNAVAILABLE, "listing only")
}
func (noWrit) ReportExecution(context.Context, *writ.ExecutionReport) (*writ.ExecutionAck, error) {
	return nil, writ.Errorf(writ.EUNAVAILABLE, "listing only")
}
func (noWrit) Resume(context.Context, *writ.ResumeRequest) (*writ.Receipt, error) {
	return nil, writ.Errorf(writ.EUNAVAILABLE, "listing only")
}

// gatewayWrit is what an in-process gateway calls: the engine, under
// telemetry's spans when tracing is on. Either way it decides approvals:
// without DecideApproval the gateway never asks its user.
func gatewayWrit(eng *engine.Engine, tracing bool) gateway.Writ {
	if !tracing {
		return eng
	}
	return struct {
		writ.Service
		writ.Lifecycle
		writ.Approvals
	}{telemetry.Service(eng, nil), eng, telemetry.Approvals(eng, nil)}
}

// withoutApprovals is a gateway.Writ that cannot decide approvals, so
// the gateway never asks its user (see askable in gateway/elicit.go).
type withoutApprovals struct{ gateway.Writ }
