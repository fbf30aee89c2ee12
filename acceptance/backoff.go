package acceptance

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/writhq/writ/pack"
)

// backoff is the delay before retry n (1 for the first retry):
//
//	fixed        initialDelay
//	linear       initialDelay × n
//	exponential  initialDelay × 2^(n-1)
//
// capped at maxDelay, then moved by up to ±jitter of itself, by a draw
// from a PCG generator seeded with (seed, n), and capped again: maxDelay
// is a hard ceiling. The same inputs always give the same delay.
func backoff(r *pack.Retry, n int, seed uint64) time.Duration {
	if r == nil || r.InitialDelay <= 0 || n < 1 {
		return 0
	}
	ceiling := time.Duration(math.MaxInt64)
	if r.MaxDelay > 0 {
		ceiling = r.MaxDelay
	}
	d := r.InitialDelay
	switch r.Strategy {
	case "linear":
		d = mulCapped(d, int64(n), ceiling)
	case "exponential":
		for i := 1; i < n && d < ceiling; i++ {
			d = mulCapped(d, 2, ceiling)
		}
	}
	d = min(d, ceiling)
	if r.Jitter > 0 {
		u := rand.New(rand.NewPCG(seed, uint64(n))).Float64()*2 - 1 // [-1, 1)
		j := float64(d) * (1 + r.Jitter*u)
		if j >= float64(ceiling) {
			return ceiling
		}
		d = time.Duration(j)
	}
	return min(max(d, 0), ceiling)
}

// mulCapped returns min(d×k, ceiling) without overflow.
func mulCapped(d time.Duration, k int64, ceiling time.Duration) time.Duration {
	if d > ceiling/time.Duration(k) {
		return ceiling
	}
	return d * time.Duration(k)
}
