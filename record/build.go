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
	// ArgumentsDigest is ArgumentsDigest(Request.Arguments).
	ArgumentsDigest string
	Redactor        *Redactor
}

// Build builds the unsealed decision record of a boundary check. The
// audit block is left for the ledger to seal.
func Build(in Input) (*writ.Record, error) {
	req, r, d, red := in.Request, in.Resolved, in.Decision, in.Redactor
	evidence, refs := validEvidence(req, in.Now)
	evidenceHash, err := CanonicalDigest(evidence)
	if err != nil {
		return nil, fmt.Errorf("evidence snapshot: %w", err)
	}

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
		Actor:                 redactActor(red, req.Actor),
		IntentRef:             red.String(req.IntentRef),
		SubjectIDs:            orEmpty(red.Strings(req.SubjectIDs)),
		Outputs:               outputs,
		EvidenceRefs:          orEmpty(red.Strings(refs)),
		PolicyDecisions:       PolicyDecisions(d),
		Approvals:             []writ.Approval{},
		ApprovalModeEffective: r.ApprovalMode,
		ControlsActive:        r.Controls,
		Scorecard:             req.Scorecard,
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
			ArgumentsDigest:      in.ArgumentsDigest,
		},
	}
	rec.Lineage.PackVersion, rec.Lineage.PackHash = packPin(r)
	if ir := req.InputsRefs; ir != nil {
		rec.InputsRefs = writ.InputsRefs{Request: red.String(ir.Request), Session: red.String(ir.Session), Attachments: red.Strings(ir.Attachments)}
	}
	if l := req.Lineage; l != nil {
		rec.Lineage.KGSnapshot, rec.Lineage.ModelProfile, rec.Lineage.EvaluatorSuite = l.KGSnapshot, l.ModelProfile, l.EvaluatorSuite
	}
	if req.Usage != nil {
		u := *req.Usage
		rec.BudgetUsage = &u
	}
	rec.ToolLineage = slices.Clone(req.ToolLineage)
	if req.Tool != "" {
		rec.ToolLineage = append(rec.ToolLineage, writ.ToolLineage{
			ToolCallID:            req.ToolCallID,
			ApprovalModeEffective: r.ApprovalMode,
			IdempotencyKey:        req.IdempotencyKey,
		})
	}
	if len(rec.ToolLineage) > 0 {
		if rec.Replay.ToolTranscriptChainHash, err = CanonicalDigest(rec.ToolLineage); err != nil {
			return nil, err
		}
	}
	return rec, nil
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

func redactActor(red *Redactor, a writ.Actor) writ.Actor {
	return writ.Actor{Type: a.Type, ID: red.String(a.ID), WorkloadIdentity: red.String(a.WorkloadIdentity), DelegatedUserID: red.String(a.DelegatedUserID)}
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
// arguments (an absent argument object digests like {}). It binds
// idempotency keys, blocked actions and approvals to exact arguments.
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

// ActionDigest fingerprints what a check asks to do, for
// must_not_retry_same_action: the decision key, tool, approval mode,
// arguments, proposed outputs, subjects, actor, evidence and context.
// Transport and bookkeeping fields (idempotency key, trace id, tool call
// id, input refs, usage, scorecard, lineage) are left out, so a retry
// that changes nothing that could change the decision has the same
// digest.
func ActionDigest(req *writ.CheckRequest, decisionKey string) (string, error) {
	evidence := req.Evidence
	if evidence == nil {
		evidence = []writ.Evidence{}
	}
	// encoding/json writes map keys sorted and struct fields in order, so
	// this encoding is deterministic; the digest never leaves writ.
	b, err := json.Marshal(map[string]any{
		"decision_key":  decisionKey,
		"tool":          req.Tool,
		"approval_mode": req.ApprovalMode,
		"arguments":     orEmptyMap(req.Arguments),
		"outputs":       orEmptyMap(req.Outputs),
		"subject_ids":   orEmpty(req.SubjectIDs),
		"actor":         req.Actor,
		"evidence":      evidence,
		"context":       orEmptyMap(req.Context),
	})
	if err != nil {
		return "", fmt.Errorf("action: %w", err)
	}
	return Digest(b), nil
}

func orEmptyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
