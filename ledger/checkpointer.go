package ledger

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// CheckpointPolicy says when checkpoints are issued: after Every new
// records of a tenant, or Interval after a tenant's first record not yet
// covered, whichever comes first. Zero fields take the defaults.
type CheckpointPolicy struct {
	Every    int64         // default 1000
	Interval time.Duration // default 1s
	// Issued, if set, is told of each checkpoint the checkpointer signs
	// and stores (a witness client's Notify). It must return at once.
	Issued func(cp *Checkpoint)
}

// Checkpointer issues signed checkpoints of tenants' trees as records are
// committed. It never holds up a check: checkpoints are issued after the
// commit, from the immutable stored hashes.
type Checkpointer struct {
	store  CheckpointStore
	keys   KeySource
	name   string
	policy CheckpointPolicy
	now    func() time.Time
	log    *slog.Logger

	mu      sync.Mutex
	pending map[string]*pendingTenant // tenants with records not yet covered
	covered map[string]int64          // size of each tenant's last checkpoint issued here
	wake    chan struct{}
}

type pendingTenant struct {
	size  int64     // latest committed size
	since time.Time // when the first uncovered record was seen
	base  int64     // size of the last checkpoint issued
}

// NewCheckpointer returns a checkpointer for the ledger named name.
func NewCheckpointer(st CheckpointStore, keys KeySource, name string, policy CheckpointPolicy, now func() time.Time, log *slog.Logger) *Checkpointer {
	if policy.Every <= 0 {
		policy.Every = 1000
	}
	if policy.Interval <= 0 {
		policy.Interval = time.Second
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Checkpointer{store: st, keys: keys, name: name, policy: policy, now: now, log: log,
		pending: map[string]*pendingTenant{}, covered: map[string]int64{}, wake: make(chan struct{}, 1)}
}

// Observe is told of committed entries (AppenderConfig.OnCommit).
func (c *Checkpointer) Observe(entries []*Entry) {
	c.mu.Lock()
	due := false
	for _, e := range entries {
		if e.Raw == nil {
			continue
		}
		t, seq := e.Record.TenantID, e.Record.Audit.Seq
		p := c.pending[t]
		if p == nil {
			// Count from the last checkpoint, not from zero: Every is the
			// number of new records a checkpoint waits for.
			p = &pendingTenant{since: c.now(), base: c.covered[t]}
			c.pending[t] = p
		}
		if seq > p.size {
			p.size = seq
		}
		if p.size-p.base >= c.policy.Every {
			due = true
		}
	}
	c.mu.Unlock()
	if due {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Issue signs and stores a checkpoint of the tenant's tree at its current
// size (or returns the latest, if it already covers it).
func (c *Checkpointer) Issue(ctx context.Context, tenantID string) (*Checkpoint, error) {
	signer, err := c.keys(c.now())
	if err != nil {
		return nil, err
	}
	cp, err := IssueCheckpoint(ctx, c.store, signer, c.name, tenantID, c.now())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if cp.Size > c.covered[tenantID] {
		c.covered[tenantID] = cp.Size
	}
	if p := c.pending[tenantID]; p != nil && p.size <= cp.Size {
		delete(c.pending, tenantID)
	} else if p != nil {
		p.base, p.since = cp.Size, c.now()
	}
	c.mu.Unlock()
	if c.policy.Issued != nil {
		c.policy.Issued(cp)
	}
	return cp, nil
}

// CatchUp finds the tenants whose chain head no stored checkpoint covers
// (records committed before a crash, say, which no checkpoint was issued
// for) and issues a checkpoint for each now.
func (c *Checkpointer) CatchUp(ctx context.Context) error {
	tenants, err := c.store.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		head, err := c.store.Head(ctx, t)
		if err != nil {
			return err
		}
		latest, err := c.store.LatestCheckpoint(ctx, t)
		if err != nil {
			return err
		}
		if head.Seq == 0 || (latest != nil && latest.Size >= head.Seq) {
			continue
		}
		if _, err := c.Issue(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// Run issues checkpoints until ctx is done, and once more for every
// tenant with uncovered records before it returns. It first catches up
// (CatchUp) with records a previous run left uncovered.
func (c *Checkpointer) Run(ctx context.Context) {
	if err := c.CatchUp(ctx); err != nil && ctx.Err() == nil {
		c.log.Error("checkpoint catch-up failed", "err", err)
	}
	tick := time.NewTicker(c.policy.Interval / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.issueDue(context.Background(), true)
			return
		case <-tick.C:
		case <-c.wake:
		}
		c.issueDue(ctx, false)
	}
}

// IssueDue issues the checkpoints the policy says are due now.
func (c *Checkpointer) IssueDue(ctx context.Context) { c.issueDue(ctx, false) }

func (c *Checkpointer) issueDue(ctx context.Context, all bool) {
	now := c.now()
	c.mu.Lock()
	var due []string
	for t, p := range c.pending {
		if all || now.Sub(p.since) >= c.policy.Interval || p.size-p.base >= c.policy.Every {
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		if _, err := c.Issue(ctx, t); err != nil {
			c.log.Error("checkpoint failed", "tenant", t, "err", err)
		}
	}
}
