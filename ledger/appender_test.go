package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
)

// gateStore is a store whose Append waits for the test to release it, so
// the test controls exactly when commits happen.
type gateStore struct {
	ledger.Store
	release chan struct{}
	mu      sync.Mutex
	batches []int
	fail    error
}

func (g *gateStore) Append(ctx context.Context, entries []*ledger.Entry, seal ledger.SealFunc) error {
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
