package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/workflow"
)

var _ writ.Lifecycle = (*Engine)(nil)

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// maxReportText bounds the free-text members of an execution report.
const maxReportText = 4096

// validateReport checks the shape of an execution report.
func validateReport(r *writ.ExecutionReport) error {
	var ds []writ.Detail
	bad := func(field, format string, args ...any) {
		ds = append(ds, writ.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if r.TenantID == "" || !tenantPattern.MatchString(r.TenantID) {
		bad("tenant_id", "a valid tenant_id is required")
	}
	if r.DecisionID == "" {
		bad("decision_id", "required")
	}
	switch r.Status {
	case writ.ExecutionSucceeded, writ.ExecutionFailed, writ.ExecutionNotExecuted:
	case "":
		bad("status", "required (succeeded, failed or not_executed)")
	default:
		bad("status", "must be succeeded, failed or not_executed, not %q", r.Status)
	}
	if r.ResultDigest != "" && !digestPattern.MatchString(r.ResultDigest) {
		bad("result_digest", `must be "sha256:" and 64 lowercase hex digits (a digest of the result, never the result)`)
	}
	if r.Error != nil {
		if r.Status == writ.ExecutionSucceeded {
			bad("error", "a succeeded execution carries no error")
		}
		if r.Error.Code == "" {
			bad("error.code", "required")
		}
	}
	if r.StartedAt != nil && r.EndedAt != nil && r.EndedAt.Before(*r.StartedAt) {
		bad("ended_at", "is before started_at")
	}
	if r.TraceID != "" && !writ.ValidTraceID(r.TraceID) {
		bad("trace_id", "must be a W3C trace id: 32 lowercase hex digits, not all zero")
	}
	if a := r.Actor; a != nil {
		switch a.Type {
		case writ.ActorAgent, writ.ActorHuman, writ.ActorService:
		default:
			bad("actor.type", "must be AGENT, HUMAN or SERVICE, not %q", a.Type)
		}
		if a.ID == "" {
			bad("actor.id", "required")
		}
	}
	if u := r.Usage; u != nil && (u.Tokens < 0 || u.ToolCalls < 0 || u.CostUSDCents < 0 || u.WallClockMS < 0) {
		bad("usage", "must not be negative")
	}
	if len(r.IdempotencyKey) > maxKeyLen {
		bad("idempotency_key", "longer than %d bytes", maxKeyLen)
	}
	texts := map[string]string{"tool_call_id": r.ToolCallID, "tool_result_id": r.ToolResultID, "reversal_token": r.ReversalToken}
	if r.Error != nil {
		texts["error.code"], texts["error.message"] = r.Error.Code, r.Error.Message
	}
	for field, s := range texts {
		if len(s) > maxReportText {
			bad(field, "longer than %d bytes", maxReportText)
		}
	}
	if len(ds) == 0 {
		return nil
	}
	slices.SortFunc(ds, func(a, b writ.Detail) int { return strings.Compare(a.Field, b.Field) })
	return &writ.Error{Code: writ.EINVALID, Message: "invalid execution report: " + detailsSummary(ds), Details: ds}
}

// lastCheck returns the latest check record of a decision's records, and
// whether it permitted the effect.
func lastCheck(recs []writ.StoredRecord) (*writ.StoredRecord, bool) {
	for i := len(recs) - 1; i >= 0; i-- {
		if sr := &recs[i]; record.StoryKind(sr.Record.DecisionKey) == writ.StoryCheck {
			return sr, record.Permits(&sr.Record)
		}
	}
	return nil, false
}

// storedReceipt reads the receipt answered with a record and checks it
// against the sealed record, which binds it (ledger.CheckStoredReceipt):
// a receipt edited behind writ's back is never served.
func (e *Engine) storedReceipt(ctx context.Context, sr *writ.StoredRecord) ([]byte, error) {
	raw, err := e.store.Receipt(ctx, sr.Record.TenantID, sr.Record.RecordID)
	if err != nil {
		return nil, err
	}
	if err := ledger.CheckStoredReceipt(sr.Raw, raw); err != nil {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: fmt.Sprintf("the stored receipt of record %s does not match its sealed record (writ ledger verify names it); it is not served", sr.Record.RecordID), Err: fmt.Errorf("%w: %w", writ.ErrIntegrity, err)}
	}
	return raw, nil
}

// ReportExecution records an execution report; see writ.Lifecycle.
func (e *Engine) ReportExecution(ctx context.Context, r *writ.ExecutionReport) (*writ.ExecutionAck, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty execution report")
	}
	if err := validateReport(r); err != nil {
		return nil, err
	}
	// The reporter is bound to its credentials, and only the key that
	// made the decision (or one that may act for its actor) reports on
	// it: checked before anything is looked up or written.
	reporter, err := e.reporter(ctx, r)
	if err != nil {
		return nil, err
	}
	// The digest of the report as received tells a repeat from another
	// report.
	digest, err := record.CanonicalDigest(r)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if prior, err := e.store.Report(ctx, r.TenantID, r.DecisionID); err != nil {
		return nil, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision's execution report could not be looked up; retry", Err: err}
	} else if prior != nil {
		ack, err := e.repeatedReport(ctx, r.TenantID, r.DecisionID, prior, digest)
		if ack != nil {
			e.linkReportedDecision(ctx, ack)
		}
		return ack, err
	}
	recs, err := e.store.DecisionRecords(ctx, r.TenantID, r.DecisionID)
	if err != nil {
		return nil, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision could not be read; retry", Err: err}
	}
	last, permitted := lastCheck(recs)
	if last == nil {
		return nil, writ.Errorf(writ.ENOTFOUND, "decision %q not found", r.DecisionID)
	}
	target := &last.Record
	if r.Status == writ.ExecutionSucceeded && !permitted {
		return nil, writ.Errorf(writ.ECONFLICT, "decision %s did not permit execution (its record %s is %s), so it cannot be reported succeeded", r.DecisionID, target.RecordID, target.Status)
	}
	rq := *r
	if reporter != nil {
		rq.Actor = reporter
	}
	now := e.now().UTC()
	if rq.TraceID == "" {
		// The report joins the permit's trace: one decision, one story.
		rq.TraceID = target.TraceID
	}
	linkDecisionTrace(ctx, target.TraceID, r.DecisionID)
	// The call goes last in its run's tool transcript: when another
	// report takes that place first, the record is built again after it
	// (the append transaction is the arbiter, see ledger.TranscriptClaim).
	for attempt := 1; ; attempt++ {
		ack, again, err := e.appendReport(ctx, r, &rq, target, digest, now)
		if !again || err != nil {
			return ack, err
		}
		if attempt == maxTranscriptAttempts {
			return nil, writ.Errorf(writ.EUNAVAILABLE, "the execution report's place in its tool transcript kept being taken by other reports; retry")
		}
	}
}

// appendReport builds the record of an execution report and appends it
// last in its call's tool transcript. again is set when another report
// took that place first: nothing was appended, and the report is to be
// built again.
func (e *Engine) appendReport(ctx context.Context, r, rq *writ.ExecutionReport, target *writ.Record, digest string, now time.Time) (_ *writ.ExecutionAck, again bool, _ error) {
	place, err := e.transcriptPlace(ctx, target)
	if err != nil {
		return nil, false, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the tool transcript of the decision's call could not be read; retry", Err: err}
	}
	rec, envelope, err := record.ExecutionReport(e.policy.Pack, e.redactor, rq, target, e.newID("dr_", now), now)
	if err != nil {
		return nil, false, err
	}
	if err := AddTranscript(rec, rq, target, place); err != nil {
		return nil, false, err
	}
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, false, &writ.Error{Code: writ.EINTERNAL, Message: "the execution report's record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	ack := &writ.ExecutionAck{TenantID: rec.TenantID, DecisionID: rec.DecisionID, RecordID: rec.RecordID, ReportedFor: target.RecordID,
		Status: rec.Status, Execution: rq.Status, Findings: rec.Execution.Findings, TraceID: rec.TraceID}
	if ack.Findings == nil {
		ack.Findings = []writ.Reason{}
	}
	ackJSON, err := json.Marshal(ack)
	if err != nil {
		return nil, false, err
	}
	entry := &ledger.Entry{Record: rec, Receipt: ackJSON,
		Envelope: envelope,
		Report:   &ledger.ReportClaim{DecisionID: rec.DecisionID, ReportDigest: digest}}
	claimTranscript(entry)
	var runStart *ledger.RunEvent
	if rq.Status == writ.ExecutionSucceeded {
		if entry.RunEvent, runStart, err = e.executedEvent(ctx, target, rec, now); err != nil {
			return nil, false, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the permit's run could not be read; retry", Err: err}
		}
		// The aggregates that count executed decisions count this one
		// now: the store adds, in this entry's transaction, what the
		// permit stored as pending when it was decided (timed at the
		// decision, from its unredacted request under its pack).
		ExecutedDecision(entry, target.DecisionID, rq.Usage)
	}
	// The record binds its acknowledgement and run event before it is
	// sealed, as every record does (ledger.Bind).
	if err := ledger.Bind(entry, runStart); err != nil {
		return nil, false, err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, false, fmt.Errorf("canonicalize execution report record: %w", err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		return nil, false, notRecorded("the execution report", err)
	}
	if entry.Prior != nil {
		// Another report of the same decision committed first, or another
		// report took this one's place in its transcript.
		prior, err := e.store.Report(ctx, r.TenantID, r.DecisionID)
		if err != nil {
			return nil, false, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision's execution report could not be looked up; retry", Err: err}
		}
		if prior == nil {
			return nil, true, nil
		}
		ack, err := e.repeatedReport(ctx, r.TenantID, r.DecisionID, prior, digest)
		return ack, false, err
	}
	return ack, false, nil
}

// reporter binds an execution report's actor to ctx's credentials
// (writ.BindActor), and refuses a report from a key that may not act on
// the decision (writ.MayActOn). It returns nil when the report names no
// actor in development mode: its record then names the decision's actor.
func (e *Engine) reporter(ctx context.Context, r *writ.ExecutionReport) (*writ.Actor, error) {
	p := writ.PrincipalFrom(ctx)
	if p == nil && r.Actor == nil {
		return nil, nil
	}
	var named writ.Actor
	if r.Actor != nil {
		named = *r.Actor
	}
	a, err := writ.BindActor(ctx, r.TenantID, named)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return &a, nil
	}
	recs, err := e.store.DecisionRecords(ctx, r.TenantID, r.DecisionID)
	if err != nil {
		return nil, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision could not be read; retry", Err: err}
	}
	last, _ := lastCheck(recs)
	if last == nil {
		return nil, writ.Errorf(writ.ENOTFOUND, "decision %q not found", r.DecisionID)
	}
	if err := writ.MayActOn(ctx, "decision "+r.DecisionID, last.Record.Actor); err != nil {
		return nil, err
	}
	return &a, nil
}

// repeatedReport answers a report of a decision that already has one: the
// first acknowledgement when it is the same report (and still the one its
// sealed record binds), a conflict otherwise.
func (e *Engine) repeatedReport(ctx context.Context, tenantID, decisionID string, prior *ledger.Prior, digest string) (*writ.ExecutionAck, error) {
	if prior.ArgsDigest != digest {
		return nil, writ.Errorf(writ.ECONFLICT, "the decision already has a different execution report (record %s); a decision has one report", prior.RecordID)
	}
	sr, err := e.store.Record(ctx, tenantID, prior.RecordID)
	if err != nil {
		return nil, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the first report's record could not be read; retry", Err: err}
	}
	if err := ledger.CheckStoredReceipt(sr.Raw, prior.Receipt); err != nil {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: fmt.Sprintf("the stored acknowledgement of record %s does not match its sealed record (writ ledger verify names it); it is not served", prior.RecordID), Err: err}
	}
	claim, err := ledger.ReportDigest(tenantID, &ledger.ReportClaim{DecisionID: decisionID, ReportDigest: prior.ArgsDigest})
	if err == nil {
		err = ledger.CheckStoredClaim(sr.Raw, ledger.ClaimReport, claim)
	}
	if err != nil {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: fmt.Sprintf("record %s, which the decision's execution report row points at, does not claim that report (writ ledger verify names it); its acknowledgement is not served", prior.RecordID), Err: err}
	}
	var ack writ.ExecutionAck
	if err := json.Unmarshal(prior.Receipt, &ack); err != nil {
		return nil, fmt.Errorf("stored acknowledgement of record %s: %w", prior.RecordID, err)
	}
	ack.Repeated = writ.RepeatedIdempotent
	return &ack, nil
}

// checkRequestOf decodes the stored (redacted) request envelope of a check
// record.
func (e *Engine) checkRequestOf(ctx context.Context, rec *writ.Record) (*writ.CheckRequest, error) {
	raw, err := e.store.Envelope(ctx, rec.TenantID, rec.Audit.Seq, rec.Replay.ReplayPacketID)
	if err != nil {
		return nil, fmt.Errorf("the request envelope of record %s: %w", rec.RecordID, err)
	}
	var req writ.CheckRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("the request envelope of record %s: %w", rec.RecordID, err)
	}
	return &req, nil
}

// observedCall returns the run event of the call writ observed for a
// workflow run's step when it allowed permit, or nil: a check made for a
// run's step is observed by the run (see Engine.decide).
func (e *Engine) observedCall(ctx context.Context, permit *writ.Record) (obs, start *ledger.RunEvent, err error) {
	req, err := e.checkRequestOf(ctx, permit)
	if err != nil {
		return nil, nil, err
	}
	w := req.Workflow
	if w == nil || w.RunID == "" {
		return nil, nil, nil
	}
	evs, err := e.store.RunEvents(ctx, permit.TenantID, w.RunID)
	if writ.ErrorCode(err) == writ.ENOTFOUND {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	for i := range evs {
		if evs[i].Kind == ledger.CallObserved && evs[i].RecordID == permit.RecordID {
			return &evs[i], &evs[0], nil
		}
	}
	return nil, nil, nil
}

// executedEvent is the run event that tells a run's verification
// contracts that the call writ observed for permit was executed, with the
// run's start event (which the report's record binds): nil when permit
// was not made for a run's step.
func (e *Engine) executedEvent(ctx context.Context, permit, report *writ.Record, now time.Time) (ev, start *ledger.RunEvent, err error) {
	obs, start, err := e.observedCall(ctx, permit)
	if err != nil || obs == nil {
		return nil, nil, err
	}
	data, err := json.Marshal(workflow.ExecutedCall{DecisionID: permit.DecisionID, RecordID: report.RecordID})
	if err != nil {
		return nil, nil, err
	}
	return &ledger.RunEvent{TenantID: permit.TenantID, RunID: obs.RunID, Kind: ledger.CallExecuted, StepID: obs.StepID, At: now, Data: data}, start, nil
}
