package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// subcommand is one subcommand of a command group.
type subcommand struct{ name, summary string }

// groups lists the subcommands of the commands that have them, by the
// command's path, so that `writ GROUP`, `writ GROUP -h` and `writ help
// GROUP` print the group's usage, and shell completion knows them.
var groups = map[string][]subcommand{
	"keys": {
		{"create", "create an API key for a tenant (the secret is printed once)"},
		{"list", "list API keys"},
		{"revoke", "revoke an API key"},
		{"sign", "sign API keys created before writ signed them"},
	},
	"approvals": {
		{"list", "list a tenant's approval requests on a server"},
		{"show", "show one approval request with its events"},
		{"approve", "approve a pending approval request"},
		{"deny", "deny a pending approval request"},
		{"withdraw", "withdraw a pending approval request you asked for and no longer need"},
	},
	"params": {
		{"show", "show a tenant's parameters: declared, set and effective values"},
		{"set", "set a tenant's parameter values (a sealed record; admin)"},
	},
	"evidence": {
		{"submit", "store an evidence item (issuer key) or carry in a signed one (--jws)"},
		{"show", "show a stored item by id or content address, with its revocation"},
		{"revoke", "revoke an item (a sealed record; issuer key)"},
	},
	"decisions": {
		{"show", "show a decision's story: every record in chain order, its approvals, where it stands"},
		{"report", "report what happened to the effect a decision allowed"},
		{"resume", "decide a blocked decision's action again, waiting for its approval if asked"},
		{"in-flight", "list permits still awaiting their execution reports"},
	},
	"records": {
		{"list", "list a tenant's records"},
		{"get", "print one record exactly as sealed"},
		{"erase", "erase a subject's classified values, on a server (admin) or with --pack in a local ledger (a sealed erasure record)"},
	},
	"ledger": {
		{"verify", "verify chains, signatures, trees and checkpoints"},
		{"checkpoint", "issue a signed checkpoint of a tenant's ledger"},
		{"prove", "print an inclusion proof of a record"},
		{"consistency", "print a consistency proof between two tree sizes"},
		{"export", "export a ledger to a bundle that verifies offline"},
		{"verify-bundle", "verify an exported bundle offline"},
		{"generate", "generate a synthetic ledger (for benchmarks)"},
		{"keys", "list, publish, generate, rotate and revoke signing keys"},
	},
	"ledger keys": {
		{"list", "list the signing keys of a key ring"},
		{"publish", "write the trusted keys file verifiers check bundles against"},
		{"generate", "generate a signing key"},
		{"rotate", "generate a signing key that takes over from the current one"},
		{"revoke", "revoke a signing key from a time on"},
	},
	"run": {
		{"start", "start a workflow run"},
		{"attempt", "submit a step attempt and print its verdict"},
		{"show", "show a run with its history"},
	},
	"shadow": {
		{"report", "compare a shadow pack's decisions with the enforced ones"},
	},
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// groupUsage prints the usage of a command group.
func (m *Main) groupUsage(path string) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: writ %s <command> [flags]\n\n", path)
	if c, ok := commands[path]; ok {
		fmt.Fprintf(&b, "%s.\n\n", upperFirst(c.summary))
	}
	b.WriteString("Commands:\n")
	for _, s := range groups[path] {
		fmt.Fprintf(&b, "  %-14s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(&b, "\nRun 'writ %s <command> -h' for a command's flags.\n", path)
	fmt.Fprint(m.Stderr, b.String())
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// group handles what a command group answers itself, before its command
// runs: no subcommand (usage, exit 2), -h or --help (usage, exit 0), an
// unknown subcommand (usage, exit 2). It descends into nested groups
// (ledger keys). done is false when the subcommand should run.
func (m *Main) group(args []string) (done bool, err error) {
	path := args[0]
	rest := args[1:]
	for {
		subs, ok := groups[path]
		if !ok {
			return false, nil
		}
		names := make([]string, len(subs))
		for i, s := range subs {
			names[i] = s.name
		}
		switch {
		case len(rest) == 0:
			m.groupUsage(path)
			return true, usagef("usage: writ %s %s [flags]", path, strings.Join(names, "|"))
		case isHelp(rest[0]):
			m.groupUsage(path)
			return true, flag.ErrHelp
		}
		if !slices.Contains(names, rest[0]) {
			m.groupUsage(path)
			return true, usagef("unknown %s command %q (want %s)", path, rest[0], orList(names))
		}
		path, rest = path+" "+rest[0], rest[1:]
	}
}

// help answers `writ help [COMMAND [SUBCOMMAND]]` with the usage it names.
func (m *Main) help(ctx context.Context, args []string) error {
	if len(args) == 0 {
		m.usage()
		return nil
	}
	if _, ok := commands[args[0]]; !ok {
		m.usage()
		return usagef("unknown command %q", args[0])
	}
	err := m.Run(ctx, append(slices.Clone(args), "--help"))
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// commandNames returns the top-level commands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
