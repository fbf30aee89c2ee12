package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fieldsRoundTripper is the HTTP transport of one session with a
// Streamable HTTP upstream: it reads the JSON-RPC messages the SDK posts
// (to note its tools/list requests) and the answers as the SDK reads
// them, application/json bodies and text/event-stream events alike, so
// that each tool's other fields are kept (listAnswers) before the SDK
// decodes the page and drops them. The bytes pass through unchanged.
type fieldsRoundTripper struct {
	next  http.RoundTripper
	lists *listAnswers
}

// withFieldsClient returns t with an HTTP client that keeps its tools'
// other fields in seen; t itself is not changed.
func withFieldsClient(t *mcp.StreamableClientTransport, seen *seenFields) *mcp.StreamableClientTransport {
	c := *t
	hc := http.DefaultClient
	if t.HTTPClient != nil {
		hc = t.HTTPClient
	}
	wrapped := *hc
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	wrapped.Transport = &fieldsRoundTripper{next: next, lists: &listAnswers{seen: seen, ids: map[any]bool{}}}
	c.HTTPClient = &wrapped
	return &c
}

// maxPostedMessage bounds the request bodies read to find tools/list
// requests: the SDK posts one message at a time, and a tools/list
// request is small. A larger body is sent unread.
const maxPostedMessage = 1 << 20

func (t *fieldsRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody && r.ContentLength >= 0 && r.ContentLength <= maxPostedMessage {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		for _, m := range decodeMessages(body) {
			t.lists.sent(m)
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &jsonReader{ReadCloser: resp.Body, lists: t.lists}
	case "text/event-stream":
		resp.Body = &sseReader{ReadCloser: resp.Body, lists: t.lists}
	}
	return resp, nil
}

// decodeMessages reads a posted body: one JSON-RPC message, or a batch
// of them. What it cannot read is not a tools/list request it must note.
func decodeMessages(b []byte) []jsonrpc.Message {
	if m, err := jsonrpc.DecodeMessage(b); err == nil {
		return []jsonrpc.Message{m}
	}
	var batch []json.RawMessage
	if json.Unmarshal(b, &batch) != nil {
		return nil
	}
	var out []jsonrpc.Message
	for _, raw := range batch {
		if m, err := jsonrpc.DecodeMessage(raw); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// jsonReader passes an application/json answer through and reads it when
// it ends, before the reader that reached its end (the SDK) has it.
type jsonReader struct {
	io.ReadCloser
	lists *listAnswers
	buf   []byte
	over  bool // longer than an SSE event may be: not read
}

func (j *jsonReader) Read(p []byte) (int, error) {
	n, err := j.ReadCloser.Read(p)
	if !j.over {
		j.buf = append(j.buf, p[:n]...)
		if len(j.buf) > mcp.DefaultMaxEventSize {
			j.over, j.buf = true, nil
		}
	}
	if err == io.EOF && !j.over && j.buf != nil {
		for _, m := range decodeMessages(j.buf) {
			j.lists.received(m)
		}
		j.buf = nil
	}
	return n, err
}

// sseReader passes a text/event-stream through and reads each event's
// data as a JSON-RPC message once the event is complete, as the SDK
// reads it (lines end at "\n", a trailing "\r" is dropped, an empty line
// ends an event, data lines are trimmed and joined with "\n"), before
// the SDK has the bytes that complete it.
type sseReader struct {
	io.ReadCloser
	lists *listAnswers
	line  []byte        // the current line so far
	data  *bytes.Buffer // the current event's data, if any
	over  bool          // the current event is longer than the SDK reads
	// skipped: the current line had bytes that were not kept (over).
	skipped bool
}

func (s *sseReader) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.feed(p[:n])
	if err == io.EOF {
		if len(s.line) > 0 {
			s.endLine()
		}
		s.endEvent()
	}
	return n, err
}

func (s *sseReader) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.take(b)
			return
		}
		s.take(b[:i])
		s.endLine()
		b = b[i+1:]
	}
}

func (s *sseReader) take(b []byte) {
	if s.over {
		s.skipped = s.skipped || len(b) > 0
		return
	}
	s.line = append(s.line, b...)
	if len(s.line)+s.dataLen() > mcp.DefaultMaxEventSize {
		s.over, s.skipped, s.line, s.data = true, true, nil, nil
	}
}

func (s *sseReader) dataLen() int {
	if s.data == nil {
		return 0
	}
	return s.data.Len()
}

func (s *sseReader) endLine() {
	line := bytes.TrimRight(s.line, "\r\n")
	s.line = s.line[:0]
	if s.over {
		skipped := s.skipped
		s.skipped = false
		if !skipped {
			s.endEvent()
		}
		return
	}
	if len(line) == 0 {
		s.endEvent()
		return
	}
	key, value, ok := bytes.Cut(line, []byte{':'})
	if !ok || string(key) != "data" {
		return
	}
	if s.data == nil {
		s.data = new(bytes.Buffer)
	} else {
		s.data.WriteByte('\n')
	}
	s.data.Write(bytes.TrimSpace(value))
}

func (s *sseReader) endEvent() {
	if s.data != nil && !s.over {
		if m, err := jsonrpc.DecodeMessage(s.data.Bytes()); err == nil {
			s.lists.received(m)
		}
	}
	s.data, s.over = nil, false
}
