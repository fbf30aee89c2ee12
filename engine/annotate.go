package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
)

var _ writ.Annotations = (*Engine)(nil)

// ReplayActor is the actor of a replay result's record: writ itself.
const ReplayActor = "writ.replay"

// maxAnnotationText bounds the free-text members of a retraction or a
// feedback entry.
const maxAnnotationText = 4096

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
	env := record.AnnotationEnvelope{Kind: writ.StoryRetraction, TenantID: rq.TenantID, RecordID: rq.RecordID, By: rq.By, TraceID: rq.TraceID}
	return e.annotate(ctx, &env, ds, func(env *record.AnnotationEnvelope) { env.Reason = e.redactor.String(rq.Reason) })
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
	env := record.AnnotationEnvelope{Kind: writ.StoryFeedback, TenantID: rq.TenantID, RecordID: rq.RecordID, By: rq.Author, TraceID: rq.TraceID, Score: rq.Score}
	return e.annotate(ctx, &env, ds, func(env *record.AnnotationEnvelope) {
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
	env := record.AnnotationEnvelope{Kind: writ.StoryReplayResult, TenantID: res.TenantID, RecordID: res.RecordID, By: ReplayActor,
		Status: res.Status, Classes: slices.Clone(res.Classes), ResultDigest: digest}
	return e.annotate(ctx, &env, nil, nil)
}

// annotate checks the record an annotation is about and seals the
// annotation's record. redact fills the envelope's free text.
func (e *Engine) annotate(ctx context.Context, env *record.AnnotationEnvelope, ds []writ.Detail, redact func(*record.AnnotationEnvelope)) (*writ.AnnotationAck, error) {
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
	if k := record.AnnotationKind(target.DecisionKey); k != "" && (env.Kind != writ.StoryReplayResult || k == writ.StoryReplayResult) {
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
	rec, err := record.Annotation(p, e.newID("dr_", now), envelope, target, now)
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
			switch record.AnnotationKind(rec.DecisionKey) {
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
