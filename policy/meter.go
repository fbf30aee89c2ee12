package policy

import (
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Metering: budgets count what writ saw, not what the caller says.
//
// A pack with a tool_calls budget on any spec gets one built-in history
// aggregate, MeterToolCalls: a count of the checks writ allowed
// (safe_to_execute true) in the same session, grouped like a pack
// aggregate with group_by: session (inputs_refs.session, else the
// workflow's run id), over all time. Every allowed check of the pack in a
// session contributes 1 to it, whatever its spec, the MCP gateway's calls
// included (each is a check); an execution report adds nothing, since its
// call was counted when it was allowed. A check of a spec with a
// tool_calls budget reads it in the same read as the pack's own
// aggregates, so the value is pinned in the record's history and
// re-checked in the append transaction like any other, and replay decides
// on the pinned value.
//
// The budget counts the larger of writ's figure (the allowed checks
// before this one, plus this one) and the caller's usage.tool_calls: a
// caller can add to what writ counted, never subtract. A check with no
// session and no run has nothing writ can count across: the budget
// refuses it with budget_unmetered (its on_exceed effect), so leaving
// the session out never lets a check through that naming it would not.
//
// A session is a name the caller chooses, so a fresh one starts a fresh
// count. A budget that a fresh session must not reset is an
// actor_tool_calls budget: MeterActorToolCalls counts the checks writ
// allowed the actor (the API key's principal in keyed mode, or the one
// it acts for) over the budget's window, whatever sessions they named.

// MeterToolCalls names writ's count of a session's allowed checks in a
// decision's history (and in the record's history field). The name
// cannot be a pack's: pack aggregate names have no dot.
const MeterToolCalls = pack.MeterToolCalls

// MeterActorToolCalls names writ's count of an actor's allowed checks in
// an actor_tool_calls budget's window.
const MeterActorToolCalls = pack.MeterActorToolCalls

// MeterNoSession names the value a check of a spec with a tool_calls
// budget pins when it names no session and no run: the budget refuses
// it (budget_unmetered) rather than count it on the caller's figure.
const MeterNoSession = pack.MeterNoSession

// noSessionGroup is the group MeterNoSession reads: a read needs one,
// and its value decides nothing.
const noSessionGroup = "(no session)"

// meterSince is the start of the meter's window: a session's whole life.
var meterSince = time.Unix(0, 0).UTC()

// newMeter returns the built-in tool-call meter of p, or nil when no
// spec of p has a tool_calls budget (then nothing is metered, and no
// check pays for it).
func newMeter(p *pack.Pack) *aggregate {
	for _, s := range p.Specs {
		if b := s.Budgets; b != nil && b.ToolCalls != nil {
			def := &pack.Aggregate{Name: MeterToolCalls, Kind: "count", GroupBy: "session"}
			return &aggregate{def: def, id: aggregateID(def)}
		}
	}
	return nil
}

// newActorMeter returns the built-in per-actor tool-call meter of p, or
// nil when no spec of p has an actor_tool_calls budget. It counts over
// all time; each budget reads it over its own window.
func newActorMeter(p *pack.Pack) *aggregate {
	for _, s := range p.Specs {
		if b := s.Budgets; b != nil && b.ActorToolCalls != nil {
			def := &pack.Aggregate{Name: MeterActorToolCalls, Kind: "count", GroupBy: "actor"}
			return &aggregate{def: def, id: aggregateID(def)}
		}
	}
	return nil
}

// meterPlan adds the meters' reads (when the spec has a tool_calls or
// actor_tool_calls budget) and their contributions to plan.
func (p *Policy) meterPlan(plan *HistoryPlan, r *Resolved, req *writ.CheckRequest, now time.Time) {
	if m := p.meter; m != nil {
		group, ok := m.groupKey(nil, req)
		switch {
		case ok:
			if r.index.metered {
				plan.Reads = append(plan.Reads, HistoryKey{Name: MeterToolCalls, Aggregate: m.id, Group: group, Since: meterSince})
			}
			plan.Allowed = append(plan.Allowed, Contribution{Name: MeterToolCalls, Aggregate: m.id, Group: group, Amount: 1})
		case r.index.metered:
			// Nothing to count across: pinned, so that the decision (and
			// its replay) refuses it; a record decided before this has no
			// such value, and replays as it was decided (WithoutMeter).
			plan.Reads = append(plan.Reads, HistoryKey{Name: MeterNoSession, Aggregate: m.id, Group: noSessionGroup, Since: meterSince})
		}
	}
	if m := p.actorMeter; m != nil {
		group, ok := m.groupKey(nil, req)
		if !ok {
			return
		}
		if w := r.index.actorWindow; w > 0 {
			plan.Reads = append(plan.Reads, HistoryKey{Name: MeterActorToolCalls, Aggregate: m.id, Group: group, Since: now.Add(-w)})
		}
		plan.Allowed = append(plan.Allowed, Contribution{Name: MeterActorToolCalls, Aggregate: m.id, Group: group, Amount: 1})
	}
}

// meteredToolCalls is writ's count of the session's tool calls with this
// one, when the decision read the meter.
func meteredToolCalls(h History) (float64, bool) {
	n, ok := h[MeterToolCalls]
	if !ok {
		return 0, false
	}
	return n + 1, true
}

// isMeter reports whether name is one of writ's built-in meters.
func isMeter(name string) bool {
	return name == MeterToolCalls || name == MeterActorToolCalls || name == MeterNoSession
}

// WithoutMeter drops from plan the reads of writ's built-in meters that
// pinned (a record's history) has no value of: the record was decided
// before writ metered them, and its replay rebuilds it as it was
// decided.
func WithoutMeter(plan HistoryPlan, pinned []writ.HistoryValue) HistoryPlan {
	reads := plan.Reads[:0:0]
	for _, k := range plan.Reads {
		if isMeter(k.Name) && !slices.ContainsFunc(pinned, func(v writ.HistoryValue) bool { return v.Name == k.Name }) {
			continue
		}
		reads = append(reads, k)
	}
	plan.Reads = reads
	return plan
}
