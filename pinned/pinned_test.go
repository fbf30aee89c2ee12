package pinned_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/pinned"
)

// countingBlobs serves a pack's stored blobs, counts the reads of its
// manifest, and fails the first failures reads.
type countingBlobs struct {
	m         map[string][]byte
	manifest  string
	reads     atomic.Int64
	mu        sync.Mutex
	failures  int
	hold      chan struct{} // when set, each manifest read waits for it to close
	readStart chan struct{}
	once      sync.Once
}

func (c *countingBlobs) Blob(_ context.Context, hash string) ([]byte, error) {
	if hash == c.manifest {
		c.reads.Add(1)
		if c.hold != nil {
			c.once.Do(func() { close(c.readStart) })
			<-c.hold
		}
	}
	c.mu.Lock()
	fail := c.failures > 0
	c.failures--
	c.mu.Unlock()
	if fail {
		return nil, context.DeadlineExceeded
	}
	b, ok := c.m[hash]
	if !ok {
		return nil, errors.New("not stored")
	}
	return b, nil
}

func refund(t *testing.T) (*pack.Pack, *countingBlobs) {
	t.Helper()
	p, err := pack.Load("../examples/refund")
	if err != nil {
		t.Fatal(err)
	}
	c := &countingBlobs{m: map[string][]byte{p.Hash: p.Manifest}, manifest: p.Hash}
	for _, f := range p.Files {
		c.m[f.Hash] = f.Data
	}
	return p, c
}

// TestPinnedKeepsALoadedPack: a pack is read and compiled once, and
// every later caller gets the compiled pack kept.
func TestPinnedKeepsALoadedPack(t *testing.T) {
	p, blobs := refund(t)
	packs := pinned.NewPacks(blobs)
	first, err := packs.Pinned(context.Background(), p.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if first.Pack.Hash != p.Hash {
		t.Fatalf("Pinned(%s) = pack %s", p.Hash, first.Pack.Hash)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if again, err := packs.Pinned(context.Background(), p.Hash); err != nil || again != first {
				t.Errorf("Pinned(%s) again = %p, %v, want the kept %p", p.Hash, again, err, first)
			}
		})
	}
	wg.Wait()
	if n := blobs.reads.Load(); n != 1 {
		t.Errorf("the manifest was read %d times, want once", n)
	}
}

// TestPinnedDoesNotKeepAFailedLoad: a transient failure to read a pack is
// the error of the caller that asked during it, not of every later one.
func TestPinnedDoesNotKeepAFailedLoad(t *testing.T) {
	p, blobs := refund(t)
	blobs.failures = 1
	packs := pinned.NewPacks(blobs)
	if _, err := packs.Pinned(context.Background(), p.Hash); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pinned while the pack cannot be read = %v, want the read's error", err)
	}
	if _, err := packs.Pinned(context.Background(), p.Hash); err != nil {
		t.Errorf("Pinned once the pack can be read = %v, want the pack", err)
	}
}

// TestPinnedWaitsOnlyForItsOwnContext: a caller whose context ends stops
// waiting for a stalled load, and the load goes on for the others.
func TestPinnedWaitsOnlyForItsOwnContext(t *testing.T) {
	p, blobs := refund(t)
	blobs.hold, blobs.readStart = make(chan struct{}), make(chan struct{})
	packs := pinned.NewPacks(blobs)
	other := make(chan error)
	go func() {
		_, err := packs.Pinned(context.Background(), p.Hash)
		other <- err
	}()
	<-blobs.readStart
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := packs.Pinned(ctx, p.Hash); !errors.Is(err, context.Canceled) {
		t.Errorf("Pinned with an ended context = %v, want context.Canceled", err)
	}
	close(blobs.hold)
	if err := <-other; err != nil {
		t.Errorf("Pinned of the caller still waiting = %v, want the pack", err)
	}
}
