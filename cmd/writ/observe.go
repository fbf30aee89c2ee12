package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
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

// readiness returns the /readyz checks of a server: the store answers,
// it can commit (see commitHealth), a signing key is valid now, the pack
// is loaded.
func readiness(st interface {
	Tenants(context.Context) ([]string, error)
}, commits *commitHealth, keys ledger.KeySource, pol *policy.Policy, log *slog.Logger, extra ...func() httpapi.ReadyCheck) func(context.Context) httpapi.ReadyReport {
	var query boundedCall
	return func(ctx context.Context) httpapi.ReadyReport {
		var checks []httpapi.ReadyCheck
		add := func(name string, err error) {
			c := httpapi.ReadyCheck{Name: name, OK: err == nil}
			if err != nil {
				c.Error = err.Error()
			}
			checks = append(checks, c)
		}
		err := query.do(ctx, 2*time.Second, "the store's query", func(ctx context.Context) error {
			if _, err := st.Tenants(ctx); err != nil {
				log.Warn("readiness: the store's query failed", "err", err)
				return errStoreQuery
			}
			return nil
		})
		add("store", err)
		add("commits", commits.check(ctx))
		_, err = keys(time.Now())
		add("signing_key", err)
		err = nil
		if pol == nil || pol.Pack == nil || pol.Pack.Hash == "" {
			err = errors.New("no pack is loaded")
		}
		add("pack", err)
		for _, f := range extra {
			checks = append(checks, f())
		}
		return httpapi.ReadyReport{Checks: checks}
	}
}

// boundedCall runs a call of /readyz with a deadline, in a goroutine of
// its own: a read or write stuck in the kernel (on a frozen file system,
// say) ignores its context, and must not hold /readyz, which has to answer
// then more than ever. At most one call runs at a time: while one is
// stuck, the next ones fail at once.
type boundedCall struct {
	mu    sync.Mutex
	done  chan struct{} // closed when the last call returned
	since time.Time
}

func (b *boundedCall) do(ctx context.Context, d time.Duration, what string, f func(context.Context) error) error {
	b.mu.Lock()
	if b.done != nil {
		select {
		case <-b.done:
		default:
			since := b.since
			b.mu.Unlock()
			return fmt.Errorf("%s has not returned for %s", what, time.Since(since).Round(time.Second))
		}
	}
	done := make(chan struct{})
	b.done, b.since = done, time.Now()
	b.mu.Unlock()
	var err error
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		defer cancel()
		err = f(ctx)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%s did not return within %s", what, d)
	}
}

// writeProber is a store that can commit a test write (sqlite and
// postgres: the write_probe row).
type writeProber interface {
	ProbeWrite(ctx context.Context, now time.Time) error
}

// commitHealth is the "commits" check of /readyz. A store that cannot
// commit (a full disk, a read-only data directory or standby, a disk
// whose writes hang) still answers reads, so the "store" check passes
// while every check is answered fail-closed. This one fails while a group
// commit has been under way for longer than the commit timeout (checks
// are then answered commit_timeout), and for commitQuiet after a group
// commit failed; after that, until a commit succeeds, it passes only when
// a test write commits (the store's write probe, at most once a second
// however often /readyz is asked). So a load balancer takes the server out
// of rotation while its commits fail or hang, and puts it back once it
// can commit, whether or not checks still reach it; while checks do reach
// it and fail, it stays out.
type commitHealth struct {
	underWay    func() (time.Time, bool)
	stallAfter  time.Duration
	lastFailure func() (time.Time, bool)
	probe       writeProber // nil when the store has none
	log         *slog.Logger

	probing boundedCall
	mu      sync.Mutex
	probed  time.Time
	err     error
}

// commitQuiet is how long after a failed group commit /readyz fails
// without asking the store; defaultStall is how long a commit may run
// before it fails when the server has no commit timeout.
const (
	commitQuiet  = 5 * time.Second
	defaultStall = 10 * time.Second
)

// What /readyz says (to anyone: it needs no key); the server's log has the
// store's own error, with paths, host and user names.
var (
	errStoreQuery   = errors.New("the store's query failed (the server's log says why)")
	errCommitFailed = fmt.Errorf("a group commit failed in the last %s: checks are answered fail-closed (the server's log says why)", commitQuiet)
	errCannotCommit = errors.New("the last group commit failed and a test write failed too: checks are answered fail-closed (the server's log says why)")
)

// newCommitHealth returns the commits check over the engine's appender
// and the store's write probe, if it has one.
func newCommitHealth(eng *engine.Engine, st ledger.Store, log *slog.Logger) *commitHealth {
	c := &commitHealth{underWay: eng.CommitUnderWay, stallAfter: eng.CommitTimeout(), lastFailure: eng.LastCommitFailure, log: log}
	if c.stallAfter <= 0 {
		c.stallAfter = defaultStall
	}
	c.probe, _ = st.(writeProber)
	return c
}

func (c *commitHealth) check(ctx context.Context) error {
	now := time.Now()
	if since, ok := c.underWay(); ok && now.Sub(since) > c.stallAfter {
		return fmt.Errorf("a group commit has been under way for %s, longer than %s: checks wait for it or are answered fail-closed (commit_timeout)", now.Sub(since).Round(100*time.Millisecond), c.stallAfter)
	}
	at, failed := c.lastFailure()
	switch {
	case !failed:
		return nil
	case now.Sub(at) < commitQuiet:
		return errCommitFailed
	case c.probe == nil:
		return errors.New("the last group commit failed: checks are answered fail-closed until one commits")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.probed) < time.Second {
		return c.err
	}
	err := c.probing.do(ctx, 2*time.Second, "the test write", func(ctx context.Context) error {
		return c.probe.ProbeWrite(ctx, now)
	})
	c.probed, c.err = now, nil
	if err != nil {
		c.log.Warn("readiness: the store cannot commit", "err", err)
		c.err = errCannotCommit
	}
	return c.err
}

// tracedHandler wraps the server in OpenTelemetry's HTTP middleware (see
// telemetry.HTTPHandler).
func tracedHandler(s *httpapi.Server) http.Handler { return telemetry.HTTPHandler(s) }
