package telemetry

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/writhq/writ/ledger"
)

// TestWindowsQuantiles: p50 and p99 of a window are within 5% of the
// exact ones, never above the maximum, and a series without a value is
// all zeros.
func TestWindowsQuantiles(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 6, 0, 10, 0, time.UTC)
	tests := []struct {
		name           string
		checks         []time.Duration
		p50, p99, maxd time.Duration
	}{
		{"one check", []time.Duration{3 * time.Millisecond}, 3 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond},
		{"1..100 ms", ramp(100, time.Millisecond), 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
		{"1..1000 µs", ramp(1000, time.Microsecond), 500 * time.Microsecond, 990 * time.Microsecond, 1000 * time.Microsecond},
		{"a slow tail", append(repeat(98, 2*time.Millisecond), 400*time.Millisecond, 900*time.Millisecond), 2 * time.Millisecond, 400 * time.Millisecond, 900 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWindows(t0)
			for _, d := range tt.checks {
				w.ObserveCheck("acme", t0, d)
			}
			st := w.Stats("acme", t0)
			if len(st.Windows) != 1 {
				t.Fatalf("%d windows, want 1: %+v", len(st.Windows), st)
			}
			c := st.Windows[0].CheckLatency
			if c.Count != int64(len(tt.checks)) {
				t.Errorf("count %d, want %d", c.Count, len(tt.checks))
			}
			near(t, "p50", c.P50Ms, tt.p50)
			near(t, "p99", c.P99Ms, tt.p99)
			if c.MaxMs != ms(tt.maxd) || c.P99Ms > c.MaxMs {
				t.Errorf("max %v ms (p99 %v), want %v", c.MaxMs, c.P99Ms, ms(tt.maxd))
			}
			if a := st.Windows[0].AppendLag; a.Count != 0 || a.P50Ms != 0 || a.P99Ms != 0 || a.MaxMs != 0 {
				t.Errorf("append lag without appends = %+v, want zeros", a)
			}
		})
	}
}

func near(t *testing.T, what string, gotMs float64, want time.Duration) {
	t.Helper()
	if w := ms(want); math.Abs(gotMs-w) > 0.05*w {
		t.Errorf("%s = %v ms, want %v ms within 5%%", what, gotMs, w)
	}
}

func ramp(n int, unit time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * unit
	}
	return out
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestWindowsTenantsAndTime: a tenant sees its own windows only, one per
// minute, oldest first; windows older than an hour are gone, and so is a
// tenant with nothing in the last hour.
func TestWindowsTenantsAndTime(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	w := NewWindows(t0)
	w.ObserveCheck("acme", t0.Add(30*time.Second), time.Millisecond)
	w.ObserveAppend("acme", t0.Add(30*time.Second), 2*time.Millisecond)
	w.ObserveCheck("acme", t0.Add(2*time.Minute), 5*time.Millisecond)
	// An append committed a little after a later one: its window is kept
	// in order.
	w.ObserveAppend("acme", t0.Add(90*time.Second), time.Millisecond)
	w.ObserveCheck("globex", t0.Add(time.Minute), 70*time.Millisecond)
	w.ObserveCheck("", t0, time.Millisecond) // no tenant: not kept

	st := w.Stats("acme", t0.Add(3*time.Minute))
	if st.TenantID != "acme" || st.WindowSeconds != 60 || !st.Since.Equal(t0) {
		t.Errorf("stats = %+v", st)
	}
	var starts []time.Time
	for _, x := range st.Windows {
		starts = append(starts, x.Start)
		if x.CheckLatency.MaxMs >= 70 {
			t.Errorf("acme's window %v holds globex's check: %+v", x.Start, x.CheckLatency)
		}
	}
	want := []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute)}
	if len(starts) != len(want) {
		t.Fatalf("windows start at %v, want %v", starts, want)
	}
	for i := range want {
		if !starts[i].Equal(want[i]) {
			t.Fatalf("windows start at %v, want %v", starts, want)
		}
	}
	if c := st.Windows[1]; c.CheckLatency.Count != 0 || c.AppendLag.Count != 1 {
		t.Errorf("minute 1 = %+v, want the late append only", c)
	}
	if g := w.Stats("globex", t0.Add(3*time.Minute)); len(g.Windows) != 1 || g.Windows[0].CheckLatency.Count != 1 {
		t.Errorf("globex = %+v, want its one check", g)
	}
	if n := w.Stats("initech", t0); len(n.Windows) != 0 || n.Windows == nil {
		t.Errorf("a tenant without checks = %+v, want an empty list", n)
	}

	// An hour after minute 0, minute 0 is gone; the others stay.
	if st := w.Stats("acme", t0.Add(time.Hour)); len(st.Windows) != 2 || !st.Windows[0].Start.Equal(t0.Add(time.Minute)) {
		t.Errorf("an hour on = %+v, want minutes 1 and 2", st.Windows)
	}
	// A check of acme three hours on: globex, silent for the hour, is
	// forgotten, and acme keeps its new window only.
	w.ObserveCheck("acme", t0.Add(3*time.Hour), time.Millisecond)
	w.mu.Lock()
	_, kept := w.tenants["globex"]
	n := len(w.tenants["acme"].w)
	w.mu.Unlock()
	if kept || n != 1 {
		t.Errorf("after three hours: globex kept %v, acme has %d windows; want globex gone, 1", kept, n)
	}
}

// TestMetricsLatencyPerTenant: a group commit's entries count in their
// own tenants' windows, failed commits in none; checks count in the
// tenant the wrapper names.
func TestMetricsLatencyPerTenant(t *testing.T) {
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	m := NewMetrics(Gauges{Now: func() time.Time { return now }})
	queued := now.Add(-4 * time.Millisecond)
	m.ObserveCommit(ledger.Commit{Start: now.Add(-time.Millisecond), End: now,
		Waits: []ledger.Wait{{TenantID: "acme", Queued: queued}, {TenantID: "globex", Queued: queued}, {TenantID: "acme", Queued: now.Add(-2 * time.Millisecond)}}})
	m.ObserveCommit(ledger.Commit{Start: now, End: now, Err: errors.New("disk full"), Waits: []ledger.Wait{{TenantID: "acme", Queued: queued}}})
	m.ObserveTenantCheck("acme", 3*time.Millisecond)
	st := m.Latency("acme")
	if len(st.Windows) != 1 {
		t.Fatalf("acme = %+v", st)
	}
	if a := st.Windows[0].AppendLag; a.Count != 2 || a.MaxMs != 4 {
		t.Errorf("acme's append lag = %+v, want its 2 committed entries, the slower 4 ms", a)
	}
	if c := st.Windows[0].CheckLatency; c.Count != 1 || c.MaxMs != 3 {
		t.Errorf("acme's checks = %+v, want one of 3 ms", c)
	}
	if g := m.Latency("globex"); len(g.Windows) != 1 || g.Windows[0].AppendLag.Count != 1 || g.Windows[0].CheckLatency.Count != 0 {
		t.Errorf("globex = %+v, want its one append", g)
	}
}
