package ledger

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writhq/writ"
)

// ErrOverloaded is returned by Append when the commit queue stays full for
// longer than the appender's queue wait: writ applies backpressure instead
// of dropping work.
var ErrOverloaded = &writ.Error{Code: writ.EUNAVAILABLE, Message: "ledger commit queue is full; retry shortly"}

// ErrClosed is returned by Append after Close.
var ErrClosed = &writ.Error{Code: writ.EUNAVAILABLE, Message: "ledger is closed"}

// AppenderConfig tunes group commit. Zero fields take the defaults.
type AppenderConfig struct {
	// MaxBatch caps the entries committed in one transaction (default 256).
	MaxBatch int
	// QueueSize bounds the entries waiting for a commit (default 4096).
	QueueSize int
	// QueueWait is how long Append waits for room in a full queue before
	// it reports ErrOverloaded (default 100ms).
	QueueWait time.Duration
	// Seal seals each record (default Seal).
	Seal SealFunc
	// Logger receives commit failures (default slog.Default()).
	Logger *slog.Logger
	// OnCommit, when set, is called with each committed batch, after the
	// callers have been answered (for example Checkpointer.Observe).
	OnCommit func([]*Entry)
	// Observe, when set, is told of each group commit (failed ones too)
	// after the callers have been answered: metrics and traces use it
	// (package telemetry). It runs on the commit loop, so it must be quick.
	Observe func(Commit)
}

// Commit describes one group commit, for AppenderConfig.Observe.
type Commit struct {
	// Waits holds one Wait per entry of the batch, in order.
	Waits []Wait
	// Start and End bound the store's transaction.
	Start, End time.Time
	// Err is the commit's error, nil when it committed.
	Err error
}

// Wait is one entry's time in the queue: the context of its Append (for
// its trace), the tenant of its record, and when it was queued. Its wait
// ends at Commit.Start.
type Wait struct {
	Ctx      context.Context
	TenantID string
	Queued   time.Time
}

// AppendStore is what an Appender needs of a store: committing a batch of
// entries in one transaction, as Store.Append does (every Store is one).
type AppendStore interface {
	Append(ctx context.Context, entries []*Entry, seal SealFunc) error
}

// Appender group-commits entries: concurrent Appends that arrive while a
// transaction is in flight share the next transaction and its sync.
type Appender struct {
	store AppendStore
	cfg   AppenderConfig
	queue chan *pending

	mu     sync.RWMutex
	closed bool
	done   chan struct{}

	// failedAt is when the last group commit failed (Unix ns), 0 once
	// one has committed since; committing is when the commit under way
	// began (Unix ns), 0 between commits.
	failedAt, committing atomic.Int64
}

type pending struct {
	entry *Entry
	err   chan error
	// ctx is the context of the Append: an entry whose context is done
	// before its batch goes to the store is dropped.
	ctx context.Context
	// queued is kept only when the appender is observed.
	queued time.Time
}

// NewAppender starts the commit loop over store.
func NewAppender(store AppendStore, cfg AppenderConfig) *Appender {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 4096
	}
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = 100 * time.Millisecond
	}
	if cfg.Seal == nil {
		cfg.Seal = Seal
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Appender{store: store, cfg: cfg, queue: make(chan *pending, cfg.QueueSize), done: make(chan struct{})}
	go a.loop()
	return a
}

// Append seals and durably appends e, waiting for the commit. On success
// e.Raw is set, or e.Prior or e.Refused when the store skipped the entry.
// An error means the entry may or may not be durable but never that a
// caller may act on it: callers fail closed on any error. If ctx is done
// before e's batch goes to the store (a commit timeout, a client gone),
// e is dropped: it is not written, so no record exists that its caller
// was told did not happen. If ctx is done while the batch is committing,
// the commit goes on and e may still land.
func (a *Appender) Append(ctx context.Context, e *Entry) error {
	p := &pending{entry: e, err: make(chan error, 1), ctx: ctx}
	if a.cfg.Observe != nil {
		p.queued = time.Now()
	}
	a.mu.RLock()
	if a.closed {
		a.mu.RUnlock()
		return ErrClosed
	}
	select {
	case a.queue <- p:
	default:
		t := time.NewTimer(a.cfg.QueueWait)
		select {
		case a.queue <- p:
			t.Stop()
		case <-t.C:
			a.mu.RUnlock()
			return ErrOverloaded
		case <-ctx.Done():
			t.Stop()
			a.mu.RUnlock()
			return ctx.Err()
		}
	}
	a.mu.RUnlock()
	select {
	case err := <-p.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Committing returns when the group commit under way began, and false
// between commits.
func (a *Appender) Committing() (time.Time, bool) {
	ns := a.committing.Load()
	return time.Unix(0, ns), ns != 0
}

// LastFailure returns when the last group commit failed, and false if it
// did not (or none ran): until one commits, checks are likely to be
// answered fail-closed.
func (a *Appender) LastFailure() (time.Time, bool) {
	ns := a.failedAt.Load()
	return time.Unix(0, ns), ns != 0
}

// QueueDepth returns the number of entries waiting for a commit.
func (a *Appender) QueueDepth() int { return len(a.queue) }

// observe tells cfg.Observe of a commit that ran from start to end.
func (a *Appender) observe(batch []*pending, start, end time.Time, err error) {
	c := Commit{Waits: make([]Wait, len(batch)), Start: start, End: end, Err: err}
	for i, p := range batch {
		c.Waits[i] = Wait{Ctx: p.ctx, Queued: p.queued}
		if p.entry.Record != nil {
			c.Waits[i].TenantID = p.entry.Record.TenantID
		}
	}
	a.cfg.Observe(c)
}

// Close stops accepting entries, commits those already queued, and waits.
func (a *Appender) Close() error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.queue)
	}
	a.mu.Unlock()
	<-a.done
	return nil
}

// commitLaterKey marks the context of an Append that may wait for a
// commit other entries start (CommitLater).
type commitLaterKey struct{}

// CommitLater returns ctx marked so that an Append made with it need not
// start a commit of its own: the entry waits, up to within, for the next
// entry whose caller does not wait so (a check, say) and is committed in
// the same transaction, saving a commit and its sync; when none comes
// within that time, it is committed alone. The Append still returns only
// once the entry is committed (or has failed), exactly as without the
// mark. It suits an entry whose caller does not wait for it (the
// gateway's execution reports): committed alone, it would hold up the
// next entry that is waited for behind its own sync.
func CommitLater(ctx context.Context, within time.Duration) context.Context {
	return context.WithValue(ctx, commitLaterKey{}, within)
}

func commitLater(ctx context.Context) time.Duration {
	d, _ := ctx.Value(commitLaterKey{}).(time.Duration)
	return d
}

func (a *Appender) loop() {
	defer close(a.done)
	batch := make([]*pending, 0, a.cfg.MaxBatch)
	entries := make([]*Entry, 0, a.cfg.MaxBatch)
	// held are entries marked CommitLater, waiting for a commit to join
	// until the first one's wait is over (due). A batch never holds more
	// than MaxBatch entries.
	var held []*pending
	var due *time.Timer
	var dueC <-chan time.Time
	for {
		var p *pending
		ok := true
		select {
		case p, ok = <-a.queue:
		case <-dueC:
		}
		if ok && p != nil && len(held) < a.cfg.MaxBatch-1 {
			if d := commitLater(p.ctx); d > 0 {
				if len(held) == 0 {
					due = time.NewTimer(d)
					dueC = due.C
				}
				held = append(held, p)
				continue
			}
		}
		if due != nil {
			due.Stop()
			due, dueC = nil, nil
		}
		batch = append(batch[:0], held...)
		held = held[:0]
		if ok && p != nil {
			batch = append(batch, p)
		}
	drain:
		for ok && len(batch) < a.cfg.MaxBatch {
			select {
			case p, open := <-a.queue:
				if !open {
					ok = false
					break drain
				}
				batch = append(batch, p)
			default:
				break drain
			}
		}
		a.commit(batch, entries)
		if !ok {
			return
		}
	}
}

// commit commits one batch and answers its callers; entries is scratch
// space for the batch's entries.
func (a *Appender) commit(batch []*pending, entries []*Entry) {
	// Drop the entries whose callers have given up (they were
	// answered with their context's error): committing them would
	// make records their callers were told did not happen. From here
	// on the batch is committed whatever its callers do.
	kept := batch[:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err <- err
			continue
		}
		kept = append(kept, p)
	}
	if dropped := len(batch) - len(kept); dropped > 0 {
		a.cfg.Logger.Warn("ledger entries dropped before their commit: their callers had given up", "entries", dropped)
	}
	batch = kept
	if len(batch) == 0 {
		return
	}
	entries = entries[:0]
	for _, p := range batch {
		entries = append(entries, p.entry)
	}
	// The commit is not tied to any one caller's context: a caller
	// that gives up must not abort the others' transaction.
	start := time.Now()
	a.committing.Store(start.UnixNano())
	err := a.store.Append(context.Background(), entries, a.cfg.Seal)
	a.committing.Store(0)
	var end time.Time
	if a.cfg.Observe != nil {
		end = time.Now()
	}
	if err != nil {
		a.failedAt.Store(time.Now().UnixNano())
	} else {
		a.failedAt.Store(0)
	}
	if err != nil {
		a.cfg.Logger.Error("ledger commit failed", "entries", len(entries), "err", err)
		if !errors.As(err, new(*writ.Error)) {
			err = &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision record could not be committed"}
		}
	}
	for _, p := range batch {
		p.err <- err
	}
	if a.cfg.Observe != nil {
		a.observe(batch, start, end, err)
	}
	if err == nil && a.cfg.OnCommit != nil {
		a.cfg.OnCommit(entries)
	}
}
