package ledgertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// ScaleQueries are the record queries of docs/scale.md's table, for a
// ledger made by `writ ledger generate --records 1000000` (one record a
// second of tenant from 2026-01-01, so the last is at 2026-01-12T13:46:39Z),
// each with a page of 50. The stores' TestQueriesAtScale time them.
func ScaleQueries(tenant string) []writ.RecordQuery {
	day := func(d int) time.Time { return time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC) }
	last := time.Date(2026, 1, 12, 13, 46, 39, 0, time.UTC)
	q := func(f func(*writ.RecordQuery)) writ.RecordQuery {
		r := writ.RecordQuery{TenantID: tenant, Limit: 50}
		f(&r)
		return r
	}
	return []writ.RecordQuery{
		q(func(r *writ.RecordQuery) {}),
		q(func(r *writ.RecordQuery) { r.From = last.Add(-30 * time.Second) }),
		q(func(r *writ.RecordQuery) { r.From, r.To = day(5), day(5).Add(time.Hour) }),
		q(func(r *writ.RecordQuery) { r.From = last.Add(-24 * time.Hour) }),
		q(func(r *writ.RecordQuery) { r.From, r.To = day(5), day(6) }),
		q(func(r *writ.RecordQuery) { r.Newest = true }),
		q(func(r *writ.RecordQuery) { r.Newest, r.From, r.To = true, day(5), day(6) }),
		q(func(r *writ.RecordQuery) { r.Status = writ.StatusDeferred }),
		q(func(r *writ.RecordQuery) { r.SubjectID = "customer:cus_77" }),
		q(func(r *writ.RecordQuery) { r.DecisionKey = "support.refund.execute" }),
	}
}

// DescribeQuery spells the filters of q that are set, for a test log.
func DescribeQuery(q writ.RecordQuery) string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+"="+v)
		}
	}
	add("decision_key", q.DecisionKey)
	add("status", string(q.Status))
	add("outcome", string(q.Outcome))
	add("subject_id", q.SubjectID)
	add("trace_id", q.TraceID)
	add("decision_key_prefix", q.DecisionKeyPrefix)
	add("subject_prefix", q.SubjectPrefix)
	add("approval_mode_effective", string(q.ApprovalMode))
	add("policy_decision_id", q.PolicyDecisionID)
	add("approver", q.Approver)
	add("refers_to", q.RefersTo)
	add("scorecard", q.Scorecard)
	if !q.From.IsZero() {
		add("from", q.From.Format(time.RFC3339))
	}
	if !q.To.IsZero() {
		add("to", q.To.Format(time.RFC3339))
	}
	if q.Newest {
		add("order", "newest")
	}
	return strings.Join(parts, " ")
}

// ScaleApprovals gives the tenant of a ledger made for ScaleQueries, if it
// has no approval request yet, 10,000 requests created at now, all but
// the last 50 then decided, appended in batches of 500 after its records
// (with times after ScaleQueries' last record): the pending list then
// has 9,950 decided requests to pass before its 50. The stores'
// TestQueriesAtScale time that list.
func ScaleApprovals(t *testing.T, st ledger.Store, tenant string, now time.Time) {
	page, err := st.Approvals(t.Context(), writ.ApprovalQuery{TenantID: tenant, Limit: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Approvals) > 0 {
		return
	}
	const n, pending, batch = 10000, 50, 500
	last := time.Date(2026, 1, 12, 13, 46, 39, 0, time.UTC)
	seq := 0
	record := func() *writ.Record {
		seq++
		r := NewRecord(tenant, 2_000_000+seq)
		r.Timestamp = last.Add(time.Duration(seq) * time.Second)
		return r
	}
	id := func(i int) string { return fmt.Sprintf("apr_scale_%05d", i) }
	var es []*ledger.Entry
	flush := func() {
		if len(es) > 0 {
			mustAppend(t, st, es...)
			es = es[:0]
		}
	}
	for i := range n {
		r := record()
		e := NewEntry(r)
		e.NewApprovals = []ledger.NewApproval{NewApproval(r, id(i), "GATE_FINANCE", NewBinding("payments.refund", i), now, 1)}
		if es = append(es, e); len(es) == batch {
			flush()
		}
	}
	flush()
	for i := range n - pending {
		ev := writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "user:ops-lead", Reason: "checked", At: now}
		if es = append(es, NewApprovalEntry(record(), id(i), ev)); len(es) == batch {
			flush()
		}
	}
	flush()
}
