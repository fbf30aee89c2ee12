package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger"
)

func (m *Main) serve(ctx context.Context, args []string) error {
	fs := m.flags("serve", "--pack DIR [--addr ADDR] [--data DIR]")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	data := fs.String("data", defaultDataDir, "data directory: the embedded SQLite store, the signing keys and the binding key")
	storeURL := fs.String("store", "", storeUsage)
	packDir := fs.String("pack", "", "pack directory to pin (required)")
	keysDir := fs.String("keys", "", "signing key ring directory (default DATA/keys; its first key is generated on first start); WRIT_SIGNING_KEY overrides it")
	ledgerName := fs.String("ledger-name", "writ", "ledger name, the first part of checkpoint origins")
	cpEvery := fs.Int64("checkpoint-every", 1000, "sign a checkpoint after this many new records of a tenant")
	cpInterval := fs.Duration("checkpoint-interval", time.Second, "or at most this long after a tenant's first record not yet covered")
	keyFile := fs.String("binding-key", "", "file holding the secret that keys argument bindings (default: DATA/binding.key, created on first use)")
	maxBody := fs.Int64("max-body", httpapi.DefaultMaxBodyBytes, "largest request body accepted, in bytes")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server's run to this file (for performance work)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *packDir == "" {
		return usagef("serve needs --pack DIR")
	}
	if fs.NArg() > 0 {
		return usagef("serve takes no arguments, got %q", fs.Args())
	}
	log, err := m.logger(*logLevel)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
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
	keys, _, err := m.openSigningKeys(*keysDir, time.Now(), log)
	if err != nil {
		return err
	}
	eng, err := openEngine(ctx, engine.Config{Policy: pol, Store: st, Logger: log, Keys: keys, LedgerName: *ledgerName,
		Checkpoints: ledger.CheckpointPolicy{Every: *cpEvery, Interval: *cpInterval}}, *data, *keyFile)
	if err != nil {
		return err
	}
	defer eng.Close()

	p := pol.Pack
	storeKind := "sqlite"
	if *storeURL != "" {
		storeKind = "postgres"
	}
	srv := &http.Server{
		Handler: httpapi.NewServer(eng, httpapi.Config{
			Ledger:       eng,
			Workflows:    eng,
			MaxBodyBytes: *maxBody,
			Logger:       log,
			Health: func(context.Context) httpapi.HealthReport {
				return httpapi.HealthReport{Status: "ok", Version: version, Pack: p.ID(), PackHash: p.Hash, Store: storeKind}
			},
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "writ %s listening on http://%s (pack %s %s, data %s)\n", version, ln.Addr(), p.ID(), p.Hash, *data)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight checks")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
