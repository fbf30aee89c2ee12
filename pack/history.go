package pack

import (
	"fmt"
	"time"
)

// Aggregate is a named aggregate over the tenant's own sealed decisions,
// declared under history: in pack.yaml. Conditions read its value for
// the check's group as history.<name> (see docs/pack-format.md).
type Aggregate struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Kind is "count" or "sum".
	Kind string `yaml:"aggregate"`
	// Field is what a sum adds up: "args.<key>" or "usage.<dimension>".
	Field string `yaml:"field"`
	// GroupBy is "subject", "actor", "session", "tool" or "expression".
	GroupBy    string `yaml:"group_by"`
	Expression string `yaml:"expression"`
	WindowText string `yaml:"window"`
	// Filter is "allowed" (the default) or "executed".
	Filter string `yaml:"filter"`
	// FilterExpression, when set, is a CEL condition over the counted
	// decision's request and outcome: only decisions for which it holds
	// count.
	FilterExpression string   `yaml:"filter_expression"`
	DecisionKeys     []string `yaml:"decision_keys"`

	Window time.Duration `yaml:"-"`
	Pos    Pos           `yaml:"-"`
	// ExpressionPos and FilterExpressionPos locate Expression and
	// FilterExpression, for CEL errors.
	ExpressionPos       Pos `yaml:"-"`
	FilterExpressionPos Pos `yaml:"-"`
}

// MeterToolCalls names writ's built-in count of the tool calls it
// allowed in a session (policy's tool-call meter): a name no pack
// aggregate can have. A test case's history may set it.
const MeterToolCalls = "writ.tool_calls"

// MeterActorToolCalls names writ's built-in count of the tool calls it
// allowed an actor (the acting principal) in an actor_tool_calls
// budget's window. A test case's history may set it.
const MeterActorToolCalls = "writ.actor_tool_calls"

// MeterNoSession names the history value a check of a spec with a
// tool_calls budget pins when it names neither a session nor a run:
// writ has nothing to count its session's calls across, and the budget
// refuses it (budget_unmetered). Its value is never read.
const MeterNoSession = "writ.no_session"

// MaxWindow bounds an aggregate's window: 366 days.
const MaxWindow = 366 * 24 * time.Hour

// Aggregate filters.
const (
	FilterAllowed  = "allowed"
	FilterExecuted = "executed"
)

// loadHistory reads the manifest's history: list (already checked
// against pack.schema.json) into p.History.
func (l *loader) loadHistory(doc *document, p *Pack, list []*Aggregate) {
	seen := map[string]Pos{}
	for i, a := range list {
		ptr := fmt.Sprintf("/history/%d", i)
		a.Pos = l.pos(doc, ptr)
		a.ExpressionPos = l.pos(doc, ptr+"/expression")
		if a.FilterExpression != "" {
			a.FilterExpressionPos = l.pos(doc, ptr+"/filter_expression")
		}
		a.Window = l.duration(doc, ptr+"/window", a.WindowText)
		if a.Window > MaxWindow {
			l.addf(l.pos(doc, ptr+"/window"), "window %s is longer than %s (366 days)", a.WindowText, MaxWindow)
		}
		if a.Filter == "" {
			a.Filter = FilterAllowed
		}
		if prev, dup := seen[a.Name]; dup {
			l.addf(l.pos(doc, ptr+"/name"), "aggregate %q is already defined at %s", a.Name, prev)
			continue
		}
		seen[a.Name] = a.Pos
		p.History = append(p.History, a)
	}
}

// checkHistory refuses an aggregate that counts a decision key the pack
// does not define.
func (l *loader) checkHistory(p *Pack) {
	for _, a := range p.History {
		for _, k := range a.DecisionKeys {
			if _, ok := p.Specs[k]; !ok {
				l.addf(a.Pos, "aggregate %s counts decision key %q, which the pack does not define", a.Name, k)
			}
		}
	}
}
