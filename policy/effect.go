package policy

import (
	"fmt"

	"github.com/writhq/writ"
)

// Effect is what a rule does when its condition holds. Effects combine by
// severity: the strongest effect among the checks that fired decides.
type Effect int8

// Effects, weakest first.
const (
	Allow Effect = iota
	Warn
	ReplanLocal
	ReplanUpstream
	RequireApproval
	Escalate
	Deny
)

var effectNames = [...]string{"allow", "warn", "replan_local", "replan_upstream", "require_approval", "escalate", "deny"}

func (e Effect) String() string { return effectNames[e] }

// ParseEffect parses an effect name as written in a pack.
func ParseEffect(s string) (Effect, error) {
	for i, n := range effectNames {
		if n == s {
			return Effect(i), nil
		}
	}
	return Deny, fmt.Errorf("unknown effect %q", s)
}

// The outcome table: what each strongest effect means for the receipt
// and the record.
var effectTable = [...]struct {
	outcome  writ.Outcome
	mode     writ.Mode
	status   writ.Status
	safe     bool
	terminal bool // human_review_terminal
}{
	Allow:           {writ.OutcomeAllow, writ.ModeContinueDownstream, writ.StatusDecided, true, false},
	Warn:            {writ.OutcomeAllowWithWarning, writ.ModeContinueDownstream, writ.StatusDecided, true, false},
	ReplanLocal:     {writ.OutcomeReplanRequired, writ.ModeLocalReplan, writ.StatusDeferred, false, false},
	ReplanUpstream:  {writ.OutcomeReplanRequired, writ.ModeUpstreamReplan, writ.StatusDeferred, false, false},
	RequireApproval: {writ.OutcomeReplanRequired, writ.ModeHumanReview, writ.StatusEscalated, false, false},
	Escalate:        {writ.OutcomeReplanRequired, writ.ModeHumanReview, writ.StatusEscalated, false, true},
	Deny:            {writ.OutcomeGoalFailTerminal, writ.ModeTerminalBlock, writ.StatusRejected, false, false},
}

// Outcome is the receipt outcome of e as the strongest effect.
func (e Effect) Outcome() writ.Outcome { return effectTable[e].outcome }

// Mode is the disposition mode of e as the strongest effect.
func (e Effect) Mode() writ.Mode { return effectTable[e].mode }

// Status is the record status of e as the strongest effect.
func (e Effect) Status() writ.Status { return effectTable[e].status }

// SafeToExecute reports whether e as the strongest effect permits the
// side effect (once its record is durable).
func (e Effect) SafeToExecute() bool { return effectTable[e].safe }

// HumanReviewTerminal reports whether e ends the path in human review.
func (e Effect) HumanReviewTerminal() bool { return effectTable[e].terminal }
