package gateway_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/gateway"
	"github.com/writhq/writ/telemetry"
)

// TestToolCallTrace: the spans of one tools/call through the gateway,
// collected with the in-memory exporter: an execute_tool span continuing
// the traceparent of the request's _meta, the check and the ledger
// append under it, and the record's trace_id equal to the trace's.
func TestToolCallTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	eng, _, pol := newEngine(t, packDir(), func(c *engine.Config) { c.TracerProvider = tp })
	w := struct {
		writ.Service
		writ.Lifecycle
	}{telemetry.Service(eng, nil), eng}
	up := &files{}
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs."}}}
	gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: w, Tools: pol.Pack.Tools, Transport: up.connect})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	f := &fixture{eng: eng, gw: gw, up: up}
	cs := f.client(t, protocols[1])

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	exp.Reset()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": "/allowed/t"},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool = %v, %v", res, err)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		byName[s.Name()] = s
	}
	tool, ok := byName["execute_tool fs.write_file"]
	if !ok {
		t.Fatalf("no execute_tool span among %v", keys(byName))
	}
	if got := tool.SpanContext().TraceID().String(); got != traceID || tool.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("execute_tool span in trace %s under %s, want the _meta traceparent's", got, tool.Parent().SpanID())
	}
	attrs := map[string]string{}
	for _, a := range tool.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["gen_ai.operation.name"] != "execute_tool" || attrs["gen_ai.tool.name"] != "fs.write_file" || attrs["gen_ai.tool.call.id"] == "" {
		t.Errorf("execute_tool attributes = %v", attrs)
	}
	check, ok := byName["writ.check"]
	if !ok || check.Parent().SpanID() != tool.SpanContext().SpanID() {
		t.Errorf("writ.check is not a child of execute_tool (spans %v)", keys(byName))
	}
	if d, ok := byName["writ.decide"]; !ok || d.Parent().SpanID() != check.SpanContext().SpanID() {
		t.Errorf("writ.decide is not a child of writ.check (spans %v)", keys(byName))
	}
	ids := decisionsOf(t, eng, "files.write")
	_, st := story(t, eng, ids[0])
	for _, r := range st.Records {
		var rec writ.Record
		if err := jsonUnmarshal(r.Record, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.TraceID != traceID {
			t.Errorf("%s record %s has trace_id %s, want the trace's %s", r.Kind, r.RecordID, rec.TraceID, traceID)
		}
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
