// Package readiness decides what a server's GET /readyz answers: whether
// its store answers queries, whether it can commit, whether a signing
// key is valid now, and whether a pack is loaded. A load balancer takes a
// server that is not ready out of rotation.
//
// The report is public (/readyz needs no key), so a check's error says
// what failed in words fit for anyone; the store's own error, with its
// paths, hosts and user names, goes to the server's log only. A check
// never blocks /readyz on a stuck store: calls run under a deadline
// (Bounded). This package decides; it never serves HTTP itself.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
)

// What /readyz says (to anyone: it needs no key); the server's log has the
// store's own error, with paths, host and user names.
var (
	ErrStoreQuery   = errors.New("the store's query failed (the server's log says why)")
	ErrCommitFailed = fmt.Errorf("a group commit failed in the last %s: checks are answered fail-closed (the server's log says why)", CommitQuiet)
	ErrCannotCommit = errors.New("the last group commit failed and a test write failed too: checks are answered fail-closed (the server's log says why)")
)

// Tenants is the query the "store" check asks the store.
type Tenants interface {
	Tenants(context.Context) ([]string, error)
}

// Report returns the /readyz checks of a server: the store answers (st),
// it can commit (commits), a signing key is valid now (keys), the pack
// is loaded (pol); then the extra checks, in their order.
func Report(st Tenants, commits *Commits, keys ledger.KeySource, pol *policy.Policy, log *slog.Logger, extra ...func() httpapi.ReadyCheck) func(context.Context) httpapi.ReadyReport {
	var query Bounded
	return func(ctx context.Context) httpapi.ReadyReport {
		var checks []httpapi.ReadyCheck
		add := func(name string, err error) {
			c := httpapi.ReadyCheck{Name: name, OK: err == nil}
			if err != nil {
				c.Error = err.Error()
			}
			checks = append(checks, c)
		}
		err := query.Do(ctx, 2*time.Second, "the store's query", func(ctx context.Context) error {
			if _, err := st.Tenants(ctx); err != nil {
				log.Warn("readiness: the store's query failed", "err", err)
				return ErrStoreQuery
			}
			return nil
		})
		add("store", err)
		add("commits", commits.Check(ctx))
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

// Bounded runs a call of /readyz with a deadline, in a goroutine of its
// own: a read or write stuck in the kernel (on a frozen file system, say)
// ignores its context, and must not hold /readyz, which has to answer
// then more than ever. At most one call runs at a time: while one is
// stuck, the next ones fail at once. The zero Bounded is ready to use.
type Bounded struct {
	mu    sync.Mutex
	done  chan struct{} // closed when the last call returned
	since time.Time
}

// Do runs f with a deadline of d, and returns its error, or an error
// naming what when f has not returned within d or an earlier call is
// still under way.
func (b *Bounded) Do(ctx context.Context, d time.Duration, what string, f func(context.Context) error) error {
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

// WriteProber is a store that can commit a test write (sqlite and
// postgres: the write_probe row).
type WriteProber interface {
	ProbeWrite(ctx context.Context, now time.Time) error
}

// CommitQuiet is how long after a failed group commit the commits check
// fails without asking the store; DefaultStall is how long a commit may
// run before the check fails when the server has no commit timeout.
const (
	CommitQuiet  = 5 * time.Second
	DefaultStall = 10 * time.Second
)

// Commits is the "commits" check of /readyz. A store that cannot commit
// (a full disk, a read-only data directory or standby, a disk whose
// writes hang) still answers reads, so the "store" check passes while
// every check is answered fail-closed. This one fails while a group
// commit has been under way for longer than StallAfter (checks are then
// answered commit_timeout), and for CommitQuiet after a group commit
// failed; after that, until a commit succeeds, it passes only when a test
// write commits (Probe, at most once a second however often /readyz is
// asked). So a load balancer takes the server out of rotation while its
// commits fail or hang, and puts it back once it can commit, whether or
// not checks still reach it; while checks do reach it and fail, it stays
// out.
type Commits struct {
	// UnderWay says when the group commit under way started (false:
	// none is).
	UnderWay func() (time.Time, bool)
	// StallAfter is how long a commit may run (the commit timeout);
	// zero: DefaultStall.
	StallAfter time.Duration
	// LastFailure says when the last group commit failed (false: the
	// last one succeeded).
	LastFailure func() (time.Time, bool)
	// Probe is the store's test write; nil when the store has none.
	Probe WriteProber
	// Log receives the probe's own errors.
	Log *slog.Logger

	probing Bounded
	mu      sync.Mutex
	probed  time.Time
	err     error
}

// Check returns nil when the server can commit, else why not.
func (c *Commits) Check(ctx context.Context) error {
	now := time.Now()
	stall := c.StallAfter
	if stall <= 0 {
		stall = DefaultStall
	}
	if since, ok := c.UnderWay(); ok && now.Sub(since) > stall {
		return fmt.Errorf("a group commit has been under way for %s, longer than %s: checks wait for it or are answered fail-closed (commit_timeout)", now.Sub(since).Round(100*time.Millisecond), stall)
	}
	at, failed := c.LastFailure()
	switch {
	case !failed:
		return nil
	case now.Sub(at) < CommitQuiet:
		return ErrCommitFailed
	case c.Probe == nil:
		return errors.New("the last group commit failed: checks are answered fail-closed until one commits")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.probed) < time.Second {
		return c.err
	}
	err := c.probing.Do(ctx, 2*time.Second, "the test write", func(ctx context.Context) error {
		return c.Probe.ProbeWrite(ctx, now)
	})
	c.probed, c.err = now, nil
	if err != nil {
		c.Log.Warn("readiness: the store cannot commit", "err", err)
		c.err = ErrCannotCommit
	}
	return c.err
}
