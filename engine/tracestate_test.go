package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// TestTraceStateKeptInTheEnvelope: a check's W3C tracestate is kept in
// its stored envelope, as it came; one that is not a tracestate is
// refused, naming the member, and nothing is written.
func TestTraceStateKeptInTheEnvelope(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"))
	req := refundRequest(t, "refund-allow")
	req.TraceState = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	rc, err := h.eng.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := h.store.Envelope(ctx, "acme", rec.Record.Audit.Seq, rec.Record.Replay.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		TraceState string `json:"trace_state"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.TraceState != req.TraceState {
		t.Errorf("envelope trace_state = %q (%v), want %q", env.TraceState, err, req.TraceState)
	}

	for _, bad := range []string{"Congo=upper", "no-equals", "a=1,a=2", "a=" + strings.Repeat("x", 257), "a=" + strings.Repeat("x", 256) + ",b=" + strings.Repeat("y", 256)} {
		req := refundRequest(t, "refund-allow")
		req.IdempotencyKey = ""
		req.TraceState = bad
		rc, err := h.eng.Check(ctx, req)
		if writ.ErrorCode(err) != writ.EINVALID || rc != nil || !strings.Contains(err.Error(), "trace_state") {
			t.Errorf("Check with trace_state %q = %v, %v; want EINVALID naming trace_state", bad, rc, err)
		}
	}
}
