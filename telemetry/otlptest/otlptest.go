// Package otlptest is a local OTLP/HTTP trace receiver for tests and
// benchmarks: it accepts what an OTLP exporter sends to /v1/traces
// (protobuf or JSON) and keeps the spans' trace ids and names. Nothing
// in writ's serving binary imports it.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP/HTTP trace receiver on loopback.
type Receiver struct {
	// URL is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string
	srv *httptest.Server

	mu    sync.Mutex
	spans []Span
	keep  bool
	count int
}

// Span is one received span.
type Span struct {
	TraceID, Name string
}

// NewReceiver starts a receiver. With keep false it only counts the
// export requests, without decoding them (for benchmarks); with keep true
// it decodes and keeps the spans (for tests).
func NewReceiver(keep bool) *Receiver {
	r := &Receiver{keep: keep}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	return r
}

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// Count returns the number of spans received (with keep false, of
// export requests received).
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Spans returns the spans kept so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !r.keep {
		// A benchmark's receiver costs no more than reading the export:
		// a real collector runs elsewhere.
		r.mu.Lock()
		r.count++
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if req.Header.Get("Content-Type") == "application/json" {
		err = protojson.Unmarshal(body, &msg)
	} else {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.count++
				if r.keep {
					r.spans = append(r.spans, Span{TraceID: hexID(s.GetTraceId()), Name: s.GetName()})
				}
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0xf]
	}
	return string(out)
}
