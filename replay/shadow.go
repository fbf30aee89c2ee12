package replay

import (
	"context"
	"slices"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// ShadowStore is what a shadow report reads.
type ShadowStore interface {
	ShadowDecisions(ctx context.Context, q ledger.ShadowQuery) (*ledger.ShadowPage, error)
	Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error)
}

// ShadowReport and ShadowPack are the report writ.ShadowReports answers.
type (
	ShadowReport = writ.ShadowReport
	ShadowPack   = writ.ShadowPack
)

// ShadowReport builds the shadow report of q from the Replayer's store,
// which must keep shadow decisions (writ.ShadowReports).
func (r *Replayer) ShadowReport(ctx context.Context, q writ.ShadowQuery) (*ShadowReport, error) {
	st, ok := r.store.(ShadowStore)
	if !ok {
		return nil, writ.Errorf(writ.ENOTFOUND, "this store keeps no shadow decisions")
	}
	if q.TenantID == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "a shadow report needs a tenant", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	return Shadow(ctx, st, ledger.ShadowQuery{TenantID: q.TenantID, PackHash: q.PackHash, DecisionKey: q.DecisionKey, From: q.From, To: q.To}, q.Examples)
}

var _ writ.ShadowReports = (*Replayer)(nil)

// Shadow builds the shadow report of q (q.Limit and q.Cursor are managed
// here). Changed decisions read their enforced record to name the rules
// that fired only in the shadow (RulesFired, at the shadow's strongest
// effect) and only in the enforced decision (RulesCleared).
func Shadow(ctx context.Context, st ShadowStore, q ledger.ShadowQuery, examples int) (*ShadowReport, error) {
	if examples <= 0 {
		examples = 3
	}
	rep := &ShadowReport{TenantID: q.TenantID, PackHash: q.PackHash, DecisionKey: q.DecisionKey, Packs: []ShadowPack{}, Transitions: []*Transition{}}
	if !q.From.IsZero() {
		from := q.From.UTC()
		rep.From = &from
	}
	if !q.To.IsZero() {
		to := q.To.UTC()
		rep.To = &to
	}
	byKey := map[string]*Transition{}
	q.Limit, q.Cursor = 1000, ""
	for {
		page, err := st.ShadowDecisions(ctx, q)
		if err != nil {
			return nil, err
		}
		for i := range page.Decisions {
			d := &page.Decisions[i]
			rep.Decisions++
			if j := slices.IndexFunc(rep.Packs, func(p ShadowPack) bool { return p.PackHash == d.PackHash }); j >= 0 {
				rep.Packs[j].Decisions++
			} else {
				rep.Packs = append(rep.Packs, ShadowPack{Pack: d.Pack, PackHash: d.PackHash, Decisions: 1})
			}
			from, to := string(d.EnforcedOutcome), string(d.Outcome)
			key := from + "\x00" + to
			t := byKey[key]
			if t == nil {
				t = &Transition{From: from, To: to, Examples: []string{}}
				byKey[key] = t
				rep.Transitions = append(rep.Transitions, t)
			}
			t.Count++
			if len(t.Examples) < examples {
				t.Examples = append(t.Examples, d.RecordID)
			}
			if !t.Changed() {
				continue
			}
			rep.Changed++
			enforced, err := st.Record(ctx, q.TenantID, d.RecordID)
			if err != nil {
				return nil, err
			}
			fired, cleared := shadowRules(enforced.Record.PolicyDecisions, d.PolicyDecisions)
			for _, r := range fired {
				if t.RulesFired == nil {
					t.RulesFired = map[string]int{}
				}
				t.RulesFired[r]++
			}
			for _, r := range cleared {
				if t.RulesCleared == nil {
					t.RulesCleared = map[string]int{}
				}
				t.RulesCleared[r]++
			}
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	sortTransitions(rep.Transitions)
	return rep, nil
}

// verdictRank orders verdicts as effects combine; unknown verdicts rank
// below allow.
var verdictRank = map[string]int{"allow": 0, "warn": 1, "replan_local": 2, "replan_upstream": 3, "require_approval": 4, "escalate": 5, "deny": 6}

// shadowRules names the checks (bundle:rule) that fired in the shadow
// decision at its strongest effect, and those that fired in the enforced
// decision and not in the shadow's. Bundles match by id whatever their
// version.
func shadowRules(enforced, shadow []writ.PolicyDecision) (fired, cleared []string) {
	strongest := 0
	for _, pd := range shadow {
		strongest = max(strongest, verdictRank[pd.Verdict])
	}
	firesInShadow := map[string]bool{}
	for _, pd := range shadow {
		if pd.Verdict == "allow" {
			continue
		}
		for _, r := range pd.RuleIDs {
			firesInShadow[unversioned(pd.BundleID)+":"+r] = true
			if strongest > 0 && verdictRank[pd.Verdict] == strongest {
				fired = append(fired, pd.BundleID+":"+r)
			}
		}
	}
	for _, pd := range enforced {
		if pd.Verdict == "allow" {
			continue
		}
		for _, r := range pd.RuleIDs {
			if !firesInShadow[unversioned(pd.BundleID)+":"+r] {
				cleared = append(cleared, pd.BundleID+":"+r)
			}
		}
	}
	return fired, cleared
}
