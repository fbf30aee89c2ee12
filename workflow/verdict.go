package workflow

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
)

// Evaluate decides an attempt at the run's current step with the step's
// contract (contracts compiled from the run's pack): the verdict, without
// its ids. red is the pack's redactor: claimed calls are compared with
// observed ones, which were stored redacted, and a verdict's details are
// stored redacted.
func Evaluate(contracts *acceptance.Contracts, red *record.Redactor, req *writ.AttemptRequest, w *pack.Workflow, st *State) (*writ.StepVerdict, error) {
	// Claimed calls are compared with observed ones, whose arguments
	// were stored redacted: redact the claims alike.
	claimed := make([]acceptance.ToolCall, len(req.ToolCalls))
	for i, c := range req.ToolCalls {
		claimed[i] = acceptance.ToolCall{Name: c.Name, Args: red.Map(c.Args), Result: c.Result}
	}
	seed := fnv.New64a()
	fmt.Fprintf(seed, "%s\x00%s\x00%s\x00%d", req.TenantID, req.RunID, req.StepID, st.attempts)
	v, err := contracts.Evaluate(w.WorkflowID, req.StepID, acceptance.Attempt{Result: req.Result, Claimed: claimed, Observed: st.observed[req.StepID]}, st.attempts, st.Run.Context, seed.Sum64())
	if err != nil {
		return nil, err
	}
	verdict := &writ.StepVerdict{
		RunID: st.Run.RunID, StepID: req.StepID, State: v.State, Checks: checks(v.Checks), Failed: checks(v.Failed),
		AttemptsUsed: v.AttemptsUsed, AttemptsLeft: v.AttemptsLeft, RetryPrompt: v.RetryPrompt, RetryAfterMS: v.RetryAfter.Milliseconds(),
		NextStep: v.NextStep, EscalateTo: v.EscalateTo, SelfReportIgnored: v.SelfReportIgnored, ClaimedCalls: v.Claimed,
	}
	// Details quote the payload: redact them before they are stored.
	for _, list := range [][]writ.VerdictCheck{verdict.Checks, verdict.Failed} {
		for i := range list {
			list[i].Detail = red.String(list[i].Detail)
		}
	}
	if v.Exempt != nil {
		verdict.Exemption = v.Exempt.Reason
	}
	return verdict, nil
}

func checks(cs []acceptance.Check) []writ.VerdictCheck {
	out := make([]writ.VerdictCheck, len(cs))
	for i, c := range cs {
		out[i] = writ.VerdictCheck{Kind: c.Kind, Target: c.Target, Passed: c.Passed, RejectMessage: c.RejectMessage, Detail: c.Detail}
	}
	return out
}

// verdictStatus maps a verdict to the record status.
var verdictStatus = map[string]writ.Status{
	writ.VerdictAccepted:             writ.StatusDecided,
	writ.VerdictAcceptedWithWarnings: writ.StatusDecided,
	writ.VerdictRetry:                writ.StatusDeferred,
	writ.VerdictAborted:              writ.StatusRejected,
	writ.VerdictEscalated:            writ.StatusEscalated,
}

// VerdictRecord builds the decision record of a step verdict v (its ids
// set) and the attempt's stored request envelope: its decision key
// names the workflow and the step, its policy decisions are the
// contract's checks, its evidence the payload's digest and the records
// of the calls writ observed. The attempt carries its trace id (the
// engine draws one for an attempt without).
func VerdictRecord(p *pack.Pack, red *record.Redactor, req *writ.AttemptRequest, w *pack.Workflow, st *State, v *writ.StepVerdict, now time.Time) (*writ.Record, []byte, error) {
	envelope, err := record.EnvelopeOf(req, red)
	if err != nil {
		return nil, nil, err
	}
	if record.HasNUL(envelope) {
		return nil, nil, record.ErrNUL
	}
	payload, err := record.CanonicalDigest(red.Map(req.Result))
	if err != nil {
		return nil, nil, &writ.Error{Code: writ.EINVALID, Message: "result: " + err.Error()}
	}
	spec := "workflow:" + w.ID() + "/" + req.StepID
	rec := &writ.Record{
		RecordID: v.RecordID, DecisionID: v.DecisionID, TenantID: req.TenantID,
		DecisionKey: "workflow:" + w.WorkflowID + "/" + req.StepID, DecisionVersion: w.Version,
		Timestamp: now, Status: verdictStatus[v.State], ActionClass: w.Step(req.StepID).ActionClass,
		Actor:      record.RedactActor(red, req.Actor),
		SubjectIDs: []string{"run:" + req.RunID},
		InputsRefs: writ.InputsRefs{Request: record.Digest(envelope)},
		Outputs: map[string]any{
			"outcome": v.State, "attempts_used": v.AttemptsUsed, "attempts_left": v.AttemptsLeft,
			"next_step": v.NextStep, "failed": len(v.Failed),
		},
		EvidenceRefs:    []string{"result:" + payload},
		Approvals:       []writ.Approval{},
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: record.RedactionRuleIDs(p)},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: spec},
		TraceID:         req.TraceID,
		PolicyDecisions: []writ.PolicyDecision{},
	}
	if v.Exemption != "" {
		rec.Outputs["exemption"] = v.Exemption
	}
	if v.ClaimedCalls != nil {
		// Set on every verdict decided under issue 31's defaults (an
		// empty list when every call was observed): replay reads it to
		// rebuild older verdicts under the defaults they had.
		rec.Outputs["claimed_calls"] = v.ClaimedCalls
	}
	for _, c := range st.observedRecords(req.StepID) {
		rec.EvidenceRefs = append(rec.EvidenceRefs, "record:"+c)
	}
	for _, c := range v.Checks {
		verdict := "allow"
		if !c.Passed {
			verdict = "reject"
		}
		rec.PolicyDecisions = append(rec.PolicyDecisions, writ.PolicyDecision{
			PolicyDecisionID: "pd:" + spec + ":" + c.Kind + ":" + c.Target + ":" + verdict,
			BundleID:         "workflow:" + w.ID(), RuleIDs: []string{c.Kind + ":" + c.Target}, Verdict: verdict,
		})
	}
	if len(v.Checks) == 0 {
		id := "no_contract"
		if v.Exemption != "" {
			id = "exempt"
		}
		rec.PolicyDecisions = append(rec.PolicyDecisions, writ.PolicyDecision{PolicyDecisionID: "pd:" + spec + ":" + id + ":allow", BundleID: "workflow:" + w.ID(), RuleIDs: []string{id}, Verdict: "allow"})
	}
	ctxHash, _ := record.CanonicalDigest(map[string]any{"pack_hash": p.Hash, "workflow": w.ID(), "step": req.StepID})
	rec.Replay = writ.Replay{ReplayPacketID: record.Digest(envelope), CompiledContextHash: ctxHash, EvidenceSnapshotHash: payload, ArgumentsDigest: payload}
	return rec, envelope, nil
}
