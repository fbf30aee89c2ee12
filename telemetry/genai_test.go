package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/writhq/writ/telemetry"
)

// TestToolCallSpan: a tool call continues the trace of the MCP request's
// _meta and is an execute_tool span with the GenAI attributes.
func TestToolCallSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	ctx := telemetry.ContextFromMeta(context.Background(), map[string]any{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "progressToken": 3})
	_, span := telemetry.StartToolCall(ctx, "payments.issue_refund", "tc_121")
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "execute_tool payments.issue_refund" || s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("span %s in trace %s, parent %s: want execute_tool payments.issue_refund continuing the _meta traceparent", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	got := map[string]string{}
	for _, a := range s.Attributes {
		got[string(a.Key)] = a.Value.Emit()
	}
	for k, v := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.issue_refund", "gen_ai.tool.call.id": "tc_121", "gen_ai.tool.type": "function"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if ctx := telemetry.ContextFromMeta(context.Background(), map[string]any{"traceparent": "bogus"}); oteltrace.SpanContextFromContext(ctx).IsValid() {
		t.Error("an invalid _meta traceparent was continued")
	}
}

// TestToolCallTraceWithTracingOff: with no tracer and no propagator set
// (tracing off), a tool call still takes the _meta trace id, so the
// check's receipt and record name the caller's trace.
func TestToolCallTraceWithTracingOff(t *testing.T) {
	prevProp := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) // reads nothing
	t.Cleanup(func() { otel.SetTextMapPropagator(prevProp) })

	ctx := telemetry.ContextFromMeta(context.Background(), map[string]any{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	_, span := telemetry.StartToolCall(ctx, "payments.issue_refund", "")
	defer span.End()
	if got := span.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s, want the _meta traceparent's", got)
	}
}
