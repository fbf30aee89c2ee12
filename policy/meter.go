package policy

import (
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
// session and no run has nothing writ can count across, and is checked
// on the caller's figure alone, as before metering.

// MeterToolCalls names writ's count of a session's allowed checks in a
// decision's history (and in the record's history field). The name
// cannot be a pack's: pack aggregate names have no dot.
const MeterToolCalls = pack.MeterToolCalls

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

// meterPlan adds the meter's read (when the spec has a tool_calls budget)
// and its contribution to plan.
func (p *Policy) meterPlan(plan *HistoryPlan, r *Resolved, req *writ.CheckRequest) {
	m := p.meter
	if m == nil {
		return
	}
	group, ok := m.groupKey(nil, req)
	if !ok {
		return
	}
	if r.index.metered {
		plan.Reads = append(plan.Reads, HistoryKey{Name: MeterToolCalls, Aggregate: m.id, Group: group, Since: meterSince})
	}
	plan.Allowed = append(plan.Allowed, Contribution{Name: MeterToolCalls, Aggregate: m.id, Group: group, Amount: 1})
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

// WithoutMeter drops the meter's read from plan when pinned (a record's
// history) has no meter value: the record was decided before writ
// metered, and its replay rebuilds it as it was decided.
func WithoutMeter(plan HistoryPlan, pinned []writ.HistoryValue) HistoryPlan {
	for _, v := range pinned {
		if v.Name == MeterToolCalls {
			return plan
		}
	}
	reads := plan.Reads[:0:0]
	for _, k := range plan.Reads {
		if k.Name != MeterToolCalls {
			reads = append(reads, k)
		}
	}
	plan.Reads = reads
	return plan
}
