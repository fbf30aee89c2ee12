package ledgertest

import (
	"strings"
	"time"

	"github.com/writhq/writ"
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
