package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var updateCLIDoc = flag.Bool("update", false, "rewrite docs/cli.md from the commands' help")

// TestEveryCommandHelps walks every command and subcommand: -h and
// --help print its usage and exit 0, and `writ help PATH` does too. A
// command group without a subcommand, or with an unknown one, prints
// its usage and exits 2.
func TestEveryCommandHelps(t *testing.T) {
	for _, path := range commandPaths() {
		for _, h := range []string{"-h", "--help"} {
			args := append(strings.Fields(path), h)
			_, stderr, code := runLedgerCmd(t, args...)
			if code != exitOK {
				t.Errorf("writ %s: exit %d, want 0:\n%s", strings.Join(args, " "), code, stderr)
			}
			if !hasUsage(stderr, path) {
				t.Errorf("writ %s prints no usage of writ %s:\n%s", strings.Join(args, " "), path, stderr)
			}
		}
		args := append([]string{"help"}, strings.Fields(path)...)
		if _, stderr, code := runLedgerCmd(t, args...); code != exitOK || !hasUsage(stderr, path) {
			t.Errorf("writ %s: exit %d, want 0 with usage:\n%s", strings.Join(args, " "), code, stderr)
		}
		if _, ok := groups[path]; ok {
			for _, bad := range [][]string{nil, {"no-such-command"}} {
				args := append(strings.Fields(path), bad...)
				_, stderr, code := runLedgerCmd(t, args...)
				if code != exitUsage || !strings.Contains(stderr, "Usage: writ "+path+" <command>") {
					t.Errorf("writ %s: exit %d, want 2 with the group's usage:\n%s", strings.Join(args, " "), code, stderr)
				}
			}
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		if _, stderr, code := runLedgerCmd(t, args...); code != exitOK || !strings.Contains(stderr, "Usage: writ <command>") {
			t.Errorf("writ %v: exit %d, want 0 with usage:\n%s", args, code, stderr)
		}
	}
	if _, _, code := runLedgerCmd(t, "test", "--no-such-flag", "x"); code != exitUsage {
		t.Errorf("a bad flag exits %d, want 2", code)
	}
}

// hasUsage reports whether help text holds the usage line of writ PATH
// (followed by its arguments, or ending there).
func hasUsage(help, path string) bool {
	return strings.Contains(help, "Usage: writ "+path+" ") || strings.Contains(help, "Usage: writ "+path+"\n")
}

// cliDoc renders docs/cli.md from every command's own help.
func cliDoc(t *testing.T) string {
	var b strings.Builder
	b.WriteString("# writ command reference\n\n")
	b.WriteString("<!-- Generated from the commands' own help by `go test ./cmd/writ -run TestCLIDoc -update`; do not edit. -->\n\n")
	b.WriteString("Every command and subcommand prints this usage with `-h`, `--help` or `writ help COMMAND [SUBCOMMAND]`, and exits 0. Flags may come before or after a command's arguments, and `--` ends them. A usage error (a missing or unknown subcommand, a bad flag or argument) exits 2: a bad flag, or a missing or unknown command or subcommand, prints the usage, and any other prints one line (`writ: …`) saying what is wrong. Other exit codes: 1 when the command failed (for `writ test`, when a case failed or coverage is below `--min-coverage`), 3 when a verification found problems.\n\n")
	b.WriteString("Flags are spelled `--flag`, in the usage lines and in the flag lists alike; the standard `flag` package, which parses them, also accepts `-flag`. writ keeps that package rather than moving to cobra: its commands are plain verbs with flags, it needs no dependency, and the help, this page and the completion scripts are generated from the same flag sets. Errors from a server are told as the flag or variable that fixes them (`--tenant`, `$WRIT_API_KEY`), and counts agree with their nouns (`1 tenant`, `2 tenants`).\n\n")
	b.WriteString("Shell completion: `writ completion bash|zsh|fish` prints a completion script (see [writ completion](#writ-completion)).\n\n")
	_, top, _ := runLedgerCmd(t, "--help")
	fmt.Fprintf(&b, "```\n%s```\n", top)
	for _, path := range commandPaths() {
		_, help, _ := runLedgerCmd(t, append(strings.Fields(path), "--help")...)
		fmt.Fprintf(&b, "\n## writ %s\n\n```\n%s```\n", path, help)
	}
	return b.String()
}

// TestCLIDoc keeps docs/cli.md equal to the commands' help.
func TestCLIDoc(t *testing.T) {
	got := cliDoc(t)
	const path = "../../docs/cli.md"
	if *updateCLIDoc {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("docs/cli.md is not the commands' help; run go test ./cmd/writ -run TestCLIDoc -update")
	}
}

// TestBashCompletion sources the bash script and completes a few
// command lines with it.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	script, stderr, code := runLedgerCmd(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("writ completion bash: exit %d: %s", code, stderr)
	}
	tests := []struct {
		line string // the words typed; the last one is being completed
		want string
	}{
		{"writ te", "test"},
		{"writ ledger ke", "keys"},
		{"writ ledger keys r", "rotate revoke"},
		{"writ test --min", "--min-coverage"},
		{"writ test --junit out.xml --j", "--json --junit"},
		{"writ diff --j", "--json"},
		{"writ approvals list --te", "--tenant"},
	}
	for _, tt := range tests {
		words := strings.Fields(tt.line)
		prog := script + fmt.Sprintf("\nCOMP_WORDS=(%s); COMP_CWORD=%d; _writ; echo \"${COMPREPLY[*]}\"\n", strings.Join(words, " "), len(words)-1)
		out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tt.line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tt.want {
			t.Errorf("%q completes to %q, want %q", tt.line, got, tt.want)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		if out, stderr, code := runLedgerCmd(t, "completion", shell); code != 0 || !strings.Contains(out, "writ") {
			t.Errorf("writ completion %s: exit %d: %s", shell, code, stderr)
		}
	}
	if _, _, code := runLedgerCmd(t, "completion", "powershell"); code != exitUsage {
		t.Errorf("an unknown shell exits %d, want 2", code)
	}
}
