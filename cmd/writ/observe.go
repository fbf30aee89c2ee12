package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/readiness"
	"github.com/writhq/writ/telemetry"
)

// observability is what writ serve turns on for operators: metrics
// (unless --metrics=false) and traces (when the OTEL_* environment asks
// for them). See docs/operations.md.
type observability struct {
	metrics *telemetry.Metrics // nil with --metrics=false
	tracing bool
	commits *telemetry.CommitTracer // set by observeCommits when tracing
}

// commitTraceQueue is how many commits the commit tracer holds before it
// drops their spans.
const commitTraceQueue = 1024

// close makes the commit spans still queued, and logs how many records'
// commit spans were dropped; call it once the engine is closed, before
// tracing stops.
func (o *observability) close(log *slog.Logger) {
	if o.commits != nil {
		o.commits.Close()
		if n := o.commits.Dropped(); n > 0 {
			log.Warn("commit spans dropped: the commit tracer's queue was full", "records", n)
		}
	}
}

// startTracing sets up traces when the OTEL_* environment asks for them;
// the returned stop flushes them.
func (m *Main) startTracing(ctx context.Context, log *slog.Logger) (enabled bool, stop func(), err error) {
	if !telemetry.TracingEnabled(m.Getenv) {
		return false, func() {}, nil
	}
	shutdown, err := telemetry.SetupTracing(ctx, version)
	if err != nil {
		return false, nil, fmt.Errorf("tracing (OTEL_* environment): %w", err)
	}
	log.Info("tracing on: spans are exported as the OTEL_* environment says")
	return true, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces", "error", err)
		}
	}, nil
}

// observeCommits returns the appender hook of o, or nil when nothing
// observes commits. With tracing, the commit spans are made off the
// commit loop (telemetry.CommitTracer).
func (o *observability) observeCommits() func(ledger.Commit) {
	if o.tracing && o.commits == nil {
		o.commits = telemetry.NewCommitTracer(commitTraceQueue)
	}
	switch {
	case o.metrics != nil && o.tracing:
		return func(c ledger.Commit) { o.metrics.ObserveCommit(c); o.commits.Observe(c) }
	case o.metrics != nil:
		return o.metrics.ObserveCommit
	case o.tracing:
		return o.commits.Observe
	}
	return nil
}

// newMetrics returns the metrics of a server of the engine eng returns
// (read at scrape time) over st, with the signing keys of ring (nil
// without a ring).
func newMetrics(eng func() *engine.Engine, st ledger.Store, ring ringView) *telemetry.Metrics {
	g := telemetry.Gauges{
		QueueDepth: func() int { return eng().QueueDepth() },
		Tenants: func(ctx context.Context) ([]telemetry.TenantGauges, error) {
			return tenantGauges(ctx, eng(), st)
		},
	}
	if ring != nil {
		g.KeyExpiry = func(now time.Time) (time.Time, bool, error) { return keyExpiry(ring, now) }
	}
	return telemetry.NewMetrics(g)
}

// maxPendingCounted caps the pending approvals counted per tenant and
// scrape, so a scrape stays cheap whatever the queue.
const maxPendingCounted = 10000

// tenantGauges reads each tenant's pending approvals and latest
// checkpoint.
func tenantGauges(ctx context.Context, eng *engine.Engine, st ledger.Store) ([]telemetry.TenantGauges, error) {
	tenants, err := st.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]telemetry.TenantGauges, 0, len(tenants))
	for _, t := range tenants {
		g := telemetry.TenantGauges{TenantID: t}
		q := writ.ApprovalQuery{TenantID: t, State: writ.ApprovalPending, Limit: 1000}
		for g.PendingApprovals < maxPendingCounted {
			page, err := eng.Approvals(ctx, q)
			if err != nil {
				return out, err
			}
			g.PendingApprovals += len(page.Approvals)
			if q.Cursor = page.NextCursor; q.Cursor == "" {
				break
			}
		}
		cp, err := eng.Checkpoint(ctx, t, 0)
		switch {
		case err == nil:
			g.CheckpointAt = cp.IssuedAt
		case writ.ErrorCode(err) != writ.ENOTFOUND:
			return out, err
		}
		out = append(out, g)
	}
	return out, nil
}

// keyExpiry returns when the signing key valid at now stops being valid
// (ok false for an open window), or an error when none is valid.
func keyExpiry(ring ringView, now time.Time) (time.Time, bool, error) {
	var active *keyring.Key
	keys := ring.Keys()
	for i := range keys {
		if keys[i].ValidAt(now) && (active == nil || !keys[i].ValidFrom.Before(active.ValidFrom)) {
			active = &keys[i]
		}
	}
	switch {
	case active == nil:
		return time.Time{}, false, errors.New("no signing key is valid now")
	case active.ValidUntil == nil:
		return time.Time{}, false, nil
	}
	return *active.ValidUntil, true, nil
}

// newCommitHealth returns the commits check of /readyz over the
// engine's appender and the store's write probe, if it has one.
func newCommitHealth(eng *engine.Engine, st ledger.Store, log *slog.Logger) *readiness.Commits {
	c := &readiness.Commits{UnderWay: eng.CommitUnderWay, StallAfter: eng.CommitTimeout(), LastFailure: eng.LastCommitFailure, Log: log}
	c.Probe, _ = st.(readiness.WriteProber)
	return c
}

// tracedHandler wraps the server in OpenTelemetry's HTTP middleware (see
// telemetry.HTTPHandler).
func tracedHandler(s *httpapi.Server) http.Handler { return telemetry.HTTPHandler(s) }
