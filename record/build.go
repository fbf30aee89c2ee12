// Package record builds decision records and defines their canonical
// bytes and hashes.
//
// Everything here is pure: Build is a function of the request, the
// resolved pack, the decision and the clock reading, so replay can rebuild
// a record byte for byte. Records carry references and hashes of inputs,
// never raw payloads, and the pack's redaction rules apply to every value
// a record or a stored envelope takes from the caller.
package record

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/policy"
)

// Input is everything a record is built from.
type Input struct {
	RecordID   string
	DecisionID string
	Now        time.Time
	Request    *writ.CheckRequest
	Resolved   *policy.Resolved
	Decision   *policy.Decision
	// EnvelopeHash is the content address of the stored, redacted request
	// envelope (see Envelope).
	EnvelopeHash string
	Redactor     *Redactor
	// Digests, when set, are InputDigests of Request at Now, already
	// computed by the caller (for the approval binding); Build computes
	// them when nil.
	Digests *Digests
	// TranscriptHead, when set, is the head of the tool transcript of the
	// check's run or session at decision time (writ.TranscriptEntry): the
	// record pins it as replay.tool_transcript_chain_hash. Without it
	// (a check outside any run or session, or whose transcript is still
	// empty, and every check sealed before issue 32) the hash is the
	// digest of the record's own tool_lineage.
	TranscriptHead string
}

// Build builds the unsealed decision record of a boundary check. The
// audit block is left for the ledger to seal.
func Build(in Input) (*writ.Record, error) {
	req, r, d, red := in.Request, in.Resolved, in.Decision, in.Redactor
	_, refs := validEvidence(req, in.Now)
	dg := in.Digests
	if dg == nil {
		d, err := InputDigests(req, in.Now, red)
		if err != nil {
			return nil, err
		}
		dg = &d
	}
	evidenceHash, argsDigest := dg.EvidenceSnapshot, dg.Arguments

	outputs := red.Map(req.Outputs)
	if outputs == nil {
		outputs = map[string]any{}
	} else {
		outputs = maps.Clone(outputs)
	}
	outputs["outcome"] = string(d.Effect.Outcome())

	rec := &writ.Record{
		RecordID:              in.RecordID,
		DecisionID:            in.DecisionID,
		TenantID:              req.TenantID,
		DecisionKey:           r.Spec.DecisionKey,
		DecisionVersion:       r.Spec.Version,
		Timestamp:             in.Now.UTC(),
		Status:                d.Effect.Status(),
		ActionClass:           r.ActionClass,
		Supersedes:            req.Supersedes,
		Actor:                 RedactActor(red, req.Actor),
		IntentRef:             red.String(req.IntentRef),
		SubjectIDs:            orEmpty(red.Strings(req.SubjectIDs)),
		Outputs:               outputs,
		EvidenceRefs:          orEmpty(red.Strings(refs)),
		PolicyDecisions:       PolicyDecisions(d),
		Approvals:             approvals(d),
		ApprovalModeEffective: r.ApprovalMode,
		ControlsActive:        r.Controls,
		Scorecard:             req.Scorecard,
		ScorecardFailed:       r.Spec.ScorecardFailures(req.Scorecard),
		Lineage: writ.Lineage{
			PackVersion:    r.Spec.Version,
			PolicyVersions: orEmpty(slices.Clone(r.PolicyVersions)),
			DecisionSpec:   r.Spec.ID(),
		},
		TraceID: req.TraceID,
		Replay: writ.Replay{
			ReplayPacketID:       in.EnvelopeHash,
			CompiledContextHash:  r.CompiledContextHash,
			EvidenceSnapshotHash: evidenceHash,
			ArgumentsDigest:      argsDigest,
		},
	}
	rec.Lineage.PackVersion, rec.Lineage.PackHash = packPin(r)
	if x := r.Spec.Execution; x != nil && d.Effect.SafeToExecute() {
		// A permit of a spec that bounds its validity or wants to hear
		// how the effect went says so in the record; one that needs a
		// report stays IN_FLIGHT until the report closes it.
		rec.Execution = &writ.Execution{ReportRequired: x.ReportRequired()}
		if x.ValidFor > 0 {
			until := in.Now.UTC().Add(x.ValidFor)
			rec.Execution.ValidUntil = &until
		}
		if x.ReportRequired() {
			rec.Status = writ.StatusInFlight
		}
	}
	if ir := req.InputsRefs; ir != nil {
		rec.InputsRefs = writ.InputsRefs{Request: red.String(ir.Request), Session: red.String(ir.Session), Attachments: red.Strings(ir.Attachments)}
	}
	if l := req.Lineage; l != nil {
		rec.Lineage.KGSnapshot, rec.Lineage.ModelProfile, rec.Lineage.EvaluatorSuite = red.String(l.KGSnapshot), red.String(l.ModelProfile), red.String(l.EvaluatorSuite)
	}
	if req.Usage != nil {
		u := *req.Usage
		rec.BudgetUsage = &u
	}
	rec.ContextSources = in.Decision.ContextSources
	if m, a := in.Decision.Metered, in.Decision.MeteredActor; m != nil || a != nil {
		rec.MeteredUsage = &writ.MeteredUsage{Provenance: writ.ProvenanceObserved}
		if m != nil {
			rec.MeteredUsage.ToolCalls = m.ToolCalls
		}
		if a != nil {
			rec.MeteredUsage.ActorToolCalls = *a
		}
	}
	for _, t := range req.ToolLineage {
		rec.ToolLineage = append(rec.ToolLineage, writ.ToolLineage{
			ToolCallID: red.String(t.ToolCallID), ToolResultID: red.String(t.ToolResultID), ApprovalModeEffective: t.ApprovalModeEffective,
			IdempotencyKey: red.String(t.IdempotencyKey), ReversalToken: red.String(t.ReversalToken),
		})
	}
	if req.Tool != "" {
		// The call being checked. Until the caller names it, the call is
		// known by its decision.
		callID := req.ToolCallID
		if callID == "" {
			callID = in.DecisionID
		}
		rec.ToolLineage = append(rec.ToolLineage, writ.ToolLineage{
			ToolCallID:            red.String(callID),
			ApprovalModeEffective: r.ApprovalMode,
			IdempotencyKey:        red.String(req.IdempotencyKey),
		})
	}
	if in.TranscriptHead != "" {
		rec.Replay.ToolTranscriptChainHash = in.TranscriptHead
	} else if len(rec.ToolLineage) > 0 {
		h, err := CanonicalDigest(rec.ToolLineage)
		if err != nil {
			return nil, err
		}
		rec.Replay.ToolTranscriptChainHash = h
	}
	return rec, nil
}

// Digests are the digests of a check's redacted inputs that its record's
// replay block carries and approvals are bound to.
type Digests struct {
	// EvidenceSnapshot is EvidenceSnapshotHash of the check.
	EvidenceSnapshot string
	// Arguments is ArgumentsDigest of the redacted arguments.
	Arguments string
}

// InputDigests computes the Digests of req decided at now.
func InputDigests(req *writ.CheckRequest, now time.Time, red *Redactor) (Digests, error) {
	ev, err := EvidenceSnapshotHash(req, now, red)
	if err != nil {
		return Digests{}, err
	}
	args, err := ArgumentsDigest(red.Map(req.Arguments))
	if err != nil {
		return Digests{}, err
	}
	return Digests{EvidenceSnapshot: ev, Arguments: args}, nil
}

// Binding is what an approval of the check resolved as r binds: its
// decision key, bundle revisions and digests. keyedArgs is the Binder's
// digest of the unredacted arguments; replay, which never sees them,
// passes "".
func Binding(r *policy.Resolved, dg Digests, keyedArgs string) writ.ApprovalBinding {
	revs := slices.Clone(r.PolicyVersions)
	if revs == nil {
		revs = []string{}
	}
	return writ.ApprovalBinding{DecisionKey: r.Spec.DecisionKey, ArgumentsDigest: keyedArgs, RedactedArgumentsDigest: dg.Arguments,
		EvidenceSnapshotHash: dg.EvidenceSnapshot, BundleRevisions: revs}
}

// EvidenceSnapshotHash is the digest of the evidence a check is decided
// on: the canonical JSON of its valid evidence (the request's own tenant's,
// not observed in the future), redacted. Records carry it as
// replay.evidence_snapshot_hash, and approvals are bound to it.
func EvidenceSnapshotHash(req *writ.CheckRequest, now time.Time, red *Redactor) (string, error) {
	evidence, _ := validEvidence(req, now)
	h, err := CanonicalDigest(redacted(red, evidence))
	if err != nil {
		return "", fmt.Errorf("evidence snapshot: %w", err)
	}
	return h, nil
}

// approvals lists the approvals that redeemed the decision's gates, as
// the record states them.
func approvals(d *policy.Decision) []writ.Approval {
	out := make([]writ.Approval, 0, len(d.Granted))
	for _, a := range d.Granted {
		out = append(out, writ.Approval{GateID: a.GateID, Approver: a.Decision.Approver, ApprovalModeEffective: a.ApprovalModeEffective,
			EvidenceSnapshotHash: a.Binding.EvidenceSnapshotHash, DecidedAt: a.Decision.At.UTC()})
	}
	return out
}

func packPin(r *policy.Resolved) (string, string) {
	p := r.Pack()
	return p.ID(), p.Hash
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// RedactActor returns a with the redaction patterns applied to its ids;
// what writ set (provenance, key id, acted_by's type, issuer) is kept.
func RedactActor(red *Redactor, a writ.Actor) writ.Actor {
	out := a
	out.ID, out.WorkloadIdentity, out.DelegatedUserID = red.String(a.ID), red.String(a.WorkloadIdentity), red.String(a.DelegatedUserID)
	if a.ActedBy != nil {
		out.ActedBy = &writ.ActorRef{Type: a.ActedBy.Type, ID: red.String(a.ActedBy.ID)}
	}
	return out
}

// PolicyDecisions lists every check the decision applied, in order.
func PolicyDecisions(d *policy.Decision) []writ.PolicyDecision {
	out := make([]writ.PolicyDecision, len(d.Applied))
	for i, a := range d.Applied {
		out[i] = writ.PolicyDecision{PolicyDecisionID: a.PolicyDecisionID(), BundleID: a.ID.BundleID, RuleIDs: []string{a.ID.RuleID}, Verdict: a.Verdict.String()}
	}
	return out
}

// ArgumentsDigest is the digest of the canonical JSON of an action's
// arguments (an absent argument object digests like {}). Records carry it
// over the redacted arguments, so it can be recomputed from the stored
// envelope; bindings use Binder instead.
func ArgumentsDigest(args map[string]any) (string, error) {
	if args == nil {
		args = map[string]any{}
	}
	d, err := CanonicalDigest(args)
	if err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	return d, nil
}

// validEvidence returns the evidence of the request's own tenant, and its
// references, in request order.
func validEvidence(req *writ.CheckRequest, now time.Time) ([]writ.Evidence, []string) {
	out := []writ.Evidence{}
	var refs []string
	for _, e := range req.Evidence {
		if e.TenantID != "" && e.TenantID != req.TenantID {
			continue // never let another tenant's facts support a decision
		}
		if e.ObservedAt != nil && e.ObservedAt.After(now.Add(policy.ClockSkew)) {
			continue
		}
		out = append(out, e)
		refs = append(refs, e.Ref())
	}
	return out, refs
}

func orEmptyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// redacted returns v with redaction applied: as v itself when no rule is
// active, else converted to the JSON data model and redacted, so that what
// is hashed is what may be stored.
func redacted(red *Redactor, v any) any {
	if !red.Active() {
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return red.Value(out)
}
