package lint

import (
	"slices"
	"strings"

	"github.com/writhq/writ/pack"
)

// workflowPolicies applies the pack's workflow policies to every step:
// verification of mutating steps (with exemptions), retry ceilings and
// strategies.
func (l *linter) workflowPolicies() {
	wp := l.p.WorkflowPolicies
	for _, w := range sortedWorkflows(l.p) {
		for _, s := range w.Steps {
			v := s.Verification
			if wp.Mutating(s.ActionClass) && wp.RequiresVerification() && wp.ExemptionFor(w, s.ID) == nil {
				var missing []string
				if v == nil || len(v.Evidence) == 0 {
					missing = append(missing, "evidence")
				}
				if v == nil || len(v.ToolCalls) == 0 {
					missing = append(missing, "required tool calls")
				}
				switch {
				case v == nil:
					l.errorf(s.Pos, RuleMutatingVerification, "step %s is mutating (action class %s) but has no verification: it needs evidence and required tool calls, or an exemption with its reason in the workflow policies", s.ID, s.ActionClass)
				case len(missing) > 0:
					l.errorf(s.Pos, RuleMutatingVerification, "step %s is mutating (action class %s) but its verification has no %s: it needs evidence and required tool calls, or an exemption with its reason in the workflow policies", s.ID, s.ActionClass, strings.Join(missing, " and no "))
				}
			}
			if v != nil {
				l.claimedCalls(w, s, wp)
			}
			if v == nil || v.Retry == nil {
				continue
			}
			r := v.Retry
			if ceiling := wp.Retry.MaxBudget; ceiling != nil && r.Budget > *ceiling {
				l.errorf(r.Pos, RuleRetryCeiling, "step %s has retry budget %d, above the workflow policies' maxBudget %d", s.ID, r.Budget, *ceiling)
			}
			if allowed := wp.Retry.AllowedStrategies; len(allowed) > 0 && !slices.Contains(allowed, r.Strategy) {
				l.errorf(r.Pos, RuleRetryStrategy, "step %s uses retry strategy %s, which the workflow policies do not allow (allowed: %s)", s.ID, r.Strategy, strings.Join(allowed, ", "))
			}
		}
	}
	if !wp.RequiresVerification() {
		// A pack-wide exemption: named, like a step's, for every mutating
		// step it lets through without proof.
		for _, w := range sortedWorkflows(l.p) {
			for _, s := range w.Steps {
				if v := s.Verification; wp.Mutating(s.ActionClass) && wp.ExemptionFor(w, s.ID) == nil && (v == nil || len(v.Evidence)+len(v.ToolCalls) == 0) {
					l.add(wp.Pos, RuleExemption, Warning, "requireVerificationForMutating is false, so workflow %s step %s (action class %s) is accepted without a verification contract", w.WorkflowID, s.ID, s.ActionClass)
				}
			}
		}
	}
	for _, e := range wp.Exemptions {
		if e.DecisionKey != "" {
			continue // a spec's exemption: claimedEvidence checks it
		}
		w := l.p.Workflows[e.Workflow]
		if w == nil {
			// An exemption may name the workflow at its version.
			if id, _, ok := strings.Cut(e.Workflow, "@"); ok {
				if cand := l.p.Workflows[id]; cand != nil && cand.ID() == e.Workflow {
					w = cand
				}
			}
		}
		switch {
		case w == nil:
			l.errorf(e.Pos, RuleExemption, "exemption names workflow %q, which the pack does not define", e.Workflow)
		case w.Step(e.Step) == nil:
			l.errorf(e.Pos, RuleExemption, "exemption names step %q, which workflow %s does not define", e.Step, e.Workflow)
		default:
			s := w.Step(e.Step)
			l.add(e.Pos, RuleExemption, Info, "workflow %s step %s is exempt from verification of mutating steps: %s", e.Workflow, e.Step, e.Reason)
			if !wp.Mutating(s.ActionClass) {
				what := "has no action class"
				if s.ActionClass != "" {
					what = "has action class " + s.ActionClass + ", which is not mutating"
				}
				l.add(e.Pos, RuleExemption, Warning, "the exemption of workflow %s step %s is unnecessary: the step %s", e.Workflow, e.Step, what)
			}
		}
	}
}

// claimedCalls reports every required tool call that writes observed:
// false, so that a call the agent merely claims would count: a warning,
// and an error on a mutating step that is not exempted (where writ
// counts observed calls all the same, so the rule says what it does
// not do). An exempted mutating step gets a warning naming the
// exemption.
func (l *linter) claimedCalls(w *pack.Workflow, s *pack.Step, wp *pack.WorkflowPolicies) {
	for _, t := range s.Verification.ToolCalls {
		if !t.ClaimedAllowed() {
			continue
		}
		switch ex := wp.ExemptionFor(w, s.ID); {
		case !wp.Mutating(s.ActionClass):
			l.add(t.Pos, RuleClaimedToolCall, Warning, "step %s accepts a claimed call to %s (observed: false): a call the agent only reports counts as made", s.ID, t.Name)
		case ex == nil:
			l.errorf(t.Pos, RuleClaimedToolCall, "step %s is mutating (action class %s) and writes observed: false for %s: a claimed call is not accepted on a mutating step without an exemption in the workflow policies, so writ counts observed calls only", s.ID, s.ActionClass, t.Name)
		default:
			l.add(t.Pos, RuleClaimedToolCall, Warning, "step %s is mutating (action class %s) and accepts a claimed call to %s (observed: false) under its exemption: %s", s.ID, s.ActionClass, t.Name, ex.Reason)
		}
	}
}
