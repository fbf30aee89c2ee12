package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// History is what a decision reads of the tenant's history: the value of
// each aggregate the check's conditions name, by aggregate name. An
// aggregate missing from it (its group key could not be computed, or the
// caller had no values to give) is absent from the history variable, so
// a condition that reads it fails closed.
type History map[string]float64

// HistoryKey is one aggregate value a check reads: the aggregate, the
// check's group and the start of the window at the check's clock.
type HistoryKey struct {
	Name      string
	Aggregate string // aggregate id: see aggregateID
	Group     string
	Since     time.Time
}

// Contribution is what a decision adds to an aggregate once it counts:
// Amount (1 for a count) to Group of Aggregate, at the decision's clock.
type Contribution struct {
	Name      string
	Aggregate string
	Group     string
	Amount    float64
	// Usage is the usage dimension a sum of usage.<dimension> adds ("" for
	// other aggregates): an execution report that carries its own usage
	// replaces Amount with it.
	Usage string

	// filter is the aggregate's filter_expression, evaluated over v and
	// the decision's outcome by HistoryPlan.Counted.
	filter cel.Program
	v      *vars
}

// HistoryPlan is what the history aggregates need from one check: the
// values it reads before deciding, and what it contributes when its
// decision allows (Allowed) or when an execution report says it ran
// (Executed).
type HistoryPlan struct {
	Reads    []HistoryKey
	Allowed  []Contribution
	Executed []Contribution
}

// aggregate is a compiled pack.Aggregate.
type aggregate struct {
	def    *pack.Aggregate
	id     string
	group  cel.Program // for group_by expression
	filter cel.Program // for filter_expression
}

// aggregateID names a definition: its name, then the first 16 hex digits
// of the SHA-256 of the JSON of what decides what it counts (kind, field,
// group_by, expression, filter, decision_keys, and filter_expression
// when it is set; not the window, which only says how far back a read
// looks). A pack that redefines an aggregate under the same name starts
// counting afresh.
func aggregateID(a *pack.Aggregate) string {
	keys := slices.Clone(a.DecisionKeys)
	sort.Strings(keys)
	def := []any{a.Kind, a.Field, a.GroupBy, a.Expression, a.Filter, keys}
	if a.FilterExpression != "" {
		// Appended only when set, so the ids of aggregates without one
		// are those they always had.
		def = append(def, a.FilterExpression)
	}
	b, _ := json.Marshal(def)
	sum := sha256.Sum256(b)
	return a.Name + ":" + hex.EncodeToString(sum[:8])
}

func (c *compiler) aggregates(p *pack.Pack) []*aggregate {
	var out []*aggregate
	for _, a := range p.History {
		ag := &aggregate{def: a, id: aggregateID(a)}
		if a.GroupBy == "expression" {
			what := "aggregate " + a.Name + " expression"
			ast, iss := c.env.Compile(a.Expression)
			switch {
			case iss != nil && iss.Err() != nil:
				c.addf(a.ExpressionPos, "%s: invalid CEL expression %q: %s", what, a.Expression, celIssues(iss))
			case !ast.OutputType().IsExactType(cel.StringType) && !ast.OutputType().IsExactType(cel.DynType):
				c.addf(a.ExpressionPos, "%s: %q has type %s, want string", what, a.Expression, cel.FormatCELType(ast.OutputType()))
			case strings.Contains(a.Expression, "history"):
				c.addf(a.ExpressionPos, "%s: a group key cannot read history", what)
			default:
				opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
				if _, ok := costBounded(c.env, ast, c.pack.Limits.CELCost); !ok {
					opts = append(opts, cel.CostLimit(c.pack.Limits.CELCost))
				}
				prg, err := c.env.Program(ast, opts...)
				if err != nil {
					c.addf(a.ExpressionPos, "%s: %v", what, err)
				}
				ag.group = prg
			}
		}
		if a.FilterExpression != "" {
			ag.filter = c.filterProgram(a)
		}
		out = append(out, ag)
	}
	return out
}

// filterProgram compiles an aggregate's filter_expression: a bool
// condition over the condition variables (except history) and outcome,
// the counted decision's outcome.
func (c *compiler) filterProgram(a *pack.Aggregate) cel.Program {
	what := "aggregate " + a.Name + " filter_expression"
	if strings.Contains(a.FilterExpression, "history") {
		c.addf(a.FilterExpressionPos, "%s: a filter cannot read history", what)
		return nil
	}
	env, err := c.env.Extend(cel.Variable("outcome", cel.StringType))
	if err != nil {
		c.addf(a.FilterExpressionPos, "%s: %v", what, err)
		return nil
	}
	ast, iss := env.Compile(a.FilterExpression)
	switch {
	case iss != nil && iss.Err() != nil:
		c.addf(a.FilterExpressionPos, "%s: invalid CEL condition %q: %s", what, a.FilterExpression, celIssues(iss))
		return nil
	case !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType):
		c.addf(a.FilterExpressionPos, "%s: condition %q has type %s, want bool", what, a.FilterExpression, cel.FormatCELType(ast.OutputType()))
		return nil
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if _, ok := costBounded(env, ast, c.pack.Limits.CELCost); !ok {
		opts = append(opts, cel.CostLimit(c.pack.Limits.CELCost))
	}
	prg, err := env.Program(ast, opts...)
	if err != nil {
		c.addf(a.FilterExpressionPos, "%s: %v", what, err)
	}
	return prg
}

// withOutcome is a check's activation with the outcome of its decision,
// for filter expressions.
type withOutcome struct {
	*vars
	outcome string
}

func (w withOutcome) ResolveName(name string) (any, bool) {
	if name == "outcome" {
		return types.String(w.outcome), true
	}
	return w.vars.ResolveName(name)
}

// Counted returns the contributions of the plan that count once the
// check is decided with outcome: those of aggregates without a
// filter_expression, and those whose filter_expression holds over the
// check and outcome. A filter that cannot be evaluated counts the
// decision: a limit never loses a decision to an error (writ fails
// closed). It is pure.
func (h HistoryPlan) Counted(outcome writ.Outcome) (allowed, executed []Contribution) {
	keep := func(cs []Contribution) []Contribution {
		var out []Contribution
		for _, c := range cs {
			if c.filter != nil {
				res, _, err := c.filter.Eval(withOutcome{c.v, string(outcome)})
				if err == nil && res == types.False {
					continue
				}
			}
			out = append(out, c)
		}
		return out
	}
	return keep(h.Allowed), keep(h.Executed)
}

// mentions reports whether text names history aggregate name: it must
// contain "history" and the name. A condition or message that reads an
// aggregate names it literally (history.<name> or history["<name>"]);
// one that computes the name does not get its value and fails closed.
func mentions(text, name string) bool {
	return strings.Contains(text, "history") && strings.Contains(text, name)
}

// readsOf lists the aggregates the checks of cs read.
func (c *compiler) readsOf(cs *candidates) []*aggregate {
	var out []*aggregate
	for _, ag := range c.aggs {
		for _, ch := range cs.checks {
			if mentions(ch.text, ag.def.Name) {
				out = append(out, ag)
				break
			}
		}
	}
	return out
}

// ruleText is every text of a rule that can read a variable.
func ruleText(r *pack.Rule) string {
	parts := []string{r.When, r.Reason.Message}
	for _, s := range r.SafeNextSteps {
		parts = append(parts, s.Message)
	}
	parts = append(parts, r.ViewerGuidance...)
	for _, w := range r.WhatWouldChangeThis {
		parts = append(parts, w.Text, w.Expression)
	}
	return strings.Join(parts, "\n")
}

// controlText is every text of a control that can read a variable.
func controlText(ctl *pack.Control) string {
	parts := []string{ctl.When, ctl.Reason.Message}
	for _, s := range ctl.SafeNextSteps {
		parts = append(parts, s.Message)
	}
	return strings.Join(parts, "\n")
}

// HistoryPlan computes what check req (resolved as r) reads of the
// tenant's history at now and what it would contribute, the built-in
// tool-call meter (meter.go) last. It is pure. An
// aggregate whose group key cannot be computed for req (no subject, no
// session, a group expression that fails or gives "") is neither read
// nor contributed to; a sum whose field is not a number is read (the
// group's amounts are others') but not contributed to.
func (p *Policy) HistoryPlan(r *Resolved, req *writ.CheckRequest, now time.Time) HistoryPlan {
	return p.HistoryPlanWith(r, req, now, nil)
}

// HistoryPlanWith is HistoryPlan with the tenant's parameter values
// (Inputs.Params), which group_by expressions read as params.<name>.
func (p *Policy) HistoryPlanWith(r *Resolved, req *writ.CheckRequest, now time.Time, params map[string]any) HistoryPlan {
	var plan HistoryPlan
	var v *vars
	for _, ag := range p.history {
		reads := slices.Contains(r.cands.reads, ag)
		counts := len(ag.def.DecisionKeys) == 0 || slices.Contains(ag.def.DecisionKeys, r.Spec.DecisionKey)
		if !reads && !counts {
			continue
		}
		if v == nil {
			v = newVars(req, r, now)
			v.params = params
		}
		group, ok := ag.groupKey(v, req)
		if !ok {
			continue
		}
		if reads {
			plan.Reads = append(plan.Reads, HistoryKey{Name: ag.def.Name, Aggregate: ag.id, Group: group, Since: now.Add(-ag.def.Window)})
		}
		if !counts {
			continue
		}
		amount, ok := ag.amount(req)
		if !ok {
			continue
		}
		c := Contribution{Name: ag.def.Name, Aggregate: ag.id, Group: group, Amount: amount, filter: ag.filter, v: v}
		if src, dim, _ := strings.Cut(ag.def.Field, "."); src == "usage" {
			c.Usage = dim
		}
		if ag.def.Filter == pack.FilterExecuted {
			plan.Executed = append(plan.Executed, c)
		} else {
			plan.Allowed = append(plan.Allowed, c)
		}
	}
	p.meterPlan(&plan, r, req, now)
	return plan
}

// groupKey is req's group of the aggregate.
func (ag *aggregate) groupKey(v *vars, req *writ.CheckRequest) (string, bool) {
	var g string
	switch ag.def.GroupBy {
	case "subject":
		if len(req.SubjectIDs) > 0 {
			g = req.SubjectIDs[0]
		}
	case "actor":
		if req.Actor.ID != "" {
			g = req.Actor.Type + ":" + req.Actor.ID
		}
	case "session":
		if in := req.InputsRefs; in != nil && in.Session != "" {
			g = in.Session
		} else if w := req.Workflow; w != nil {
			g = w.RunID
		}
	case "tool":
		g = req.Tool
		if g == "" {
			g = v.decisionKey
		}
	case "expression":
		if ag.group == nil {
			return "", false
		}
		out, _, err := ag.group.Eval(v)
		if err != nil || out.Type() != types.StringType {
			return "", false
		}
		g = out.Value().(string)
	}
	return g, g != ""
}

// amount is what req adds to the aggregate: 1 for a count, the field for
// a sum.
func (ag *aggregate) amount(req *writ.CheckRequest) (float64, bool) {
	if ag.def.Kind == "count" {
		return 1, true
	}
	src, name, _ := strings.Cut(ag.def.Field, ".")
	if src == "usage" {
		u := req.Usage
		if u == nil {
			return 0, true
		}
		switch name {
		case "tokens":
			return float64(u.Tokens), true
		case "tool_calls":
			return float64(u.ToolCalls), true
		case "cost_usd_cents":
			return u.CostUSDCents, true
		case "wall_clock_ms":
			return float64(u.WallClockMS), true
		}
		return 0, false
	}
	switch x := req.Arguments[name].(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// Pin returns the values a decision read, as the record pins them:
// one per read, in the plan's order (aggregate order in the pack).
func (h HistoryPlan) Pin(values History) []writ.HistoryValue {
	if len(h.Reads) == 0 {
		return nil
	}
	out := make([]writ.HistoryValue, 0, len(h.Reads))
	for _, k := range h.Reads {
		out = append(out, writ.HistoryValue{Name: k.Name, Aggregate: k.Aggregate, Group: k.Group, Since: k.Since, Value: values[k.Name]})
	}
	return out
}

// PinnedHistory is the History a record pinned.
func PinnedHistory(pinned []writ.HistoryValue) History {
	if len(pinned) == 0 {
		return nil
	}
	h := make(History, len(pinned))
	for _, v := range pinned {
		h[v.Name] = v.Value
	}
	return h
}

// Aggregates lists the pack's aggregates: name and id, in pack order,
// then the tool-call meter when the pack has one (meter.go).
func (p *Policy) Aggregates() [][2]string {
	out := make([][2]string, 0, len(p.history)+1)
	for _, ag := range p.history {
		out = append(out, [2]string{ag.def.Name, ag.id})
	}
	if m := p.meter; m != nil {
		out = append(out, [2]string{m.def.Name, m.id})
	}
	if m := p.actorMeter; m != nil {
		out = append(out, [2]string{m.def.Name, m.id})
	}
	return out
}

// historyRef matches a literal read of an aggregate: history.<name> or
// history["<name>"] (or with single quotes).
var historyRef = regexp.MustCompile(`\bhistory\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*["']([^"']*)["']\s*\])`)

// checkRefs refuses a rule or control text that reads an aggregate the
// pack does not declare: its condition would fail closed on every check.
func (c *compiler) checkRefs(pos pack.Pos, what, text string) {
	for _, m := range historyRef.FindAllStringSubmatch(text, -1) {
		name := m[1] + m[2]
		if !slices.ContainsFunc(c.aggs, func(ag *aggregate) bool { return ag.def.Name == name }) {
			c.addf(pos, "%s reads history.%s, which the pack does not declare (see history: in pack.yaml)", what, name)
		}
	}
}
