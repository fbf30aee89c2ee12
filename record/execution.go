package record

import (
	"fmt"
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// ExecutionReport builds the record of an execution report rq closing the
// check record target, and the report's stored request envelope:
// decision key "execution:<key>", status CLOSED, the same decision id,
// subjects and approval mode, superseding target, with the report in
// tool_lineage and execution, and findings for a report made after the
// permit expired or of an effect attempted without one. p is the pinned
// pack and red its redactor.
func ExecutionReport(p *pack.Pack, red *Redactor, rq *writ.ExecutionReport, target *writ.Record, recordID string, now time.Time) (*writ.Record, []byte, error) {
	envelope, err := EnvelopeOf(rq, red)
	if err != nil {
		return nil, nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if HasNUL(envelope) {
		return nil, nil, ErrNUL
	}
	env := Digest(envelope)
	var findings []writ.Reason
	if Permits(target) && target.Execution != nil && target.Execution.ValidUntil != nil {
		until := *target.Execution.ValidUntil
		if now.After(until) {
			findings = append(findings, writ.Reason{Code: writ.FindingReportedAfterExpiry,
				Message: fmt.Sprintf("reported at %s, after the permit expired at %s", now.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))})
		}
	}
	if !Permits(target) && rq.Status == writ.ExecutionFailed {
		findings = append(findings, writ.Reason{Code: writ.FindingNotPermitted,
			Message: fmt.Sprintf("the effect was attempted although record %s (%s) did not permit it", target.RecordID, target.Status)})
	}
	actor := target.Actor
	if rq.Actor != nil {
		actor = RedactActor(red, *rq.Actor)
	}
	callID := rq.ToolCallID
	if callID == "" {
		callID = target.DecisionID
		if n := len(target.ToolLineage); n > 0 {
			callID = target.ToolLineage[n-1].ToolCallID
		}
	} else {
		callID = red.String(callID)
	}
	key := ExecutionKeyPrefix + target.DecisionKey
	verdict, rules := "allow", []string{"execution_report"}
	for _, f := range findings {
		verdict = "warn"
		rules = append(rules, f.Code)
	}
	evidence := []string{"record:" + target.RecordID}
	if rq.ToolResultID != "" {
		ref := "tool_result:" + red.String(rq.ToolResultID)
		if rq.ResultDigest != "" {
			ref += "#" + rq.ResultDigest
		}
		evidence = append(evidence, ref)
	}
	x := &writ.Execution{Status: rq.Status, ReportedFor: target.RecordID, ResultDigest: rq.ResultDigest, Findings: findings}
	if rq.Error != nil {
		x.Error = &writ.ExecutionError{Code: red.String(rq.Error.Code), Message: red.String(rq.Error.Message)}
	}
	if rq.StartedAt != nil {
		t := rq.StartedAt.UTC()
		x.StartedAt = &t
	}
	if rq.EndedAt != nil {
		t := rq.EndedAt.UTC()
		x.EndedAt = &t
	}
	rec := &writ.Record{
		RecordID: recordID, DecisionID: target.DecisionID, TenantID: rq.TenantID,
		DecisionKey: key, DecisionVersion: p.Version, Timestamp: now, Status: writ.StatusClosed,
		ActionClass: target.ActionClass, Supersedes: target.RecordID,
		Actor: actor, SubjectIDs: slices.Clone(target.SubjectIDs),
		InputsRefs:            writ.InputsRefs{Request: env},
		Outputs:               map[string]any{"outcome": string(rq.Status), "reported_for": target.RecordID},
		EvidenceRefs:          evidence,
		PolicyDecisions:       []writ.PolicyDecision{{PolicyDecisionID: "pd:" + key + ":" + string(rq.Status), BundleID: "execution_report", RuleIDs: rules, Verdict: verdict}},
		Approvals:             []writ.Approval{},
		ApprovalModeEffective: target.ApprovalModeEffective,
		ControlsActive:        writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: RedactionRuleIDs(p)},
		ToolLineage: []writ.ToolLineage{{ToolCallID: callID, ToolResultID: red.String(rq.ToolResultID), ApprovalModeEffective: target.ApprovalModeEffective,
			IdempotencyKey: red.String(rq.IdempotencyKey), ReversalToken: red.String(rq.ReversalToken)}},
		Execution: x,
		Lineage:   writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: key},
		TraceID:   rq.TraceID,
	}
	if rec.SubjectIDs == nil {
		rec.SubjectIDs = []string{}
	}
	if rq.Usage != nil {
		u := *rq.Usage
		rec.BudgetUsage = &u
	}
	ctxHash, err := CanonicalDigest(map[string]any{"pack_hash": p.Hash, "reported_for": target.RecordID})
	if err != nil {
		return nil, nil, err
	}
	lineageHash, err := CanonicalDigest(rec.ToolLineage)
	if err != nil {
		return nil, nil, err
	}
	rec.Replay = writ.Replay{ReplayPacketID: env, CompiledContextHash: ctxHash, EvidenceSnapshotHash: target.Replay.EvidenceSnapshotHash,
		ArgumentsDigest: target.Replay.ArgumentsDigest, ToolTranscriptChainHash: lineageHash}
	return rec, envelope, nil
}
