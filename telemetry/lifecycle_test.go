package telemetry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/telemetry"
)

// TestLifecycleSpans collects the spans of the lifecycle routes with the
// in-memory exporter: each route's HTTP span continues the caller's
// traceparent and has the route's writ.decision.* span under it, naming
// the tenant and the decision.
func TestLifecycleSpans(t *testing.T) {
	exp, tp := globalMemoryTracing(t)
	wrap := func(e *engine.Engine) writ.Service { return telemetry.Service(e, nil) }
	eng, _ := serveRefund(t, tp, telemetry.TraceCommit, wrap, func(s *httpapi.Server) http.Handler { return s })
	api := httpapi.NewServer(wrap(eng), httpapi.Config{Lifecycle: telemetry.Lifecycle(eng)})
	srv := httptest.NewServer(telemetry.HTTPHandler(api))
	t.Cleanup(srv.Close)

	permit := post(t, srv, example(t, "refund-allow"), "")
	blockedBody := example(t, "refund-high-value-human-review")
	blocked := post(t, srv, blockedBody, "")
	if !permit.SafeToExecute || blocked.SafeToExecute {
		t.Fatalf("the examples decided %s and %s", permit.Outcome, blocked.Outcome)
	}

	if permit.Metadata.TraceID == "" || blocked.Metadata.TraceID == "" {
		t.Fatal("a receipt has no trace id")
	}
	for i, tt := range []struct {
		method, path, body string
		route, span        string
		decisionID         string
		attrs              map[string]string
		link               string // the trace the span links to, if any
	}{
		{"GET", "/v1/decisions/in_flight?tenant_id=acme", "", "GET /v1/decisions/in_flight", "writ.decision.in_flight", "", nil, ""},
		{"GET", "/v1/decisions/" + permit.DecisionID + "?tenant_id=acme", "", "GET /v1/decisions/{id}", "writ.decision.story", permit.DecisionID, nil, ""},
		// A report whose body names a trace of its own: its record is in
		// that trace, and the span still links to the decision's.
		{"POST", "/v1/decisions/" + permit.DecisionID + "/execution", `{"tenant_id":"acme","status":"succeeded","trace_id":"0af7651916cd43dd8448eb211c80319c"}`, "POST /v1/decisions/{id}/execution", "writ.decision.report", permit.DecisionID,
			map[string]string{"writ.execution": "succeeded", "writ.status": "CLOSED"}, permit.Metadata.TraceID},
		// The same report again: answered with the first acknowledgement,
		// linked the same.
		{"POST", "/v1/decisions/" + permit.DecisionID + "/execution", `{"tenant_id":"acme","status":"succeeded","trace_id":"0af7651916cd43dd8448eb211c80319c"}`, "POST /v1/decisions/{id}/execution", "writ.decision.report", permit.DecisionID,
			map[string]string{"writ.repeated": "true"}, permit.Metadata.TraceID},
		{"POST", "/v1/decisions/" + blocked.DecisionID + "/resume", `{"tenant_id":"acme","wait":"10ms","request":` + string(blockedBody) + `}`, "POST /v1/decisions/{id}/resume", "writ.decision.resume", blocked.DecisionID,
			map[string]string{"writ.repeated": writ.RepeatedStillWaiting, "writ.outcome": string(blocked.Outcome)}, blocked.Metadata.TraceID},
	} {
		t.Run(tt.span, func(t *testing.T) {
			exp.Reset()
			traceID := fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e47%02x", i)
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, bytes.NewReader([]byte(tt.body)))
			req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 != 2 || !json.Valid(b) {
				t.Fatalf("%s %s = %d %s", tt.method, tt.path, resp.StatusCode, b)
			}
			// The route's spans end before it answers.
			var server, inner *tracetest.SpanStub
			spans := exp.GetSpans()
			for i := range spans {
				switch spans[i].Name {
				case tt.route:
					server = &spans[i]
				case tt.span:
					inner = &spans[i]
				}
			}
			if server == nil || inner == nil {
				t.Fatalf("spans %v: want %q with %q under it", spans.Snapshots(), tt.route, tt.span)
			}
			if inner.Parent.SpanID() != server.SpanContext.SpanID() || inner.SpanContext.TraceID().String() != traceID || server.SpanContext.TraceID().String() != traceID {
				t.Errorf("%s: parent %s, trace %s; want under %s in the caller's trace %s", tt.span, inner.Parent.SpanID(), inner.SpanContext.TraceID(), server.SpanContext.SpanID(), traceID)
			}
			want := map[string]string{"writ.tenant_id": "acme"}
			if tt.decisionID != "" {
				want["writ.decision_id"] = tt.decisionID
			}
			for k, v := range tt.attrs {
				want[k] = v
			}
			got := map[string]string{}
			for _, kv := range inner.Attributes {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: attribute %s = %q, want %q (all: %v)", tt.span, k, got[k], v, got)
				}
			}
			// A report's record, and a resumed check, are in the decision's
			// trace: the span, in the request's, links to it.
			switch {
			case tt.link == "" && len(inner.Links) != 0:
				t.Errorf("%s: links %+v, want none", tt.span, inner.Links)
			case tt.link != "":
				if tt.link == traceID {
					t.Fatalf("the decision's trace %s is the request's", tt.link)
				}
				if len(inner.Links) != 1 || inner.Links[0].SpanContext.TraceID().String() != tt.link || linkKind(inner.Links[0].Attributes) != "decision_trace" {
					t.Errorf("%s: links %+v, want one, decision_trace, to the decision's trace %s", tt.span, inner.Links, tt.link)
				}
			}
		})
	}
}
