package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/sqlite"
)

// TestKeysCommandsBadInput: bad flags or values are refused with a clear
// message and a non-zero exit, and no key is written.
func TestKeysCommandsBadInput(t *testing.T) {
	data := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"keys"}, exitUsage, "usage: writ keys"},
		{"unknown subcommand", []string{"keys", "rotate"}, exitUsage, `unknown keys command "rotate"`},
		{"create without tenant", []string{"keys", "create", "--data", data, "--subject", "s", "--role", "agent"}, exitUsage, "needs --tenant, --subject and --role"},
		{"create without role", []string{"keys", "create", "--data", data, "--tenant", "acme", "--subject", "s"}, exitUsage, "needs --tenant, --subject and --role"},
		{"unknown role", []string{"keys", "create", "--data", data, "--tenant", "acme", "--subject", "s", "--role", "agent,root"}, exitError, `unknown role "root"`},
		{"stray argument", []string{"keys", "create", "--data", data, "--tenant", "acme", "--subject", "s", "--role", "agent", "extra"}, exitUsage, "takes no arguments"},
		{"expires not a time", []string{"keys", "create", "--data", data, "--tenant", "acme", "--subject", "s", "--role", "agent", "--expires", "90d"}, exitUsage, `--expires "90d" is neither a duration (2160h) nor an RFC 3339 time`},
		{"expires in the past", []string{"keys", "create", "--data", data, "--tenant", "acme", "--subject", "s", "--role", "agent", "--expires", "2020-01-01T00:00:00Z"}, exitUsage, "is not in the future"},
		{"expires now", []string{"keys", "create", "--data", data, "--tenant", "acme", "--subject", "s", "--role", "agent", "--expires", "0s"}, exitUsage, "give a positive duration"},
		{"revoke unknown", []string{"keys", "revoke", "--data", data, "key_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, exitError, "not"},
		{"revoke without id", []string{"keys", "revoke", "--data", data}, exitUsage, "exactly one KEY_ID"},
		// A shared store's keys are signed with the servers' ring: an
		// empty one is not replaced by a key of the command's own.
		{"create on a shared store without a ring", []string{"keys", "create", "--data", t.TempDir(), "--store", "postgres://nobody@127.0.0.1:1/none",
			"--tenant", "acme", "--subject", "s", "--role", "agent"}, exitError, "no signing key in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runLedgerCmd(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("writ %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tt.args, " "), code, stderr, tt.code, tt.want)
			}
		})
	}
	stdout, stderr, code := runLedgerCmd(t, "keys", "list", "--data", data)
	if code != exitOK || strings.Count(stdout, "\n") != 1 {
		t.Errorf("keys list after refused creates: exit %d, %q %q; want the header only", code, stdout, stderr)
	}

	// A good key is listed without its secret.
	stdout, _, code = runLedgerCmd(t, "keys", "create", "--data", data, "--tenant", "acme", "--subject", "fin_lead", "--role", "approver,auditor")
	if code != exitOK {
		t.Fatalf("keys create: exit %d", code)
	}
	token := strings.TrimSpace(stdout[strings.LastIndex(stdout, "\n"+"writ_")+1:])
	if !strings.HasPrefix(token, "writ_key_") || len(token) != len("writ_key_")+26+1+64 {
		t.Fatalf("token %q is not in the documented form", token)
	}
	list, _, _ := runLedgerCmd(t, "keys", "list", "--data", data, "--tenant", "acme")
	if !strings.Contains(list, "fin_lead") || !strings.Contains(list, "approver,auditor") || strings.Contains(list, token[len(token)-64:]) {
		t.Errorf("keys list = %q", list)
	}
}

// TestKeysSign: a key stored without a signature (as keys created before
// writ signed them are) is listed as unsigned and found by writ ledger
// verify until writ keys sign signs it; a request to sign a signed key
// signs nothing.
func TestKeysSign(t *testing.T) {
	data := t.TempDir()
	stdout, _, code := runLedgerCmd(t, "keys", "create", "--data", data, "--tenant", "acme", "--subject", "fin_lead", "--role", "approver", "--json")
	var created struct {
		ID string `json:"key_id"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &created) != nil {
		t.Fatalf("keys create: exit %d, %q", code, stdout)
	}
	st, err := sqlite.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	legacy, _, err := auth.NewKey("acme", "old-agent", []writ.Role{writ.RoleAgent}, time.Now().Add(-time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutAPIKey(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}
	st.Close()

	status := func(when string, want map[string]string) {
		t.Helper()
		list, _, code := runLedgerCmd(t, "keys", "list", "--data", data)
		for id, s := range want {
			if code != exitOK || !regexp.MustCompile(id+`\s.*\s`+s+`\n`).MatchString(list) {
				t.Errorf("keys list %s: exit %d, want %s %s:\n%s", when, code, id, s, list)
			}
		}
	}
	status("before signing", map[string]string{created.ID: "ok", legacy.ID: "unsigned"})
	stdout, _, code = runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != exitFindings || !strings.Contains(stdout, "api_key_unsigned\ttenant acme API key "+legacy.ID) {
		t.Errorf("ledger verify with an unsigned key: exit %d, want %d naming api_key_unsigned on %s\n%s", code, exitFindings, legacy.ID, stdout)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"keys", "sign", "--data", data}, exitUsage, "needs KEY_IDs or --all-unsigned"},
		{[]string{"keys", "sign", "--data", data, "--all-unsigned", legacy.ID}, exitUsage, "not both"},
		{[]string{"keys", "sign", "--data", data, legacy.ID, created.ID}, exitError, created.ID + " is signed already"},
		{[]string{"keys", "sign", "--data", data, "key_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, exitError, "not found"},
	} {
		if _, stderr, code := runLedgerCmd(t, tc.args...); code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("writ %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
	status("after refused signs", map[string]string{legacy.ID: "unsigned"})

	stdout, _, code = runLedgerCmd(t, "keys", "sign", "--data", data, "--all-unsigned")
	if code != exitOK || !strings.Contains(stdout, "signed "+legacy.ID) || strings.Contains(stdout, created.ID) {
		t.Errorf("keys sign --all-unsigned: exit %d, %q; want %s signed, and only it", code, stdout, legacy.ID)
	}
	status("after signing", map[string]string{created.ID: "ok", legacy.ID: "ok"})
	if stdout, _, code = runLedgerCmd(t, "ledger", "verify", "--data", data); code != exitOK {
		t.Errorf("ledger verify after signing: exit %d\n%s", code, stdout)
	}
	if stdout, _, code = runLedgerCmd(t, "keys", "sign", "--data", data, "--all-unsigned"); code != exitOK || !strings.Contains(stdout, "no unsigned keys") {
		t.Errorf("keys sign --all-unsigned again: exit %d, %q; want no unsigned keys", code, stdout)
	}
}

// TestKeysCreateExpires: a key made with --expires carries its expiry,
// signed, in the JSON, the text output and keys list.
func TestKeysCreateExpires(t *testing.T) {
	data := t.TempDir()
	before := time.Now()
	stdout, stderr, code := runLedgerCmd(t, "keys", "create", "--data", data, "--tenant", "acme", "--subject", "ci-bot", "--role", "agent", "--expires", "2160h", "--json")
	var created struct {
		ID        string     `json:"key_id"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &created) != nil || created.ExpiresAt == nil {
		t.Fatalf("keys create --expires 2160h: exit %d, %q %q; want JSON with expires_at", code, stdout, stderr)
	}
	if lo, hi := before.Add(2160*time.Hour), time.Now().Add(2160*time.Hour); created.ExpiresAt.Before(lo.Truncate(time.Second)) || created.ExpiresAt.After(hi) {
		t.Errorf("expires_at = %s, want 90 days after the command ran (%s to %s)", created.ExpiresAt, lo, hi)
	}
	stdout, _, code = runLedgerCmd(t, "keys", "create", "--data", data, "--tenant", "acme", "--subject", "contractor", "--role", "agent", "--expires", "2099-03-01T00:00:00Z")
	if code != exitOK || !strings.Contains(stdout, "\nexpires 2099-03-01T00:00:00Z\n") {
		t.Errorf("keys create --expires TIME: exit %d, stdout %q; want an expires line", code, stdout)
	}
	list, _, code := runLedgerCmd(t, "keys", "list", "--data", data)
	if code != exitOK || !strings.Contains(list, "EXPIRES") || !regexp.MustCompile(`contractor\s+agent\s+\S+\s+2099-03-01T00:00:00Z\s+-\s+ok\n`).MatchString(list) ||
		!regexp.MustCompile(created.ID+`.*\s`+created.ExpiresAt.UTC().Format(time.RFC3339)+`\s+-\s+ok\n`).MatchString(list) {
		t.Errorf("keys list: exit %d, want both keys with their expiry, not revoked, signature ok:\n%s", code, list)
	}
	if stdout, _, code := runLedgerCmd(t, "ledger", "verify", "--data", data); code != exitOK {
		t.Errorf("ledger verify: exit %d\n%s", code, stdout)
	}
}
