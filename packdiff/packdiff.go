// Package packdiff says what changed between two versions of a pack, in
// a policy owner's words: rules added and removed, conditions and effects
// changed, evidence, budgets, gates and ceilings moved, verification
// contracts tightened or loosened. It compares loaded packs, not their
// bytes: reformatting a file is no change, and every change names the
// definition it is about with its file and line.
//
// A change is "tightened" when the new pack refuses, escalates or asks
// for more (a stronger effect, a new rule, a shorter max_age, a lower
// budget or ceiling, a contract with more checks or fewer retries),
// "loosened" for the opposite, and has no direction when writ cannot
// tell (a rewritten condition, a renamed reason code). Package packdiff
// is pure: it reads two *pack.Pack values and nothing else.
package packdiff

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// Directions of a change.
const (
	Tightened = "tightened"
	Loosened  = "loosened"
)

// Change is one difference between two packs.
type Change struct {
	// Subject names what changed: "rule R_X of POLICY@1.0.0", "spec
	// support.refund.execute", "gate G", "tool t", "step w/s", ...
	Subject string `json:"subject"`
	// What is the aspect: added, removed, or a field such as condition,
	// effect, max_age, budget tool_calls, approval_mode_ceiling.
	What string `json:"what"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
	// Direction is tightened, loosened or empty (cannot tell).
	Direction string `json:"direction,omitempty"`
	// File and Line locate the definition in the new pack (in the old one
	// when it was removed).
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// Diff is what changed from Old to New.
type Diff struct {
	Old     string   `json:"old"` // name@version
	OldHash string   `json:"old_hash"`
	New     string   `json:"new"`
	NewHash string   `json:"new_hash"`
	Changes []Change `json:"changes"`
}

// Count returns how many changes have direction d ("" counts those
// without one).
func (d *Diff) Count(dir string) int {
	n := 0
	for _, c := range d.Changes {
		if c.Direction == dir {
			n++
		}
	}
	return n
}

type differ struct{ out []Change }

func (d *differ) add(pos pack.Pos, subject, what, old, new, dir string) {
	d.out = append(d.out, Change{Subject: subject, What: what, Old: old, New: new, Direction: dir, File: pos.File, Line: pos.Line})
}

// field records a change of one field when its value differs.
func (d *differ) field(pos pack.Pos, subject, what, old, new, dir string) {
	if old != new {
		d.add(pos, subject, what, old, new, dir)
	}
}

// Compare returns what changed from old to new.
func Compare(old, new *pack.Pack) *Diff {
	d := &differ{}
	subject := "pack " + new.Name
	d.field(pack.Pos{}, subject, "name", old.Name, new.Name, "")
	d.field(pack.Pos{}, subject, "version", old.Version, new.Version, "")
	d.field(pack.Pos{}, subject, "limits.cel_cost", u64(old.Limits.CELCost), u64(new.Limits.CELCost), direction(float64(old.Limits.CELCost), float64(new.Limits.CELCost), true))
	d.history(old, new)
	d.params(old, new)
	d.specs(old, new)
	d.bundles(old, new)
	d.controls(old, new)
	d.tools(old, new)
	d.workflows(old, new)
	d.workflowPolicies(old, new)
	if d.out == nil {
		d.out = []Change{} // JSON [], not null
	}
	return &Diff{Old: old.ID(), OldHash: old.Hash, New: new.ID(), NewHash: new.Hash, Changes: d.out}
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// direction says whether moving a limit from old to new tightens: when
// lowerIsTighter, a smaller value is stricter.
func direction(old, new float64, lowerIsTighter bool) string {
	switch {
	case old == new:
		return ""
	case (new < old) == lowerIsTighter:
		return Tightened
	}
	return Loosened
}

// byKey indexes a list by the key each item gives.
func byKey[T any](items []T, key func(T) string) map[string]T {
	out := make(map[string]T, len(items))
	for _, it := range items {
		out[key(it)] = it
	}
	return out
}

// keys returns the union of two maps' keys, sorted.
func keys[V any](a, b map[string]V) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func effectDirection(old, new string) string {
	o, err1 := policy.ParseEffect(old)
	n, err2 := policy.ParseEffect(new)
	if err1 != nil || err2 != nil || o == n {
		return ""
	}
	if n > o {
		return Tightened
	}
	return Loosened
}

func modeDirection(old, new string) string {
	o, n := writ.ApprovalMode(old).Rank(), writ.ApprovalMode(new).Rank()
	if o == n {
		return ""
	}
	if n > o {
		return Tightened
	}
	return Loosened
}

func durationDirection(old, new string) string {
	o, err1 := time.ParseDuration(old)
	n, err2 := time.ParseDuration(new)
	if err1 != nil || err2 != nil {
		return ""
	}
	return direction(float64(o), float64(n), true)
}

func list(s []string) string { return strings.Join(s, ", ") }

func jsonText(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (d *differ) specs(old, new *pack.Pack) {
	for _, k := range keys(old.Specs, new.Specs) {
		o, n := old.Specs[k], new.Specs[k]
		subject := "spec " + k
		switch {
		case o == nil:
			d.add(n.Pos, subject, "added", "", n.ID(), "")
			continue
		case n == nil:
			d.add(o.Pos, subject, "removed", o.ID(), "", "")
			continue
		}
		d.field(n.Pos, subject, "version", o.Version, n.Version, "")
		d.field(n.Pos, subject, "action_class", o.ActionClass, n.ActionClass, "")
		d.field(n.Pos, subject, "approval_mode", o.ApprovalMode, n.ApprovalMode, modeDirection(o.ApprovalMode, n.ApprovalMode))
		d.field(n.Pos, subject, "allowed_outcomes", list(o.AllowedOutcomes), list(n.AllowedOutcomes), "")
		d.field(n.Pos, subject, "policies", list(o.Policies), list(n.Policies), "")
		d.field(n.Pos, subject, "outputs_schema", jsonText(o.OutputsSchemaDoc), jsonText(n.OutputsSchemaDoc), "")
		d.evidence(subject, o, n)
		d.budgets(subject, o, n)
		d.execution(subject, o, n)
	}
}

// history compares the aggregates declared under history: in pack.yaml.
// What a change of window, filter or grouping does to the rules that
// read it depends on their conditions: no direction.
func (d *differ) history(old, new *pack.Pack) {
	om, nm := byKey(old.History, func(a *pack.Aggregate) string { return a.Name }), byKey(new.History, func(a *pack.Aggregate) string { return a.Name })
	for _, k := range keys(om, nm) {
		a, b := om[k], nm[k]
		s := "history aggregate " + k
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", b.Kind+" over "+b.WindowText, "")
		case b == nil:
			d.add(a.Pos, s, "removed", a.Kind+" over "+a.WindowText, "", "")
		default:
			d.field(b.Pos, s, "aggregate", a.Kind, b.Kind, "")
			d.field(b.Pos, s, "field", a.Field, b.Field, "")
			d.field(b.Pos, s, "group_by", a.GroupBy, b.GroupBy, "")
			d.field(b.ExpressionPos, s, "expression", a.Expression, b.Expression, "")
			d.field(b.Pos, s, "window", a.WindowText, b.WindowText, "")
			d.field(b.Pos, s, "filter", a.Filter, b.Filter, "")
			d.field(b.Pos, s, "filter_expression", a.FilterExpression, b.FilterExpression, "")
			d.field(b.Pos, s, "decision_keys", list(a.DecisionKeys), list(b.DecisionKeys), "")
		}
	}
}

// execution compares a spec's execution block: a required report holds
// an allow IN_FLIGHT until it is reported, and a shorter valid_for lets
// an allow expire sooner, both tighter.
func (d *differ) execution(subject string, o, n *pack.Spec) {
	report := func(x *pack.Execution) string {
		if x.ReportRequired() {
			return "required"
		}
		return "optional"
	}
	validFor := func(x *pack.Execution) string {
		if x == nil {
			return ""
		}
		return x.ValidForText
	}
	pos := n.Pos
	if n.Execution != nil {
		pos = n.Execution.Pos
	}
	dir := Loosened
	if n.Execution.ReportRequired() {
		dir = Tightened
	}
	d.field(pos, subject, "execution report", report(o.Execution), report(n.Execution), dir)
	ov, nv := validFor(o.Execution), validFor(n.Execution)
	switch {
	case ov == nv:
	case ov == "":
		d.add(pos, subject, "execution valid_for", "none", nv, Tightened)
	case nv == "":
		d.add(pos, subject, "execution valid_for", ov, "none", Loosened)
	default:
		d.add(pos, subject, "execution valid_for", ov, nv, durationDirection(ov, nv))
	}
}

func (d *differ) evidence(subject string, o, n *pack.Spec) {
	oe, ne := byKey(o.RequiredEvidence, func(e *pack.EvidenceRequirement) string { return e.Kind }), byKey(n.RequiredEvidence, func(e *pack.EvidenceRequirement) string { return e.Kind })
	for _, k := range keys(oe, ne) {
		a, b := oe[k], ne[k]
		s := subject + " evidence " + k
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", "required", Tightened)
		case b == nil:
			d.add(a.Pos, s, "removed", "required", "", Loosened)
		default:
			d.field(b.Pos, s, "max_age", a.MaxAgeText, b.MaxAgeText, durationDirection(a.MaxAgeText, b.MaxAgeText))
			d.field(b.Pos, s, "on_missing", a.OnMissing, b.OnMissing, effectDirection(a.OnMissing, b.OnMissing))
			// A condition narrows where the requirement applies: adding one
			// loosens, dropping one tightens; changing one cannot be told.
			whenDir := ""
			switch {
			case a.When == "" && b.When != "":
				whenDir = Loosened
			case a.When != "" && b.When == "":
				whenDir = Tightened
			}
			d.field(b.Pos, s, "when", a.When, b.When, whenDir)
		}
	}
}

func (d *differ) budgets(subject string, o, n *pack.Spec) {
	ob, nb := o.Budgets, n.Budgets
	if ob == nil {
		ob = &pack.Budgets{}
	}
	if nb == nil {
		nb = &pack.Budgets{}
	}
	pos := nb.Pos
	if n.Budgets == nil {
		pos = ob.Pos
	}
	i := func(p *int64) *float64 {
		if p == nil {
			return nil
		}
		f := float64(*p)
		return &f
	}
	dims := []struct {
		name     string
		old, new *float64
	}{
		{"tool_calls", i(ob.ToolCalls), i(nb.ToolCalls)},
		{"tokens", i(ob.Tokens), i(nb.Tokens)},
		{"cost_usd_cents", ob.CostUSDCents, nb.CostUSDCents},
		{"wall_clock_ms", i(ob.WallClockMS), i(nb.WallClockMS)},
	}
	num := func(f *float64) string {
		if f == nil {
			return ""
		}
		return strconv.FormatFloat(*f, 'f', -1, 64)
	}
	for _, dim := range dims {
		what := "budget " + dim.name
		switch {
		case dim.old == nil && dim.new == nil:
		case dim.old == nil:
			d.add(pos, subject, what, "none", num(dim.new), Tightened)
		case dim.new == nil:
			d.add(pos, subject, what, num(dim.old), "none", Loosened)
		default:
			d.field(pos, subject, what, num(dim.old), num(dim.new), direction(*dim.old, *dim.new, true))
		}
	}
	if o.Budgets != nil && n.Budgets != nil {
		d.field(pos, subject, "budgets on_exceed", ob.OnExceed, nb.OnExceed, effectDirection(ob.OnExceed, nb.OnExceed))
	}
}

func (d *differ) bundles(old, new *pack.Pack) {
	for _, k := range keys(old.Bundles, new.Bundles) {
		o, n := old.Bundles[k], new.Bundles[k]
		switch {
		case o == nil:
			d.add(n.Pos, "policy bundle "+k, "added", "", n.ID(), "")
			for _, r := range n.Rules {
				d.add(r.Pos, "rule "+r.ID+" of "+k, "added", "", r.Effect, addedDirection(r.Effect))
			}
			continue
		case n == nil:
			d.add(o.Pos, "policy bundle "+k, "removed", o.ID(), "", "")
			for _, r := range o.Rules {
				d.add(r.Pos, "rule "+r.ID+" of "+k, "removed", r.Effect, "", removedDirection(r.Effect))
			}
			continue
		}
		d.field(n.Pos, "policy bundle "+k, "version", o.Version, n.Version, "")
		om, nm := byKey(o.Rules, func(r *pack.Rule) string { return r.ID }), byKey(n.Rules, func(r *pack.Rule) string { return r.ID })
		for _, id := range keys(om, nm) {
			a, b := om[id], nm[id]
			s := "rule " + id + " of " + k
			switch {
			case a == nil:
				d.add(b.Pos, s, "added", "", b.Effect, addedDirection(b.Effect))
			case b == nil:
				d.add(a.Pos, s, "removed", a.Effect, "", removedDirection(a.Effect))
			default:
				d.rule(s, a, b)
			}
		}
	}
}

// A rule that fires can only add a constraint: adding one tightens,
// removing one loosens (an allow rule is neither).
func addedDirection(effect string) string {
	if effect == "allow" {
		return ""
	}
	return Tightened
}

func removedDirection(effect string) string {
	if effect == "allow" {
		return ""
	}
	return Loosened
}

func (d *differ) rule(s string, a, b *pack.Rule) {
	d.field(b.WhenPos, s, "condition", a.When, b.When, "")
	d.field(b.Pos, s, "effect", a.Effect, b.Effect, effectDirection(a.Effect, b.Effect))
	d.field(b.Pos, s, "gate", a.Gate, b.Gate, "")
	d.field(b.Pos, s, "applies_to", jsonText(a.AppliesTo), jsonText(b.AppliesTo), "")
	d.field(b.Pos, s, "reason code", a.Reason.Code, b.Reason.Code, "")
	d.field(b.Pos, s, "reason message", a.Reason.Message, b.Reason.Message, "")
	mustNot := ""
	if b.MustNotRetrySameAction {
		mustNot = Tightened
	} else {
		mustNot = Loosened
	}
	d.field(b.Pos, s, "must_not_retry_same_action", strconv.FormatBool(a.MustNotRetrySameAction), strconv.FormatBool(b.MustNotRetrySameAction), mustNot)
	d.field(b.Pos, s, "routing", jsonText(a.Routing), jsonText(b.Routing), "")
}

func (d *differ) controls(old, new *pack.Pack) {
	for _, kind := range []struct {
		name     string
		old, new []*pack.Control
	}{{"must_refuse", old.Controls.MustRefuse, new.Controls.MustRefuse}, {"must_escalate", old.Controls.MustEscalate, new.Controls.MustEscalate}} {
		om, nm := byKey(kind.old, func(c *pack.Control) string { return c.ID }), byKey(kind.new, func(c *pack.Control) string { return c.ID })
		for _, id := range keys(om, nm) {
			a, b := om[id], nm[id]
			s := kind.name + " control " + id
			switch {
			case a == nil:
				d.add(b.Pos, s, "added", "", "", Tightened)
			case b == nil:
				d.add(a.Pos, s, "removed", "", "", Loosened)
			default:
				d.field(b.WhenPos, s, "condition", a.When, b.When, "")
				d.field(b.Pos, s, "applies_to", jsonText(a.AppliesTo), jsonText(b.AppliesTo), "")
				d.field(b.Pos, s, "reason code", a.Reason.Code, b.Reason.Code, "")
			}
		}
	}
	for _, id := range keys(old.Gates, new.Gates) {
		a, b := old.Gates[id], new.Gates[id]
		s := "approval gate " + id
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", "", "")
		case b == nil:
			d.add(a.Pos, s, "removed", "", "", "")
		default:
			d.field(b.Pos, s, "approval_mode", a.ApprovalMode, b.ApprovalMode, modeDirection(a.ApprovalMode, b.ApprovalMode))
			d.field(b.Pos, s, "ttl", a.TTLText, b.TTLText, durationDirection(a.TTLText, b.TTLText))
			d.field(b.Pos, s, "allowance", strconv.Itoa(max(a.Allowance, 1)), strconv.Itoa(max(b.Allowance, 1)), direction(float64(max(a.Allowance, 1)), float64(max(b.Allowance, 1)), true))
			// Who may be asked changes, not how much is allowed: review it.
			d.field(b.Pos, s, "elicit", strconv.FormatBool(a.Elicit), strconv.FormatBool(b.Elicit), "")
			d.field(b.Pos, s, "target_hint", a.TargetHint, b.TargetHint, "")
		}
	}
	om, nm := byKey(old.Controls.Redaction, func(r *pack.RedactionRule) string { return r.ID }), byKey(new.Controls.Redaction, func(r *pack.RedactionRule) string { return r.ID })
	for _, id := range keys(om, nm) {
		a, b := om[id], nm[id]
		s := "redaction rule " + id
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", "", Tightened)
		case b == nil:
			d.add(a.Pos, s, "removed", "", "", Loosened)
		default:
			d.field(b.Pos, s, "fields", list(a.Fields), list(b.Fields), "")
			d.field(b.Pos, s, "patterns", list(a.PatternTexts), list(b.PatternTexts), "")
			d.field(b.Pos, s, "named_patterns", list(a.NamedPatterns), list(b.NamedPatterns), "")
		}
	}
	op, np := byKey(old.Controls.Patterns, func(p *pack.NamedPattern) string { return p.ID }), byKey(new.Controls.Patterns, func(p *pack.NamedPattern) string { return p.ID })
	for _, id := range keys(op, np) {
		a, b := op[id], np[id]
		s := "pattern " + id
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", b.Regex, "")
		case b == nil:
			d.add(a.Pos, s, "removed", a.Regex, "", "")
		default:
			d.field(b.Pos, s, "regex", a.Regex, b.Regex, "")
		}
	}
}

func (d *differ) tools(old, new *pack.Pack) {
	for _, k := range keys(old.Tools, new.Tools) {
		a, b := old.Tools[k], new.Tools[k]
		s := "tool " + k
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", b.DecisionKey, "")
		case b == nil:
			d.add(a.Pos, s, "removed", a.DecisionKey, "", "")
		default:
			d.field(b.Pos, s, "decision_key", a.DecisionKey, b.DecisionKey, "")
			d.field(b.Pos, s, "action_class", a.ActionClass, b.ActionClass, "")
			// A lower ceiling allows fewer approval modes.
			d.field(b.Pos, s, "approval_mode_ceiling", a.ApprovalModeCeiling, b.ApprovalModeCeiling, modeDirection(b.ApprovalModeCeiling, a.ApprovalModeCeiling))
			// Pinning a definition refuses every other; unpinning accepts
			// any; a new pin accepts what was refused: review it.
			pin := ""
			switch {
			case a.DefinitionDigest == "" && b.DefinitionDigest != "":
				pin = Tightened
			case a.DefinitionDigest != "" && b.DefinitionDigest == "":
				pin = Loosened
			}
			d.field(b.Pos, s, "definition_digest", a.DefinitionDigest, b.DefinitionDigest, pin)
			// What the MCP gateway makes of a call: its subjects, the
			// outputs it proposes and the evidence its result is. Each can
			// let a call through or stop it, so they carry no direction:
			// review them.
			d.field(b.Pos, s, "subject_ids", list(a.SubjectIDs), list(b.SubjectIDs), "")
			d.field(b.Pos, s, "outputs", outputsText(a.Outputs), outputsText(b.Outputs), "")
			d.field(b.Pos, s, "captures", captureText(a.Captures), captureText(b.Captures), "")
		}
	}
}

// outputsText renders a tool's outputs mapping as "name: argument"
// pairs in name order.
func outputsText(m map[string]string) string {
	pairs := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, name+": "+m[name])
	}
	return strings.Join(pairs, ", ")
}

// captureText renders what a tool's result is as evidence, or "".
func captureText(c *pack.Capture) string {
	if c == nil {
		return ""
	}
	t := c.Kind + " [" + list(c.Attributes) + "]"
	if c.ValidForText != "" {
		t += " valid_for " + c.ValidForText
	}
	return t
}

func (d *differ) workflows(old, new *pack.Pack) {
	for _, k := range keys(old.Workflows, new.Workflows) {
		a, b := old.Workflows[k], new.Workflows[k]
		s := "workflow " + k
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", b.ID(), "")
			continue
		case b == nil:
			d.add(a.Pos, s, "removed", a.ID(), "", "")
			continue
		}
		d.field(b.Pos, s, "version", a.Version, b.Version, "")
		d.field(b.Pos, s, "context", list(a.Context), list(b.Context), "")
		d.field(b.Pos, s, "start", a.Root().ID, b.Root().ID, "")
		ids := func(w *pack.Workflow) map[string]*pack.Step {
			m := map[string]*pack.Step{}
			for _, st := range w.Steps {
				m[st.ID] = st
			}
			return m
		}
		om, nm := ids(a), ids(b)
		for _, id := range keys(om, nm) {
			x, y := om[id], nm[id]
			ss := "step " + k + "/" + id
			switch {
			case x == nil:
				d.add(y.Pos, ss, "added", "", "", "")
			case y == nil:
				d.add(x.Pos, ss, "removed", "", "", "")
			default:
				d.step(ss, x, y)
			}
		}
	}
}

func (d *differ) step(s string, a, b *pack.Step) {
	d.field(b.Pos, s, "action_class", a.ActionClass, b.ActionClass, "")
	d.field(b.PromptPos, s, "prompt", a.Prompt, b.Prompt, "")
	d.field(b.Pos, s, "next", a.Next, b.Next, "")
	d.field(b.Pos, s, "goto", jsonText(gotos(a.Goto)), jsonText(gotos(b.Goto)), "")
	d.field(b.Pos, s, "terminal", strconv.FormatBool(a.Terminal), strconv.FormatBool(b.Terminal), "")
	va, vb := a.Verification, b.Verification
	switch {
	case va == nil && vb == nil:
		return
	case va == nil:
		d.add(vb.Pos, s, "verification contract added", "", "", Tightened)
		return
	case vb == nil:
		d.add(va.Pos, s, "verification contract removed", "", "", Loosened)
		return
	}
	strict := map[string]float64{"warn": 0, "reject-and-retry": 1, "reject-and-abort": 2}
	d.field(vb.Pos, s, "onMissingEvidence", va.OnMissingEvidence, vb.OnMissingEvidence, direction(strict[va.OnMissingEvidence], strict[vb.OnMissingEvidence], false))
	d.field(vb.Pos, s, "retryPrompt", va.RetryPrompt, vb.RetryPrompt, "")
	budget := func(r *pack.Retry) float64 {
		if r == nil {
			return 0
		}
		return float64(r.Budget)
	}
	// Fewer retries ask more of each attempt.
	d.field(vb.Pos, s, "retry budget", strconv.Itoa(int(budget(va.Retry))), strconv.Itoa(int(budget(vb.Retry))), direction(budget(va.Retry), budget(vb.Retry), true))
	d.field(vb.Pos, s, "onFailure", jsonText(onFailure(va.OnFailure)), jsonText(onFailure(vb.OnFailure)), "")
	oe, ne := byKey(va.Evidence, func(e *pack.EvidenceRule) string { return e.Path }), byKey(vb.Evidence, func(e *pack.EvidenceRule) string { return e.Path })
	for _, p := range keys(oe, ne) {
		x, y := oe[p], ne[p]
		cs := s + " evidence " + p
		switch {
		case x == nil:
			d.add(y.Pos, cs, "added", "", evidenceText(y), Tightened)
		case y == nil:
			d.add(x.Pos, cs, "removed", evidenceText(x), "", Loosened)
		default:
			d.field(y.Pos, cs, "check", evidenceText(x), evidenceText(y), "")
		}
	}
	ot, nt := byKey(va.ToolCalls, func(t *pack.ToolCallRule) string { return t.Name }), byKey(vb.ToolCalls, func(t *pack.ToolCallRule) string { return t.Name })
	for _, name := range keys(ot, nt) {
		x, y := ot[name], nt[name]
		cs := s + " tool call " + name
		switch {
		case x == nil:
			d.add(y.Pos, cs, "added", "", toolCallText(y), Tightened)
		case y == nil:
			d.add(x.Pos, cs, "removed", toolCallText(x), "", Loosened)
		default:
			obs := Loosened
			if y.RequiresObserved() {
				obs = Tightened
			}
			d.field(y.Pos, cs, "observed", strconv.FormatBool(x.RequiresObserved()), strconv.FormatBool(y.RequiresObserved()), obs)
			exe := Loosened
			if y.Executed {
				exe = Tightened
			}
			d.field(y.Pos, cs, "executed", strconv.FormatBool(x.Executed), strconv.FormatBool(y.Executed), exe)
			d.field(y.Pos, cs, "min", strconv.Itoa(x.Min), strconv.Itoa(y.Min), direction(float64(x.Min), float64(y.Min), false))
			d.field(y.Pos, cs, "when", x.When, y.When, "")
		}
	}
}

func gotos(gs []*pack.Goto) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.When+" → "+g.Step)
	}
	return out
}

func onFailure(f *pack.OnFailure) any {
	if f == nil {
		return nil
	}
	return map[string]string{"action": f.Action, "step": f.Step, "target_hint": f.TargetHint}
}

func evidenceText(e *pack.EvidenceRule) string {
	switch {
	case e.CEL != "":
		return "cel " + e.CEL
	case e.PatternText != "":
		return "pattern " + e.PatternText
	case e.HasEquals:
		return "equals " + jsonText(e.Equals)
	}
	return fmt.Sprintf("expect %v", e.Expect)
}

func toolCallText(t *pack.ToolCallRule) string {
	s := fmt.Sprintf("at least %d", t.Min)
	if t.RequiresObserved() {
		s += ", observed by writ"
	}
	if t.Executed {
		s += ", reported executed"
	}
	if t.When != "" {
		s += ", when " + t.When
	}
	return s
}

func (d *differ) workflowPolicies(old, new *pack.Pack) {
	a, b := old.WorkflowPolicies, new.WorkflowPolicies
	s := "workflow policies"
	pos := b.Pos
	oc, nc := map[string]bool{}, map[string]bool{}
	for _, c := range a.MutatingActionClasses {
		oc[c] = true
	}
	for _, c := range b.MutatingActionClasses {
		nc[c] = true
	}
	for _, c := range keys(oc, nc) {
		switch {
		case !oc[c]:
			d.add(pos, s, "mutating action class added", "", c, Tightened)
		case !nc[c]:
			d.add(pos, s, "mutating action class removed", c, "", Loosened)
		}
	}
	req := Loosened
	if b.RequiresVerification() {
		req = Tightened
	}
	d.field(pos, s, "requireVerificationForMutating", strconv.FormatBool(a.RequiresVerification()), strconv.FormatBool(b.RequiresVerification()), req)
	ex := func(es []*pack.Exemption) map[string]*pack.Exemption {
		m := map[string]*pack.Exemption{}
		for _, e := range es {
			if e.DecisionKey != "" {
				m["spec "+e.DecisionKey] = e
				continue
			}
			m[e.Workflow+"/"+e.Step] = e
		}
		return m
	}
	oe, ne := ex(a.Exemptions), ex(b.Exemptions)
	for _, k := range keys(oe, ne) {
		switch {
		case oe[k] == nil:
			d.add(ne[k].Pos, s, "exemption added", "", k+": "+ne[k].Reason, Loosened)
		case ne[k] == nil:
			d.add(oe[k].Pos, s, "exemption removed", k, "", Tightened)
		}
	}
	mb := func(p *int) string {
		if p == nil {
			return ""
		}
		return strconv.Itoa(*p)
	}
	d.field(pos, s, "retry.maxBudget", mb(a.Retry.MaxBudget), mb(b.Retry.MaxBudget), "")
	d.field(pos, s, "retry.allowedStrategies", list(a.Retry.AllowedStrategies), list(b.Retry.AllowedStrategies), "")
}

// WriteText writes the diff for a code review: a heading with both
// versions and their hashes, the counts, then one entry per change.
func (d *Diff) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "writ diff %s (%s) → %s (%s)\n", d.Old, d.OldHash, d.New, d.NewHash)
	if len(d.Changes) == 0 {
		b.WriteString("no policy changes\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "%d changes: %d tightened, %d loosened, %d to review\n\n", len(d.Changes), d.Count(Tightened), d.Count(Loosened), d.Count(""))
	for _, c := range d.Changes {
		dir := c.Direction
		if dir == "" {
			dir = "changed"
		}
		where := ""
		if c.File != "" {
			where = fmt.Sprintf("  (%s:%d)", c.File, c.Line)
		}
		switch {
		case c.What == "added" || c.What == "removed":
			extra := c.New
			if c.What == "removed" {
				extra = c.Old
			}
			if extra != "" {
				extra = " (" + extra + ")"
			}
			fmt.Fprintf(&b, "%-9s %s %s%s%s\n", dir, c.Subject, c.What, extra, where)
		case len(c.Old)+len(c.New) > 60 || strings.ContainsAny(c.Old+c.New, "\n"):
			fmt.Fprintf(&b, "%-9s %s: %s%s\n", dir, c.Subject, c.What, where)
			fmt.Fprintf(&b, "          - %s\n          + %s\n", oneLine(c.Old), oneLine(c.New))
		default:
			fmt.Fprintf(&b, "%-9s %s: %s %s → %s%s\n", dir, c.Subject, c.What, orNone(c.Old), orNone(c.New), where)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
