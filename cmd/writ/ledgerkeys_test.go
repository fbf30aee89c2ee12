package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ/keyring"
)

// TestLedgerKeysCommands walks a key ring through writ ledger keys: each
// subcommand takes only its own flags, before or after its argument.
func TestLedgerKeysCommands(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout, or in stderr when code is not 0
	}{
		{"generate", []string{"generate", "--keys", keys, "--name", "first"}, exitOK, "generated key first+"},
		{"list takes no argument", []string{"list", "--keys", keys, "first"}, exitUsage, "takes no arguments"},
		{"list has no --at", []string{"list", "--keys", keys, "--at", "2026-01-01T00:00:00Z"}, exitUsage, "flag provided but not defined: -at"},
		{"generate has no --reason", []string{"generate", "--keys", keys, "--reason", "x"}, exitUsage, "flag provided but not defined: -reason"},
		{"rotate", []string{"rotate", "--name", "second", "--keys", keys}, exitOK, "rotated to key second+"},
		{"revoke without an id", []string{"revoke", "--keys", keys}, exitUsage, "KEY_ID"},
		{"list", []string{"list", "--keys", keys}, exitOK, "retired"},
	} {
		stdout, stderr, code := runLedgerCmd(t, append([]string{"ledger", "keys"}, tc.args...)...)
		got := stdout
		if tc.code != exitOK {
			got = stderr
		}
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Fatalf("%s: exit %d, want %d with %q:\n%s%s", tc.name, code, tc.code, tc.want, stdout, stderr)
		}
	}
	// revoke, with its flags after the key's id.
	list, _, _ := runLedgerCmd(t, "ledger", "keys", "list", "--keys", keys)
	var first string
	for _, f := range strings.Fields(list) {
		if strings.HasPrefix(f, "first+") {
			first = f // the id; the verifier key comes after it
			break
		}
	}
	if first == "" {
		t.Fatalf("no key first in:\n%s", list)
	}
	stdout, stderr, code := runLedgerCmd(t, "ledger", "keys", "revoke", first, "--keys", keys, "--reason", "lost laptop", "--at", "2026-01-01T00:00:00Z")
	if code != exitOK || !strings.Contains(stdout, "revoked key "+first+" at 2026-01-01T00:00:00Z") {
		t.Fatalf("revoke: exit %d:\n%s%s", code, stdout, stderr)
	}
	list, _, _ = runLedgerCmd(t, "ledger", "keys", "list", "--keys", keys)
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == first && f[1] != "revoked" {
			t.Errorf("after revoke, %s is %s:\n%s", first, f[1], list)
		}
	}

	// --json: keys.json's key objects, each with its status and verifier key.
	stdout, stderr, code = runLedgerCmd(t, "ledger", "keys", "list", "--json", "--keys", keys)
	var listed []struct {
		keyring.Key
		Status string `json:"status"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &listed) != nil || len(listed) != 2 {
		t.Fatalf("keys list --json: exit %d: %s%s", code, stdout, stderr)
	}
	ring, err := keyring.Open(keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range ring.Keys() {
		got := listed[i]
		if got.ID != k.ID || got.VerifierKey != k.VerifierKey || !got.SameWindow(k) || got.Status != k.Status(time.Now()) {
			t.Errorf("keys list --json [%d] = %+v, want %+v (%s)", i, got, k, k.Status(time.Now()))
		}
	}
	if listed[0].Status != "revoked" || listed[1].Status != "active" {
		t.Errorf("keys list --json statuses = %s, %s, want revoked, active", listed[0].Status, listed[1].Status)
	}

	// publish: a trusted keys file that reads back as the ring's keys,
	// for every tenant, on stdout or in a file.
	out := filepath.Join(t.TempDir(), "trusted.json")
	if stdout, stderr, code := runLedgerCmd(t, "ledger", "keys", "publish", "--keys", keys, "--ledger-name", "acme-ledger", "--out", out); code != exitOK {
		t.Fatalf("keys publish: exit %d: %s%s", code, stdout, stderr)
	}
	toStdout, _, _ := runLedgerCmd(t, "ledger", "keys", "publish", "--keys", keys, "--ledger-name", "acme-ledger")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{string(data), toStdout} {
		pub, err := keyring.ParsePublished([]byte(text))
		if err != nil {
			t.Fatalf("ParsePublished(keys publish) = %v:\n%s", err, text)
		}
		if pub.LedgerName != "acme-ledger" || len(pub.Keys) != 2 {
			t.Fatalf("keys publish = %+v", pub)
		}
		for i, k := range ring.Keys() {
			pk := pub.Keys[i]
			if got := pk.Key(); pk.Tenant != keyring.AllTenants || got.ID != k.ID || got.VerifierKey != k.VerifierKey || !got.SameWindow(k) {
				t.Errorf("published key %d = %+v, want %+v for every tenant", i, pk, k)
			}
		}
	}
	// An empty ring has nothing to publish.
	if _, stderr, code := runLedgerCmd(t, "ledger", "keys", "publish", "--keys", filepath.Join(t.TempDir(), "none")); code != exitError || !strings.Contains(stderr, "no keys") {
		t.Errorf("keys publish of an empty ring: exit %d: %s", code, stderr)
	}
}
