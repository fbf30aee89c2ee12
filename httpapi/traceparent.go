package httpapi

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// traceparent is a parsed W3C Trace Context traceparent header
// (https://www.w3.org/TR/trace-context/#traceparent-header).
type traceparent struct {
	TraceID  string // 32 lowercase hex, not all zeros
	ParentID string // 16 lowercase hex, not all zeros
	Flags    byte
	State    string // the tracestate that goes with it, canonical; "" when none or invalid
}

// Length of a version 00 traceparent: 2+1+32+1+16+1+2.
const traceparentLen = 55

// parseTraceparent parses the traceparent header values of a request. It
// reports false when there is not exactly one value or the value is not
// valid; callers then ignore the header, as the specification requires.
//
// Version 00 must be exactly 55 characters. Other versions (except the
// invalid ff) are parsed by the forward-compatibility rule: the first four
// fields are read as version 00 defines them, and anything after them must
// start with "-".
func parseTraceparent(values []string) (traceparent, bool) {
	if len(values) != 1 {
		return traceparent{}, false
	}
	v := strings.Trim(values[0], " \t")
	if len(v) < traceparentLen {
		return traceparent{}, false
	}
	version := v[0:2]
	switch {
	case !isLowerHex(version) || version == "ff":
		return traceparent{}, false
	case version == "00" && len(v) != traceparentLen:
		return traceparent{}, false
	case len(v) > traceparentLen && v[traceparentLen] != '-':
		return traceparent{}, false
	case v[2] != '-' || v[35] != '-' || v[52] != '-':
		return traceparent{}, false
	}
	tp := traceparent{TraceID: v[3:35], ParentID: v[36:52]}
	flags := v[53:55]
	if !validID(tp.TraceID) || !validID(tp.ParentID) || !isLowerHex(flags) {
		return traceparent{}, false
	}
	var b [1]byte
	hex.Decode(b[:], []byte(flags)) // cannot fail: checked above
	tp.Flags = b[0]
	return tp, true
}

// requestTrace returns the trace a request continues: its valid
// traceparent header, parsed by parseTraceparent (the one parser of the
// header). When the server is traced (OpenTelemetry's HTTP middleware
// started a span for the request), the trace id is that span's, so the
// records of the request join its trace; the span continues the same
// traceparent, so the two agree.
func requestTrace(r *http.Request) (traceparent, bool) {
	tp, ok := parseTraceparent(r.Header.Values("traceparent"))
	if !ok {
		return tp, false
	}
	tp.State = parseTracestate(r.Header.Values("tracestate"))
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		tp.TraceID = sc.TraceID().String()
	}
	return tp, true
}

// parseTracestate returns the request's tracestate, its headers joined
// as one list (W3C Trace Context lets a list span several headers), in
// its canonical form, or "" when it is absent, invalid or longer than
// the 512 bytes every participant must propagate: an invalid tracestate
// is dropped, never an error, as Trace Context says.
func parseTracestate(values []string) string {
	if len(values) == 0 {
		return ""
	}
	ts, err := trace.ParseTraceState(strings.Join(values, ","))
	if err != nil {
		return ""
	}
	if s := ts.String(); len(s) <= 512 {
		return s
	}
	return ""
}

// validID reports whether id is lowercase hex and not all zeros.
func validID(id string) bool {
	return isLowerHex(id) && strings.Trim(id, "0") != ""
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

// sampledFlag is the only trace flag version 00 defines.
const sampledFlag = 0x01

// formatTraceparent renders a version 00 traceparent with a fresh span id
// read from rand. Only the sampled flag is propagated.
func formatTraceparent(traceID string, flags byte, rand io.Reader) (string, error) {
	span, err := newSpanID(rand)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("00-%s-%s-%02x", traceID, span, flags&sampledFlag), nil
}

// newSpanID returns 16 lowercase hex digits read from rand, never all zeros.
func newSpanID(rand io.Reader) (string, error) {
	var b [8]byte
	for range 8 {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			return "", fmt.Errorf("read span id: %w", err)
		}
		if id := hex.EncodeToString(b[:]); validID(id) {
			return id, nil
		}
	}
	return "", fmt.Errorf("read span id: random source returned only zeros")
}
