package record

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// AnnotationEnvelope is the stored request envelope of a record about a
// record: what Annotation builds the record from, with the record
// it is about. Its free text is redacted with the pack's patterns.
type AnnotationEnvelope struct {
	Kind     string `json:"kind"`
	TenantID string `json:"tenant_id"`
	RecordID string `json:"record_id"`
	By       string `json:"by"`
	TraceID  string `json:"trace_id"`
	// A retraction's.
	Reason string `json:"reason,omitempty"`
	// A feedback entry's.
	Score      *float64 `json:"score,omitempty"`
	Label      string   `json:"label,omitempty"`
	Comment    string   `json:"comment,omitempty"`
	RuleChange string   `json:"rule_change,omitempty"`
	// A replay result's: its status, the classes of its differences and
	// the digest of the whole result (differences and all).
	Status        string   `json:"status,omitempty"`
	Classes       []string `json:"classes,omitempty"`
	ResultDigest  string   `json:"result_digest,omitempty"`
	ReplayedKind  string   `json:"replayed_kind,omitempty"`
	ReplayedError string   `json:"error,omitempty"`
}

// Annotation builds the record of a retraction, a feedback entry or
// a replay result from its stored request envelope and the record it is
// about: what the engine seals, and what replay rebuilds.
func Annotation(p *pack.Pack, recordID string, envelope []byte, target *writ.Record, now time.Time) (*writ.Record, error) {
	var env AnnotationEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, err
	}
	if env.RecordID != target.RecordID || env.TenantID != target.TenantID {
		return nil, fmt.Errorf("the envelope is about record %s of tenant %s, not %s of %s", env.RecordID, env.TenantID, target.RecordID, target.TenantID)
	}
	envHash := Digest(envelope)
	none, err := CanonicalDigest([]any{})
	if err != nil {
		return nil, err
	}
	outputs := map[string]any{"record_id": target.RecordID}
	var (
		prefix, supersedes, bundle, verdict string
		status                              = writ.StatusDecided
		actor                               = writ.Actor{Type: writ.ActorHuman, ID: env.By}
		rules                               []string
	)
	switch env.Kind {
	case writ.StoryRetraction:
		prefix, bundle, verdict, status, supersedes = writ.RetractionKeyPrefix, "retraction", "allow", writ.StatusClosed, target.RecordID
		outputs["outcome"], outputs["reason"] = "retracted", env.Reason
		rules = []string{"retraction"}
	case writ.StoryFeedback:
		prefix, bundle, verdict = writ.FeedbackKeyPrefix, "feedback", "allow"
		outputs["outcome"] = env.Label
		if env.Score != nil {
			outputs["score"] = *env.Score
		}
		if env.Comment != "" {
			outputs["comment"] = env.Comment
		}
		if env.RuleChange != "" {
			outputs["rule_change"] = env.RuleChange
		}
		rules = []string{"feedback"}
	case writ.StoryReplayResult:
		prefix, bundle, verdict = writ.ReplayKeyPrefix, "replay", "allow"
		actor = writ.Actor{Type: writ.ActorService, ID: env.By}
		outputs["outcome"], outputs["result_digest"] = env.Status, env.ResultDigest
		classes := env.Classes
		if classes == nil {
			classes = []string{}
		}
		outputs["classes"] = classes
		rules = append([]string{"replay"}, classes...)
		if env.Status != writ.ReplayEqual {
			verdict = "warn"
		}
	default:
		return nil, fmt.Errorf("unknown kind of record about a record %q", env.Kind)
	}
	key := prefix + target.DecisionKey
	ctxHash, err := CanonicalDigest(map[string]any{"pack_hash": p.Hash, "about": target.RecordID, "kind": env.Kind})
	if err != nil {
		return nil, err
	}
	subjects := slices.Clone(target.SubjectIDs)
	if subjects == nil {
		subjects = []string{}
	}
	return &writ.Record{
		RecordID: recordID, DecisionID: target.DecisionID, TenantID: env.TenantID,
		DecisionKey: key, DecisionVersion: p.Version, Timestamp: now, Status: status,
		ActionClass: env.Kind, Supersedes: supersedes,
		Actor:           actor,
		SubjectIDs:      subjects,
		InputsRefs:      writ.InputsRefs{Request: envHash},
		Outputs:         outputs,
		EvidenceRefs:    []string{"record:" + target.RecordID},
		PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pd:" + prefix + fmt.Sprint(outputs["outcome"]), BundleID: bundle, RuleIDs: rules, Verdict: verdict}},
		Approvals:       []writ.Approval{},
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: RedactionRuleIDs(p)},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: key},
		TraceID:         env.TraceID,
		Replay:          writ.Replay{ReplayPacketID: envHash, CompiledContextHash: ctxHash, EvidenceSnapshotHash: none, ArgumentsDigest: envHash},
	}, nil
}

// AnnotationTarget returns the record id and tenant an annotation's
// stored envelope is about.
func AnnotationTarget(envelope []byte) (tenantID, recordID string, err error) {
	var env AnnotationEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return "", "", err
	}
	return env.TenantID, env.RecordID, nil
}
