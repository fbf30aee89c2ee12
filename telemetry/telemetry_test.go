package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
	"github.com/writhq/writ/telemetry"
)

// serveRefund starts the refund example pack behind the HTTP API, with
// the engine's commits observed by observe, on loopback.
func serveRefund(t testing.TB, tp trace.TracerProvider, observe func(ledger.Commit), wrap func(*engine.Engine) writ.Service, handler func(*httpapi.Server) http.Handler) (*engine.Engine, *httptest.Server) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := pack.Load(filepath.Join("..", "examples", "refund"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC) // the examples' time
	// The identity verification the examples cite, on file as the pack's
	// tests keep it (a refund accepts no evidence that is only the
	// caller's word), through an engine of its own, so that the engine
	// under test observes and traces only what the test sends.
	pre, err := engine.New(context.Background(), engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	observed := time.Date(2026, 5, 9, 9, 10, 0, 0, time.UTC)
	idv := writ.WithPrincipal(context.Background(), &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example", Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	if _, err := pre.AddEvidence(idv, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: "idv_771",
		SubjectIDs: []string{"customer:cus_77"}, Attributes: map[string]any{"method": "otp"}, ObservedAt: &observed}); err != nil {
		t.Fatal(err)
	}
	pre.Close()
	cfg := engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32), Now: func() time.Time { return clock }}
	cfg.Appender.Observe = observe
	cfg.TracerProvider = tp
	eng, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.NewServer(wrap(eng), httpapi.Config{})
	srv := httptest.NewServer(handler(api))
	t.Cleanup(func() {
		srv.Close()
		eng.Close()
		st.Close()
	})
	return eng, srv
}

func example(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "refund", "requests", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t *testing.T, srv *httptest.Server, body []byte, traceparent string) *writ.Receipt {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/check", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rc writ.Receipt
	if err := json.NewDecoder(resp.Body).Decode(&rc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("check: %d %v", resp.StatusCode, err)
	}
	return &rc
}

// TestCheckSpanTree collects the spans of checks with the SDK's in-memory
// exporter: the HTTP server span continues the caller's traceparent, and
// under it are writ.check, writ.decide, writ.ledger.append and, under the
// append, its queue wait and commit; the record's trace_id is the
// trace's. A check without a traceparent starts a trace, and its record
// carries that trace's id.
func TestCheckSpanTree(t *testing.T) {
	exp, tp := globalMemoryTracing(t)
	eng, srv := serveRefund(t, tp, telemetry.TraceCommit,
		func(e *engine.Engine) writ.Service { return telemetry.Service(e, nil) },
		func(s *httpapi.Server) http.Handler { return telemetry.HTTPHandler(s) })

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tt := range []struct {
		name, traceparent string
	}{
		{"continued", "00-" + traceID + "-" + parentID + "-01"},
		{"started", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exp.Reset()
			// Its own idempotency key: an earlier answer is not decided again.
			body := bytes.Replace(example(t, "refund-allow"), []byte(`"ik_2x9k4j7m1q8w0p3z"`), []byte(`"ik_`+tt.name+`"`), 1)
			rc := post(t, srv, body, tt.traceparent)
			want := map[string]string{ // span → its parent's name
				"POST /v1/check":         "",
				"writ.check":             "POST /v1/check",
				"writ.decide":            "writ.check",
				"writ.ledger.append":     "writ.decide",
				"writ.ledger.queue_wait": "writ.ledger.append",
				"writ.ledger.commit":     "writ.ledger.append",
			}
			// The queue wait and commit spans are made on the commit loop
			// once the caller is answered: wait for them.
			var spans tracetest.SpanStubs
			for deadline := time.Now().Add(10 * time.Second); ; {
				spans = exp.GetSpans()
				if len(spans) >= len(want) || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			byID := map[string]tracetest.SpanStub{}
			for _, s := range spans {
				byID[s.SpanContext.SpanID().String()] = s
			}
			got := map[string]string{}
			for _, s := range spans {
				parent := ""
				if p, ok := byID[s.Parent.SpanID().String()]; ok {
					parent = p.Name
				}
				got[s.Name] = parent
				if s.SpanContext.TraceID().String() != rc.Metadata.TraceID {
					t.Errorf("span %s is in trace %s, want the receipt's %s", s.Name, s.SpanContext.TraceID(), rc.Metadata.TraceID)
				}
			}
			if len(got) != len(want) {
				t.Errorf("spans %v, want %v", got, want)
			}
			for name, parent := range want {
				if p, ok := got[name]; !ok || p != parent {
					t.Errorf("span %s: parent %q (present %v), want %q", name, p, ok, parent)
				}
			}
			server := spans[0]
			for _, s := range spans {
				if s.Name == "POST /v1/check" {
					server = s
				}
			}
			if tt.traceparent != "" {
				if server.SpanContext.TraceID().String() != traceID || server.Parent.SpanID().String() != parentID || !server.Parent.IsRemote() {
					t.Errorf("server span %s/%s parent %s: want trace %s continued from %s", server.SpanContext.TraceID(), server.SpanContext.SpanID(), server.Parent.SpanID(), traceID, parentID)
				}
			}
			rec, err := eng.Record(context.Background(), "acme", rc.Metadata.RecordID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Record.TraceID != server.SpanContext.TraceID().String() {
				t.Errorf("record trace_id = %s, want the span's trace id %s", rec.Record.TraceID, server.SpanContext.TraceID())
			}
		})
	}
}

// TestCheckBodyTraceJoins: a check whose body sets trace_id, sent
// without a traceparent header, has its HTTP span in a trace of its own
// (the middleware starts one before the body is read), but writ.check
// continues the body's trace under a remote parent with the HTTP span's
// id, and links to the HTTP span: writ.check, the decide, append, queue
// wait and commit spans are in the body's trace, which the record
// carries.
func TestCheckBodyTraceJoins(t *testing.T) {
	exp, tp := globalMemoryTracing(t)
	eng, srv := serveRefund(t, tp, telemetry.TraceCommit,
		func(e *engine.Engine) writ.Service { return telemetry.Service(e, nil) },
		func(s *httpapi.Server) http.Handler { return telemetry.HTTPHandler(s) })

	const bodyTrace = "0af7651916cd43dd8448eb211c80319c"
	var req map[string]any
	if err := json.Unmarshal(example(t, "refund-allow"), &req); err != nil {
		t.Fatal(err)
	}
	req["trace_id"] = bodyTrace
	body, _ := json.Marshal(req)
	rc := post(t, srv, body, "")
	if rc.Metadata.TraceID != bodyTrace {
		t.Fatalf("receipt trace_id = %s, want the body's %s", rc.Metadata.TraceID, bodyTrace)
	}
	inBody := []string{"writ.check", "writ.decide", "writ.ledger.append", "writ.ledger.queue_wait", "writ.ledger.commit"}
	// The queue wait and commit spans are made on the commit loop once
	// the caller is answered: wait for them.
	var spans tracetest.SpanStubs
	for deadline := time.Now().Add(10 * time.Second); ; {
		spans = exp.GetSpans()
		if len(spans) >= len(inBody)+1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	server, ok := byName["POST /v1/check"]
	if !ok || len(spans) != len(inBody)+1 {
		t.Fatalf("spans %v, want the server span and %v", spans.Snapshots(), inBody)
	}
	if server.SpanContext.TraceID().String() == bodyTrace || server.Parent.IsValid() {
		t.Errorf("server span in trace %s with parent %v: want a root of a trace of its own", server.SpanContext.TraceID(), server.Parent)
	}
	for _, name := range inBody {
		if s, ok := byName[name]; !ok || s.SpanContext.TraceID().String() != bodyTrace {
			t.Errorf("span %s (present %v) is in trace %s, want the body's %s", name, ok, s.SpanContext.TraceID(), bodyTrace)
		}
	}
	check := byName["writ.check"]
	if check.Parent.TraceID().String() != bodyTrace || check.Parent.SpanID() != server.SpanContext.SpanID() || !check.Parent.IsRemote() {
		t.Errorf("writ.check parent %s/%s remote %v: want the body's trace with the server span's id %s, remote", check.Parent.TraceID(), check.Parent.SpanID(), check.Parent.IsRemote(), server.SpanContext.SpanID())
	}
	if len(check.Links) != 1 || !check.Links[0].SpanContext.Equal(server.SpanContext) || linkKind(check.Links[0].Attributes) != "request_span" {
		t.Errorf("writ.check links %+v: want one, request_span, to the server span %s/%s", check.Links, server.SpanContext.TraceID(), server.SpanContext.SpanID())
	}
	if decide := byName["writ.decide"]; decide.Parent.SpanID() != check.SpanContext.SpanID() {
		t.Errorf("writ.decide parent %s, want writ.check %s", decide.Parent.SpanID(), check.SpanContext.SpanID())
	}
	rec, err := eng.Record(context.Background(), "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Record.TraceID != bodyTrace {
		t.Errorf("record trace_id = %s, want the body's %s", rec.Record.TraceID, bodyTrace)
	}
}

// linkKind is the writ.link attribute of a link.
func linkKind(attrs []attribute.KeyValue) string {
	for _, kv := range attrs {
		if kv.Key == "writ.link" {
			return kv.Value.AsString()
		}
	}
	return ""
}

// TestMetricsMoveWithChecks scrapes the metrics in the Prometheus text
// format, parses them with expfmt, and checks the counters move with the
// checks made.
func TestMetricsMoveWithChecks(t *testing.T) {
	var eng *engine.Engine
	m := telemetry.NewMetrics(telemetry.Gauges{QueueDepth: func() int { return eng.QueueDepth() }})
	eng, srv := serveRefund(t, nil, m.ObserveCommit,
		func(e *engine.Engine) writ.Service { return telemetry.Service(e, m) },
		func(s *httpapi.Server) http.Handler { return s })
	metrics := httptest.NewServer(m.Handler())
	defer metrics.Close()

	scrape := func() map[string]float64 {
		t.Helper()
		resp, err := metrics.Client().Get(metrics.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for name, f := range fams {
			for _, mt := range f.GetMetric() {
				key := name
				for _, l := range mt.GetLabel() {
					key += "," + l.GetName() + "=" + l.GetValue()
				}
				switch {
				case mt.Counter != nil:
					out[key] = mt.GetCounter().GetValue()
				case mt.Gauge != nil:
					out[key] = mt.GetGauge().GetValue()
				case mt.Histogram != nil:
					out[key+",count"] = float64(mt.GetHistogram().GetSampleCount())
				}
			}
		}
		return out
	}
	before := scrape()
	for _, name := range []string{"refund-allow", "refund-high-value-human-review", "refund-account-frozen-goal-fail"} {
		post(t, srv, example(t, name), "")
	}
	post(t, srv, bytes.Replace(example(t, "refund-allow"), []byte(`"ik_2x9k4j7m1q8w0p3z"`), []byte(`"ik_other"`), 1), "")
	// The appender observes a commit after it has answered the batch's
	// callers, so the last commit may reach the metrics a moment after
	// the last answer: scrape until it has (or the deadline passes and
	// the assertions below say what is missing).
	after := scrape()
	for deadline := time.Now().Add(10 * time.Second); after["writ_ledger_commit_batch_size,count"]-before["writ_ledger_commit_batch_size,count"] < 4 && time.Now().Before(deadline); {
		runtime.Gosched()
		after = scrape()
	}
	const key = "support.refund.execute"
	for _, tt := range []struct {
		series string
		delta  float64
	}{
		{"writ_checks_total,decision_key=" + key + ",outcome=allow", 2},
		{"writ_checks_total,decision_key=" + key + ",outcome=replan_required", 1},
		{"writ_checks_total,decision_key=" + key + ",outcome=goal_fail_terminal", 1},
		{"writ_check_duration_seconds,count", 4},
		{"writ_ledger_commit_batch_size,count", 4},
		{"writ_ledger_commit_duration_seconds,count", 4},
	} {
		if d := after[tt.series] - before[tt.series]; d != tt.delta {
			t.Errorf("%s moved by %v, want %v", tt.series, d, tt.delta)
		}
	}
	for _, series := range []string{"writ_ledger_queue_depth", "go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := after[series]; !ok {
			t.Errorf("%s is not exported", series)
		}
	}
	for series := range after {
		if strings.HasPrefix(series, "writ_checks_total") && !strings.Contains(series, "decision_key="+key) {
			t.Errorf("unexpected series %s", series)
		}
	}
}

// TestCommitTracer: the commit tracer makes, off the commit loop, the
// spans TraceCommit makes: under each record's append span a queue wait
// (from its queueing to the commit's start) and a commit (the
// transaction, with the batch size). Close makes the spans of the
// commits handed over; a commit observed after Close is dropped and
// counted.
func TestCommitTracer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		tp.Shutdown(context.Background())
	})
	ct := telemetry.NewCommitTracer(8)
	at := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
	var appends []trace.Span
	c := ledger.Commit{Start: at.Add(3 * time.Millisecond), End: at.Add(5 * time.Millisecond)}
	for i := range 2 {
		ctx, span := tp.Tracer("test").Start(context.Background(), "writ.ledger.append")
		appends = append(appends, span)
		c.Waits = append(c.Waits, ledger.Wait{Ctx: ctx, Queued: at.Add(time.Duration(i) * time.Millisecond)})
	}
	ct.Observe(c)
	ct.Close()
	ct.Observe(c)
	if got := ct.Dropped(); got != 2 {
		t.Errorf("Dropped() = %d after a commit of 2 observed after Close, want 2", got)
	}
	spans := exp.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("spans %v, want a queue wait and a commit for each of 2 records", spans.Snapshots())
	}
	for i, s := range spans {
		parent := appends[i/2].SpanContext()
		wantName, wantStart, wantEnd := "writ.ledger.queue_wait", c.Waits[i/2].Queued, c.Start
		if i%2 == 1 {
			wantName, wantStart, wantEnd = "writ.ledger.commit", c.Start, c.End
		}
		if s.Name != wantName || s.Parent.SpanID() != parent.SpanID() || s.SpanContext.TraceID() != parent.TraceID() ||
			!s.StartTime.Equal(wantStart) || !s.EndTime.Equal(wantEnd) {
			t.Errorf("span %d: %s under %s from %s to %s; want %s under %s from %s to %s", i, s.Name, s.Parent.SpanID(), s.StartTime, s.EndTime,
				wantName, parent.SpanID(), wantStart, wantEnd)
		}
		if i%2 == 1 && (len(s.Attributes) != 1 || s.Attributes[0].Key != "writ.ledger.batch_size" || s.Attributes[0].Value.AsInt64() != 2) {
			t.Errorf("commit span attributes %v, want writ.ledger.batch_size 2", s.Attributes)
		}
	}
}

// batchSizes is a span exporter that records the size of each batch.
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, len(spans))
	return nil
}

func (b *batchSizes) Shutdown(context.Context) error { return nil }

// TestNewTracerProviderBatches: the batch span processor exports batches
// of up to 2048 spans (the SDK's default is 512), unless
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE says otherwise.
func TestNewTracerProviderBatches(t *testing.T) {
	for _, tt := range []struct {
		name, env string
		want      []int
	}{
		{"writ's default", "", []int{600}},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "250", []int{250, 250, 100}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", tt.env)
			}
			exp := &batchSizes{}
			tp := telemetry.NewTracerProvider(exp, os.Getenv)
			for range 600 {
				_, span := tp.Tracer("test").Start(context.Background(), "s")
				span.End()
			}
			if err := tp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			tp.Shutdown(context.Background())
			exp.mu.Lock()
			defer exp.mu.Unlock()
			if fmt.Sprint(exp.sizes) != fmt.Sprint(tt.want) {
				t.Errorf("batches %v, want %v", exp.sizes, tt.want)
			}
		})
	}
}

// globalMemoryTracing installs a tracer provider that records into an
// in-memory exporter, and the W3C propagator, as the global ones for the
// test (restored when it ends), as writ serve does with tracing on.
func globalMemoryTracing(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		tp.Shutdown(context.Background())
	})
	return exp, tp
}
