package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// LogInterval is how often RateLimit lets a line of one cause through.
const LogInterval = 10 * time.Second

// maxCauses bounds the causes RateLimit remembers: past it, it forgets
// them all and starts again (a line more, never a line lost for good
// nor memory without bound).
const maxCauses = 1024

// perOccurrence are the attributes that differ from one occurrence of a
// cause to the next (which request, which decision): they are not part of
// the cause.
var perOccurrence = map[string]bool{"decision_id": true, "trace_id": true, "span_id": true, "record_id": true, "run_id": true, "approval_id": true, "duration": true}

// RateLimit wraps h so that under a persistent fault the log stays
// readable: of the warnings and errors of one cause (the same level,
// message and attributes, but for those naming the occurrence, such as
// decision_id and trace_id), one line per interval goes through; the
// others are counted, and the next line of that cause that goes through
// carries the count as "suppressed" (lines of that cause left out since
// the last one). Lines below warning level always go through. now is the
// clock (time.Now in writ serve; a test's fake clock in tests).
func RateLimit(h slog.Handler, interval time.Duration, now func() time.Time) slog.Handler {
	return &rateHandler{Handler: h, l: &rateLimiter{interval: interval, now: now, causes: make(map[string]*causeState)}}
}

type rateLimiter struct {
	interval time.Duration
	now      func() time.Time

	mu     sync.Mutex
	causes map[string]*causeState
}

type causeState struct {
	last       time.Time // when a line of this cause last went through
	suppressed int       // lines left out since
}

// admit reports whether a line of cause may go through now, and how many
// were left out before it.
func (l *rateLimiter) admit(cause string) (ok bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.causes[cause]
	if c == nil {
		if len(l.causes) >= maxCauses {
			clear(l.causes)
		}
		l.causes[cause] = &causeState{last: now}
		return true, 0
	}
	if now.Sub(c.last) < l.interval {
		c.suppressed++
		return false, 0
	}
	n := c.suppressed
	c.last, c.suppressed = now, 0
	return true, n
}

type rateHandler struct {
	slog.Handler
	l *rateLimiter
}

func (h *rateHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.Handler.Handle(ctx, r)
	}
	var b strings.Builder
	b.WriteString(r.Level.String() + "\x00" + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if !perOccurrence[a.Key] {
			b.WriteString("\x00" + a.Key + "=" + a.Value.Resolve().String())
		}
		return true
	})
	cause := b.String()
	ok, suppressed := h.l.admit(cause)
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed),
			slog.String("suppressed_note", fmt.Sprintf("%d more lines of this cause were left out in the last %s", suppressed, h.l.interval)))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *rateHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &rateHandler{Handler: h.Handler.WithAttrs(attrs), l: h.l}
}

func (h *rateHandler) WithGroup(name string) slog.Handler {
	return &rateHandler{Handler: h.Handler.WithGroup(name), l: h.l}
}
