package record

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// EvidenceEnvelope is the stored request envelope of an evidence record:
// what Evidence builds the record from, so replay rebuilds it.
type EvidenceEnvelope struct {
	Item           writ.EvidenceItem `json:"item"`
	ContentAddress string            `json:"content_address"`
	Provenance     writ.Provenance   `json:"provenance"`
	SubmittedBy    string            `json:"submitted_by,omitempty"`
	SignedBy       string            `json:"signed_by,omitempty"`
	JWS            string            `json:"jws,omitempty"`
	// Observation names the tool call the MCP gateway captured the item
	// from (provenance observed).
	Observation *writ.EvidenceObservation `json:"observation,omitempty"`
	Actor       writ.Actor                `json:"actor"`
	TraceID     string                    `json:"trace_id"`
}

// RevocationEnvelope is the stored request envelope of an evidence
// revocation record.
type RevocationEnvelope struct {
	TenantID       string     `json:"tenant_id"`
	Kind           string     `json:"kind"`
	ID             string     `json:"id"`
	ContentAddress string     `json:"content_address"`
	Revokes        string     `json:"revokes"` // the evidence record
	DecisionID     string     `json:"decision_id"`
	Reason         string     `json:"reason"`
	Actor          writ.Actor `json:"actor"`
	TraceID        string     `json:"trace_id"`
}

// Evidence builds the record of an evidence item from its stored
// request envelope (EvidenceEnvelope's JSON): what the engine seals, and
// what replay rebuilds. Its decision key is "evidence:<kind>"; outputs
// hold the item, its content address and provenance.
func Evidence(p *pack.Pack, recordID string, envelope []byte, now time.Time) (*writ.Record, error) {
	var env EvidenceEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, err
	}
	it := env.Item
	var item map[string]any
	if err := remarshal(it, &item); err != nil {
		return nil, err
	}
	key := writ.EvidenceKeyPrefix + it.Kind
	envHash := Digest(envelope)
	ctxHash, err := CanonicalDigest(map[string]any{"pack_hash": p.Hash, "evidence": key})
	if err != nil {
		return nil, err
	}
	rule := "issuer_role"
	outputs := map[string]any{"item": item, "content_address": env.ContentAddress, "provenance": string(env.Provenance)}
	switch {
	case env.JWS != "":
		rule = "issuer_signature"
		outputs["jws"], outputs["signed_by"] = env.JWS, env.SignedBy
	case env.Observation != nil:
		rule = "gateway_observation"
		var obs map[string]any
		if err := remarshal(env.Observation, &obs); err != nil {
			return nil, err
		}
		outputs["observation"] = obs
	}
	subjects := slices.Clone(it.SubjectIDs)
	if subjects == nil {
		subjects = []string{}
	}
	return &writ.Record{
		RecordID: recordID, DecisionID: recordID, TenantID: it.TenantID,
		DecisionKey: key, DecisionVersion: p.Version, Timestamp: now, Status: writ.StatusDecided, ActionClass: "evidence",
		Actor:           env.Actor,
		SubjectIDs:      subjects,
		InputsRefs:      writ.InputsRefs{Request: envHash},
		Outputs:         outputs,
		EvidenceRefs:    []string{it.Kind + ":" + it.ID + "#" + env.ContentAddress},
		PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pd:" + key + ":stored", BundleID: "evidence_store", RuleIDs: []string{rule}, Verdict: "allow"}},
		Approvals:       []writ.Approval{},
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: RedactionRuleIDs(p)},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: key},
		TraceID:         env.TraceID,
		Replay:          writ.Replay{ReplayPacketID: envHash, CompiledContextHash: ctxHash, EvidenceSnapshotHash: env.ContentAddress, ArgumentsDigest: env.ContentAddress},
	}, nil
}

// EvidenceRevocation builds the record of an evidence item's
// revocation from its stored request envelope: decision key
// "evidence_revocation:<kind>", status CLOSED, superseding the item's
// evidence record, in the item's decision.
func EvidenceRevocation(p *pack.Pack, recordID string, envelope []byte, now time.Time) (*writ.Record, error) {
	var env RevocationEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, err
	}
	key := writ.EvidenceRevocationKeyPrefix + env.Kind
	envHash := Digest(envelope)
	ctxHash, err := CanonicalDigest(map[string]any{"pack_hash": p.Hash, "evidence": key})
	if err != nil {
		return nil, err
	}
	return &writ.Record{
		RecordID: recordID, DecisionID: env.DecisionID, TenantID: env.TenantID,
		DecisionKey: key, DecisionVersion: p.Version, Timestamp: now, Status: writ.StatusClosed, ActionClass: "evidence", Supersedes: env.Revokes,
		Actor:           env.Actor,
		SubjectIDs:      []string{},
		InputsRefs:      writ.InputsRefs{Request: envHash},
		Outputs:         map[string]any{"revokes": env.ID, "content_address": env.ContentAddress, "reason": env.Reason},
		EvidenceRefs:    []string{env.Kind + ":" + env.ID + "#" + env.ContentAddress, "record:" + env.Revokes},
		PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pd:" + key + ":revoked", BundleID: "evidence_store", RuleIDs: []string{"issuer_role"}, Verdict: "allow"}},
		Approvals:       []writ.Approval{},
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: RedactionRuleIDs(p)},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: key},
		TraceID:         env.TraceID,
		Replay:          writ.Replay{ReplayPacketID: envHash, CompiledContextHash: ctxHash, EvidenceSnapshotHash: env.ContentAddress, ArgumentsDigest: env.ContentAddress},
	}, nil
}

func remarshal(v, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
