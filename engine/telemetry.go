package engine

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

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

// appendTraced appends entry under a writ.ledger.append span.
func (e *Engine) appendTraced(ctx context.Context, entry *ledger.Entry) error {
	ctx, span := e.tracer.Start(ctx, "writ.ledger.append")
	defer span.End()
	return e.appender.Append(ctx, entry)
}

// QueueDepth returns the number of records waiting for a group commit
// (for the writ_ledger_queue_depth gauge).
func (e *Engine) QueueDepth() int { return e.appender.QueueDepth() }
