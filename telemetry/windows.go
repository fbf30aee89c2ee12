package telemetry

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/writhq/writ"
)

// Windows keeps, per tenant, the check latencies and append lags this
// server measured, in one-minute windows of the last hour: the tenant's
// own figures (GET /v1/stats/latency), where the Prometheus histograms
// have no tenant label. Each window holds a log-scale histogram (eight
// buckets per doubling), so a quantile is an estimate within 5% of a
// measured value, and a window costs memory in proportion to the
// distinct buckets it saw, not to its checks.
type Windows struct {
	mu      sync.Mutex
	since   time.Time
	tenants map[string]*tenantWindows
	// pruned is the window at which tenants without a recent window were
	// last dropped.
	pruned int64
}

// WindowLength is the length of one window, and WindowsKept how many
// of a tenant's are kept.
const (
	WindowLength = time.Minute
	WindowsKept  = 60
)

// tenantWindows are a tenant's windows, oldest first.
type tenantWindows struct{ w []*window }

type window struct {
	index          int64 // unix time / WindowLength
	check, appends series
}

// series is a histogram of durations: bucket index -> count.
type series struct {
	n       int64
	max     time.Duration
	buckets map[int16]uint32
}

// bucketsPerDoubling sets the resolution: a value is estimated as its
// bucket's geometric middle, within 2^(1/16)-1 (4.4%) of it.
const bucketsPerDoubling = 8

func bucketOf(d time.Duration) int16 {
	if d < 1 {
		d = 1
	}
	return int16(math.Floor(math.Log2(float64(d)) * bucketsPerDoubling))
}

func (s *series) add(d time.Duration) {
	if s.buckets == nil {
		s.buckets = map[int16]uint32{}
	}
	s.buckets[bucketOf(d)]++
	s.n++
	s.max = max(s.max, d)
}

// quantile estimates the q-quantile (the value at rank ceil(q*n)), in
// milliseconds; never above the maximum measured.
func (s *series) quantile(q float64) float64 {
	if s.n == 0 {
		return 0
	}
	keys := make([]int16, 0, len(s.buckets))
	for k := range s.buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := int64(math.Ceil(q * float64(s.n)))
	var seen int64
	for _, k := range keys {
		seen += int64(s.buckets[k])
		if seen >= rank {
			ns := math.Exp2((float64(k) + 0.5) / bucketsPerDoubling)
			return ms(time.Duration(min(ns, float64(s.max))))
		}
	}
	return ms(s.max)
}

func (s *series) summary() writ.LatencySummary {
	return writ.LatencySummary{Count: s.n, P50Ms: s.quantile(0.50), P99Ms: s.quantile(0.99), MaxMs: ms(s.max)}
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// NewWindows returns empty windows, measuring since now.
func NewWindows(now time.Time) *Windows {
	return &Windows{since: now.UTC(), tenants: map[string]*tenantWindows{}}
}

func windowIndex(at time.Time) int64 { return at.Unix() / int64(WindowLength/time.Second) }

// at returns the tenant's window of time at, creating it; nil for a
// time older than the tenant's newest window's hour.
func (w *Windows) at(tenant string, at time.Time) *window {
	idx := windowIndex(at)
	if idx > w.pruned {
		// Once a window: forget the tenants with nothing in the last hour.
		for id, tw := range w.tenants {
			if tw.w[len(tw.w)-1].index <= idx-WindowsKept {
				delete(w.tenants, id)
			}
		}
		w.pruned = idx
	}
	tw := w.tenants[tenant]
	if tw == nil {
		tw = &tenantWindows{}
		w.tenants[tenant] = tw
	}
	// Appends come in time order but for a few in flight: look from the
	// newest back.
	for i := len(tw.w) - 1; i >= 0; i-- {
		switch {
		case tw.w[i].index == idx:
			return tw.w[i]
		case tw.w[i].index < idx:
			nw := &window{index: idx}
			tw.w = slices.Insert(tw.w, i+1, nw)
			tw.trim(idx)
			return nw
		}
	}
	nw := &window{index: idx}
	tw.w = slices.Insert(tw.w, 0, nw)
	tw.trim(max(idx, tw.w[len(tw.w)-1].index))
	return nw
}

// trim drops the windows more than an hour older than newest.
func (tw *tenantWindows) trim(newest int64) {
	i := 0
	for i < len(tw.w) && tw.w[i].index <= newest-WindowsKept {
		i++
	}
	tw.w = tw.w[i:]
}

// ObserveCheck records a check of tenant answered at time at, which took d.
func (w *Windows) ObserveCheck(tenant string, at time.Time, d time.Duration) {
	if tenant == "" {
		return
	}
	w.mu.Lock()
	w.at(tenant, at).check.add(d)
	w.mu.Unlock()
}

// ObserveAppend records a record of tenant committed at time at, d after
// it entered the commit queue.
func (w *Windows) ObserveAppend(tenant string, at time.Time, d time.Duration) {
	if tenant == "" {
		return
	}
	w.mu.Lock()
	w.at(tenant, at).appends.add(d)
	w.mu.Unlock()
}

// Stats returns the tenant's windows of the hour before now.
func (w *Windows) Stats(tenant string, now time.Time) *writ.LatencyStats {
	out := &writ.LatencyStats{TenantID: tenant, WindowSeconds: int(WindowLength / time.Second), Since: w.since, Windows: []writ.LatencyWindow{}}
	idx := windowIndex(now)
	w.mu.Lock()
	defer w.mu.Unlock()
	if tw := w.tenants[tenant]; tw != nil {
		for _, x := range tw.w {
			if x.index <= idx-WindowsKept || x.index > idx {
				continue
			}
			out.Windows = append(out.Windows, writ.LatencyWindow{Start: time.Unix(x.index*int64(WindowLength/time.Second), 0).UTC(),
				CheckLatency: x.check.summary(), AppendLag: x.appends.summary()})
		}
	}
	return out
}
