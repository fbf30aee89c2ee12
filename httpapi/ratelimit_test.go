package httpapi

import (
	"fmt"
	"testing"
	"time"
)

// TestKeyLimiter: each key has its own bucket of Burst requests, refilled
// at PerSecond; a refused request costs nothing and says how long to wait.
func TestKeyLimiter(t *testing.T) {
	if newKeyLimiter(RateLimit{}) != nil {
		t.Fatal("the zero RateLimit limits")
	}
	k := newKeyLimiter(RateLimit{PerSecond: 2, Burst: 3})
	t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	for i := range 3 {
		if ok, _ := k.allow("a", t0); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := k.allow("a", t0)
	if ok || wait != 500*time.Millisecond {
		t.Errorf("request beyond the burst = %v, wait %s; want refused, 500ms", ok, wait)
	}
	if ok, _ := k.allow("b", t0); !ok {
		t.Error("another key refused while the first is limited")
	}
	if ok, _ := k.allow("a", t0.Add(499*time.Millisecond)); ok {
		t.Error("allowed before a token refilled")
	}
	if ok, _ := k.allow("a", t0.Add(500*time.Millisecond)); !ok {
		t.Error("refused once a token refilled (refused requests must not cost tokens)")
	}
	if d := newKeyLimiter(RateLimit{PerSecond: 0.5}); d.burst != 1 {
		t.Errorf("default burst of 0.5/s = %d, want 1", d.burst)
	}
	// Idle buckets are dropped once there are many keys.
	for i := range maxLimiterKeys + 10 {
		k.allow(fmt.Sprint("k", i), t0)
	}
	k.allow("late", t0.Add(time.Hour))
	if n := len(k.buckets); n > 1 {
		t.Errorf("%d buckets kept after an hour, want only the new one", n)
	}
}
