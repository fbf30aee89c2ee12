package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/internal/durable"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/postgres"
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

// storeUsage documents the --store flag every command that opens a store has.
const storeUsage = "PostgreSQL store URL (postgres://user@host:port/db); default: the embedded SQLite store in --data"

// measureStore, when set, replaces the SQLite store with a measuring
// instrument. Only a build with -tags writ_floor sets it (floor.go), for
// bench/peers/run --floor; writ as built and shipped never does.
var measureStore func(st *sqlite.Store, dir string) (ledger.Store, error)

// openStore opens the ledger store to append to it: PostgreSQL when url
// is set, else the SQLite store of the data directory, whose writer lock
// it takes (see lockDataDir) and holds until the store is closed.
func openStore(dir, url string) (ledger.Store, error) {
	if url != "" || measureStore != nil {
		return openShared(dir, url)
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open store in %s: %w", dir, err)
	}
	return &lockedStore{Store: st, lock: lock}, nil
}

// openShared opens the ledger store without the data directory's writer
// lock: for commands that only read, or change API keys (which append
// nothing to the chain), beside a running writer.
func openShared(dir, url string) (ledger.Store, error) {
	if url != "" {
		st, err := postgres.Open(context.Background(), url)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", redactURL(url), err)
		}
		return st, nil
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open store in %s: %w", dir, err)
	}
	if measureStore != nil {
		return measureStore(st, dir)
	}
	return st, nil
}

// openExisting opens a store that must already exist: reading commands
// never create an empty SQLite ledger by mistake.
func openExisting(dir, url string) (ledger.Store, error) {
	if url == "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("no ledger at %s: %w", dir, err)
		}
	}
	return openShared(dir, url)
}

// openExistingWriter opens a store that must already exist to append to
// it, with the data directory's writer lock (see openStore).
func openExistingWriter(dir, url string) (ledger.Store, error) {
	if url == "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("no ledger at %s: %w", dir, err)
		}
	}
	return openStore(dir, url)
}

// kvPassword is a password of a key=value connection string (password,
// or sslpassword, the client key's): a word, or a quoted value with its
// escapes.
var kvPassword = regexp.MustCompile(`(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']+)`)

// redactURL hides a password in a store URL before it is printed: in a
// URL's user information or its password parameter, or in a key=value
// connection string.
func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		return kvPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	u, err := neturl.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	q := u.Query()
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}

// openEngine starts an engine on a store.
func openEngine(ctx context.Context, cfg engine.Config, dataDir, keyFile string) (*engine.Engine, error) {
	key, err := loadBindingKey(ctx, cfg.Store, dataDir, keyFile)
	if err != nil {
		return nil, err
	}
	cfg.BindingKey = key
	return engine.New(ctx, cfg)
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

// bindingKeyFile is the binding key's file name inside a data directory.
const bindingKeyFile = "binding.key"

// bindingKeyHelp says where the recovery of a lost binding key is told.
const bindingKeyHelp = `see "The binding key" in docs/security.md`

// loadBindingKey reads the secret that keys argument bindings (see
// engine.Config.BindingKey) from path, or from the data directory when
// path is empty, creating it there (32 random bytes, mode 0600) on first
// use. The key never enters the database.
//
// A new key is made durable (synced, with its directory) before it is
// used: a receipt bound with a key a power cut then lost could never be
// answered again. And a new key is made only for a ledger that holds no
// records yet: a data directory whose key is gone but whose store holds
// records is refused, since a new key would turn every earlier
// idempotent retry into a conflict.
func loadBindingKey(ctx context.Context, st ledger.Store, dataDir, path string) ([]byte, error) {
	if path == "" {
		path = filepath.Join(dataDir, bindingKeyFile)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if err := refuseNewKey(ctx, st, path); err != nil {
				return nil, err
			}
			if err := durable.MkdirAll(dataDir, 0o700); err != nil {
				return nil, err
			}
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			err := durable.Create(path, key, 0o600)
			if err == nil {
				return key, nil
			} else if !errors.Is(err, durable.ErrExist) {
				return nil, fmt.Errorf("create binding key: %w", err)
			}
			// Another process created it first: read theirs.
		}
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read binding key: %w", err)
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("binding key %s holds %d bytes; it needs at least 32. "+
			"A file cut short like this is what a power cut leaves of a key that had not reached the disk. "+
			"Restore the key from a backup of the data directory; %s", path, len(key), bindingKeyHelp)
	}
	return key, nil
}

// refuseNewKey returns an error when st already holds records: the
// binding key that bound them is missing, and a new one must not be made
// by accident.
func refuseNewKey(ctx context.Context, st ledger.Store, path string) error {
	if st == nil {
		return nil
	}
	tenants, err := st.Tenants(ctx)
	if err != nil {
		return fmt.Errorf("binding key %s is missing, and whether the ledger holds records cannot be read: %w", path, err)
	}
	if len(tenants) == 0 {
		return nil
	}
	return fmt.Errorf("binding key %s is missing, but the ledger already holds records of %d tenants: "+
		"a new key would answer every earlier idempotent retry with 409 (already used with other arguments). "+
		"Restore binding.key from a backup of the data directory, or pass the key's file with --binding-key; %s",
		path, len(tenants), bindingKeyHelp)
}
