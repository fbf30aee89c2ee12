package main

import (
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

// zeroHistory decides a generated record as if the tenant had no history
// yet: every aggregate its rules read is 0. It returns the values and
// what the record pins.
func zeroHistory(pol *policy.Policy, r *policy.Resolved, req *writ.CheckRequest, at time.Time) (policy.History, []writ.HistoryValue) {
	plan := pol.HistoryPlan(r, req, at)
	if len(plan.Reads) == 0 {
		return nil, nil
	}
	h := policy.History{}
	red := record.NewRedactor(pol.Pack.Controls.Redaction)
	for i, k := range plan.Reads {
		h[k.Name] = 0
		plan.Reads[i].Group = red.String(k.Group) // as the engine pins it
	}
	return h, plan.Pin(h)
}

// contribute gives each generated entry (the from-th record onwards) the
// contributions its check makes to the pack's aggregates that count
// allowed decisions, spread over groups groups ("g-0", "g-1", …) rather
// than the request's own group, so that a large ledger has a realistic
// history index to read (see docs/scale.md). The records' pinned values
// (for the request's own group, which gets no contributions) stay 0.
func (t *template) contribute(entries []*ledger.Entry, from, groups int) error {
	r, err := t.pol.Resolve(t.req)
	if err != nil {
		return err
	}
	plan := t.pol.HistoryPlan(r, t.req, t.rec.Timestamp)
	for i, e := range entries {
		for _, c := range plan.Allowed {
			e.Contributions = append(e.Contributions, ledger.Contribution{Aggregate: c.Aggregate, Group: fmt.Sprintf("g-%d", (from+i)%groups), At: e.Record.Timestamp, Amount: c.Amount})
		}
	}
	return nil
}
