package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ/internal/durable"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
)

// defaultKeysDir is where the signing key ring lives by default: beside
// the database, never inside it.
func defaultKeysDir(dataDir string) string { return filepath.Join(dataDir, "keys") }

// liveRing serves signing keys from a ring directory and notices when
// `writ ledger keys rotate` or `revoke` changes it: before each signature
// it compares ring.json's modification time and size with what it loaded,
// so a rotation takes effect at the next record, not at the next restart.
type liveRing struct {
	dir string

	mu      sync.Mutex
	ring    *keyring.Ring
	stamp   string
	signers map[string]*keyring.Signer
}

func openLiveRing(dir string) (*liveRing, error) {
	l := &liveRing{dir: dir}
	if err := l.reload(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *liveRing) currentStamp() string {
	fi, err := os.Stat(filepath.Join(l.dir, "ring.json"))
	if err != nil {
		return ""
	}
	return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
}

func (l *liveRing) reload() error {
	stamp := l.currentStamp()
	r, err := keyring.Open(l.dir)
	if err != nil {
		return err
	}
	l.ring, l.stamp, l.signers = r, stamp, map[string]*keyring.Signer{}
	return nil
}

// Signer returns the signer of the key valid at at (a ledger.KeySource).
func (l *liveRing) Signer(at time.Time) (ledger.Signer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.currentStamp() != l.stamp {
		if err := l.reload(); err != nil {
			return nil, err
		}
	}
	for _, k := range l.ring.Keys() {
		if s, ok := l.signers[k.ID]; ok && k.ValidAt(at) {
			return s, nil
		}
	}
	s, err := l.ring.Signer(at)
	if err != nil {
		return nil, err
	}
	l.signers[s.KeyID()] = s
	return s, nil
}

// current returns the ring, loaded again if ring.json changed.
func (l *liveRing) current() (*keyring.Ring, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.currentStamp() != l.stamp {
		if err := l.reload(); err != nil {
			return l.ring, err
		}
	}
	return l.ring, nil
}

// Keys returns the ring's public keys as they are now (a ringView). A
// ring.json that cannot be read again leaves the keys last loaded.
func (l *liveRing) Keys() []keyring.Key {
	r, _ := l.current()
	return r.Keys()
}

// VerifyRecordSignature verifies with the ring as it is now (a
// ringView): a key rotated in since the server started verifies.
func (l *liveRing) VerifyRecordSignature(id string, msg, sig []byte, signedAt time.Time) error {
	r, err := l.current()
	if err != nil {
		return err
	}
	return r.VerifyRecordSignature(id, msg, sig, signedAt)
}

// ringView is the public side of a signing key ring: its keys, and
// signatures checked against them. A *keyring.Ring is one; so is a
// liveRing, which follows rotations.
type ringView interface {
	Keys() []keyring.Key
	VerifyRecordSignature(id string, msg, sig []byte, signedAt time.Time) error
}

// openSigningKeys returns the key source for a server or an offline
// check, and the ring's public side: WRIT_SIGNING_KEY (a note signer key)
// when set, else the ring in dir, generating its first key when the ring
// is empty.
func (m *Main) openSigningKeys(dir string, now time.Time, log *slog.Logger) (ledger.KeySource, ringView, error) {
	if skey := m.Getenv("WRIT_SIGNING_KEY"); skey != "" {
		r, err := keyring.FromEnv(skey, time.Unix(0, 0))
		if err != nil {
			return nil, nil, fmt.Errorf("WRIT_SIGNING_KEY: %w", err)
		}
		return func(at time.Time) (ledger.Signer, error) {
			s, err := r.Signer(at)
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return s, nil
		}, r, nil
	}
	r, err := keyring.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	if len(r.Keys()) == 0 {
		k, err := r.Generate(rand.Reader, now, "")
		if err != nil {
			return nil, nil, err
		}
		log.Warn("generated the first signing key of an empty key ring", "key", k.ID, "dir", dir)
	}
	l, err := openLiveRing(dir)
	if err != nil {
		return nil, nil, err
	}
	return l.Signer, l, nil
}

func (m *Main) ledgerKeys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ ledger keys list|publish|generate|rotate|revoke [flags]")
	}
	sub := args[0]
	usage, ok := map[string]string{
		"list":     "[--keys DIR] [--json]",
		"publish":  "[--keys DIR] [--ledger-name N] [--out FILE]",
		"generate": "[--keys DIR] [--name NAME]",
		"rotate":   "[--keys DIR] [--name NAME]",
		"revoke":   "[--keys DIR] [--at TIME] [--reason TEXT] KEY_ID",
	}[sub]
	if !ok {
		return usagef("unknown keys command %q (want list, publish, generate, rotate or revoke)", sub)
	}
	fs := m.flags("ledger keys "+sub, usage)
	keysDir := fs.String("keys", defaultKeysDir(defaultDataDir), "signing key ring directory")
	var name, at, reason, ledgerName, out *string
	var asJSON *bool
	switch sub {
	case "list":
		asJSON = fs.Bool("json", false, "print the keys as JSON: an array of keys.json's key objects, each with its status")
	case "publish":
		ledgerName = fs.String("ledger-name", "writ", "the ledger's name, the first part of its checkpoint origins")
		out = fs.String("out", "-", "the file to write the trusted keys to; - is standard output")
	case "generate", "rotate":
		name = fs.String("name", "", "the new key's name (default from the clock)")
	case "revoke":
		at = fs.String("at", "", "when the key stops being valid (RFC 3339; default now)")
		reason = fs.String("reason", "", "why, kept in ring.json")
	}
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if sub != "revoke" && fs.NArg() > 0 {
		return usagef("ledger keys %s takes no arguments, got %q", sub, fs.Args())
	}
	r, err := keyring.Open(*keysDir)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	switch sub {
	case "list":
		if *asJSON {
			type listed struct {
				keyring.Key
				Status string `json:"status"`
			}
			keys := []listed{}
			for _, k := range r.Keys() {
				keys = append(keys, listed{k, k.Status(now)})
			}
			return m.printJSON(keys)
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tVALID FROM\tVALID UNTIL\tVERIFIER KEY")
		for _, k := range r.Keys() {
			until := "-"
			if k.ValidUntil != nil {
				until = k.ValidUntil.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Status(now), k.ValidFrom.Format(time.RFC3339), until, k.VerifierKey)
		}
		return tw.Flush()
	case "publish":
		keys := r.Keys()
		if len(keys) == 0 {
			return fmt.Errorf("the key ring in %s holds no keys to publish", *keysDir)
		}
		data, err := keyring.Publish(*ledgerName, keys, now)
		if err != nil {
			return err
		}
		if *out == "-" {
			_, err := m.Stdout.Write(data)
			return err
		}
		if err := durable.WriteFile(*out, data, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "published %s of ledger %s to %s\n", count(len(keys), "key"), *ledgerName, *out)
		return nil
	case "generate", "rotate":
		gen := r.Generate
		if sub == "rotate" {
			gen = r.Rotate
		}
		k, err := gen(rand.Reader, now, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "%s key %s, valid from %s\npublic key: %s\n", map[string]string{"generate": "generated", "rotate": "rotated to"}[sub], k.ID, k.ValidFrom.Format(time.RFC3339), k.VerifierKey)
		return nil
	default: // revoke
		if fs.NArg() != 1 {
			return usagef("usage: writ ledger keys revoke %s", usage)
		}
		when := now
		if *at != "" {
			if when, err = time.Parse(time.RFC3339, *at); err != nil {
				return usagef("bad --at %q: want RFC 3339", *at)
			}
		}
		k, err := r.Revoke(fs.Arg(0), when, *reason, now)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "revoked key %s at %s\n", k.ID, k.RevokedAt.Format(time.RFC3339))
		return nil
	}
}
