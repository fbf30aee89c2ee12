package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRunLocksDrain: the per-run locks serialise the holders of one run,
// and the map keeps no entry once a run's lock is not held or waited for
// (a server runs millions of runs; it must not keep a mutex per run).
func TestRunLocksDrain(t *testing.T) {
	var l runLocks
	var inside [4]atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := i % len(inside)
			unlock := l.lock(fmt.Sprintf("acme/run_%d", k))
			if n := inside[k].Add(1); n != 1 {
				t.Errorf("%d holders of run_%d's lock at once", n, k)
			}
			inside[k].Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) != 0 {
		t.Errorf("the run lock map keeps %d entries after every lock was released, want 0", len(l.m))
	}
}
