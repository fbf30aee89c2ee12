package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runCmdEnv runs a command in-process with the given environment.
func runCmdEnv(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
	err := m.Run(context.Background(), args)
	printError(&errOut, err)
	return out.String(), errOut.String(), exitCode(err)
}

// TestServerErrorsNameTheFix: a command that talks to a server says
// which of its flags or variables fixes a refusal, not the API's
// parameter or header.
func TestServerErrorsNameTheFix(t *testing.T) {
	dev := startServer(t, filepath.Join(t.TempDir(), "data"), "../../examples/refund")
	_, stderr, code := runCmdEnv(t, nil, "decisions", "show", "--server", dev.url, "dec_01m8g6q11smq8shkxh2emvpqv8")
	if code != exitError || !strings.Contains(stderr, "--tenant") || strings.Contains(stderr, "tenant_id") {
		t.Errorf("decisions show without --tenant on a development server: exit %d, want 1 naming --tenant (not tenant_id):\n%s", code, stderr)
	}
	_, stderr, code = runCmdEnv(t, nil, "approvals", "list", "--server", dev.url)
	if code != exitError || !strings.Contains(stderr, "--tenant") {
		t.Errorf("approvals list without --tenant on a development server: exit %d, want 1 naming --tenant:\n%s", code, stderr)
	}

	data := filepath.Join(t.TempDir(), "data")
	if _, stderr, code := runLedgerCmd(t, "keys", "create", "--data", data, "--tenant", "acme", "--subject", "agt", "--role", "agent"); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, stderr)
	}
	keyed := startServer(t, data, "../../examples/refund")
	_, stderr, code = runCmdEnv(t, nil, "approvals", "list", "--server", keyed.url)
	if code != exitError || !strings.Contains(stderr, "$WRIT_API_KEY") || strings.Contains(stderr, "Authorization") {
		t.Errorf("approvals list without a key on a keyed server: exit %d, want 1 naming $WRIT_API_KEY (not the header):\n%s", code, stderr)
	}
	_, stderr, code = runCmdEnv(t, map[string]string{"WRIT_API_KEY": "writ_key_nonsense"}, "approvals", "list", "--server", keyed.url)
	if code != exitError || !strings.Contains(stderr, "$WRIT_API_KEY") {
		t.Errorf("approvals list with a bad key: exit %d, want 1 naming $WRIT_API_KEY:\n%s", code, stderr)
	}
}

// TestFlagListsUseDoubleDash: every command's flag list spells its flags
// as its usage line does, --flag; a command without flags prints no
// empty Flags: heading.
func TestFlagListsUseDoubleDash(t *testing.T) {
	single := regexp.MustCompile(`(?m)^  -[a-z]`)
	for _, path := range commandPaths() {
		_, help, _ := runLedgerCmd(t, append(strings.Fields(path), "--help")...)
		if m := single.FindString(help); m != "" {
			t.Errorf("writ %s --help lists a flag with one dash:\n%s", path, help)
		}
		if strings.HasSuffix(strings.TrimRight(help, "\n"), "Flags:") {
			t.Errorf("writ %s --help ends with an empty Flags: heading:\n%s", path, help)
		}
	}
	_, help, _ := runLedgerCmd(t, "approvals", "list", "--help")
	if !strings.Contains(help, "\n  --state string\n") || !strings.Contains(help, `(default "pending")`) {
		t.Errorf("writ approvals list --help does not list --state with its default:\n%s", help)
	}
}

// TestCountsAgree: counts printed with a noun agree with it: "1 tenant",
// "2 records".
func TestCountsAgree(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if _, stderr, code := runLedgerCmd(t, "check", "--request", "../../examples/refund/requests/refund-allow.json", "--data", data, "--now", "2026-05-09T09:31:42Z"); code != 0 {
		t.Fatalf("writ check: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != 0 {
		t.Fatalf("ledger verify: exit %d: %s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "1 record of 1 tenant and ") || regexp.MustCompile(`\b1 (records|tenants|checkpoints)\b`).MatchString(stdout) {
		t.Errorf("ledger verify of one record: %q, want 1 record of 1 tenant", stdout)
	}
}
