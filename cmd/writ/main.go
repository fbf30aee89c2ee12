// Command writ is the writ governance runtime: a server, an offline
// checker, and the tools to read and verify its ledger.
//
// This package does wiring only: flags, environment, opening stores and
// packs, and printing. Everything it runs lives in the library packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	err := m.Run(ctx, os.Args[1:])
	printError(m.Stderr, err)
	os.Exit(exitCode(err))
}

// printError prints what a command's error says to w: nothing for none
// or for -h, else "writ: " and the error, and its details on the lines
// after.
func printError(w io.Writer, err error) {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	fmt.Fprintln(w, "writ:", err)
	if _, ok := errors.AsType[*hintError](err); ok {
		return // the hint replaces the server's details
	}
	for _, d := range writ.ErrorDetails(err) {
		if d.Message != writ.ErrorMessage(err) && !strings.Contains(err.Error(), d.String()) {
			fmt.Fprintln(w, "  "+d.String())
		}
	}
}

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1 // the command failed
	exitUsage     = 2 // bad flags or arguments
	exitFindings  = 3 // a verification found problems
	exitUntrusted = 4 // a bundle verified, but only against the keys it carries itself
)

// usageError marks bad command-line use.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// findingsError reports that a verification completed and found problems.
type findingsError struct{ n int }

func (e *findingsError) Error() string { return fmt.Sprintf("%d problem(s) found", e.n) }

// untrustedKeysError reports that a bundle verified against its own
// keys, which prove nothing about who signed it.
type untrustedKeysError struct{}

func (e *untrustedKeysError) Error() string {
	return "verified against the bundle's own keys (keys.json), which whoever wrote the bundle chose; " +
		"pass --trusted-keys FILE (the operator's writ ledger keys publish) to verify against keys from outside the bundle, or --trust-bundle-keys to accept them"
}

func exitCode(err error) int {
	var ue *usageError
	var fe *findingsError
	var uk *untrustedKeysError
	switch {
	case errors.As(err, &uk):
		return exitUntrusted
	case err == nil || errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &fe):
		return exitFindings
	}
	return exitError
}

// Main holds the process's standard streams and environment so that tests
// can run commands in-process.
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// onFlags, when set, sees every flag set a command defines (shell
	// completion learns the flags this way).
	onFlags func(*flag.FlagSet)
	// remote is set when the command built a client of a server, so
	// that Run can tell a refusal in the CLI's own words.
	remote *remoteUse
}

// NewMain returns a Main on the process's streams.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// command is one subcommand.
type command struct {
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

var commands = map[string]command{
	"serve":     {"run the HTTP server", (*Main).serve},
	"check":     {"decide one check request offline and print its receipt", (*Main).check},
	"lint":      {"check a pack for CI: schema, policy, workflow graph and templates", (*Main).lint},
	"test":      {"run a pack's tests (tests/*.yaml) and report coverage", (*Main).test},
	"diff":      {"say what changed between two versions of a pack, for a review", (*Main).diff},
	"records":   {"list or show records of a ledger", (*Main).records},
	"ledger":    {"verify, prove, checkpoint, export and generate ledgers; manage signing keys", (*Main).ledger},
	"bench":     {"measure durable checks per second over HTTP", (*Main).bench},
	"crashloop": {"kill writ serve under load again and again; check nothing acknowledged is lost", (*Main).crashloop},
	"run":       {"start a workflow run, submit step attempts, show a run", (*Main).run},
	"keys":      {"create, list, revoke and sign the API keys of tenants", (*Main).keys},
	"approvals": {"list, show, approve and deny approval requests on a server", (*Main).approvals},
	"params":    {"show and set a tenant's parameter values on a server", (*Main).params},
	"evidence":  {"submit, show and revoke items of a tenant's evidence store on a server", (*Main).evidence},
	"decisions": {"a decision's story, execution report and resume; decisions in flight (on a server)", (*Main).decisions},
	"gateway":   {"an MCP gateway: every tools/call of an agent checked, recorded and reported", (*Main).gateway},
	"shadow":    {"compare a shadow pack's decisions with the enforced ones", (*Main).shadow},
	"replay":    {"re-run recorded decisions on their pinned inputs and compare", (*Main).replay},
	"backtest":  {"decide recorded checks again under a candidate pack and count the changes", (*Main).backtest},
	"version":   {"print the version", (*Main).printVersion},
}

// Run runs the subcommand named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "help" {
		return m.help(ctx, args[1:])
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		m.usage()
		if len(args) == 0 {
			return usagef("no command given")
		}
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		m.usage()
		return usagef("unknown command %q", args[0])
	}
	if done, err := m.group(args); done {
		return err
	}
	err := c.run(m, ctx, args[1:])
	if err != nil && m.remote != nil {
		err = m.remote.explain(err)
	}
	return err
}

func (m *Main) usage() {
	fmt.Fprintln(m.Stderr, "writ: a governance runtime for AI agents\n\nUsage: writ <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(m.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(m.Stderr, "\nRun 'writ <command> -h' (or 'writ help <command>') for a command's usage and flags.")
}

func (m *Main) printVersion(_ context.Context, args []string) error {
	fs := m.flags("version", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintln(m.Stdout, "writ", version)
	return nil
}

// flags returns a flag set that reports errors instead of exiting.
func (m *Main) flags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("writ "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	if m.onFlags != nil {
		m.onFlags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintln(m.Stderr, strings.TrimRight("Usage: writ "+name+" "+usage, " \n"))
		printFlags(m.Stderr, fs)
	}
	return fs
}

// printFlags lists a flag set's flags the way flag.PrintDefaults does,
// but spelled --flag, as every usage line and doc spells them (the flag
// package accepts -flag and --flag alike). A command without flags gets
// no Flags: heading.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(&b, "  --%s", f.Name)
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZeroFlag(f) {
			if t := reflect.TypeOf(f.Value); t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.String {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		b.WriteString("\n")
	})
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", b.String())
	}
}

// count says n of a noun, in agreement: "1 tenant", "2 tenants".
func count[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// isZeroFlag reports whether a flag's default is its type's zero value,
// which flag.PrintDefaults leaves unsaid too.
func isZeroFlag(f *flag.Flag) (zero bool) {
	defer func() {
		if recover() != nil { // a Value whose zero String panics: say its default
			zero = false
		}
	}()
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	return ok && f.DefValue == v.String()
}

// parse parses flags, turning flag errors into usage errors. Flags may
// come before or after a command's arguments (writ approvals approve
// apr_1 --reason ok, as well as --reason ok apr_1); "--" ends the flags,
// and everything after it is an argument. fs.Args() is the arguments, in
// their order.
func parse(fs *flag.FlagSet, args []string) error {
	flags, rest := interspersed(fs, args)
	err := fs.Parse(flags)
	if err == nil {
		// What fs.Args() returns: the arguments, none taken as a flag.
		err = fs.Parse(append([]string{"--"}, append(fs.Args(), rest...)...))
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return &usageError{err.Error()}
	}
	return err
}

// interspersed splits args into the flags (each with its value, where the
// value is the next word) and the arguments, the way the flag package
// reads a word: "-" alone and a word not starting with "-" are arguments;
// "-name" and "--name" are flags, which take the next word as their value
// unless written -name=value or the flag is boolean. A flag fs does not
// define stays with the flags, for fs.Parse to report.
func interspersed(fs *flag.FlagSet, args []string) (flags, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return flags, append(rest, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(a[1:], "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, rest
}

func (m *Main) logger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("bad --log-level %q (want debug, info, warn or error)", level)
	}
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// formatLogger returns a logger at level, writing JSON (one object a
// line) or text to stderr; a record logged with a traced context carries
// its trace_id and span_id. Warnings and errors are rate-limited per cause
// (telemetry.RateLimit).
func (m *Main) formatLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("bad --log-level %q (want debug, info, warn or error)", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(m.Stderr, opts)
	case "text":
		h = slog.NewTextHandler(m.Stderr, opts)
	default:
		return nil, usagef("bad --log-format %q (want json or text)", format)
	}
	// Under a persistent fault (a full disk) each check would log its
	// own error: one line per cause per interval keeps the log readable.
	return slog.New(telemetry.LogHandler(telemetry.RateLimit(h, telemetry.LogInterval, time.Now))), nil
}

// startCPUProfile writes a CPU profile to path until the returned stop is
// called (for performance work on serve, verify and the like).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
