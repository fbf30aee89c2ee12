package engine

import (
	"context"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
)

// maxHistoryAttempts bounds how often a check is decided again because a
// history value it read changed before its record could be appended
// (ledger.RefusedHistory). Every refusal means another check of the same
// tenant and group was appended first, so each round settles at least
// one of the racing checks: 16 concurrent checks of one group need at
// most 16 rounds. Past the bound the check fails closed (EUNAVAILABLE),
// and the caller retries it later.
const maxHistoryAttempts = 64

// errHistoryBusy is the cause of a check that failed closed after
// maxHistoryAttempts refusals.
var errHistoryBusy = &writ.Error{Code: writ.EUNAVAILABLE, Message: "the history aggregates the check reads kept changing"}

// history is what one decision of a check reads of and adds to the
// tenant's history aggregates.
type history struct {
	plan   policy.HistoryPlan
	values policy.History
	reads  []ledger.HistoryRead
}

// readHistory computes the check's history plan at now and reads the
// values it needs from the store (an indexed read per aggregate, never a
// scan of records). Group keys are redacted with the pack's patterns
// before they are read or stored, as every id in a record is.
func (e *Engine) readHistory(ctx context.Context, r *policy.Resolved, rq *writ.CheckRequest, now time.Time, params map[string]any) (*history, error) {
	h := &history{plan: e.policy.HistoryPlanWith(r, rq, now, params)}
	e.redactGroups(&h.plan)
	if len(h.plan.Reads) == 0 {
		return h, nil
	}
	h.reads = make([]ledger.HistoryRead, len(h.plan.Reads))
	for i, k := range h.plan.Reads {
		h.reads[i] = ledger.HistoryRead{Aggregate: k.Aggregate, Group: k.Group, Since: k.Since}
	}
	vals, err := e.store.HistoryValues(ctx, rq.TenantID, h.reads)
	if err != nil {
		return nil, err
	}
	h.values = make(policy.History, len(vals))
	for i, v := range vals {
		h.reads[i].Value = v
		h.values[h.plan.Reads[i].Name] = v
	}
	return h, nil
}

// redactGroups redacts the plan's group keys. An aggregate's group is
// usually both read and added to (a session's meter, a customer's
// velocity), so each distinct key is redacted once: redaction runs every
// pattern of the pack over the key.
func (e *Engine) redactGroups(p *policy.HistoryPlan) {
	if !e.redactor.Active() {
		return
	}
	done := make(map[string]string, len(p.Reads))
	redact := func(g *string) {
		r, ok := done[*g]
		if !ok {
			r = e.redactor.String(*g)
			done[*g] = r
		}
		*g = r
	}
	for i := range p.Reads {
		redact(&p.Reads[i].Group)
	}
	for i := range p.Allowed {
		redact(&p.Allowed[i].Group)
	}
	for i := range p.Executed {
		redact(&p.Executed[i].Group)
	}
}

// pin sets what the entry of a decided check carries for the history
// aggregates: the values read (pinned in the record as rec.History, and
// re-checked by the store inside the append transaction), and, when the
// receipt permits execution, the contributions of the aggregates that
// count allowed decisions, and (pending until an execution report says
// the decision succeeded, see ExecutedDecision) those of the aggregates
// that count executed ones; an aggregate's filter_expression is evaluated
// here, over the check and its outcome (policy.HistoryPlan.Counted), so
// the store holds only the decisions it counts and a read stays one
// indexed range sum.
func (h *history) pin(entry *ledger.Entry, rc *writ.Receipt, now time.Time) {
	entry.HistoryReads = h.reads
	if rc.SafeToExecute {
		allowed, executed := h.plan.Counted(rc.Outcome)
		entry.Contributions = contributions(allowed, now)
		entry.PendingContributions = contributions(executed, now)
	}
}

// contributions turns the plan's contributions into the ledger's, at at.
func contributions(cs []policy.Contribution, at time.Time) []ledger.Contribution {
	if len(cs) == 0 {
		return nil
	}
	out := make([]ledger.Contribution, len(cs))
	for i, c := range cs {
		out[i] = ledger.Contribution{Aggregate: c.Aggregate, Group: c.Group, At: at, Amount: c.Amount, Usage: c.Usage}
	}
	return out
}

// ExecutedDecision is the hook for execution reports: the engine code
// that appends a report's record (a ledger.Entry under the same
// decision_id) calls it on that entry when the report's status is
// succeeded. The store then adds, in the report's append transaction,
// what the decision contributes to the aggregates with filter: executed:
// the check computed those contributions when it was decided (from the
// unredacted request, timed at the decision) and its entry stored them
// as pending (ledger.Entry.PendingContributions). A decision the tenant
// does not have, or one that counts toward no such aggregate, adds
// nothing. It must be called at most once per decision: the reports'
// one-report-per-decision rule is what keeps a decision counted once.
//
// usage is the execution's own usage, when the report carries it: a
// pending sum of a usage dimension (a session's tokens, say) then adds
// the report's figure instead of the one the check declared.
func ExecutedDecision(report *ledger.Entry, decisionID string, usage *writ.Usage) {
	report.Executes, report.ExecutedUsage = decisionID, usage
}

// pinnedHistory is the record's history field.
func pinnedHistory(h *history) []writ.HistoryValue {
	return h.plan.Pin(h.values)
}

// shadowHistory reads the history values the shadow pack's conditions
// read for the check, so that a shadow pack with history rules is
// decided on the tenant's real history, not failing closed. They are
// read outside the append transaction and not re-checked in it: a shadow
// decision is never enforced. A failed read leaves the values out (the
// shadow's history conditions then fail closed, as they would live). The
// read is on the check's path, so it runs under the check's context: a
// stalled store does not hold the check past its caller's deadline.
func (e *Engine) shadowHistory(ctx context.Context, sh *policy.Policy, r *policy.Resolved, rq *writ.CheckRequest, now time.Time, params map[string]any) policy.History {
	plan := sh.HistoryPlanWith(r, rq, now, params)
	if len(plan.Reads) == 0 {
		return nil
	}
	reads := make([]ledger.HistoryRead, len(plan.Reads))
	for i, k := range plan.Reads {
		reads[i] = ledger.HistoryRead{Aggregate: k.Aggregate, Group: e.redactor.String(k.Group), Since: k.Since}
	}
	vals, err := e.store.HistoryValues(ctx, rq.TenantID, reads)
	if err != nil {
		e.log.Warn("shadow pack's history values could not be read", "pack", sh.Pack.ID(), "err", err)
		return nil
	}
	h := make(policy.History, len(vals))
	for i, v := range vals {
		h[plan.Reads[i].Name] = v
	}
	return h
}
