package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/writhq/writ"
)

// FindingApprovalMismatch is an approval request or event that its
// records do not bear out.
const FindingApprovalMismatch = "approval_mismatch"

// ApprovalSource is what VerifyApprovals reads.
type ApprovalSource interface {
	Tenants(ctx context.Context) ([]string, error)
	Approvals(ctx context.Context, q writ.ApprovalQuery, now time.Time) (*writ.ApprovalPage, error)
	Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error)
}

// VerifyApprovals checks every approval request and event against the
// sealed records that state them. Requests and events are not sealed
// themselves; the records written with them are, so each must agree:
//
//   - the request's record is the check that asked, of its decision key,
//     status ESCALATED;
//   - an approved or denied event's record is the decision record of that
//     request (decision key approval:<gate>, outputs.approval_id, the
//     approver as its HUMAN actor, DECIDED or REJECTED);
//   - a redeemed event's record was allowed (DECIDED) with the approval in
//     its approvals[]: the gate, the approver and the decision time.
//
// A record that exists and passes Verify is trustworthy; an event that
// names a missing record, or a record that says otherwise, is a finding.
func VerifyApprovals(ctx context.Context, src ApprovalSource, now time.Time) ([]Finding, error) {
	tenants, err := src.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, tenant := range tenants {
		q := writ.ApprovalQuery{TenantID: tenant, Limit: 1000}
		for {
			page, err := src.Approvals(ctx, q, now)
			if err != nil {
				return nil, fmt.Errorf("tenant %s: approvals: %w", tenant, err)
			}
			for i := range page.Approvals {
				fs, err := verifyApproval(ctx, src, &page.Approvals[i])
				if err != nil {
					return nil, err
				}
				out = append(out, fs...)
			}
			if page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
	}
	return out, nil
}

func verifyApproval(ctx context.Context, src ApprovalSource, a *writ.ApprovalRequest) ([]Finding, error) {
	var out []Finding
	bad := func(recordID, format string, args ...any) {
		out = append(out, Finding{TenantID: a.TenantID, RecordID: recordID, Kind: FindingApprovalMismatch,
			Detail: "approval " + a.ApprovalID + ": " + fmt.Sprintf(format, args...)})
	}
	read := func(id, what string) (*writ.Record, error) {
		sr, err := src.Record(ctx, a.TenantID, id)
		if writ.ErrorCode(err) == writ.ENOTFOUND {
			bad(id, "its %s record %s is not in the ledger", what, id)
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("approval %s: record %s: %w", a.ApprovalID, id, err)
		}
		return &sr.Record, nil
	}
	asked, err := read(a.RecordID, "asking")
	if err != nil {
		return nil, err
	}
	if asked != nil && (asked.DecisionKey != a.Binding.DecisionKey || asked.Status != writ.StatusEscalated || asked.DecisionID != a.DecisionID) {
		bad(a.RecordID, "the asking record is %s %s (decision %s), not the ESCALATED check of %s (decision %s)", asked.DecisionKey, asked.Status, asked.DecisionID, a.Binding.DecisionKey, a.DecisionID)
	}
	var decision *writ.ApprovalEvent
	for i := range a.Events {
		ev := &a.Events[i]
		rec, err := read(ev.RecordID, ev.Kind)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			continue
		}
		switch ev.Kind {
		case writ.ApprovalEventApproved, writ.ApprovalEventDenied, writ.ApprovalEventWithdrawn:
			decision = ev
			want := writ.StatusDecided
			if ev.Kind != writ.ApprovalEventApproved {
				want = writ.StatusRejected
			}
			if ev.Kind == writ.ApprovalEventWithdrawn && rec.Outputs["outcome"] != writ.ApprovalWithdrawn {
				bad(ev.RecordID, "the withdrawn event names record %s, whose outcome is %v, not withdrawn", ev.RecordID, rec.Outputs["outcome"])
			}
			if rec.DecisionKey != "approval:"+a.GateID || rec.Outputs["approval_id"] != a.ApprovalID || rec.Actor.ID != ev.Actor || rec.Status != want {
				bad(ev.RecordID, "the %s event names record %s, which is %s %s by %s for approval %v", ev.Kind, ev.RecordID, rec.DecisionKey, rec.Status, rec.Actor.ID, rec.Outputs["approval_id"])
			}
		case writ.ApprovalEventRedeemed:
			ok := decision != nil && decision.Kind == writ.ApprovalEventApproved && (rec.Status == writ.StatusDecided || rec.Status == writ.StatusInFlight)
			if ok {
				ok = false
				for _, ap := range rec.Approvals {
					ok = ok || ap.GateID == a.GateID && ap.Approver == decision.Actor && ap.DecidedAt.Equal(decision.At)
				}
			}
			if !ok {
				bad(ev.RecordID, "the redeemed event names record %s, which was not allowed with this approval", ev.RecordID)
			}
		}
	}
	return out, nil
}
