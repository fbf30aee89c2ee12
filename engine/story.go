package engine

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
)

// Decision returns the whole story of one decision; see writ.Lifecycle.
func (e *Engine) Decision(ctx context.Context, tenantID, decisionID string) (*writ.DecisionStory, error) {
	if err := needTenant(tenantID); err != nil {
		return nil, err
	}
	if decisionID == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "decision_id is required", Details: []writ.Detail{{Field: "decision_id", Message: "required"}}}
	}
	recs, err := e.store.DecisionRecords(ctx, tenantID, decisionID)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, writ.Errorf(writ.ENOTFOUND, "decision %q not found", decisionID)
	}
	verdicts, err := e.citingVerdicts(ctx, recs)
	if err != nil {
		return nil, err
	}
	recs = append(recs, verdicts...)
	slices.SortFunc(recs, func(a, b writ.StoredRecord) int { return int(a.Record.Audit.Seq - b.Record.Audit.Seq) })
	recs = slices.CompactFunc(recs, func(a, b writ.StoredRecord) bool { return a.Record.RecordID == b.Record.RecordID })

	st := &writ.DecisionStory{TenantID: tenantID, DecisionID: decisionID, Records: make([]writ.StoryRecord, 0, len(recs)), Approvals: []writ.ApprovalRequest{}}
	var approvalIDs []string
	for i := range recs {
		rec := &recs[i].Record
		sr := writ.StoryRecord{Kind: record.StoryKind(rec.DecisionKey), RecordID: rec.RecordID, Status: rec.Status, Timestamp: rec.Timestamp, Seal: rec.Audit, Record: recs[i].Raw,
			Supersedes: rec.Supersedes}
		if record.AnnotationKind(rec.DecisionKey) == "" {
			links, err := RecordLinks(ctx, e.store, tenantID, rec.RecordID)
			if err != nil {
				return nil, err
			}
			sr.SupersededBy, sr.Retracted, sr.Feedback, sr.LastReplay = links.SupersededBy, links.Retracted, links.Feedback, links.Replay
			st.State.Retracted = st.State.Retracted || links.Retracted
			for _, id := range links.SupersededBy {
				if !slices.ContainsFunc(recs, func(r writ.StoredRecord) bool { return r.Record.RecordID == id }) {
					st.State.CorrectedBy = append(st.State.CorrectedBy, id)
				}
			}
		}
		switch sr.Kind {
		case writ.StoryCheck:
			receipt, err := e.storedReceipt(ctx, &recs[i])
			if err != nil && writ.ErrorCode(err) != writ.ENOTFOUND {
				return nil, err
			}
			sr.Receipt = receipt
			var rc writ.Receipt
			if json.Unmarshal(receipt, &rc) == nil {
				approvalIDs = append(approvalIDs, rc.Metadata.ApprovalIDs...)
				st.State.Outcome, st.State.SafeToExecute = rc.Outcome, rc.SafeToExecute
			}
			st.State.Status = rec.Status
			if record.Permits(rec) {
				st.State.PermitRecordID, st.State.ValidUntil, st.State.ReportRequired = rec.RecordID, nil, false
				if x := rec.Execution; x != nil {
					st.State.ValidUntil, st.State.ReportRequired = x.ValidUntil, x.ReportRequired
				}
			}
		case writ.StoryApproval:
			if id, ok := rec.Outputs["approval_id"].(string); ok {
				approvalIDs = append(approvalIDs, id)
			}
		case writ.StoryExecution:
			st.State.Status = rec.Status
			if x := rec.Execution; x != nil {
				st.State.Execution = x.Status
			}
			receipt, err := e.storedReceipt(ctx, &recs[i])
			if err != nil && writ.ErrorCode(err) != writ.ENOTFOUND {
				return nil, err
			}
			sr.Receipt = receipt
		}
		st.Records = append(st.Records, sr)
	}
	st.State.InFlight = st.State.ReportRequired && st.State.Execution == ""
	now := e.now().UTC()
	slices.Sort(approvalIDs)
	for _, id := range slices.Compact(approvalIDs) {
		a, err := e.store.Approval(ctx, tenantID, id, now)
		if writ.ErrorCode(err) == writ.ENOTFOUND {
			continue
		} else if err != nil {
			return nil, err
		}
		st.Approvals = append(st.Approvals, *a)
	}
	return st, nil
}

// citingVerdicts returns the step verdicts whose records cite a permit of
// the decision: the attempts of the run's step the permit was observed
// for, made after it.
func (e *Engine) citingVerdicts(ctx context.Context, recs []writ.StoredRecord) ([]writ.StoredRecord, error) {
	var out []writ.StoredRecord
	for i := range recs {
		permit := &recs[i].Record
		if !record.Permits(permit) {
			continue
		}
		obs, _, err := e.observedCall(ctx, permit)
		if err != nil || obs == nil {
			if writ.ErrorCode(err) == writ.ENOTFOUND {
				err = nil // an envelope not on file: the story is what the records say
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		evs, err := e.store.RunEvents(ctx, permit.TenantID, obs.RunID)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if ev.Kind != ledger.StepAttempt || ev.StepID != obs.StepID || ev.Seq < obs.Seq || ev.RecordID == "" {
				continue
			}
			sr, err := e.store.Record(ctx, permit.TenantID, ev.RecordID)
			if err != nil {
				return nil, err
			}
			if slices.Contains(sr.Record.EvidenceRefs, "record:"+permit.RecordID) {
				out = append(out, *sr)
			}
		}
	}
	return out, nil
}

// InFlight lists the decisions whose permit awaits its execution report;
// see writ.Lifecycle.
func (e *Engine) InFlight(ctx context.Context, q writ.InFlightQuery) (*writ.InFlightPage, error) {
	if err := needTenant(q.TenantID); err != nil {
		return nil, err
	}
	limit, err := ledger.PageSize(q.Limit)
	if err != nil {
		return nil, err
	}
	var after int64
	if q.Cursor != "" {
		if after, err = ledger.DecodeCursor(q.Cursor); err != nil {
			return nil, err
		}
	}
	now := e.now().UTC()
	page := &writ.InFlightPage{Decisions: []writ.InFlightDecision{}}
	// Records still in flight but not expired by ExpiredBy are skipped, so
	// a page may take several reads; each read moves after forward.
	for {
		recs, err := e.store.InFlight(ctx, q.TenantID, after, limit+1)
		if err != nil {
			return nil, err
		}
		for _, sr := range recs {
			if len(page.Decisions) == limit {
				page.NextCursor = ledger.EncodeCursor(after)
				return page, nil
			}
			rec := &sr.Record
			after = rec.Audit.Seq
			d := writ.InFlightDecision{DecisionID: rec.DecisionID, RecordID: rec.RecordID, DecisionKey: rec.DecisionKey, DecidedAt: rec.Timestamp, TraceID: rec.TraceID}
			if x := rec.Execution; x != nil && x.ValidUntil != nil {
				d.ValidUntil = x.ValidUntil
				d.Expired = now.After(*x.ValidUntil)
			}
			if !q.ExpiredBy.IsZero() && (d.ValidUntil == nil || !d.ValidUntil.Before(q.ExpiredBy)) {
				continue
			}
			page.Decisions = append(page.Decisions, d)
		}
		if len(recs) <= limit {
			return page, nil
		}
	}
}
