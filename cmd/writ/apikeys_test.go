package main

import (
	"strings"
	"testing"
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
		{"revoke unknown", []string{"keys", "revoke", "--data", data, "key_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, exitError, "not"},
		{"revoke without id", []string{"keys", "revoke", "--data", data}, exitUsage, "exactly one KEY_ID"},
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
