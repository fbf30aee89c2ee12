package record

import (
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// ApprovalDecision builds the decision record of an approval, a denial or
// a withdrawal, and its stored request envelope: decision key
// "approval:<gate>", the approver as a HUMAN actor (the requester as an
// AGENT for a withdrawal), the request's subjects, the checked record
// and its evidence snapshot as evidence, and, for an approval, the
// approval itself in approvals[]. a is the approval request decided (only
// its fixed fields are read: gate, binding, subjects, the record that
// asked); p is the pinned pack and red its redactor.
func ApprovalDecision(p *pack.Pack, red *Redactor, rq *writ.DecideApprovalRequest, a *writ.ApprovalRequest, recordID string, now time.Time) (*writ.Record, []byte, error) {
	envelope, err := EnvelopeOf(rq, red)
	if err != nil {
		return nil, nil, err
	}
	if HasNUL(envelope) {
		return nil, nil, ErrNUL
	}
	env := Digest(envelope)
	status, verdict, actor := writ.StatusDecided, "allow", writ.ActorHuman
	switch rq.Decision {
	case writ.ApprovalDenied:
		status, verdict = writ.StatusRejected, "deny"
	case writ.ApprovalWithdrawn:
		// The requester, an agent, takes its own request back.
		status, verdict, actor = writ.StatusRejected, "withdraw", writ.ActorAgent
	}
	spec := "approval:" + a.GateID
	rec := &writ.Record{
		// The approval is part of the story of the decision that asked.
		RecordID: recordID, DecisionID: a.DecisionID, TenantID: rq.TenantID,
		DecisionKey: spec, DecisionVersion: p.Version, Timestamp: now, Status: status, ActionClass: "approval",
		Actor:      writ.Actor{Type: actor, ID: rq.Approver},
		SubjectIDs: append(slices.Clone(a.SubjectIDs), "approval:"+a.ApprovalID),
		InputsRefs: writ.InputsRefs{Request: env},
		Outputs: map[string]any{
			"outcome": rq.Decision, "approval_id": a.ApprovalID, "for_record": a.RecordID, "for_decision": a.DecisionID,
			"reason": red.String(rq.Reason),
		},
		EvidenceRefs: []string{"record:" + a.RecordID, "evidence_snapshot:" + a.Binding.EvidenceSnapshotHash},
		PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pd:" + spec + ":" + rq.Decision, BundleID: "gate:" + a.GateID,
			RuleIDs: []string{a.GateID}, Verdict: verdict}},
		Approvals:             []writ.Approval{},
		ApprovalModeEffective: a.ApprovalModeEffective,
		ControlsActive:        writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: RedactionRuleIDs(p)},
		Lineage:               writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: slices.Clone(a.Binding.BundleRevisions), DecisionSpec: spec},
		TraceID:               rq.TraceID,
	}
	if !a.Terminal {
		rec.ControlsActive.ApprovalGatesActive = []string{a.GateID}
	}
	if rq.Decision == writ.ApprovalApproved {
		rec.Approvals = []writ.Approval{{GateID: a.GateID, Approver: rq.Approver, ApprovalModeEffective: a.ApprovalModeEffective, EvidenceSnapshotHash: a.Binding.EvidenceSnapshotHash, DecidedAt: now}}
	}
	ctxHash, err := CanonicalDigest(map[string]any{"pack_hash": p.Hash, "gate": a.GateID, "approval_id": a.ApprovalID})
	if err != nil {
		return nil, nil, err
	}
	rec.Replay = writ.Replay{ReplayPacketID: env, CompiledContextHash: ctxHash, EvidenceSnapshotHash: a.Binding.EvidenceSnapshotHash, ArgumentsDigest: env}
	return rec, envelope, nil
}
