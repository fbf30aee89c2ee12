package ledger_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
)

// gateStore is a store whose Append waits for the test to release it, so
// the test controls exactly when commits happen. It has nothing but
// Append: an Appender needs no other method (ledger.AppendStore).
type gateStore struct {
	release chan struct{}
	// started, when set, is sent the record IDs of each batch as it
	// reaches the store, before the store waits for release.
	started chan []string
	mu      sync.Mutex
	batches []int
	fail    error
}

func (g *gateStore) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
	if g.started != nil {
		ids := make([]string, len(entries))
		for i, e := range entries {
			ids[i] = e.Record.RecordID
		}
		g.started <- ids
	}
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	g.batches = append(g.batches, len(entries))
	if g.fail != nil {
		return g.fail
	}
	for _, e := range entries {
		raw, err := seal(ledger.Head{}, e)
		if err != nil {
			return err
		}
		e.Raw = raw
	}
	return nil
}

func entry(n int) *ledger.Entry {
	return ledgertest.NewEntry(ledgertest.NewRecord("acme", n))
}

func TestAppenderGroupsConcurrentAppends(t *testing.T) {
	g := &gateStore{release: make(chan struct{})}
	a := ledger.NewAppender(g, ledger.AppenderConfig{MaxBatch: 64})
	defer a.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	// The first append holds the committer; the next nine queue behind it.
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- a.Append(context.Background(), entry(i+1))
		}()
	}
	// Release commits until everyone is answered.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case g.release <- struct{}{}:
			continue
		case <-done:
		}
		break
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Append = %v", err)
		}
	}
	total := 0
	for _, n := range g.batches {
		total += n
	}
	if total != 10 || len(g.batches) > 10 {
		t.Errorf("batches %v carry %d entries, want 10 in all", g.batches, total)
	}
}

func TestAppenderBackpressure(t *testing.T) {
	g := &gateStore{release: make(chan struct{})}
	a := ledger.NewAppender(g, ledger.AppenderConfig{MaxBatch: 1, QueueSize: 2, QueueWait: time.Millisecond})
	results := make(chan error, 4)
	for i := range 4 {
		go func() { results <- a.Append(context.Background(), entry(i+1)) }()
	}
	// One entry is held by the committer, two wait in the queue; the
	// fourth finds the queue full and is refused, never dropped silently.
	err := <-results
	if !errors.Is(err, ledger.ErrOverloaded) || writ.ErrorCode(err) != writ.EUNAVAILABLE {
		t.Fatalf("Append on a full queue = %v, want ErrOverloaded (EUNAVAILABLE)", err)
	}
	for range 3 {
		g.release <- struct{}{}
	}
	for range 3 {
		if err := <-results; err != nil {
			t.Errorf("queued Append = %v, want nil", err)
		}
	}
	a.Close()
	if err := a.Append(context.Background(), entry(9)); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
}

func TestAppenderReportsCommitFailureToEveryCaller(t *testing.T) {
	g := &gateStore{release: make(chan struct{}), fail: errors.New("disk full")}
	close(g.release)
	a := ledger.NewAppender(g, ledger.AppenderConfig{})
	defer a.Close()
	err := a.Append(context.Background(), entry(1))
	if writ.ErrorCode(err) != writ.EUNAVAILABLE {
		t.Fatalf("Append on a failing store = %v, want EUNAVAILABLE", err)
	}
	if writ.ErrorMessage(err) != "the decision record could not be committed" {
		t.Errorf("the store's error leaked to the caller: %q", writ.ErrorMessage(err))
	}
}

// TestAppenderDropsAbandonedEntries: an entry whose caller gave up (its
// context is done) before its batch reaches the store is not written, so
// no record exists that its caller was told did not happen; an entry whose
// caller gives up while its batch is in the store stays in that batch.
func TestAppenderDropsAbandonedEntries(t *testing.T) {
	g := &gateStore{release: make(chan struct{}), started: make(chan []string, 8)}
	a := ledger.NewAppender(g, ledger.AppenderConfig{MaxBatch: 64})
	defer a.Close()
	start := func(ctx context.Context, e *ledger.Entry) chan error {
		c := make(chan error, 1)
		go func() { c <- a.Append(ctx, e) }()
		return c
	}
	queued := func(n int) {
		for a.QueueDepth() != n {
			runtime.Gosched()
		}
	}

	// 1 holds the store while 2 (given up) and 3 queue behind it.
	first, second, third := entry(1), entry(2), entry(3)
	r1 := start(context.Background(), first)
	if got := <-g.started; !slices.Equal(got, []string{first.Record.RecordID}) {
		t.Fatalf("first batch = %v", got)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	r2 := start(ctx2, second)
	queued(1)
	cancel2()
	if err := <-r2; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned Append = %v, want context.Canceled", err)
	}
	r3 := start(context.Background(), third)
	queued(2)
	g.release <- struct{}{}
	if err := <-r1; err != nil {
		t.Fatalf("first Append = %v", err)
	}
	if got := <-g.started; !slices.Equal(got, []string{third.Record.RecordID}) {
		t.Errorf("second batch = %v, want only %s: the abandoned entry went to the store", got, third.Record.RecordID)
	}
	g.release <- struct{}{}
	if err := <-r3; err != nil {
		t.Fatalf("third Append = %v", err)
	}
	if second.Raw != nil {
		t.Errorf("the abandoned entry was sealed")
	}

	// 4's caller gives up while its batch is in the store: it is committed.
	fourth := entry(4)
	ctx4, cancel4 := context.WithCancel(context.Background())
	r4 := start(ctx4, fourth)
	if got := <-g.started; !slices.Equal(got, []string{fourth.Record.RecordID}) {
		t.Fatalf("fourth batch = %v", got)
	}
	cancel4()
	if err := <-r4; !errors.Is(err, context.Canceled) {
		t.Fatalf("Append given up mid-commit = %v, want context.Canceled", err)
	}
	g.release <- struct{}{}
	a.Close()
	if fourth.Raw == nil {
		t.Errorf("an entry given up on mid-commit was taken out of its batch")
	}
	if !slices.Equal(g.batches, []int{1, 1, 1}) {
		t.Errorf("batches = %v, want [1 1 1]", g.batches)
	}
}

// TestAppenderCommitLater: an entry appended with CommitLater waits for
// the next entry that is waited for and is committed in its transaction,
// or alone once its wait is over or the appender closes; either way its
// Append returns only after the commit.
func TestAppenderCommitLater(t *testing.T) {
	id := func(n int) string { return entry(n).Record.RecordID }
	cases := []struct {
		name string
		wait time.Duration
		// then follows the later entry (2), once the commit loop has
		// taken it: 0 for none, 3 for an entry that is waited for, -1
		// to close the appender.
		then int
		want [][]string
	}{
		{"joins the next commit", time.Hour, 3, [][]string{{id(1)}, {id(2), id(3)}}},
		{"alone once its wait is over", time.Millisecond, 0, [][]string{{id(1)}, {id(2)}}},
		{"alone when the appender closes", time.Hour, -1, [][]string{{id(1)}, {id(2)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &gateStore{release: make(chan struct{}), started: make(chan []string, 4)}
			a := ledger.NewAppender(g, ledger.AppenderConfig{MaxBatch: 64})
			defer a.Close()
			// Entry 1 holds the committer while entry 2 is queued; once 1
			// is committed, the loop takes 2 (the queue empties).
			res := make(chan error, 3)
			go func() { res <- a.Append(context.Background(), entry(1)) }()
			got := [][]string{<-g.started}
			go func() { res <- a.Append(ledger.CommitLater(context.Background(), c.wait), entry(2)) }()
			for a.QueueDepth() != 1 {
				runtime.Gosched()
			}
			g.release <- struct{}{}
			if err := <-res; err != nil {
				t.Fatalf("Append(1) = %v", err)
			}
			for a.QueueDepth() != 0 {
				runtime.Gosched()
			}
			appends := 1
			switch c.then {
			case 3:
				appends++
				go func() { res <- a.Append(context.Background(), entry(3)) }()
			case -1:
				go a.Close()
			}
			for appends > 0 {
				select {
				case b := <-g.started:
					got = append(got, b)
					g.release <- struct{}{}
				case err := <-res:
					if err != nil {
						t.Errorf("Append = %v", err)
					}
					appends--
				}
			}
			if !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Errorf("batches = %v, want %v", got, c.want)
			}
		})
	}
}
