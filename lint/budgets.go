package lint

import (
	"slices"
	"strings"

	"github.com/writhq/writ/pack"
)

// sessionBudgets warns about every spec with a tool_calls budget and no
// actor_tool_calls budget. tool_calls counts the calls of one session,
// and a session is a name the caller chooses: an agent that names a
// fresh one starts a fresh count (docs/trust.md, "Sessions"). That is
// what a per-task budget means, so it is a warning, not an error; a
// bound the agent cannot reset is an actor_tool_calls budget beside it.
func (l *linter) sessionBudgets() {
	specs := make([]*pack.Spec, 0, len(l.p.Specs))
	for _, s := range l.p.Specs {
		specs = append(specs, s)
	}
	slices.SortFunc(specs, func(a, b *pack.Spec) int { return strings.Compare(a.DecisionKey, b.DecisionKey) })
	for _, s := range specs {
		b := s.Budgets
		if b == nil || b.ToolCalls == nil || b.ActorToolCalls != nil {
			continue
		}
		l.add(b.Pos, RuleSessionBudget, Warning, "spec %s has a tool_calls budget and no actor_tool_calls: tool_calls counts one session's calls, and an agent that names a fresh session starts a fresh count; an actor_tool_calls budget bounds the actor's calls whatever sessions it names (docs/trust.md, Sessions)", s.DecisionKey)
	}
}
