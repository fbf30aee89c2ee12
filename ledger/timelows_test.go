package ledger

import (
	"math/rand/v2"
	"testing"
)

// memLows is a tenant's chain of record times and its lows, in memory,
// as a store keeps them.
type memLows struct {
	times []int64                 // times[seq-1]
	lows  map[int]map[int64]int64 // level → seq → minimum
}

func (m *memLows) append(t *testing.T, times []int64) {
	t.Helper()
	prior := int64(len(m.times))
	lows, err := TimeLows("acme", prior, times, func(level int, lo, hi int64) (int64, bool, error) {
		v, ok := int64(0), false
		for seq := lo + 1; seq <= hi; seq++ {
			x, found := m.item(level, seq)
			if found && (!ok || x < v) {
				v, ok = x, true
			}
		}
		return v, ok, nil
	})
	if err != nil {
		t.Fatalf("TimeLows(prior %d, %d times) = %v", prior, len(times), err)
	}
	m.times = append(m.times, times...)
	for _, l := range lows {
		if l.Seq%TimeLowSpan(l.Level) != 0 || l.Seq > int64(len(m.times)) {
			t.Fatalf("TimeLows wrote a low of level %d at %d, not the end of a complete block", l.Level, l.Seq)
		}
		if _, dup := m.lows[l.Level][l.Seq]; dup {
			t.Fatalf("TimeLows wrote the low of level %d at %d twice", l.Level, l.Seq)
		}
		if m.lows[l.Level] == nil {
			m.lows[l.Level] = map[int64]int64{}
		}
		m.lows[l.Level][l.Seq] = l.MinNanos
	}
}

func (m *memLows) item(level int, seq int64) (int64, bool) {
	if level == 0 {
		return m.times[seq-1], true
	}
	v, ok := m.lows[level][seq]
	return v, ok
}

// TestTimeLows appends records with times out of chain order in batches
// of random sizes, checks every low against the block's minimum, and
// TimeCeiling against a walk back for ends and bounds all over the chain.
func TestTimeLows(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 1))
	for _, tc := range []struct {
		name  string
		n     int
		batch int
		time  func(seq int) int64
	}{
		{"in order", 5000, 40, func(seq int) int64 { return int64(seq) * 10 }},
		{"clock stepped back", 5000, 7, func(seq int) int64 {
			if seq > 3000 {
				return int64(seq-2500) * 10
			}
			return int64(seq) * 10
		}},
		{"jitter", 70000, 500, func(seq int) int64 { return int64(seq)*10 + rng.Int64N(5000) }},
		{"random", 5000, 1, func(int) int64 { return rng.Int64N(50000) }},
		{"equal times", 300, 3, func(int) int64 { return 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memLows{lows: map[int]map[int64]int64{}}
			for len(m.times) < tc.n {
				k := 1 + rng.IntN(2*tc.batch)
				times := make([]int64, k)
				for i := range times {
					times[i] = tc.time(len(m.times) + i + 1)
				}
				m.append(t, times)
			}
			n := int64(len(m.times))
			for level := 1; level <= TimeLowLevels; level++ {
				span := TimeLowSpan(level)
				if got, want := int64(len(m.lows[level])), n/span; got != want {
					t.Errorf("%d lows of level %d over %d records, want %d", got, level, n, want)
				}
				for seq, low := range m.lows[level] {
					want := m.times[seq-span]
					for _, ts := range m.times[seq-span : seq] {
						want = min(want, ts)
					}
					if low != want {
						t.Errorf("low of level %d at %d = %d, want %d", level, seq, low, want)
					}
				}
			}
			for range 400 {
				hi := 1 + rng.Int64N(n)
				before := m.times[rng.Int64N(n)] + rng.Int64N(3) - 1
				reads := 0
				got, err := TimeCeiling(hi, func(level int, lo, hi int64) (int64, error) {
					reads++
					for seq := hi; seq > lo; seq-- {
						if v, ok := m.item(level, seq); ok && v < before {
							return seq, nil
						}
					}
					return 0, nil
				})
				want := int64(0)
				for seq := hi; seq > 0; seq-- {
					if m.times[seq-1] < before {
						want = seq
						break
					}
				}
				if err != nil || got != want {
					t.Fatalf("TimeCeiling(%d, before %d) = %d, %v; want %d", hi, before, got, err, want)
				}
				if reads > 2*TimeLowLevels+1 {
					t.Errorf("TimeCeiling(%d, before %d) read %d ranges, want at most %d", hi, before, reads, 2*TimeLowLevels+1)
				}
			}
		})
	}
}
