package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
)

var _ writ.Annotations = (*Engine)(nil)

// ReplayActor is the actor of a replay result's record: writ itself.
const ReplayActor = "writ.replay"

// maxAnnotationText bounds the free-text members of a retraction or a
// feedback entry.
const maxAnnotationText = 4096

// annotationEnvelope is the stored request envelope of a record about a
// record: what AnnotationRecord builds the record from, with the record
// it is about. Its free text is redacted with the pack's patterns.
type annotationEnvelope struct {
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

// AnnotationKind returns the kind of a record about a record with
// decision key key (writ.StoryRetraction, StoryFeedback,
// StoryReplayResult), or "" for any other record.
func AnnotationKind(key string) string {
	switch {
	case strings.HasPrefix(key, writ.RetractionKeyPrefix):
		return writ.StoryRetraction
	case strings.HasPrefix(key, writ.FeedbackKeyPrefix):
		return writ.StoryFeedback
	case strings.HasPrefix(key, writ.ReplayKeyPrefix):
		return writ.StoryReplayResult
	}
	return ""
}

// AnnotationRecord builds the record of a retraction, a feedback entry or
// a replay result from its stored request envelope and the record it is
// about: what the engine seals, and what replay rebuilds.
func AnnotationRecord(p *pack.Pack, recordID string, envelope []byte, target *writ.Record, now time.Time, redactionRules []string) (*writ.Record, error) {
	var env annotationEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, err
	}
	if env.RecordID != target.RecordID || env.TenantID != target.TenantID {
		return nil, fmt.Errorf("the envelope is about record %s of tenant %s, not %s of %s", env.RecordID, env.TenantID, target.RecordID, target.TenantID)
	}
	envHash := record.Digest(envelope)
	none, err := record.CanonicalDigest([]any{})
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
	ctxHash, err := record.CanonicalDigest(map[string]any{"pack_hash": p.Hash, "about": target.RecordID, "kind": env.Kind})
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
		ControlsActive:  writ.ControlsActive{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: redactionRules},
		Lineage:         writ.Lineage{PackVersion: p.ID(), PackHash: p.Hash, PolicyVersions: []string{}, DecisionSpec: key},
		TraceID:         env.TraceID,
		Replay:          writ.Replay{ReplayPacketID: envHash, CompiledContextHash: ctxHash, EvidenceSnapshotHash: none, ArgumentsDigest: envHash},
	}, nil
}

// Annotation rebuilds the record of a retraction, a feedback entry or a
// replay result from its stored envelope and the record it is about.
func (b *Rebuilder) Annotation(envelope []byte, target *writ.Record, recordID string, now time.Time) (*writ.Record, error) {
	p := b.e.policy.Pack
	return AnnotationRecord(p, recordID, envelope, target, now, redactionIDs(p))
}

// AnnotationTarget returns the record id and tenant an annotation's
// stored envelope is about.
func AnnotationTarget(envelope []byte) (tenantID, recordID string, err error) {
	var env annotationEnvelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return "", "", err
	}
	return env.TenantID, env.RecordID, nil
}

// Retract seals a retraction; see writ.Annotations.
func (e *Engine) Retract(ctx context.Context, r *writ.RetractRequest) (*writ.AnnotationAck, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty retraction")
	}
	rq := *r
	var ds []writ.Detail
	bad := func(field, msg string) { ds = append(ds, writ.Detail{Field: field, Message: msg}) }
	if strings.TrimSpace(rq.Reason) == "" {
		bad("reason", "required: say why, for the record")
	}
	if len(rq.Reason) > maxAnnotationText {
		bad("reason", fmt.Sprintf("longer than %d bytes", maxAnnotationText))
	}
	bindSubject(ctx, &rq.By, "by", "the retracting person", bad)
	env := annotationEnvelope{Kind: writ.StoryRetraction, TenantID: rq.TenantID, RecordID: rq.RecordID, By: rq.By, TraceID: rq.TraceID}
	return e.annotate(ctx, &env, ds, func(env *annotationEnvelope) { env.Reason = e.redactor.String(rq.Reason) })
}

// Feedback seals a feedback entry; see writ.Annotations.
func (e *Engine) Feedback(ctx context.Context, r *writ.FeedbackRequest) (*writ.AnnotationAck, error) {
	if r == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty feedback")
	}
	rq := *r
	var ds []writ.Detail
	bad := func(field, msg string) { ds = append(ds, writ.Detail{Field: field, Message: msg}) }
	if s := rq.Score; s != nil && (math.IsNaN(*s) || *s < 0 || *s > 1) {
		bad("score", "must be a number from 0 to 1")
	}
	if strings.TrimSpace(rq.Label) == "" {
		bad("label", "required: name the feedback (correct, wrong_outcome, ...)")
	}
	for field, s := range map[string]string{"label": rq.Label, "comment": rq.Comment, "rule_change": rq.RuleChange} {
		if len(s) > maxAnnotationText {
			bad(field, fmt.Sprintf("longer than %d bytes", maxAnnotationText))
		}
	}
	bindSubject(ctx, &rq.Author, "author", "the feedback's author", bad)
	env := annotationEnvelope{Kind: writ.StoryFeedback, TenantID: rq.TenantID, RecordID: rq.RecordID, By: rq.Author, TraceID: rq.TraceID, Score: rq.Score}
	return e.annotate(ctx, &env, ds, func(env *annotationEnvelope) {
		env.Label, env.Comment, env.RuleChange = e.redactor.String(rq.Label), e.redactor.String(rq.Comment), e.redactor.String(rq.RuleChange)
	})
}

// RecordReplay seals a replay's result; see writ.Annotations.
func (e *Engine) RecordReplay(ctx context.Context, res *writ.ReplayResult) (*writ.AnnotationAck, error) {
	if res == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty replay result")
	}
	switch res.Status {
	case writ.ReplayEqual, writ.ReplayDiff, writ.ReplayError:
	default:
		return nil, writ.Errorf(writ.EINVALID, "replay status %q is not replay_equal, diff or error", res.Status)
	}
	digest, err := record.CanonicalDigest(res)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	env := annotationEnvelope{Kind: writ.StoryReplayResult, TenantID: res.TenantID, RecordID: res.RecordID, By: ReplayActor,
		Status: res.Status, Classes: slices.Clone(res.Classes), ResultDigest: digest}
	return e.annotate(ctx, &env, nil, nil)
}

// annotate checks the record an annotation is about and seals the
// annotation's record. redact fills the envelope's free text.
func (e *Engine) annotate(ctx context.Context, env *annotationEnvelope, ds []writ.Detail, redact func(*annotationEnvelope)) (*writ.AnnotationAck, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if env.TenantID == "" || !tenantPattern.MatchString(env.TenantID) {
		ds = append(ds, writ.Detail{Field: "tenant_id", Message: "a valid tenant_id is required"})
	}
	if env.RecordID == "" {
		ds = append(ds, writ.Detail{Field: "record_id", Message: "required"})
	}
	if env.TraceID != "" && !writ.ValidTraceID(env.TraceID) {
		ds = append(ds, writ.Detail{Field: "trace_id", Message: "must be 32 lowercase hex digits, not all zero"})
	}
	what := map[string]string{writ.StoryRetraction: "retraction", writ.StoryFeedback: "feedback", writ.StoryReplayResult: "replay result"}[env.Kind]
	if len(ds) > 0 {
		slices.SortFunc(ds, func(a, b writ.Detail) int { return strings.Compare(a.Field, b.Field) })
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid " + what + ": " + detailsSummary(ds), Details: ds}
	}
	sr, err := e.store.Record(ctx, env.TenantID, env.RecordID)
	if err != nil {
		return nil, err
	}
	target := &sr.Record
	// A retraction or a feedback entry is about a decision's record; a
	// replay is recorded for every record but a replay result's own.
	if k := AnnotationKind(target.DecisionKey); k != "" && (env.Kind != writ.StoryReplayResult || k == writ.StoryReplayResult) {
		return nil, writ.Errorf(writ.ECONFLICT, "record %s is a %s record, a record about record %v: no %s is recorded about it", target.RecordID, k, target.Outputs["record_id"], what)
	}
	if env.Kind == writ.StoryRetraction {
		links, err := e.Links(ctx, env.TenantID, env.RecordID)
		if err != nil {
			return nil, err
		}
		if links.Retracted {
			return nil, writ.Errorf(writ.ECONFLICT, "record %s is already retracted (record %s)", env.RecordID, links.RetractedBy)
		}
	}
	if redact != nil {
		redact(env)
	}
	if env.TraceID == "" {
		// The annotation joins the record's trace: one decision, one story.
		env.TraceID = target.TraceID
	}
	envelope, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	if hasNUL(envelope) {
		return nil, errNUL
	}
	p := e.policy.Pack
	now := e.now().UTC()
	rec, err := AnnotationRecord(p, e.newID("dr_", now), envelope, target, now, redactionIDs(p))
	if err != nil {
		return nil, err
	}
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: "the " + what + "'s record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	ack := &writ.AnnotationAck{TenantID: rec.TenantID, RecordID: rec.RecordID, About: target.RecordID, DecisionID: rec.DecisionID,
		Kind: env.Kind, Status: rec.Status, Outcome: fmt.Sprint(rec.Outputs["outcome"]), TraceID: rec.TraceID}
	receipt, err := json.Marshal(ack)
	if err != nil {
		return nil, err
	}
	entry := &ledger.Entry{Record: rec, Receipt: receipt, Envelope: envelope}
	if err := ledger.Bind(entry, nil); err != nil {
		return nil, err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, fmt.Errorf("canonicalize %s record: %w", what, err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		return nil, notRecorded("the "+what, err)
	}
	return ack, nil
}

// Links returns what the ledger holds about a record; see
// writ.Annotations.
func (e *Engine) Links(ctx context.Context, tenantID, recordID string) (*writ.RecordLinks, error) {
	if err := needTenant(tenantID); err != nil {
		return nil, err
	}
	if _, err := e.store.Record(ctx, tenantID, recordID); err != nil {
		return nil, err
	}
	return RecordLinks(ctx, e.store, tenantID, recordID)
}

// RecordLinks reads what a store holds about a record: the records that
// refer to it (writ.RecordQuery.RefersTo), sorted out by kind.
func RecordLinks(ctx context.Context, st interface {
	Records(context.Context, writ.RecordQuery) (*writ.RecordPage, error)
}, tenantID, recordID string) (*writ.RecordLinks, error) {
	out := &writ.RecordLinks{TenantID: tenantID, RecordID: recordID, SupersededBy: []string{}, Feedback: []string{}}
	q := writ.RecordQuery{TenantID: tenantID, RefersTo: recordID, Limit: 1000}
	for {
		page, err := st.Records(ctx, q)
		if err != nil {
			return nil, err
		}
		for i := range page.Records {
			rec := &page.Records[i].Record
			switch AnnotationKind(rec.DecisionKey) {
			case writ.StoryFeedback:
				out.Feedback = append(out.Feedback, rec.RecordID)
				continue
			case writ.StoryReplayResult:
				last := &writ.LastReplay{RecordID: rec.RecordID, At: rec.Timestamp}
				last.LastStatus, _ = rec.Outputs["outcome"].(string)
				if cs, ok := rec.Outputs["classes"].([]any); ok {
					for _, c := range cs {
						if s, ok := c.(string); ok {
							last.Classes = append(last.Classes, s)
						}
					}
				}
				if out.Replay != nil {
					last.Replays = out.Replay.Replays
				}
				last.Replays++
				out.Replay = last
				continue
			case writ.StoryRetraction:
				if !out.Retracted {
					out.Retracted, out.RetractedBy = true, rec.RecordID
				}
			}
			if rec.Supersedes == recordID {
				out.SupersededBy = append(out.SupersededBy, rec.RecordID)
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		q.Cursor = page.NextCursor
	}
}
