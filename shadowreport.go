package writ

import (
	"context"
	"time"
)

// ShadowQuery selects the shadow decisions a shadow report sums up: a
// tenant's, optionally of one shadow pack and one decision key, in a
// window. From is inclusive, To exclusive; zero fields do not filter.
type ShadowQuery struct {
	TenantID    string
	PackHash    string
	DecisionKey string
	From, To    time.Time
	// Examples caps the example record ids per transition (default 3).
	Examples int
}

// ShadowReport compares what shadow packs decided with what was enforced,
// over a tenant's window: counts per enforced outcome → shadow outcome,
// with examples and, for changed outcomes, the rules responsible.
type ShadowReport struct {
	TenantID    string     `json:"tenant_id"`
	PackHash    string     `json:"pack_hash,omitempty"`
	DecisionKey string     `json:"decision_key,omitempty"`
	From        *time.Time `json:"from,omitempty"`
	To          *time.Time `json:"to,omitempty"`
	// Packs are the shadow packs seen (name@version and hash).
	Packs []ShadowPack `json:"packs"`
	// Decisions is how many shadow decisions the window holds; Changed how
	// many of them differ from the enforced outcome.
	Decisions int `json:"decisions"`
	Changed   int `json:"changed"`
	// Transitions count decisions per enforced outcome (From) → shadow
	// outcome (To), changed ones first, then by count.
	Transitions []*OutcomeTransition `json:"transitions"`
}

// ShadowPack names one shadow pack of a report.
type ShadowPack struct {
	Pack      string `json:"pack"`
	PackHash  string `json:"pack_hash"`
	Decisions int    `json:"decisions"`
}

// OutcomeTransition counts the decisions whose outcome went from From
// (what was recorded or enforced) to To (what a candidate or shadow pack
// decides).
type OutcomeTransition struct {
	From     string   `json:"from"`
	To       string   `json:"to"`
	Count    int      `json:"count"`
	Examples []string `json:"examples"`
	// RulesFired counts the checks (bundle:rule) that fired at the
	// strongest effect of the candidate's decisions; RulesCleared those
	// that fired in the recorded decisions and no longer fire. Both are
	// kept for changed outcomes only.
	RulesFired   map[string]int `json:"rules_fired,omitempty"`
	RulesCleared map[string]int `json:"rules_cleared,omitempty"`
	// Errors holds why records could not be decided under the candidate
	// (To is "error"), up to Examples of them.
	Errors []string `json:"errors,omitempty"`
}

// Changed reports whether the transition changes the outcome.
func (t *OutcomeTransition) Changed() bool { return t.From != t.To }

// ShadowReports reports what the shadow packs of a server decided
// against what it enforced. The replay package satisfies it.
type ShadowReports interface {
	ShadowReport(ctx context.Context, q ShadowQuery) (*ShadowReport, error)
}
