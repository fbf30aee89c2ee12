package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ/internal/durable"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
)

// defaultKeysDir is where the signing key ring lives by default: beside
// the database, never inside it.
func defaultKeysDir(dataDir string) string { return filepath.Join(dataDir, "keys") }

// ringView is the public side of a signing key ring: its keys, and
// signatures checked against them. A *keyring.Ring is one; so is a
// *keyring.Live, which follows rotations.
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
	l, err := keyring.OpenLive(dir)
	if err != nil {
		return nil, nil, err
	}
	return func(at time.Time) (ledger.Signer, error) {
		s, err := l.Signer(at)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return s, nil
	}, l, nil
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
