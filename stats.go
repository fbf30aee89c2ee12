package writ

import "time"

// LatencyStats is what one server measured of a tenant's checks and
// ledger appends in recent windows (GET /v1/stats/latency): the check
// latency (from the service call to the answer, the record committed)
// and the append lag (from a record entering the ledger's commit queue to
// its durable commit). The figures live in the server's memory only:
// they begin when the server starts, and each server of a cluster
// answers its own.
type LatencyStats struct {
	TenantID string `json:"tenant_id"`
	// WindowSeconds is the length of each window.
	WindowSeconds int `json:"window_seconds"`
	// Since is when the server began measuring (it started).
	Since time.Time `json:"since"`
	// Windows are the windows in which the tenant had a check or an
	// append, oldest first; at most the last hour's.
	Windows []LatencyWindow `json:"windows"`
}

// LatencyWindow is one window of LatencyStats.
type LatencyWindow struct {
	// Start is when the window began; it ends WindowSeconds later.
	Start time.Time `json:"start"`
	// CheckLatency is the latency of the checks answered in the window.
	CheckLatency LatencySummary `json:"check_latency"`
	// AppendLag is the lag of the records committed in the window.
	AppendLag LatencySummary `json:"append_lag"`
}

// LatencySummary sums up the durations of one series in a window. The
// quantiles are estimates within 5% of the measured value (log-scale
// buckets); both are 0 when Count is 0.
type LatencySummary struct {
	Count int64   `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}
