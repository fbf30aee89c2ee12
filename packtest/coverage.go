package packtest

import (
	"math"
	"slices"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Coverage kinds: what a pack's tests can exercise.
const (
	KindRule          = "rule"
	KindControl       = "control"
	KindEvidence      = "evidence"
	KindBudget        = "budget"
	KindContractCheck = "contract_check"
	KindStep          = "step"
	KindGate          = "gate"
	KindRedaction     = "redaction"
)

// Coverage says which parts of a pack the cases exercised. A rule,
// control, evidence requirement or budget is covered when a case made it
// fire (its verdict in a decision record is not allow): a check that
// never fires in any test is a check whose effect nobody has seen. A
// verification check is covered when an attempt failed it; a workflow
// step when a run reached it. An approval gate is covered when a check
// asked for an approval at it or redeemed one; a redaction rule when a
// case that states what must be stored (expect.stored) stored its
// placeholder in the request envelope: a redaction nobody has seen
// happen is one nobody knows works.
type Coverage struct {
	Covered int            `json:"covered"`
	Total   int            `json:"total"`
	Percent float64        `json:"percent"`
	Items   []CoverageItem `json:"items"`
}

// CoverageItem is one part of the pack and whether a case exercised it.
type CoverageItem struct {
	Kind string `json:"kind"`
	// ID names the item: the rule or control id, evidence.<kind> or
	// budget.<dimension> of a spec, workflow/step for a step, and
	// workflow/step/<evidence|tool_call>:<target> for a verification
	// check.
	ID      string `json:"id"`
	Where   string `json:"where,omitempty"` // the spec or bundle, for rules, evidence and budgets
	File    string `json:"file"`
	Line    int    `json:"line"`
	Covered bool   `json:"covered"`
}

// coverage accumulates what the cases exercised.
type coverage struct {
	items []CoverageItem
	index map[string]int // key → items index
}

func (c *coverage) add(key string, it CoverageItem) {
	c.index[key] = len(c.items)
	c.items = append(c.items, it)
}

func (c *coverage) mark(key string) {
	if i, ok := c.index[key]; ok {
		c.items[i].Covered = true
	}
}

// newCoverage lists everything in p that a case can exercise, in the
// order a reader meets it: controls, specs (evidence, budgets), bundles,
// workflows.
func newCoverage(p *pack.Pack) *coverage {
	c := &coverage{index: map[string]int{}}
	for _, list := range [][]*pack.Control{p.Controls.MustRefuse, p.Controls.MustEscalate} {
		for _, ctl := range list {
			c.add("controls\x00"+ctl.ID, CoverageItem{Kind: KindControl, ID: ctl.ID, File: ctl.Pos.File, Line: ctl.Pos.Line})
		}
	}
	for _, g := range p.Controls.ApprovalGates {
		c.add("gate\x00"+g.ID, CoverageItem{Kind: KindGate, ID: g.ID, File: g.Pos.File, Line: g.Pos.Line})
	}
	for _, rr := range p.Controls.Redaction {
		c.add("redaction\x00"+rr.ID, CoverageItem{Kind: KindRedaction, ID: rr.ID, File: rr.Pos.File, Line: rr.Pos.Line})
	}
	for _, s := range sorted(p.Specs) {
		bundle := "spec:" + s.ID()
		for _, e := range s.RequiredEvidence {
			c.add(bundle+"\x00evidence."+e.Kind, CoverageItem{Kind: KindEvidence, ID: "evidence." + e.Kind, Where: s.ID(), File: e.Pos.File, Line: e.Pos.Line})
		}
		if b := s.Budgets; b != nil {
			for _, dim := range []struct {
				name string
				set  bool
			}{{"tool_calls", b.ToolCalls != nil}, {"tokens", b.Tokens != nil}, {"cost_usd_cents", b.CostUSDCents != nil}, {"wall_clock_ms", b.WallClockMS != nil}} {
				if dim.set {
					c.add(bundle+"\x00budget."+dim.name, CoverageItem{Kind: KindBudget, ID: "budget." + dim.name, Where: s.ID(), File: b.Pos.File, Line: b.Pos.Line})
				}
			}
		}
	}
	for _, b := range sorted(p.Bundles) {
		for _, r := range b.Rules {
			c.add(b.ID()+"\x00"+r.ID, CoverageItem{Kind: KindRule, ID: r.ID, Where: b.ID(), File: r.Pos.File, Line: r.Pos.Line})
		}
	}
	for _, w := range sorted(p.Workflows) {
		for _, s := range w.Steps {
			c.add("step\x00"+w.WorkflowID+"\x00"+s.ID, CoverageItem{Kind: KindStep, ID: w.WorkflowID + "/" + s.ID, File: s.Pos.File, Line: s.Pos.Line})
			v := s.Verification
			if v == nil {
				continue
			}
			for _, e := range v.Evidence {
				id := w.WorkflowID + "/" + s.ID + "/evidence:" + e.Path
				c.add("contract\x00"+id, CoverageItem{Kind: KindContractCheck, ID: id, File: e.Pos.File, Line: e.Pos.Line})
			}
			for _, t := range v.ToolCalls {
				id := w.WorkflowID + "/" + s.ID + "/tool_call:" + t.Name
				c.add("contract\x00"+id, CoverageItem{Kind: KindContractCheck, ID: id, File: t.Pos.File, Line: t.Pos.Line})
			}
		}
	}
	return c
}

// sorted returns a map's values in key order.
func sorted[V any](m map[string]V) []V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// fired marks the checks of a decision record that fired.
func (c *coverage) fired(pds []writ.PolicyDecision) {
	for _, pd := range pds {
		if pd.Verdict == "allow" {
			continue
		}
		for _, id := range pd.RuleIDs {
			c.mark(pd.BundleID + "\x00" + id)
		}
	}
}

// gate marks an approval gate a check asked for or redeemed an approval at.
func (c *coverage) gate(id string) { c.mark("gate\x00" + id) }

// redacted marks a redaction rule whose placeholder a case stored.
func (c *coverage) redacted(id string) { c.mark("redaction\x00" + id) }

// reached marks a workflow step a run reached.
func (c *coverage) reached(w *pack.Workflow, step string) {
	if w != nil && step != "" {
		c.mark("step\x00" + w.WorkflowID + "\x00" + step)
	}
}

// attempted marks the step of a verdict, the step it leads to, and the
// verification checks it failed.
func (c *coverage) attempted(w *pack.Workflow, step string, v *writ.StepVerdict) {
	if w == nil {
		return
	}
	c.reached(w, step)
	c.reached(w, v.NextStep)
	for _, f := range v.Failed {
		c.mark("contract\x00" + w.WorkflowID + "/" + step + "/" + f.Kind + ":" + f.Target)
	}
}

func (c *coverage) report() *Coverage {
	out := &Coverage{Items: append([]CoverageItem{}, c.items...), Total: len(c.items)}
	for _, it := range c.items {
		if it.Covered {
			out.Covered++
		}
	}
	out.Percent = 100
	if out.Total > 0 {
		// One decimal, rounded down: 99.95% must not print as 100%.
		out.Percent = math.Floor(float64(out.Covered)*1000/float64(out.Total)) / 10
	}
	return out
}

// Uncovered are the items no case exercised.
func (c *Coverage) Uncovered() []CoverageItem {
	var out []CoverageItem
	for _, it := range c.Items {
		if !it.Covered {
			out = append(out, it)
		}
	}
	return out
}

// describeItem names an item as a policy owner would.
func describeItem(it CoverageItem) string {
	var b strings.Builder
	switch it.Kind {
	case KindRule:
		b.WriteString("rule " + it.ID + " of " + it.Where)
	case KindControl:
		b.WriteString("control " + it.ID)
	case KindEvidence:
		b.WriteString("evidence requirement " + strings.TrimPrefix(it.ID, "evidence.") + " of " + it.Where)
	case KindBudget:
		b.WriteString("budget " + strings.TrimPrefix(it.ID, "budget.") + " of " + it.Where)
	case KindContractCheck:
		b.WriteString("verification check " + it.ID)
	case KindStep:
		b.WriteString("workflow step " + it.ID)
	case KindGate:
		b.WriteString("approval gate " + it.ID)
	case KindRedaction:
		b.WriteString("redaction rule " + it.ID)
	}
	return b.String()
}

// why says what a case must do to cover an item.
func why(it CoverageItem) string {
	switch it.Kind {
	case KindContractCheck:
		return "no attempt failed it"
	case KindStep:
		return "no run reached it"
	case KindGate:
		return "no check asked for an approval at it"
	case KindRedaction:
		return "no case with expect.stored had it redact anything"
	}
	return "no case made it fire"
}
