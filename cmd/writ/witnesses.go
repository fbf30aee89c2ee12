package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/telemetry"
	"github.com/writhq/writ/witness"
)

// startWitnesses starts the witness client of writ serve --witnesses: it
// submits each tenant's newest checkpoint to the configured witnesses
// and stores their cosignatures, off the check path. stop ends it.
func startWitnesses(path string, st ledger.Store, poll time.Duration, metrics *telemetry.Metrics, log *slog.Logger) (c *witness.Client, stop func(), err error) {
	ws, err := witness.ReadConfigFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--witnesses: %w", err)
	}
	ws2, ok := st.(witness.Store)
	if !ok {
		return nil, nil, fmt.Errorf("--witnesses: the store (%T) keeps no cosignatures", st)
	}
	cfg := witness.Config{Witnesses: ws, Store: ws2, Poll: poll, Log: log}
	if metrics != nil {
		wm := newWitnessMetrics(metrics.Registry(), ws, func() []witness.Status { return c.Status() })
		cfg.OnCosigned, cfg.OnConflict, cfg.OnError = wm.cosigned, wm.conflict, wm.failed
	}
	c, err = witness.NewClient(cfg)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range ws {
		log.Info("witness configured", "witness", w.Key.Name(), "key", w.Key.Text, "url", w.URL)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	return c, func() { cancel(); <-done }, nil
}

// witnessMetrics are the witness client's Prometheus series, labelled by
// witness name (no tenant label: every tenant's admin sees them).
type witnessMetrics struct {
	cosignatures *prometheus.CounterVec
	lag          *prometheus.HistogramVec
	conflicts    *prometheus.CounterVec
	errors       *prometheus.CounterVec
}

func newWitnessMetrics(reg *prometheus.Registry, ws []witness.Witness, status func() []witness.Status) *witnessMetrics {
	m := &witnessMetrics{
		cosignatures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_witness_cosignatures_total",
			Help: "Cosignatures received from each witness and stored."}, []string{"witness"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "writ_witness_cosignature_lag_seconds",
			Help:    "Time from a checkpoint's signing to the storing of a witness's cosignature of it.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}}, []string{"witness"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_witness_conflicts_total",
			Help: "Witness answers that it cosigned a tree of a tenant's log that the ledger does not extend: two histories exist."}, []string{"witness"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_witness_errors_total",
			Help: "Failed submissions to each witness (down, refused, garbage), conflicts not counted."}, []string{"witness"}),
	}
	reg.MustRegister(m.cosignatures, m.lag, m.conflicts, m.errors)
	for i, w := range ws {
		labels := prometheus.Labels{"witness": w.Key.Name()}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "writ_witness_behind_tenants", ConstLabels: labels,
			Help: "Tenants whose newest checkpoint the witness has not cosigned yet."},
			func() float64 { return float64(status()[i].Behind) }))
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "writ_witness_lag_seconds", ConstLabels: labels,
			Help: "How long the oldest checkpoint the witness has not cosigned yet has waited (0: none waits)."},
			func() float64 { return status()[i].Lag.Seconds() }))
		m.cosignatures.With(labels)
		m.conflicts.With(labels)
		m.errors.With(labels)
	}
	return m
}

func (m *witnessMetrics) cosigned(w string, lag time.Duration) {
	m.cosignatures.WithLabelValues(w).Inc()
	m.lag.WithLabelValues(w).Observe(lag.Seconds())
}

func (m *witnessMetrics) conflict(w, _ string, _ error) { m.conflicts.WithLabelValues(w).Inc() }
func (m *witnessMetrics) failed(w, _ string, _ error)   { m.errors.WithLabelValues(w).Inc() }

// witnessReadiness is the "witnesses" check of /readyz: degraded (the
// server still takes checks) when a witness reported a conflict; passed
// otherwise, a lag or a witness that is down included, since checks never
// wait for witnesses (the metrics show the lag).
func witnessReadiness(c *witness.Client) httpapi.ReadyCheck {
	check := httpapi.ReadyCheck{Name: "witnesses", OK: true}
	var conflicts []string
	for _, s := range c.Status() {
		for _, t := range s.Conflicts {
			conflicts = append(conflicts, fmt.Sprintf("witness %s, tenant %s", s.Witness, t))
		}
	}
	if len(conflicts) > 0 {
		check.OK, check.Degraded = false, true
		check.Error = "a witness has cosigned a tree of the log that the ledger does not extend (two histories exist; see docs/operations.md): " + strings.Join(conflicts, "; ")
	}
	return check
}
