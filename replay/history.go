package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
)

// ClassHistory is a pinned history value that the store's history
// aggregates, as of the record's position in its chain, do not confirm
// (or, rebuilt under another pack, a different set of values read).
const ClassHistory = "changed_history"

// rebuiltHistory is the record's history field as the engine built it:
// the values the pack's conditions read for req, with the values the
// record pinned (by aggregate name) and the group keys redacted. A
// record decided before writ metered tool calls has no meter value, and
// is rebuilt without one (policy.WithoutMeter).
func rebuiltHistory(pin *pinned, r *policy.Resolved, req *writ.CheckRequest, now time.Time, pinned []writ.HistoryValue, params map[string]any) []writ.HistoryValue {
	plan := policy.WithoutMeter(pin.pol.HistoryPlanWith(r, req, now, params), pinned)
	for i := range plan.Reads {
		plan.Reads[i].Group = pin.red.String(plan.Reads[i].Group)
	}
	return plan.Pin(policy.PinnedHistory(pinned))
}

// checkHistory holds each value the record pinned against the store: the
// sum of the contributions of the records before it in the chain, in the
// pinned window. A value they do not give is a changed_history
// difference. Contributions are kept beside the chain, not in it, so
// this shows a record that was decided on a value the ledger does not
// back (or contribution rows that were tampered with), not a change of
// the sealed bytes.
func (rp *replaying) checkHistory(ctx context.Context) error {
	for i, v := range rp.head.History {
		read := ledger.HistoryRead{Aggregate: v.Aggregate, Group: v.Group, Since: v.Since}
		got, err := rp.r.store.HistoryAsOf(ctx, rp.head.TenantID, read, rp.audit.Seq)
		if err != nil {
			return fmt.Errorf("read history %s of record %s: %w", v.Aggregate, rp.head.RecordID, err)
		}
		if got != v.Value {
			rp.res.Differences = append(rp.res.Differences, Difference{Class: ClassHistory, Path: fmt.Sprintf("history[%d].value", i),
				Input: "history " + v.Aggregate, Recorded: jsonNumber(v.Value), Replayed: jsonNumber(got),
				Detail: fmt.Sprintf("the record pins %s = %s for group %q, but the ledger's history as of the record gives %s", v.Name, fmtFloat(v.Value), v.Group, fmtFloat(got))})
		}
	}
	return nil
}

// backtestHistory is the history a backtest decides a recorded check
// with under the candidate: the values the record pinned, by name, and
// for an aggregate of the candidate the record did not read, its value
// from the store as of the record.
func backtestHistory(ctx context.Context, st Store, pin *pinned, req *writ.CheckRequest, rec *writ.Record) (policy.History, error) {
	h := policy.PinnedHistory(rec.History)
	r, err := pin.pol.Resolve(req)
	if err != nil {
		return h, nil // decideCheck reports it
	}
	now := rec.Timestamp.UTC()
	for _, k := range pin.pol.HistoryPlanWith(r, req, now, pinnedParams(pin, rec.Params)).Reads {
		if _, ok := h[k.Name]; ok {
			continue
		}
		v, err := st.HistoryAsOf(ctx, rec.TenantID, ledger.HistoryRead{Aggregate: k.Aggregate, Group: pin.red.String(k.Group), Since: k.Since}, rec.Audit.Seq)
		if err != nil {
			return nil, fmt.Errorf("read history %s of record %s: %w", k.Aggregate, rec.RecordID, err)
		}
		if h == nil {
			h = policy.History{}
		}
		h[k.Name] = v
	}
	return h, nil
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func jsonNumber(f float64) json.RawMessage {
	b, _ := json.Marshal(f)
	return b
}
