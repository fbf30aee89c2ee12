package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
)

// defaultDataDir is where the embedded store lives when --data is not given.
const defaultDataDir = "writ-data"

// loadPolicy loads and compiles a pack; a broken pack is an error that
// names every problem with its file and line.
func loadPolicy(dir string) (*policy.Policy, error) {
	p, err := pack.Load(dir)
	if err != nil {
		return nil, err
	}
	return policy.Compile(p)
}

// openStore opens the ledger store of a data directory.
func openStore(dir string) (ledger.Store, error) {
	st, err := sqlite.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open store in %s: %w", dir, err)
	}
	return st, nil
}

// openEngine opens a store and starts an engine on it.
func openEngine(ctx context.Context, pol *policy.Policy, st ledger.Store, log *slog.Logger) (*engine.Engine, error) {
	return engine.New(ctx, engine.Config{Policy: pol, Store: st, Logger: log})
}

// findPack returns the nearest directory at or above the request file
// that holds a pack.yaml.
func findPack(requestFile string) (string, error) {
	abs, err := filepath.Abs(requestFile)
	if err != nil {
		return "", err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, pack.ManifestFile)); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", usagef("no %s found above %s; pass --pack", pack.ManifestFile, requestFile)
		}
	}
}
