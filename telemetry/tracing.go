package telemetry

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
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
// per request, named by its route (route returns the route pattern, such
// as "POST /v1/check", or "" for none), continuing the request's W3C
// traceparent. Health, readiness and metrics requests are not traced.
func HTTPHandler(h http.Handler, route func(*http.Request) string) http.Handler {
	return otelhttp.NewHandler(h, "writ",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if rt := route(r); rt != "" {
				return rt
			}
			return r.Method
		}),
		otelhttp.WithFilter(func(r *http.Request) bool { return !probes[r.URL.Path] }))
}
