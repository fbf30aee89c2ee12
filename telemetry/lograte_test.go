package telemetry

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRateLimitOneLinePerCause: 340 errors a second of one cause (the
// disk-full case of issue 38) make one line per interval, the next
// carrying the count; another cause, and lines below warning, go
// through. The clock is a fake one: no sleeps.
func TestRateLimitOneLinePerCause(t *testing.T) {
	now := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	log := slog.New(RateLimit(slog.NewTextHandler(&buf, nil), LogInterval, func() time.Time { return now }))
	full := errors.New("database or disk is full")
	for range 340 {
		log.Error("check failed closed", "decision_id", now.String(), "tenant", "acme", "error", full)
		now = now.Add(time.Second / 340)
	}
	log.Warn("check failed closed", "tenant", "acme", "error", full) // another level: its own cause
	log.Error("check failed closed", "tenant", "acme", "error", errors.New("connection refused"))
	log.Info("http request")
	log.Info("http request")
	if got := strings.Count(buf.String(), "\n"); got != 5 {
		t.Fatalf("after a second of one fault: %d lines, want 5 (one per cause, and the two info lines):\n%s", got, buf.String())
	}
	now = now.Add(LogInterval)
	buf.Reset()
	log.Error("check failed closed", "decision_id", "d2", "tenant", "acme", "error", full)
	if l := buf.String(); !strings.Contains(l, "suppressed=339 ") || !strings.Contains(l, "339 more lines of this cause were left out in the last 10s") {
		t.Errorf("the first line after the interval = %q, want suppressed=339", l)
	}
	buf.Reset()
	log.Error("check failed closed", "decision_id", "d3", "tenant", "acme", "error", full)
	if buf.Len() != 0 {
		t.Errorf("a second line within the new interval went through: %q", buf.String())
	}
}
