// Package lint checks a pack the way a policy owner's CI should: the
// schema and cross-references (package pack), the conditions (package
// policy), the workflow policies, the safety of every workflow's graph,
// and the templates of every step.
//
// Lint never stops at the first problem. Each stage runs unless it
// depends on one that failed: nothing can be checked in a pack that does
// not load, but a CEL error does not hide a graph problem, nor a graph
// problem a template problem. Every finding names a file, a line and a
// rule.
package lint

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// Severity grades a finding. Only errors fail a lint.
type Severity string

// Severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Rules: the name of each check, as findings report it.
const (
	RuleSchema               = "schema"                // pack.Load: schema and cross-references
	RuleCEL                  = "cel"                   // policy.Compile and acceptance.Compile: every CEL condition, type-checked
	RuleMutatingVerification = "mutating-verification" // mutating steps carry evidence and required tool calls
	RuleExemption            = "exemption"             // exemptions from the rule above, listed
	RuleClaimedToolCall      = "claimed-tool-call"     // a required tool call that counts claimed calls (observed: false)
	RuleClaimedEvidence      = "claimed-evidence"      // an evidence requirement of a mutating spec that accepts claimed evidence
	RuleRetryCeiling         = "retry-ceiling"         // retry budgets within the policies' maxBudget
	RuleRetryStrategy        = "retry-strategy"        // retry strategies among the policies' allowedStrategies
	RuleGraphRoot            = "graph-root"            // exactly one root
	RuleGraphUnreachable     = "graph-unreachable"     // every step reachable from the root
	RuleGraphTerminal        = "graph-terminal"        // a terminal step reachable from every step
	RuleGotoSelf             = "goto-self"             // no transition to its own step
	RuleGraphCycle           = "graph-cycle"           // every cycle has a guard
	RuleGotoGuard            = "goto-guard"            // a conditional goto has a retries-exhausted → abort guard
	RuleTemplate             = "template"              // {{context.*}} and {{steps.<id>.<field>}} resolve
	RuleTests                = "tests"                 // tests/*.yaml: schema and references (writ test runs them)
	RuleProvenance           = "provenance"            // a condition compares a provenance only with a provenance writ knows
	RuleSessionBudget        = "session-budget"        // a tool_calls budget, which a fresh session resets, has an actor_tool_calls budget beside it
	RuleEvidenceCapture      = "evidence-capture"      // a tool whose spec requires evidence another tool captures names subject_ids, so the gateway can cite it
	RuleToolOutputs          = "tool-outputs"          // a tool's proposed outputs (tools.yaml outputs) can meet its spec's outputs_schema
)

// Finding is one problem (or, with severity info, one fact worth listing).
type Finding struct {
	File     string   `json:"file"`
	Line     int      `json:"line,omitempty"`
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// String renders f as "file:line: severity: [rule] message".
func (f Finding) String() string {
	where := f.File
	if f.Line > 0 {
		where = fmt.Sprintf("%s:%d", f.File, f.Line)
	}
	return fmt.Sprintf("%s: %s: [%s] %s", where, f.Severity, f.Rule, f.Message)
}

// Report is the result of linting one pack.
type Report struct {
	// Dir is the pack directory, as given.
	Dir string `json:"dir"`
	// Findings are sorted by file and line.
	Findings []Finding `json:"findings"`
}

// Count returns the number of findings of severity s.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// OK reports whether the pack has no error (warnings and infos allowed).
func (r *Report) OK() bool { return r.Count(Error) == 0 }

// Summary is one line such as "examples/storybook: 0 errors, 1 warning, 2 infos".
func (r *Report) Summary() string {
	return fmt.Sprintf("%s: %s, %s, %s", r.Dir,
		count(r.Count(Error), "error", "errors"),
		count(r.Count(Warning), "warning", "warnings"),
		count(r.Count(Info), "info", "infos"))
}

// WriteText writes one line per finding, then the summary line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	b.WriteString(r.Summary())
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Lint lints the pack rooted at dir. File names in findings are dir
// joined with the pack-relative path, so a relative dir gives relative
// names.
func Lint(dir string) *Report {
	p, err := pack.Load(dir)
	return lintPack(os.DirFS(dir), dir, p, err)
}

// LintFS lints the pack in fsys; dir names it in findings.
func LintFS(fsys fs.FS, dir string) *Report {
	p, err := pack.LoadFS(fsys, dir)
	return lintPack(fsys, dir, p, err)
}

type linter struct {
	r     *Report
	p     *pack.Pack
	files map[string][]byte // pack files by the name positions give them
}

func (l *linter) add(pos pack.Pos, rule string, sev Severity, format string, args ...any) {
	l.r.Findings = append(l.r.Findings, Finding{File: pos.File, Line: pos.Line, Rule: rule, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

func (l *linter) errorf(pos pack.Pos, rule, format string, args ...any) {
	l.add(pos, rule, Error, format, args...)
}

// details maps the details of a pack or policy error to findings.
func (l *linter) details(err error, rule string) {
	ds := writ.ErrorDetails(err)
	if len(ds) == 0 {
		l.errorf(pack.Pos{File: l.r.Dir}, rule, "%s", writ.ErrorMessage(err))
		return
	}
	for _, d := range ds {
		file := d.File
		if file == "" {
			file = l.r.Dir
		}
		l.errorf(pack.Pos{File: file, Line: d.Line}, rule, "%s", d.Message)
	}
}

func lintPack(fsys fs.FS, dir string, p *pack.Pack, loadErr error) *Report {
	l := &linter{r: &Report{Dir: dir, Findings: []Finding{}}, p: p}
	if loadErr != nil {
		// pack.Load refuses a pack with any problem, and everything else
		// needs the loaded pack: stop here.
		var e *writ.Error
		if !errors.As(loadErr, &e) {
			l.errorf(pack.Pos{File: dir}, RuleSchema, "%v", loadErr)
		} else {
			l.details(loadErr, RuleSchema)
		}
		return l.finish()
	}
	// Policy: CEL conditions and the templates of reasons. Nothing below
	// depends on them.
	if _, err := policy.Compile(p); err != nil {
		l.details(err, RuleCEL)
	}
	// Workflow conditions are type-checked exactly as the runtime
	// compiles them, so a pack that lints clean also starts.
	if _, err := acceptance.Compile(p); err != nil {
		l.details(err, RuleCEL)
	}
	l.provenances()
	l.sessionBudgets()
	l.captures()
	l.toolOutputs()
	l.claimedEvidence()
	l.workflowPolicies()
	for _, w := range sortedWorkflows(p) {
		g := newGraph(w)
		l.graph(g)
		l.templates(g)
	}
	// The pack's tests are checked as test files (schema, references);
	// running them is writ test's.
	if _, err := pack.LoadTestsFS(fsys, dir, p); err != nil {
		l.details(err, RuleTests)
	}
	return l.finish()
}

func (l *linter) finish() *Report {
	slices.SortStableFunc(l.r.Findings, func(a, b Finding) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return l.r
}

func sortedWorkflows(p *pack.Pack) []*pack.Workflow {
	out := make([]*pack.Workflow, 0, len(p.Workflows))
	for _, w := range p.Workflows {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *pack.Workflow) int { return strings.Compare(a.WorkflowID, b.WorkflowID) })
	return out
}

// listing renders names as "a, b and c".
func listing(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
