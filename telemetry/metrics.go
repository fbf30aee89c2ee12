// Package telemetry is writ's operational instrumentation: Prometheus
// metrics and OpenTelemetry traces. It wraps the engine's interfaces at
// the edges (decorators of writ.Service, writ.Workflows and
// writ.Approvals, and a hook of the ledger appender) rather than living in
// the decision path, and the pure packages (policy, record, acceptance)
// never import it. docs/operations.md lists every metric and span.
package telemetry

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// Fail-closed causes: the reason codes of the engine's fail-closed
// receipts. Any other is counted as causeOther, so the label stays
// bounded whatever a future engine says.
var failClosedCauses = map[string]bool{"record_not_committed": true, "ledger_overloaded": true, "record_invalid": true, "commit_timeout": true, "stored_receipt_mismatch": true}

const causeOther = "other"

// outcomeError labels a check that answered no receipt (bad input, an
// unavailable store before any decision).
const outcomeError = "error"

// Metrics are writ's Prometheus metrics, in a registry of their own.
type Metrics struct {
	reg *prometheus.Registry

	checks        *prometheus.CounterVec
	checkDuration prometheus.Histogram
	failClosed    *prometheus.CounterVec
	approvals     *prometheus.CounterVec
	runs          *prometheus.CounterVec
	verdicts      *prometheus.CounterVec
	batchSize     prometheus.Histogram
	commitLatency prometheus.Histogram
	commitErrors  prometheus.Counter

	// windows are each tenant's recent latencies (Latency).
	windows *Windows
	now     func() time.Time
}

// Gauges are the values read when /metrics is scraped. Any nil field is
// not exported.
type Gauges struct {
	// QueueDepth is the number of entries waiting for a commit.
	QueueDepth func() int
	// KeyExpiry is when the signing key valid now stops being valid; ok
	// is false for a key with an open window (no end yet).
	KeyExpiry func(now time.Time) (until time.Time, ok bool, err error)
	// Tenants reports, per tenant, the pending approval requests and the
	// time of the latest checkpoint (zero when it has none). It is read
	// at each scrape, within the scrape's timeout.
	Tenants func(ctx context.Context) ([]TenantGauges, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// TenantGauges are one tenant's gauges.
type TenantGauges struct {
	TenantID         string
	PendingApprovals int
	CheckpointAt     time.Time
}

// NewMetrics returns writ's metrics, with Go runtime and process metrics,
// and the gauges g reads at each scrape.
func NewMetrics(g Gauges) *Metrics {
	if g.Now == nil {
		g.Now = time.Now
	}
	m := &Metrics{
		windows: NewWindows(g.Now()),
		now:     g.Now,
		reg:     prometheus.NewRegistry(),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_checks_total",
			Help: "Checks answered, by outcome (a receipt outcome, or error when no receipt was answered) and decision key (of the pinned pack; empty when none was resolved)."},
			[]string{"outcome", "decision_key"}),
		checkDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "writ_check_duration_seconds",
			Help:    "Time to answer a check, from the service call to its answer (record committed).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		failClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_fail_closed_total",
			Help: "Fail-closed receipts (the decision record was not committed, so the action must not run), by cause."},
			[]string{"cause"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_approvals_decided_total",
			Help: "Approval requests decided through this server, by decision (approved or denied)."},
			[]string{"decision"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_runs_total",
			Help: "Workflow runs reaching a status (active when started; completed or failed at the end), as answered by this server."},
			[]string{"status"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_step_verdicts_total",
			Help: "Step attempts judged, by verdict state."},
			[]string{"state"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "writ_ledger_commit_batch_size",
			Help:    "Entries committed together in one group-commit transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "writ_ledger_commit_duration_seconds",
			Help:    "Time of one group-commit transaction.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "writ_ledger_commit_errors_total",
			Help: "Group-commit transactions that failed (their checks failed closed)."}),
	}
	m.reg.MustRegister(m.checks, m.checkDuration, m.failClosed, m.approvals, m.runs, m.verdicts,
		m.batchSize, m.commitLatency, m.commitErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every known value of a bounded label is exported at 0 from the
	// start: a rate or an alert sees the series before its first event,
	// and a dashboard finds each of its queries in the first scrape.
	for cause := range failClosedCauses {
		m.failClosed.WithLabelValues(cause)
	}
	m.failClosed.WithLabelValues(causeOther)
	for _, d := range []string{writ.ApprovalApproved, writ.ApprovalDenied, writ.ApprovalWithdrawn} {
		m.approvals.WithLabelValues(d)
	}
	for _, s := range writ.RunStatuses {
		m.runs.WithLabelValues(s)
	}
	for _, v := range []string{writ.VerdictAccepted, writ.VerdictAcceptedWithWarnings, writ.VerdictRetry, writ.VerdictAborted, writ.VerdictEscalated} {
		m.verdicts.WithLabelValues(v)
	}
	if g.QueueDepth != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "writ_ledger_queue_depth",
			Help: "Entries waiting for a group commit."}, func() float64 { return float64(g.QueueDepth()) }))
	}
	if g.KeyExpiry != nil || g.Tenants != nil {
		m.reg.MustRegister(&scrapeCollector{g: g})
	}
	return m
}

// Registry returns the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats, every
// tenant's series included: for an operator's own listener (writ serve
// --metrics-addr), never for a tenant's key.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// TenantHandler serves the metrics to the caller whose principal the
// request's context carries (writ.PrincipalFrom): of the series labelled
// with a tenant, only its own tenant's. A request without a principal
// (a server that authenticates no one: development mode, on loopback)
// sees every series.
func (m *Metrics) TenantHandler() http.Handler {
	all := m.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := writ.PrincipalFrom(r.Context())
		if p == nil {
			all.ServeHTTP(w, r)
			return
		}
		g := tenantGatherer{g: m.reg, tenant: p.TenantID}
		promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: m.reg}).ServeHTTP(w, r)
	})
}

// tenantGatherer gathers g's metrics without the series of tenants other
// than tenant: a series with a "tenant" label of another value is left
// out, and so is a family left with no series.
type tenantGatherer struct {
	g      prometheus.Gatherer
	tenant string
}

func (t tenantGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := t.g.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		kept := mf.Metric[:0]
		for _, m := range mf.Metric {
			if seriesTenant(m) == "" || seriesTenant(m) == t.tenant {
				kept = append(kept, m)
			}
		}
		if len(kept) > 0 {
			mf.Metric = kept
			out = append(out, mf)
		}
	}
	return out, err
}

// seriesTenant is the value of a series' "tenant" label, or "".
func seriesTenant(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "tenant" {
			return l.GetValue()
		}
	}
	return ""
}

// ObserveCheck counts one check's answer.
func (m *Metrics) ObserveCheck(rc *writ.Receipt, err error, took time.Duration) {
	m.checkDuration.Observe(took.Seconds())
	if rc == nil {
		m.checks.WithLabelValues(outcomeError, "").Inc()
		return
	}
	m.checks.WithLabelValues(string(rc.Outcome), rc.Metadata.DecisionKey).Inc()
	if rc.Metadata.FailClosed {
		cause := causeOther
		if len(rc.Reasons) > 0 && failClosedCauses[rc.Reasons[0].Code] {
			cause = rc.Reasons[0].Code
		}
		m.failClosed.WithLabelValues(cause).Inc()
	}
}

// ObserveCommit is the ledger appender's commit hook: one group commit of
// size entries that took d.
func (m *Metrics) ObserveCommit(c ledger.Commit) {
	m.batchSize.Observe(float64(len(c.Waits)))
	m.commitLatency.Observe(c.End.Sub(c.Start).Seconds())
	if c.Err != nil {
		m.commitErrors.Inc()
		return
	}
	for _, w := range c.Waits {
		if !w.Queued.IsZero() {
			m.windows.ObserveAppend(w.TenantID, c.End, c.End.Sub(w.Queued))
		}
	}
}

// ObserveTenantCheck records a check of tenant that was answered now
// and took d, in the tenant's windows (Latency).
func (m *Metrics) ObserveTenantCheck(tenant string, d time.Duration) {
	m.windows.ObserveCheck(tenant, m.now(), d)
}

// Latency returns the check latencies and append lags of the tenant's
// recent windows: its own figures, none of another tenant's.
func (m *Metrics) Latency(tenant string) *writ.LatencyStats {
	return m.windows.Stats(tenant, m.now())
}

// scrapeCollector reads the gauges that need a look at the store or the
// key ring, at scrape time.
type scrapeCollector struct{ g Gauges }

var (
	descKeyExpiry = prometheus.NewDesc("writ_signing_key_expiry_days",
		"Days until the signing key valid now stops being valid: +Inf for an open window, and absent (with writ_signing_key_valid 0) when no key is valid now.", nil, nil)
	descKeyValid = prometheus.NewDesc("writ_signing_key_valid",
		"1 when a signing key is valid now, else 0.", nil, nil)
	descPending = prometheus.NewDesc("writ_approvals_pending",
		"Approval requests pending, per tenant.", []string{"tenant"}, nil)
	descCheckpointAge = prometheus.NewDesc("writ_checkpoint_age_seconds",
		"Seconds since the tenant's latest signed checkpoint (absent for a tenant without one).", []string{"tenant"}, nil)
	descScrapeErrors = prometheus.NewDesc("writ_metrics_scrape_errors",
		"1 when a gauge could not be read in this scrape (the store or the key ring failed), else 0.", []string{"source"}, nil)
)

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKeyExpiry, descKeyValid, descPending, descCheckpointAge, descScrapeErrors} {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.g.Now()
	if c.g.KeyExpiry != nil {
		until, ok, err := c.g.KeyExpiry(now)
		valid := 0.0
		if err == nil {
			valid = 1
			days := math.Inf(1)
			if ok {
				days = until.Sub(now).Hours() / 24
			}
			ch <- prometheus.MustNewConstMetric(descKeyExpiry, prometheus.GaugeValue, days)
		}
		ch <- prometheus.MustNewConstMetric(descKeyValid, prometheus.GaugeValue, valid)
	}
	if c.g.Tenants != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tenants, err := c.g.Tenants(ctx)
		failed := 0.0
		if err != nil {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(descScrapeErrors, prometheus.GaugeValue, failed, "store")
		for _, t := range tenants {
			ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(t.PendingApprovals), t.TenantID)
			if !t.CheckpointAt.IsZero() {
				ch <- prometheus.MustNewConstMetric(descCheckpointAge, prometheus.GaugeValue, now.Sub(t.CheckpointAt).Seconds(), t.TenantID)
			}
		}
	}
}
