// Package policy turns a loaded pack into a compiled policy and decides
// boundary checks with it.
//
// Compile type-checks every CEL condition of the pack and indexes rules
// and controls by decision spec and tool, so that a check evaluates only
// its candidates. Decide is pure: a deterministic function of the request,
// the compiled pack and the clock reading it is given. It does no I/O and
// keeps no state between calls, which is what makes replay exact.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Policy is a compiled pack. It is safe for concurrent use.
type Policy struct {
	Pack  *pack.Pack
	env   *cel.Env
	specs map[string]*specIndex
	// history are the pack's aggregates, in pack order (history.go).
	history []*aggregate
	// meter is the built-in tool-call meter (meter.go), nil when no spec
	// has a tool_calls budget.
	meter *aggregate
	// actorMeter is the built-in per-actor tool-call meter, nil when no
	// spec has an actor_tool_calls budget.
	actorMeter *aggregate
}

// specIndex holds the candidates of one decision spec.
type specIndex struct {
	spec           *pack.Spec
	policyVersions []string
	evidence       []*evidenceCheck
	budgets        []*budgetCheck
	// metered is set when the spec has a tool_calls budget: its checks
	// read the tool-call meter (meter.go).
	metered bool
	// actorWindow is the window of the spec's actor_tool_calls budget,
	// 0 when it has none.
	actorWindow time.Duration
	ceilings    map[string]*CheckID // by tool
	pins        map[string]*CheckID // by pinned tool
	// lineagePins and gates are the seed's lineage and approval rules
	// (emission.go): the spec's required pins, the pack's required gates.
	lineagePins []*pinCheck
	gates       []*gateCheck
	// byTool lists the candidate checks for each tool of the manifest
	// that maps to this spec; noTool is used when the check names only
	// the decision key.
	byTool map[string]*candidates
	noTool *candidates
}

// candidates are the checks that apply to one (spec, tool) pair, in
// evaluation order: must_refuse controls, must_escalate controls, then the
// rules of the spec's bundles in bundle and file order.
type candidates struct {
	checks   []*check
	controls writ.ControlsActive
	// contextHash pins what resolution compiled for this (spec, tool):
	// see compiledContextHash.
	contextHash string
	// reads are the history aggregates the checks name (history.go).
	reads []*aggregate
}

// check is one compiled condition: a rule or a control.
type check struct {
	cid          *CheckID
	id           string // rule or control id
	bundleID     string // "bundle@version" of a rule; "controls" for a control
	effect       Effect
	gate         string
	mustNotRetry bool
	when         string
	prg          cel.Program
	reason       reasonTemplate
	nextSteps    []reasonTemplate
	guidance     []template
	changes      []conditionTemplate
	routing      pack.Routing
	appliesTo    pack.AppliesTo
	text         string // every text that can read a variable (history.go)
}

type reasonTemplate struct {
	code    string
	message template
}

type conditionTemplate struct {
	c    writ.Condition
	text template
}

type evidenceCheck struct {
	cid          *CheckID
	req          *pack.EvidenceRequirement
	effect       Effect
	reason, step *reasonTemplate   // the pack's own words, when it gives them
	when         cel.Program       // nil: the requirement applies to every check
	accepts      []writ.Provenance // the provenances that satisfy it (pack.AcceptedProvenance)
}

// Compile compiles p. Every problem is reported with its file and line.
func Compile(p *pack.Pack) (*Policy, error) {
	env, err := newEnv()
	if err == nil {
		// The named patterns of controls.yaml, as a constant map that
		// conditions read as patterns.<id> (args.body.matches(patterns.card)).
		env, err = env.Extend(cel.Constant("patterns", cel.MapType(cel.StringType, cel.StringType),
			types.NewStringStringMap(types.DefaultTypeAdapter, p.Controls.PatternMap())))
	}
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	c := &compiler{env: env, pack: p}
	pol := &Policy{Pack: p, env: env, specs: map[string]*specIndex{}}
	pol.history = c.aggregates(p)
	c.aggs = pol.history
	pol.meter = newMeter(p)
	pol.actorMeter = newActorMeter(p)

	refuse := c.controls(p.Controls.MustRefuse, Deny)
	escalate := c.controls(p.Controls.MustEscalate, Escalate)
	gates := compileRequiredGates(p)
	rules := map[string][]*check{}
	for id, b := range p.Bundles {
		for _, r := range b.Rules {
			rules[id] = append(rules[id], c.rule(b, r))
		}
	}
	for key, s := range p.Specs {
		idx := &specIndex{spec: s, byTool: map[string]*candidates{}, ceilings: map[string]*CheckID{}, pins: map[string]*CheckID{},
			lineagePins: compilePins(s), gates: gates}
		var specChecks []*check
		specChecks = append(specChecks, refuse...)
		specChecks = append(specChecks, escalate...)
		for _, id := range s.Policies {
			b, ok := p.Bundles[id]
			if !ok {
				continue // reported by pack.Load
			}
			idx.policyVersions = append(idx.policyVersions, b.ID())
			specChecks = append(specChecks, rules[id]...)
		}
		for _, r := range s.RequiredEvidence {
			e, _ := ParseEffect(r.OnMissing)
			cid := newCheckID("spec:"+s.ID(), "evidence."+r.Kind, "pd:"+s.ID()+":", e)
			ec := &evidenceCheck{cid: cid, req: r, effect: e}
			for _, pv := range p.AcceptedProvenance(s, r) {
				ec.accepts = append(ec.accepts, writ.Provenance(pv))
			}
			what := "spec " + s.DecisionKey + " evidence " + r.Kind
			if r.When != "" {
				if strings.Contains(r.When, "history") {
					c.addf(r.WhenPos, "%s: when cannot read history (an evidence requirement applies by the request alone)", what)
				} else {
					ec.when = c.program(r.WhenPos, what, r.When)
				}
			}
			if r.Reason != nil {
				rt := c.reason(r.Pos, what, *r.Reason)
				ec.reason = &rt
			}
			if r.SafeNextStep != nil {
				st := c.reason(r.Pos, what, *r.SafeNextStep)
				ec.step = &st
			}
			idx.evidence = append(idx.evidence, ec)
		}
		c.checkOutcomes(s, specChecks)
		idx.budgets = compileBudgets(s)
		idx.metered = s.Budgets != nil && s.Budgets.ToolCalls != nil
		if b := s.Budgets; b != nil && b.ActorToolCalls != nil {
			idx.actorWindow = b.ActorWindow
		}
		idx.noTool = c.candidates(s, "", specChecks)
		idx.noTool.contextHash = compiledContextHash(p, idx, nil, idx.noTool)
		for name, t := range p.Tools {
			if t.DecisionKey == key {
				idx.ceilings[name] = newCheckID("tool_manifest", "approval_mode_ceiling", "pd:tool:"+name+":", Deny)
				if t.DefinitionDigest != "" {
					idx.pins[name] = newCheckID("tool_manifest", "definition_digest", "pd:tool:"+name+":", Deny)
				}
				cs := c.candidates(s, name, specChecks)
				cs.contextHash = compiledContextHash(p, idx, t, cs)
				idx.byTool[name] = cs
			}
		}
		pol.specs[key] = idx
	}
	if len(c.problems) > 0 {
		slices.SortStableFunc(c.problems, func(a, b writ.Detail) int {
			if n := strings.Compare(a.File, b.File); n != 0 {
				return n
			}
			return a.Line - b.Line
		})
		return nil, &writ.Error{
			Code:    writ.EINVALID,
			Message: fmt.Sprintf("pack %s is invalid (%d %s in conditions and templates)", p.Dir, len(c.problems), plural(len(c.problems), "problem", "problems")),
			Details: c.problems,
		}
	}
	return pol, nil
}

type compiler struct {
	env      *cel.Env
	pack     *pack.Pack
	problems []writ.Detail
	seen     map[string]bool
	aggs     []*aggregate
}

func (c *compiler) addf(pos pack.Pos, format string, args ...any) {
	d := writ.Detail{File: pos.File, Line: pos.Line, Message: fmt.Sprintf(format, args...)}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if key := d.String(); !c.seen[key] {
		c.seen[key] = true
		c.problems = append(c.problems, d)
	}
}

// patternRef matches a literal read of a named pattern: patterns.<id>
// or patterns["<id>"].
var patternRef = regexp.MustCompile(`\bpatterns\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*["']([^"']*)["']\s*\])`)

// program compiles and type-checks one boolean CEL condition.
func (c *compiler) program(pos pack.Pos, what, expr string) cel.Program {
	for _, m := range patternRef.FindAllStringSubmatch(expr, -1) {
		if id := m[1] + m[2]; !slices.ContainsFunc(c.pack.Controls.Patterns, func(np *pack.NamedPattern) bool { return np.ID == id }) {
			c.addf(pos, "%s reads patterns.%s, which controls.yaml does not define (see patterns: in controls.yaml)", what, id)
			return nil
		}
	}
	ast, iss := c.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		c.addf(pos, "%s: invalid CEL condition %q: %s", what, expr, celIssues(iss))
		return nil
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		c.addf(pos, "%s: condition %q has type %s, want bool", what, expr, cel.FormatCELType(ast.OutputType()))
		return nil
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if _, ok := costBounded(c.env, ast, c.pack.Limits.CELCost); !ok {
		// Not provably cheap (a comprehension or a string function over
		// caller data): bound it while it runs.
		opts = append(opts, cel.CostLimit(c.pack.Limits.CELCost))
	}
	prg, err := c.env.Program(ast, opts...)
	if err != nil {
		c.addf(pos, "%s: %v", what, err)
		return nil
	}
	return prg
}

// celIssues renders CEL's errors on one line, each with its column in
// the expression.
func celIssues(iss *cel.Issues) string {
	var parts []string
	for _, e := range iss.Errors() {
		parts = append(parts, fmt.Sprintf("column %d: %s", e.Location.Column()+1, e.Message))
	}
	return strings.Join(parts, "; ")
}

func (c *compiler) template(pos pack.Pos, what, s string) template {
	t, err := parseTemplate(s)
	if err != nil {
		c.addf(pos, "%s: %v", what, err)
	}
	return t
}

func (c *compiler) reason(pos pack.Pos, what string, r pack.Reason) reasonTemplate {
	return reasonTemplate{code: r.Code, message: c.template(pos, what, r.Message)}
}

func (c *compiler) rule(b *pack.Bundle, r *pack.Rule) *check {
	what := "rule " + r.ID
	e, err := ParseEffect(r.Effect)
	if err != nil {
		c.addf(r.Pos, "%s: %v", what, err)
	}
	ch := &check{
		id:           r.ID,
		bundleID:     b.ID(),
		cid:          newCheckID(b.ID(), r.ID, "pd:"+b.ID()+":", e),
		effect:       e,
		gate:         r.Gate,
		mustNotRetry: r.MustNotRetrySameAction,
		when:         r.When,
		prg:          c.program(r.WhenPos, what, r.When),
		reason:       c.reason(r.Pos, what, r.Reason),
		routing:      r.Routing,
		appliesTo:    r.AppliesTo,
		text:         ruleText(r),
	}
	c.checkRefs(r.Pos, what, ch.text)
	for _, s := range r.SafeNextSteps {
		ch.nextSteps = append(ch.nextSteps, c.reason(r.Pos, what, s))
	}
	for _, g := range r.ViewerGuidance {
		ch.guidance = append(ch.guidance, c.template(r.Pos, what, g))
	}
	for _, w := range r.WhatWouldChangeThis {
		if w.Expression != "" {
			c.program(w.Pos, what+" what_would_change_this", w.Expression)
		}
		ch.changes = append(ch.changes, conditionTemplate{
			c:    writ.Condition{Kind: w.Kind, EvidenceKind: w.EvidenceKind, MaxAge: w.MaxAge, GateID: w.Gate, Expression: w.Expression},
			text: c.template(w.Pos, what, w.Text),
		})
	}
	if e == RequireApproval && len(ch.changes) == 0 {
		ch.changes = append(ch.changes, conditionTemplate{
			c:    writ.Condition{Kind: writ.ConditionApproval, GateID: r.Gate},
			text: template{parts: []templatePart{{lit: "An approval at gate " + r.Gate + " for this exact action."}}},
		})
	}
	return ch
}

func (c *compiler) controls(list []*pack.Control, e Effect) []*check {
	var out []*check
	for _, ctl := range list {
		what := "control " + ctl.ID
		ch := &check{
			id:           ctl.ID,
			bundleID:     "controls",
			cid:          newCheckID("controls", ctl.ID, "pd:"+c.pack.ID()+":controls:", e),
			effect:       e,
			mustNotRetry: true,
			when:         ctl.When,
			prg:          c.program(ctl.WhenPos, what, ctl.When),
			reason:       c.reason(ctl.Pos, what, ctl.Reason),
			routing:      ctl.Routing,
			appliesTo:    ctl.AppliesTo,
			text:         controlText(ctl),
		}
		c.checkRefs(ctl.Pos, what, ch.text)
		for _, s := range ctl.SafeNextSteps {
			ch.nextSteps = append(ch.nextSteps, c.reason(ctl.Pos, what, s))
		}
		out = append(out, ch)
	}
	return out
}

// checkOutcomes refuses a spec whose rules, evidence or budgets can
// produce an outcome the spec does not allow. Controls are exempt: a
// safety control always wins.
func (c *compiler) checkOutcomes(s *pack.Spec, checks []*check) {
	if len(s.AllowedOutcomes) == 0 {
		return
	}
	allowed := func(e Effect) bool { return slices.Contains(s.AllowedOutcomes, string(e.Outcome())) }
	for _, ch := range checks {
		// Any rule that can apply to the spec, through any tool or none.
		reachable := matches(ch.appliesTo, s, "")
		for _, t := range ch.appliesTo.Tools {
			reachable = reachable || matches(ch.appliesTo, s, t)
		}
		if ch.bundleID != "controls" && reachable && !allowed(ch.effect) {
			c.addf(s.Pos, "spec %s allows outcomes %v, but rule %s (%s) can decide %s", s.DecisionKey, s.AllowedOutcomes, ch.id, ch.bundleID, ch.effect.Outcome())
		}
	}
	for _, r := range s.RequiredEvidence {
		if e, _ := ParseEffect(r.OnMissing); !allowed(e) {
			c.addf(r.Pos, "spec %s allows outcomes %v, but missing %s evidence decides %s", s.DecisionKey, s.AllowedOutcomes, r.Kind, e.Outcome())
		}
	}
	if len(s.RequiredPins) > 0 && !allowed(ReplanLocal) {
		c.addf(s.Pos, "spec %s allows outcomes %v, but a missing lineage pin decides %s", s.DecisionKey, s.AllowedOutcomes, ReplanLocal.Outcome())
	}
	if len(c.pack.RequiredGates(writ.ApprovalMode(s.ApprovalMode))) > 0 && !allowed(RequireApproval) {
		c.addf(s.Pos, "spec %s allows outcomes %v, but a required approval gate decides %s", s.DecisionKey, s.AllowedOutcomes, RequireApproval.Outcome())
	}
	if b := s.Budgets; b != nil {
		if e, _ := ParseEffect(b.OnExceed); !allowed(e) {
			c.addf(b.Pos, "spec %s allows outcomes %v, but an exceeded budget decides %s", s.DecisionKey, s.AllowedOutcomes, e.Outcome())
		}
	}
}

// matches reports whether a rule or control scoped by a applies to spec s
// called through tool ("" for none). A rule scoped to tools never applies
// to a check that names no tool.
func matches(a pack.AppliesTo, s *pack.Spec, tool string) bool {
	if len(a.DecisionKeys) > 0 && !slices.Contains(a.DecisionKeys, s.DecisionKey) {
		return false
	}
	if len(a.ActionClasses) > 0 && !slices.Contains(a.ActionClasses, s.ActionClass) {
		return false
	}
	if len(a.Tools) > 0 && (tool == "" || !slices.Contains(a.Tools, tool)) {
		return false
	}
	return true
}

func (c *compiler) candidates(s *pack.Spec, tool string, all []*check) *candidates {
	cs := &candidates{controls: writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: []string{}}}
	gates := map[string]bool{}
	for _, ch := range all {
		if !matches(ch.appliesTo, s, tool) {
			continue
		}
		cs.checks = append(cs.checks, ch)
		switch {
		case ch.bundleID == "controls" && ch.effect == Deny:
			cs.controls.MustRefuse = append(cs.controls.MustRefuse, ch.id)
		case ch.bundleID == "controls" && ch.effect == Escalate:
			cs.controls.MustEscalate = append(cs.controls.MustEscalate, ch.id)
		}
		if ch.gate != "" {
			gates[ch.gate] = true
		}
	}
	for _, g := range c.pack.Controls.ApprovalGates {
		// A required gate is in force for every check (emission.go).
		if gates[g.ID] || g.Required && g.ApprovalMode != "" {
			cs.controls.ApprovalGatesActive = append(cs.controls.ApprovalGatesActive, g.ID)
		}
	}
	for _, r := range c.pack.Controls.Redaction {
		cs.controls.RedactionRulesActive = append(cs.controls.RedactionRulesActive, r.ID)
	}
	cs.reads = c.readsOf(cs)
	return cs
}

// compiledContextHash is the digest of the RFC 8785 form of what
// resolution compiles for one (spec, tool): the pack, the spec, the tool,
// its action class and ceiling, and every check in evaluation order.
// Records pin it as replay.compiled_context_hash.
func compiledContextHash(p *pack.Pack, idx *specIndex, tool *pack.Tool, cs *candidates) string {
	var checks []string
	add := func(id *CheckID) { checks = append(checks, id.BundleID+"/"+id.RuleID) }
	ctx := map[string]any{"pack": p.ID(), "pack_hash": p.Hash, "decision_spec": idx.spec.ID(), "action_class": idx.spec.ActionClass, "policy_versions": idx.policyVersions, "controls": cs.controls}
	if tool != nil {
		ctx["tool"], ctx["action_class"], ctx["approval_mode_ceiling"] = tool.Name, tool.ActionClass, tool.ApprovalModeCeiling
		add(idx.ceilings[tool.Name])
		if pin := idx.pins[tool.Name]; pin != nil {
			ctx["definition_digest"] = tool.DefinitionDigest
			add(pin)
		}
	}
	for _, ch := range cs.checks {
		if ch.bundleID == "controls" {
			add(ch.cid)
		}
	}
	for _, e := range idx.evidence {
		add(e.cid)
	}
	for _, b := range idx.budgets {
		add(b.cid)
	}
	for _, pc := range idx.lineagePins {
		add(pc.cid)
	}
	for _, ch := range cs.checks {
		if ch.bundleID != "controls" {
			add(ch.cid)
		}
	}
	for _, gc := range idx.gates {
		add(gc.cid)
	}
	ctx["checks"] = checks
	b, err := json.Marshal(ctx)
	if err == nil {
		// RFC 8785, as record.Canonical (which policy, pure, does not import).
		err = (*jsontext.Value)(&b).Canonicalize()
	}
	if err != nil {
		panic("policy: compiled context does not encode: " + err.Error()) // only plain strings and lists
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
