package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/telemetry"
	"github.com/writhq/writ/telemetry/otlptest"
)

// BenchmarkCheckOverhead measures checks over HTTP (the refund pack's
// allow example, a SQLite store, 32 concurrent clients) with
// observability off, and on: every check traced (sampled) and exported
// over OTLP/HTTP to a local receiver, and metrics counted. Run the two
// alternately and compare the medians of checks/s and cpu-µs/check
// (docs/operations.md, "Overhead").
func BenchmarkCheckOverhead(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		eng, srv := serveRefund(b, nil, nil,
			func(e *engine.Engine) writ.Service { return e },
			func(s *httpapi.Server) http.Handler { return s })
		benchChecks(b, eng, srv.URL, srv.Client())
	})
	b.Run("on", func(b *testing.B) {
		recv := otlptest.NewReceiver(false)
		defer recv.Close()
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(recv.URL+"/v1/traces"), otlptracehttp.WithInsecure())
		if err != nil {
			b.Fatal(err)
		}
		tp := telemetry.NewTracerProvider(exp, os.Getenv)
		prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(propagation.TraceContext{})
		defer func() {
			tp.Shutdown(context.Background())
			otel.SetTracerProvider(prevTP)
			otel.SetTextMapPropagator(prevProp)
			if recv.Count() == 0 {
				b.Error("the receiver got no spans")
			}
		}()
		var eng *engine.Engine
		m := telemetry.NewMetrics(telemetry.Gauges{QueueDepth: func() int { return eng.QueueDepth() }})
		commits := telemetry.NewCommitTracer(1024)
		defer commits.Close()
		eng, srv := serveRefund(b, tp, func(c ledger.Commit) { m.ObserveCommit(c); commits.Observe(c) },
			func(e *engine.Engine) writ.Service { return telemetry.Service(e, m) },
			func(s *httpapi.Server) http.Handler { return telemetry.HTTPHandler(s) })
		benchChecks(b, eng, srv.URL, srv.Client())
	})
}

// benchChecks sends b.N checks from 32 concurrent clients and reports
// checks/s. Each check has its own idempotency key and its own customer,
// so each is decided and recorded: with one customer, the refund pack's
// velocity rule (3 refunds per customer a day) would deny the fourth, and
// every later check would be answered from the blocked action's first
// answer, neither decided nor appended. A check answered anything but a
// fresh allow fails the benchmark.
func benchChecks(b *testing.B, eng *engine.Engine, url string, hc *http.Client) {
	body := example(b, "refund-allow")
	if !bytes.Contains(body, []byte(`"customer:cus_77"`)) || !bytes.Contains(body, []byte(`"idv_771"`)) {
		b.Fatal("the refund-allow example no longer names customer:cus_77 and cites idv_771")
	}
	// Each customer's identity verification, on file before the clock
	// starts: a refund accepts only evidence writ resolves.
	observed := time.Date(2026, 5, 9, 9, 10, 0, 0, time.UTC)
	idv := writ.WithPrincipal(context.Background(), &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example", Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	for i := 1; i <= b.N; i++ {
		n := strconv.FormatInt(int64(i), 36)
		if _, err := eng.AddEvidence(idv, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: "idv_" + n,
			SubjectIDs: []string{"customer:cus_" + n}, ObservedAt: &observed}); err != nil && writ.ErrorCode(err) != writ.ECONFLICT {
			b.Fatal(err)
		}
	}
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	var seq atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := strconv.FormatInt(seq.Add(1), 36)
			req := bytes.Replace(body, []byte(`"ik_2x9k4j7m1q8w0p3z"`), []byte(`"ik_`+n+`"`), 1)
			req = bytes.Replace(req, []byte(`"customer:cus_77"`), []byte(`"customer:cus_`+n+`"`), 1)
			req = bytes.Replace(req, []byte(`"idv_771"`), []byte(`"idv_`+n+`"`), 1)
			resp, err := hc.Post(url+"/v1/check", "application/json", bytes.NewReader(req))
			if err != nil {
				b.Error(err)
				return
			}
			answer, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"outcome":"allow"`)) || bytes.Contains(answer, []byte(`"repeated"`)) {
				b.Errorf("check answered %d %.300s, want a fresh allow", resp.StatusCode, answer)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "checks/s")
	// CPU per check (server, client and receiver together) moves less
	// than throughput with the load of other processes on the machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/check")
}

// cpuTime returns the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
