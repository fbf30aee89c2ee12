package acceptance

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Contracts are the compiled verification contracts of a pack's
// workflows. They are safe for concurrent use.
type Contracts struct {
	workflows map[string]*workflow // by workflow_id
	lenient   bool                 // Options.Lenient
}

type workflow struct {
	w     *pack.Workflow
	steps map[string]*step
}

// step is one step and its compiled contract.
type step struct {
	s         *pack.Step
	evidence  []*evidenceRule
	toolCalls []*toolCallRule
	gotos     []*gotoRule
	exempt    *pack.Exemption
	maxBudget *int // the workflow policies' retry.maxBudget
	// refuse is set when the step is mutating, has no contract and is not
	// exempted: Evaluate never accepts it.
	refuse *writ.Error
	// reads holds the top-level result fields the evidence rules read;
	// readsAll is set when a CEL rule reads the result as a whole.
	reads    map[string]bool
	readsAll bool
}

type gotoRule struct {
	g   *pack.Goto
	prg cel.Program
}

// Compile compiles the verification contracts of every workflow of p:
// every CEL condition is parsed and type-checked against its variables
// and must yield a bool. Problems are reported together as one EINVALID
// *writ.Error whose details name each file and line.
//
// The variables:
//
//	evidence cel   value    dyn               the value at the rule's path (null if missing)
//	               result   map(string, dyn)  the whole payload
//	               context  map(string, dyn)  the run context
//	toolCalls when call     map(string, dyn)  name, args, result, observed, executed
//	goto when      result, context            as above
//
// Every program runs under the pack's CEL cost limit.
func Compile(p *pack.Pack) (*Contracts, error) {
	return CompileWith(p, Options{})
}

// Options select the defaults contracts are compiled under.
type Options struct {
	// Lenient compiles under the defaults writ had before issue 31, to
	// replay the verdicts decided under them: a required tool call
	// counts claimed calls unless it writes observed: true, only the
	// workflow policies' own mutatingActionClasses are mutating, and a
	// verdict does not list the claimed calls. New verdicts are never
	// decided leniently.
	Lenient bool
}

// CompileWith is Compile under o's defaults.
func CompileWith(p *pack.Pack, o Options) (*Contracts, error) {
	c, err := newCompiler(p)
	if err != nil {
		return nil, err
	}
	c.lenient = o.Lenient
	out := &Contracts{workflows: map[string]*workflow{}, lenient: o.Lenient}
	for _, id := range sortedKeys(p.Workflows) {
		w := p.Workflows[id]
		cw := &workflow{w: w, steps: map[string]*step{}}
		for _, s := range w.Steps {
			cw.steps[s.ID] = c.step(w, s)
		}
		out.workflows[id] = cw
	}
	if len(c.problems) > 0 {
		slices.SortStableFunc(c.problems, func(a, b writ.Detail) int {
			if n := strings.Compare(a.File, b.File); n != 0 {
				return n
			}
			return a.Line - b.Line
		})
		n := len(c.problems)
		noun := "problems"
		if n == 1 {
			noun = "problem"
		}
		return nil, &writ.Error{
			Code:    writ.EINVALID,
			Message: fmt.Sprintf("pack %s is invalid (%d %s in verification contracts)", p.Dir, n, noun),
			Details: c.problems,
		}
	}
	return out, nil
}

type compiler struct {
	pack                 *pack.Pack
	policies             *pack.WorkflowPolicies
	evidenceEnv, callEnv *cel.Env
	routeEnv             *cel.Env
	costLimit            uint64
	problems             []writ.Detail
	lenient              bool
}

// mutating reports whether a step of actionClass is mutating: one of the
// seed's mutating classes or the policies' own (pack.WorkflowPolicies.Mutating);
// leniently, the policies' own only.
func (c *compiler) mutating(actionClass string) bool {
	if c.lenient {
		return c.policies.DeclaredMutating(actionClass)
	}
	return c.policies.Mutating(actionClass)
}

func newCompiler(p *pack.Pack) (*compiler, error) {
	obj := cel.MapType(cel.StringType, cel.DynType)
	common := []cel.EnvOption{cel.CrossTypeNumericComparisons(true), cel.DefaultUTCTimeZone(true), ext.Strings()}
	env := func(vars ...cel.EnvOption) (*cel.Env, error) {
		return cel.NewEnv(append(slices.Clone(common), vars...)...)
	}
	c := &compiler{pack: p, policies: p.WorkflowPolicies, costLimit: p.Limits.CELCost}
	if c.policies == nil {
		c.policies = &pack.WorkflowPolicies{}
	}
	if c.costLimit == 0 {
		c.costLimit = pack.DefaultCELCost
	}
	var err error
	if c.evidenceEnv, err = env(cel.Variable("value", cel.DynType), cel.Variable("result", obj), cel.Variable("context", obj)); err != nil {
		return nil, fmt.Errorf("acceptance: CEL environment: %w", err)
	}
	if c.callEnv, err = env(cel.Variable("call", obj)); err != nil {
		return nil, fmt.Errorf("acceptance: CEL environment: %w", err)
	}
	if c.routeEnv, err = env(cel.Variable("result", obj), cel.Variable("context", obj)); err != nil {
		return nil, fmt.Errorf("acceptance: CEL environment: %w", err)
	}
	return c, nil
}

func (c *compiler) addf(pos pack.Pos, format string, args ...any) {
	c.problems = append(c.problems, writ.Detail{File: pos.File, Line: pos.Line, Message: fmt.Sprintf(format, args...)})
}

func (c *compiler) step(w *pack.Workflow, s *pack.Step) *step {
	cs := &step{s: s, reads: map[string]bool{}, maxBudget: c.policies.Retry.MaxBudget}
	mutating := c.mutating(s.ActionClass)
	if mutating {
		cs.exempt = c.policies.ExemptionFor(w, s.ID)
	}
	v := s.Verification
	if v == nil || len(v.Evidence)+len(v.ToolCalls) == 0 {
		// An empty contract proves nothing: for a mutating step it is
		// as good as none.
		if mutating && c.policies.RequiresVerification() && cs.exempt == nil {
			msg := fmt.Sprintf("step %s is mutating and has no verification contract", s.ID)
			cs.refuse = &writ.Error{
				Code:    writ.EINVALID,
				Message: fmt.Sprintf("workflow %s: %s (action class %s); writ does not accept it without proof", w.WorkflowID, msg, s.ActionClass),
				Details: []writ.Detail{{File: s.Pos.File, Line: s.Pos.Line, Message: msg}},
			}
		}
		if mutating && !c.policies.RequiresVerification() && cs.exempt == nil && !c.lenient {
			// The policies exempt every mutating step: the verdict and its
			// record name that as the step's exemption.
			cs.exempt = &pack.Exemption{Workflow: w.WorkflowID, Step: s.ID, Reason: "requireVerificationForMutating is false in the workflow policies", Pos: c.policies.Pos}
		}
	}
	what := func(kind string, i int) string {
		return fmt.Sprintf("workflow %s step %s %s %d", w.WorkflowID, s.ID, kind, i)
	}
	if v != nil {
		switch v.OnMissingEvidence {
		case "", "reject-and-retry", "reject-and-abort", "warn":
		default:
			c.addf(v.Pos, "workflow %s step %s: unknown onMissingEvidence %q", w.WorkflowID, s.ID, v.OnMissingEvidence)
		}
		if f := v.OnFailure; f != nil {
			switch f.Action {
			case "abort", "escalate":
			case "goto":
				if w.Step(f.Step) == nil {
					c.addf(f.Pos, "workflow %s step %s: onFailure goes to step %q, which the workflow does not define", w.WorkflowID, s.ID, f.Step)
				}
			default:
				c.addf(f.Pos, "workflow %s step %s: unknown onFailure action %q", w.WorkflowID, s.ID, f.Action)
			}
		}
		for i, e := range v.Evidence {
			r := c.evidence(what("evidence", i), e)
			cs.evidence = append(cs.evidence, r)
			if len(r.path) > 0 && !r.path[0].isIndex {
				cs.reads[r.path[0].key] = true
			}
			if r.prg != nil {
				keys, all := resultFields(r.ast)
				cs.readsAll = cs.readsAll || all
				for _, k := range keys {
					cs.reads[k] = true
				}
			}
		}
		for i, t := range v.ToolCalls {
			r := &toolCallRule{rule: t, min: max(t.Min, 1), observed: t.RequiresObserved()}
			switch {
			case c.lenient:
				r.observed = t.Observed != nil && *t.Observed
			case mutating && cs.exempt == nil && !r.observed:
				// A mutating step counts only what writ saw, unless it
				// is exempted in writing: observed: false alone does not
				// let a claimed call through (lint reports it).
				r.observed, r.overridden = true, true
			}
			if t.When != "" {
				r.prg, _ = c.program(c.callEnv, t.Pos, what("toolCalls", i)+" ("+t.Name+") when", t.When)
			}
			cs.toolCalls = append(cs.toolCalls, r)
		}
	}
	for i, g := range s.Goto {
		prg, _ := c.program(c.routeEnv, g.Pos, what("goto", i)+" when", g.When)
		cs.gotos = append(cs.gotos, &gotoRule{g: g, prg: prg})
	}
	return cs
}

func (c *compiler) evidence(what string, e *pack.EvidenceRule) *evidenceRule {
	r := &evidenceRule{rule: e}
	what += " (" + e.Path + ")"
	path, err := parsePath(e.Path)
	if err != nil {
		c.addf(e.Pos, "%s: %v", what, err)
	}
	r.path = path
	switch {
	case e.Expect != nil:
		switch e.Expect {
		case true:
			r.kind = expectTrue
		case false:
			r.kind = expectFalse
		case "present":
			r.kind = expectPresent
		case "absent":
			r.kind = expectAbsent
		default:
			c.addf(e.Pos, "%s: expect must be true, false, present or absent, not %v", what, e.Expect)
		}
	case e.HasEquals:
		r.kind = expectEquals
		if r.equals, err = jsonValue(e.Equals); err != nil {
			c.addf(e.Pos, "%s: equals is not a JSON value: %v", what, err)
		}
	case e.PatternText != "":
		r.kind = expectPattern
		r.pattern = e.Pattern
		if r.pattern == nil {
			if r.pattern, err = regexp.Compile(e.PatternText); err != nil {
				c.addf(e.Pos, "%s: bad pattern: %v", what, err)
			}
		}
	case e.CEL != "":
		r.kind = expectCEL
		r.prg, r.ast = c.program(c.evidenceEnv, e.Pos, what+" cel", e.CEL)
	default:
		c.addf(e.Pos, "%s: the rule has no expect, equals, pattern or cel", what)
	}
	return r
}

// program compiles and type-checks one CEL condition. Its type must be
// bool, or dyn (then it must yield a bool when it runs).
func (c *compiler) program(env *cel.Env, pos pack.Pos, what, expr string) (cel.Program, *cel.Ast) {
	a, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		var parts []string
		for _, e := range iss.Errors() {
			parts = append(parts, fmt.Sprintf("column %d: %s", e.Location.Column()+1, e.Message))
		}
		c.addf(pos, "%s: invalid CEL condition %q: %s", what, expr, strings.Join(parts, "; "))
		return nil, nil
	}
	if t := a.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		c.addf(pos, "%s: condition %q has type %s, want bool", what, expr, cel.FormatCELType(t))
		return nil, nil
	}
	prg, err := env.Program(a, cel.CostLimit(c.costLimit))
	if err != nil {
		c.addf(pos, "%s: %v", what, err)
		return nil, nil
	}
	return prg, a
}

// evalBool runs a condition. An error, the cost limit or a non-bool
// result is an error.
func evalBool(prg cel.Program, vars map[string]any) (bool, error) {
	out, _, err := prg.Eval(vars)
	switch {
	case err != nil:
		return false, err
	case out == types.True:
		return true, nil
	case out == types.False:
		return false, nil
	}
	return false, fmt.Errorf("the condition yielded %v (%s), not a bool", out, out.Type().TypeName())
}

// resultFields lists the top-level fields of result a condition reads
// (result.f, result["f"], has(result.f)); all is set when it uses result
// in any other way.
func resultFields(a *cel.Ast) (fields []string, all bool) {
	if a == nil {
		return nil, false
	}
	root := ast.NavigateAST(a.NativeRep())
	for _, e := range ast.MatchDescendants(root, ast.KindMatcher(ast.IdentKind)) {
		if e.AsIdent() != "result" {
			continue
		}
		parent, ok := e.Parent()
		switch {
		case ok && parent.Kind() == ast.SelectKind:
			fields = append(fields, parent.AsSelect().FieldName())
		case ok && parent.Kind() == ast.CallKind && parent.AsCall().FunctionName() == operators.Index &&
			len(parent.AsCall().Args()) == 2 && parent.AsCall().Args()[0].ID() == e.ID() &&
			parent.AsCall().Args()[1].Kind() == ast.LiteralKind:
			key, isStr := parent.AsCall().Args()[1].AsLiteral().Value().(string)
			if !isStr {
				return nil, true
			}
			fields = append(fields, key)
		default:
			return nil, true
		}
	}
	return fields, false
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
