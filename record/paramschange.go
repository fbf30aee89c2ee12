package record

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// ParamsEnvelope is the stored request of a parameter change: the
// request as the engine took it, the setter resolved.
type ParamsEnvelope struct {
	TenantID string         `json:"tenant_id"`
	Values   map[string]any `json:"values"`
	By       string         `json:"by"`
	Reason   string         `json:"reason"`
	Replaces string         `json:"replaces,omitempty"`
	TraceID  string         `json:"trace_id"`
}

// ParamsChange builds the record of a parameter change from its stored
// request envelope (ParamsEnvelope's JSON): what the engine seals, and
// what replay rebuilds. prev is the change it replaces ("" for none).
func ParamsChange(p *pack.Pack, recordID string, envelope []byte, prev string, now time.Time) (*writ.Record, error) {
	var env ParamsEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, err
	}
	d, err := CanonicalDigest(env.Values)
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(env.Values))
	key := p.ParamsKey()
	envHash := Digest(envelope)
	none, err := CanonicalDigest([]any{})
	if err != nil {
		return nil, err
	}
	ctxHash, err := CanonicalDigest(map[string]any{"pack_hash": p.Hash, "params": key})
	if err != nil {
		return nil, err
	}
	outputs := map[string]any{"values": env.Values, "digest": d, "reason": env.Reason}
	if prev != "" {
		outputs["replaces"] = prev
	}
	if names == nil {
		names = []string{}
	}
	return &writ.Record{
		RecordID: recordID, DecisionID: recordID, TenantID: env.TenantID,
		DecisionKey: key, DecisionVersion: p.Version, Timestamp: now, Status: writ.StatusDecided, ActionClass: "params",
		Actor:           writ.Actor{Type: writ.ActorHuman, ID: env.By},
		SubjectIDs:      []string{key},
		InputsRefs:      writ.InputsRefs{Request: envHash},
		Outputs:         outputs,
		EvidenceRefs:    []string{},
		PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pd:" + key + ":set", BundleID: "params", RuleIDs: names, Verdict: "allow"}},
		Approvals:       []writ.Approval{},
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: RedactionRuleIDs(p)},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: key},
		TraceID:         env.TraceID,
		Replay:          writ.Replay{ReplayPacketID: envHash, CompiledContextHash: ctxHash, EvidenceSnapshotHash: none, ArgumentsDigest: envHash},
	}, nil
}
