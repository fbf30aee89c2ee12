package main

import (
	"path/filepath"
	"strings"
	"testing"
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
			first = f
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
}
