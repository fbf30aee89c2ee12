package telemetry

import (
	"context"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// ScopeName is the instrumentation scope of writ's spans.
const ScopeName = "github.com/writhq/writ"

// tracer returns writ's tracer from the global provider, so the provider
// SetupTracing installs (or a test's) is the one used. The tracer is kept
// for as long as the global provider stays the same: the SDK provider
// looks a tracer up under a lock, which every span would otherwise pay.
func tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	if c := cachedTracer.Load(); c != nil && c.tp == tp {
		return c.tracer
	}
	t := tp.Tracer(ScopeName)
	// Only a provider of a comparable type can be recognised again (an
	// interface comparison of another type is false, never a panic).
	if tp != nil && reflect.TypeOf(tp).Comparable() {
		cachedTracer.Store(&providerTracer{tp: tp, tracer: t})
	}
	return t
}

// providerTracer is a tracer and the provider it came from.
type providerTracer struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
}

var cachedTracer atomic.Pointer[providerTracer]

// TracerProvider returns the provider writ's spans go through: the one
// SetupTracing installed, or a no-op.
func TracerProvider() trace.TracerProvider { return otel.GetTracerProvider() }

// TracingEnabled reports whether the OTEL_* environment asks for traces:
// OTEL_TRACES_EXPORTER is set to something other than "none", or an OTLP
// endpoint is configured, and OTEL_SDK_DISABLED is not "true". Tracing is
// off by default.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// SetupTracing installs a tracer provider exporting with the exporter the
// standard OTEL_* variables select (OTLP over HTTP or gRPC, or the
// console; see go.opentelemetry.io/contrib/exporters/autoexport), with the
// resource of OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service.name
// defaults to "writ") and the sampler of OTEL_TRACES_SAMPLER, and the W3C
// trace context and baggage propagators. version is the service version.
// The returned shutdown flushes and stops the exporter.
func SetupTracing(ctx context.Context, version string) (shutdown func(context.Context) error, err error) {
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("writ"), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	tp := NewTracerProvider(exp, os.Getenv, sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// Batch span processor settings for a server, used unless the matching
// OTEL_BSP_* variable is set: a check makes six spans, so at a thousand
// checks a second the SDK's defaults (a queue of 2048, batches of 512)
// drop spans after a third of a second of a stalled collector and export
// a dozen small batches a second.
const (
	bspMaxQueueSize       = 8192
	bspMaxExportBatchSize = 2048
	bspExportTimeout      = 10 * time.Second
)

// NewTracerProvider returns a tracer provider exporting to exp through a
// batch span processor tuned for a server (queue 8192 spans, batches of
// 2048, export timeout 10s), each setting left to its OTEL_BSP_*
// variable when getenv has it (OTEL_BSP_MAX_QUEUE_SIZE,
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_EXPORT_TIMEOUT;
// OTEL_BSP_SCHEDULE_DELAY keeps the SDK's default of 5s), with opts.
func NewTracerProvider(exp sdktrace.SpanExporter, getenv func(string) string, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	var bsp []sdktrace.BatchSpanProcessorOption
	if getenv("OTEL_BSP_MAX_QUEUE_SIZE") == "" {
		bsp = append(bsp, sdktrace.WithMaxQueueSize(bspMaxQueueSize))
	}
	if getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") == "" {
		bsp = append(bsp, sdktrace.WithMaxExportBatchSize(bspMaxExportBatchSize))
	}
	if getenv("OTEL_BSP_EXPORT_TIMEOUT") == "" {
		bsp = append(bsp, sdktrace.WithExportTimeout(bspExportTimeout))
	}
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp, bsp...)}, opts...)...)
}

// TraceCommit is the ledger appender's commit hook for traces: under each
// entry's append span, a writ.ledger.queue_wait span (queued until the
// commit started) and a writ.ledger.commit span (the transaction, shared
// by the batch), timed after the fact.
func TraceCommit(c ledger.Commit) {
	for _, w := range c.Waits {
		// The append span may have ended (its caller was answered first):
		// what matters is that its trace is sampled.
		if w.Ctx == nil || !trace.SpanContextFromContext(w.Ctx).IsSampled() {
			continue
		}
		_, wait := tracer().Start(w.Ctx, "writ.ledger.queue_wait", trace.WithTimestamp(w.Queued))
		wait.End(trace.WithTimestamp(c.Start))
		_, commit := tracer().Start(w.Ctx, "writ.ledger.commit", trace.WithTimestamp(c.Start),
			trace.WithAttributes(attribute.Int("writ.ledger.batch_size", len(c.Waits))))
		if c.Err != nil {
			commit.SetStatus(codes.Error, "commit failed")
		}
		commit.End(trace.WithTimestamp(c.End))
	}
}

// CommitTracer makes the spans of TraceCommit off the appender's commit
// loop: the loop hands each commit over and goes on to the next batch,
// and a goroutine makes the queue wait and commit spans (two per record,
// timed by the commit's own timestamps, so they are the same spans
// TraceCommit makes in place). A check makes its two commit spans while
// the loop waits for nothing; a batch of 30 records is 60 spans the loop
// would otherwise start and end before its next commit. When the
// hand-over queue is full (the goroutine is behind by the queue's length
// in commits), a commit's spans are dropped, as the batch span processor
// drops spans its queue has no room for: the commit loop never waits on
// tracing.
type CommitTracer struct {
	mu      sync.RWMutex // held to send on commits, and to close it
	closed  bool
	commits chan ledger.Commit
	done    chan struct{}
	dropped atomic.Int64
}

// NewCommitTracer starts a CommitTracer with room for queue commits
// handed over and not yet traced.
func NewCommitTracer(queue int) *CommitTracer {
	t := &CommitTracer{commits: make(chan ledger.Commit, queue), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for c := range t.commits {
			TraceCommit(c)
		}
	}()
	return t
}

// Observe is the appender's commit hook: it hands c over, or drops its
// spans when the queue is full or the tracer is closed.
func (t *CommitTracer) Observe(c ledger.Commit) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.closed {
		select {
		case t.commits <- c:
			return
		default:
		}
	}
	t.dropped.Add(int64(len(c.Waits)))
}

// Dropped returns how many records' commit spans were dropped.
func (t *CommitTracer) Dropped() int64 { return t.dropped.Load() }

// Close makes the spans of the commits handed over and stops; the spans
// of commits observed after it are dropped. Call it once the appender is
// closed, before the tracer provider is shut down.
func (t *CommitTracer) Close() {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.commits)
	}
	t.mu.Unlock()
	<-t.done
}

// endSpan records err on span (its writ error code, never its text, which
// may quote inputs) and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(attribute.String("writ.error_code", writ.ErrorCode(err)))
		span.SetStatus(codes.Error, writ.ErrorCode(err))
	}
	span.End()
}

// probes are the paths left out of traces: polled by orchestrators and
// scrapers, they would drown the traces that matter.
var probes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// HTTPHandler wraps h in OpenTelemetry's HTTP middleware: a server span
// per request, continuing the request's W3C traceparent, named by the
// route pattern h's ServeMux matched (such as "POST /v1/check"; the
// middleware renames the span once h has routed the request), or by the
// method for a request no route matched. Health, readiness and metrics
// requests are not traced. The middleware's own HTTP metrics go to a
// no-op meter: writ's metrics are Prometheus's (see Metrics).
func HTTPHandler(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "writ",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithFilter(func(r *http.Request) bool { return !probes[r.URL.Path] }))
}
