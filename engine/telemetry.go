package engine

import (
	"time"

	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// The engine's spans (writ.decide, writ.ledger.append) go through
// Config.TracerProvider: a no-op unless the server turns tracing on
// (package telemetry), so they cost next to nothing when off. The queue
// wait and commit spans under writ.ledger.append are made by the
// appender's Observe hook (telemetry.TraceCommit). The engine imports
// only the trace API, never the SDK or its exporters.

// newTracer returns the engine's tracer from tp (a no-op when nil).
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/writhq/writ/engine")
}

// spanTraceID returns the trace id of the span in ctx, or "" when there
// is none: a check made under a span is recorded with the span's trace
// id, so the trace and its records join.
func spanTraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// linkDecisionTrace links the span in ctx (writ.decision.report or
// writ.decision.resume, under a traced server) to the trace traceID, the
// trace of the decision the report or resume is about, when that is
// another trace: a report's record joins the decision's trace, and a
// resumed check the decision's, while the request's spans are in the
// request's own trace. A record keeps its trace id but no span id, so the
// link names the trace with a zero span id; its attributes say what it
// points at (writ.link "decision_trace", writ.decision_id).
func linkDecisionTrace(ctx context.Context, traceID, decisionID string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil || tid == span.SpanContext().TraceID() {
		return
	}
	span.AddLink(trace.Link{
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid}),
		Attributes:  []attribute.KeyValue{attribute.String("writ.link", "decision_trace"), attribute.String("writ.decision_id", decisionID)},
	})
}

// linkReportedDecision links a repeated report's span to the decision's
// trace. The stored acknowledgement names the report record's trace,
// which is the report body's own when it named one, so the check record
// it reported on is read for the decision's; only when the span is
// recorded, and a failed read leaves the span unlinked (the answer
// stands).
func (e *Engine) linkReportedDecision(ctx context.Context, ack *writ.ExecutionAck) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	if sr, err := e.store.Record(ctx, ack.TenantID, ack.ReportedFor); err == nil {
		linkDecisionTrace(ctx, sr.Record.TraceID, ack.DecisionID)
	}
}

// appendTraced appends entry under a writ.ledger.append span, waiting at
// most Config.CommitTimeout for the commit. A commit that outlives the
// deadline is not cancelled (cancelling a PostgreSQL commit that waits on
// a synchronous standby would let it return as if replicated): it may
// still land, and the caller, told errCommitTimeout, fails closed. An
// entry still queued when the deadline passes is dropped by the appender.
func (e *Engine) appendTraced(ctx context.Context, entry *ledger.Entry) error {
	ctx, span := e.tracer.Start(ctx, "writ.ledger.append")
	defer span.End()
	if e.commitTimeout <= 0 {
		return e.appender.Append(ctx, entry)
	}
	wait, cancel := context.WithTimeoutCause(ctx, e.commitTimeout, errCommitTimeout)
	defer cancel()
	err := e.appender.Append(wait, entry)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wait), errCommitTimeout) {
		e.log.Error("a commit outlived the commit timeout; answering fail-closed", "timeout", e.commitTimeout.String(), "queue_depth", e.appender.QueueDepth())
		return errCommitTimeout
	}
	return err
}

// errCommitTimeout: the record's commit did not return within
// Config.CommitTimeout. It may still land.
var errCommitTimeout = errors.New("the ledger did not commit within the commit timeout")

// notRecorded is the error of an approval decision, execution report or
// step attempt whose record could not be committed.
func notRecorded(what string, err error) error {
	if errors.Is(err, errCommitTimeout) {
		return &writ.Error{Code: writ.EUNAVAILABLE, Message: what + " was not committed within the commit timeout; it may still be recorded. Retry it: a retry of the same request is answered as a repeat if the first one landed", Err: err}
	}
	return &writ.Error{Code: writ.EUNAVAILABLE, Message: what + " could not be recorded; it did not count, retry it", Err: err}
}

// LastCommitFailure returns when the last group commit failed, and false
// if it did not (for GET /readyz).
func (e *Engine) LastCommitFailure() (time.Time, bool) { return e.appender.LastFailure() }

// CommitUnderWay returns when the group commit under way began, and
// false between commits (for GET /readyz).
func (e *Engine) CommitUnderWay() (time.Time, bool) { return e.appender.Committing() }

// CommitTimeout is Config.CommitTimeout: how long a check waits for its
// record's commit before it is answered fail-closed (0: no limit).
func (e *Engine) CommitTimeout() time.Duration { return e.commitTimeout }

// QueueDepth returns the number of records waiting for a group commit
// (for the writ_ledger_queue_depth gauge).
func (e *Engine) QueueDepth() int { return e.appender.QueueDepth() }
