package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The MCP gateway (not built yet) traces each tools/call it forwards with
// StartToolCall, under the trace its caller sent in the request's _meta
// (ContextFromMeta). They are here so the gateway has one place to call.

// GenAI semantic convention attribute keys of a tool execution span.
const (
	attrGenAIOperation = attribute.Key("gen_ai.operation.name")
	attrGenAIToolName  = attribute.Key("gen_ai.tool.name")
	attrGenAIToolCall  = attribute.Key("gen_ai.tool.call.id")
	attrGenAIToolType  = attribute.Key("gen_ai.tool.type")
)

// StartToolCall starts the span of one tool call, as the OpenTelemetry
// GenAI semantic conventions name it: "execute_tool <tool>", kind
// internal, with gen_ai.operation.name execute_tool, gen_ai.tool.name,
// gen_ai.tool.call.id (when known) and gen_ai.tool.type function. The
// check of the call runs under it (its writ.check span is a child).
func StartToolCall(ctx context.Context, tool, callID string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attrGenAIOperation.String("execute_tool"), attrGenAIToolName.String(tool), attrGenAIToolType.String("function")}
	if callID != "" {
		attrs = append(attrs, attrGenAIToolCall.String(callID))
	}
	return tracer().Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// ContextFromMeta returns ctx continuing the W3C trace context an MCP
// request carries in its _meta ("traceparent", and "tracestate"), when it
// is valid; otherwise ctx unchanged.
func ContextFromMeta(ctx context.Context, meta map[string]any) context.Context {
	carrier := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := meta[k].(string); ok {
			carrier[k] = v
		}
	}
	if len(carrier) == 0 {
		return ctx
	}
	// W3C trace context always, not the global propagator: with tracing
	// off that propagator reads nothing, and the check would lose the
	// caller's trace id, which its receipt and record carry either way.
	return propagation.TraceContext{}.Extract(ctx, carrier)
}
