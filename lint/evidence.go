package lint

import (
	"slices"
	"strings"

	"github.com/writhq/writ/pack"
)

// claimedEvidence reports every evidence requirement of a mutating spec
// that accepts claimed evidence (a citation writ cannot resolve, the
// caller's word): an error unless the workflow policies exempt the spec
// in writing, and then a warning naming the exemption's reason. Left
// out, a mutating spec's requirement accepts issued and observed
// evidence only (pack.AcceptedProvenance), so only a written
// provenance list can accept claimed. Exemptions that name a spec are
// checked here too: the spec must exist, and be mutating.
func (l *linter) claimedEvidence() {
	wp := l.p.WorkflowPolicies
	for _, s := range sortedSpecs(l.p) {
		if !wp.Mutating(s.ActionClass) {
			continue
		}
		ex := wp.SpecExemption(s.DecisionKey)
		for _, r := range s.RequiredEvidence {
			if !slices.Contains(l.p.AcceptedProvenance(s, r), "claimed") {
				continue
			}
			if ex == nil {
				l.errorf(r.Pos, RuleClaimedEvidence, "spec %s is mutating (action class %s) and its %s requirement accepts claimed evidence: a citation writ cannot resolve would satisfy it on the caller's word; accept issued and observed evidence (leave provenance out), or exempt the spec in the workflow policies with its reason", s.DecisionKey, s.ActionClass, r.Kind)
				continue
			}
			l.add(r.Pos, RuleClaimedEvidence, Warning, "spec %s is mutating (action class %s) and its %s requirement accepts claimed evidence under its exemption: %s", s.DecisionKey, s.ActionClass, r.Kind, ex.Reason)
		}
	}
	if wp == nil {
		return
	}
	for _, e := range wp.Exemptions {
		if e.DecisionKey == "" {
			continue
		}
		s := l.p.Specs[e.DecisionKey]
		switch {
		case s == nil:
			l.errorf(e.Pos, RuleExemption, "exemption names spec %q, which the pack does not define", e.DecisionKey)
		case !wp.Mutating(s.ActionClass):
			l.add(e.Pos, RuleExemption, Warning, "the exemption of spec %s is unnecessary: its action class %s is not mutating, so its requirements accept claimed evidence when they leave provenance out", e.DecisionKey, s.ActionClass)
		default:
			l.add(e.Pos, RuleExemption, Info, "spec %s may accept claimed evidence: %s", e.DecisionKey, e.Reason)
		}
	}
}

func sortedSpecs(p *pack.Pack) []*pack.Spec {
	out := make([]*pack.Spec, 0, len(p.Specs))
	for _, s := range p.Specs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *pack.Spec) int { return strings.Compare(a.DecisionKey, b.DecisionKey) })
	return out
}
