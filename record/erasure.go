package record

import (
	"encoding/json"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// ErasureEnvelope is the stored request envelope of an erasure: what
// Erasure builds the record from, and what replay rebuilds it
// from. Refs are the references of the values it deleted, in the order
// they were stored.
type ErasureEnvelope struct {
	TenantID  string   `json:"tenant_id"`
	SubjectID string   `json:"subject_id"`
	By        string   `json:"by"`
	Reason    string   `json:"reason"`
	Refs      []string `json:"refs"`
	TraceID   string   `json:"trace_id"`
}

// Erasure builds the record of an erasure from its stored request
// envelope (ErasureEnvelope's JSON): what the engine seals, and what
// replay rebuilds.
func Erasure(p *pack.Pack, recordID string, envelope []byte, now time.Time) (*writ.Record, error) {
	var env ErasureEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, err
	}
	if env.Refs == nil {
		env.Refs = []string{}
	}
	key := p.ErasureKey()
	envHash := Digest(envelope)
	none, err := CanonicalDigest([]any{})
	if err != nil {
		return nil, err
	}
	ctxHash, err := CanonicalDigest(map[string]any{"pack_hash": p.Hash, "erasure": key})
	if err != nil {
		return nil, err
	}
	refs := make([]any, len(env.Refs))
	for i, r := range env.Refs {
		refs[i] = r
	}
	return &writ.Record{
		RecordID: recordID, DecisionID: recordID, TenantID: env.TenantID,
		DecisionKey: key, DecisionVersion: p.Version, Timestamp: now, Status: writ.StatusDecided, ActionClass: "erasure",
		Actor:           writ.Actor{Type: writ.ActorHuman, ID: env.By},
		SubjectIDs:      []string{env.SubjectID},
		InputsRefs:      writ.InputsRefs{Request: envHash},
		Outputs:         map[string]any{"erased": len(env.Refs), "refs": refs, "reason": env.Reason},
		EvidenceRefs:    []string{},
		PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pd:" + key + ":erase", BundleID: "erasure", RuleIDs: []string{}, Verdict: "allow"}},
		Approvals:       []writ.Approval{},
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: RedactionRuleIDs(p)},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: key},
		TraceID:         env.TraceID,
		Replay:          writ.Replay{ReplayPacketID: envHash, CompiledContextHash: ctxHash, EvidenceSnapshotHash: none, ArgumentsDigest: envHash},
	}, nil
}
