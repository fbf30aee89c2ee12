package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport serves MCP over a newline-delimited stream (the stdio
// transport) and answers every malformed message itself, so that no input
// ends the session.
//
// The SDK's own stdio connection ends its session on the first message it
// cannot decode (invalid JSON, a message that is not JSON-RPC 2.0, a batch
// it refuses), and a desktop client then loses the gateway and every
// approval it was waiting on. StdioTransport reads one line at a time in
// front of it: a line that is a well-formed JSON-RPC 2.0 message is
// re-encoded in a plain form and passed on to the SDK; any other line is
// answered with the JSON-RPC error the specification names
// (docs/mcp.md, "Malformed messages") and dropped.
type StdioTransport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxMessage bounds one line, in bytes; a longer line is answered
	// with an error and skipped. 0 means 4 MiB.
	MaxMessage int
}

// drainTime bounds how long a session whose input ended waits for the
// answers to the requests under way (a call that waits on a question to
// the departed client would wait for ever).
var drainTime = time.Minute

// DefaultMaxMessage is the largest message StdioTransport reads when
// MaxMessage is 0.
const DefaultMaxMessage = 4 << 20

// maxDepth is the deepest nesting of objects and arrays passed on: the
// SDK's decoder refuses deeper messages by ending the session.
const maxDepth = 1000

// Connect starts reading the stream.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	limit := t.MaxMessage
	if limit <= 0 {
		limit = DefaultMaxMessage
	}
	pr, pw := io.Pipe()
	out := &stdioWriter{w: t.Writer}
	// drainTime is read here, not by the stream's goroutine, which may
	// outlive the session it served.
	go screenStream(t.Reader, pw, out, limit, drainTime)
	return (&mcp.IOTransport{Reader: pr, Writer: out, MaxLineLength: -1}).Connect(ctx)
}

// stdioWriter serialises the SDK's messages and the screen's answers on
// one stream, and watches the SDK's answer to initialize: until a session
// is initialized, requests other than initialize and ping are answered by
// the screen (the SDK would answer them with a code of 0).
type stdioWriter struct {
	mu          sync.Mutex
	w           io.Writer
	initialized bool
	initIDs     map[string]bool // ids of initialize requests passed on, as JSON
	// open are the ids (as JSON) of the requests passed on and not yet
	// answered; idle is closed and replaced when none is left.
	open map[string]int
	idle chan struct{}
	// listens are the open subscriptions/listen requests (2026-07-28):
	// they stay open until cancelled, so a session whose input ended
	// does not wait for their answers.
	listens map[string]bool
	// cancelled are the open requests the client cancelled
	// (notifications/cancelled): their answers are not sent, as MCP asks
	// of the receiver of a cancellation.
	cancelled map[string]bool
}

// cancel records that the client cancelled the request id (its JSON),
// if it is still under way; an initialize request cannot be cancelled.
func (s *stdioWriter) cancel(id []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := idKey(id)
	if s.open[k] == 0 || s.initIDs[string(id)] {
		return
	}
	if s.cancelled == nil {
		s.cancelled = map[string]bool{}
	}
	s.cancelled[k] = true
}

// responsePrefix starts every response the SDK writes: it encodes
// "jsonrpc", then "id", then "result" or "error" (a request or
// notification to the client has "method" there instead).
const responsePrefix = `{"jsonrpc":"2.0","id":`

// answered returns the id of the response p, if it is one, as JSON.
func answered(p []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(p, []byte(responsePrefix))
	if !ok {
		return "", false
	}
	var end int
	if len(rest) > 0 && rest[0] == '"' {
		for end = 1; end < len(rest) && rest[end] != '"'; end++ {
			if rest[end] == '\\' {
				end++
			}
		}
		end++
	} else {
		for end < len(rest) && rest[end] != ',' {
			end++
		}
	}
	if end > len(rest) || !bytes.HasPrefix(rest[end:], []byte(`,"result"`)) && !bytes.HasPrefix(rest[end:], []byte(`,"error"`)) {
		return "", false
	}
	return idKey(rest[:end]), true
}

// idKey is the id of a message as a key: the same for every spelling of
// one string or integer.
func idKey(raw []byte) string {
	if len(raw) > 0 && raw[0] == '"' {
		var v string
		if json.Unmarshal(raw, &v) == nil {
			return "s" + v
		}
	} else if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return "n" + strconv.FormatInt(n, 10)
	}
	return "?" + string(raw)
}

// passed records a request passed on; false when a request with the same
// id is still unanswered (JSON-RPC ids of requests in flight are unique).
func (s *stdioWriter) passed(id []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[string]int{}
	}
	k := idKey(id)
	if s.open[k] > 0 {
		return false
	}
	s.open[k]++
	return true
}

// listening records that the request id (passed on) is a
// subscriptions/listen.
func (s *stdioWriter) listening(id []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listens == nil {
		s.listens = map[string]bool{}
	}
	s.listens[idKey(id)] = true
}

// waiting reports whether a request other than a subscriptions/listen
// is under way. s.mu is held.
func (s *stdioWriter) waiting() bool {
	for k := range s.open {
		if !s.listens[k] {
			return true
		}
	}
	return false
}

// drained is closed once every request passed on so far is answered.
func (s *stdioWriter) drained() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waiting() {
		c := make(chan struct{})
		close(c)
		return c
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

func (s *stdioWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := answered(p); ok && s.open[id] > 0 {
		if s.open[id]--; s.open[id] == 0 {
			delete(s.open, id)
			delete(s.listens, id)
		}
		if !s.waiting() && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
		if s.cancelled[id] {
			// The client cancelled it: no answer.
			delete(s.cancelled, id)
			return len(p), nil
		}
	}
	if !s.initialized && len(s.initIDs) > 0 {
		var m struct {
			ID     jsontext.Value `json:"id"`
			Result jsontext.Value `json:"result"`
		}
		if jsonv2.Unmarshal(bytes.TrimSpace(p), &m) == nil && s.initIDs[string(m.ID)] && len(m.Result) > 0 {
			s.initialized = true
		}
	}
	return s.w.Write(p)
}

func (s *stdioWriter) Close() error { return nil }

// isInitialized reports whether requests may now reach the SDK: once an
// initialize request was passed on, the SDK handles the requests after
// it in order (a client may send them before it reads the answer).
func (s *stdioWriter) isInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized || len(s.initIDs) > 0
}

func (s *stdioWriter) initializing(id []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.initIDs == nil {
		s.initIDs = map[string]bool{}
	}
	s.initIDs[string(id)] = true
}

// answer writes a JSON-RPC error response.
func (s *stdioWriter) answer(e *rpcError) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(e.id), "error": map[string]any{"code": e.code, "message": e.message}})
	if err != nil {
		return err
	}
	_, err = s.Write(append(b, '\n'))
	return err
}

// screenStream reads r line by line until it ends, passing each
// well-formed message on to pw and answering the rest on out.
func screenStream(r io.Reader, pw *io.PipeWriter, out *stdioWriter, limit int, drain time.Duration) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, tooLong, err := readLine(br, limit)
		if len(line) > 0 || tooLong {
			var msg []byte
			var e *rpcError
			if tooLong {
				e = &rpcError{id: nullID, code: jsonrpc.CodeInvalidRequest, message: fmt.Sprintf("Invalid Request: the message is longer than %d bytes (--max-message); it was skipped", limit)}
			} else {
				var method string
				var id []byte
				msg, method, id, e = screen(line)
				if e == nil && method != "" && id != nil && !out.isInitialized() && preInitialize(method, msg) {
					e = &rpcError{id: id, code: jsonrpc.CodeInvalidRequest, message: fmt.Sprintf("Invalid Request: %s before initialize; the session begins with initialize", method)}
				}
				if e == nil && method == "initialize" && id != nil {
					out.initializing(id)
				}
				if e == nil && method == "notifications/cancelled" && id == nil {
					if rid := cancelledID(msg); rid != nil {
						out.cancel(rid)
					}
				}
				if e == nil && method != "" && id != nil && !out.passed(id) {
					e = &rpcError{id: id, code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: a request with this id is still under way; ids of requests in flight are unique"}
				} else if e == nil && method == "subscriptions/listen" && id != nil {
					out.listening(id)
				}
			}
			if e != nil {
				if out.answer(e) != nil {
					pw.CloseWithError(io.ErrClosedPipe)
					return
				}
			} else if msg != nil {
				if _, err := pw.Write(append(msg, '\n')); err != nil {
					return // the session ended
				}
			}
		}
		if err != nil {
			// The client closed its end: the requests under way are
			// answered first (the SDK cancels them all when its input
			// ends), for at most drain, then the SDK reads io.EOF.
			select {
			case <-out.drained():
			case <-time.After(drain):
			}
			pw.Close()
			return
		}
	}
}

// cancelledID returns the requestId a notifications/cancelled message
// names (as JSON), or nil when it names none a request could have.
func cancelledID(msg []byte) []byte {
	var m struct {
		Params struct {
			RequestID jsontext.Value `json:"requestId"`
		} `json:"params"`
	}
	if jsonv2.Unmarshal(msg, &m) != nil || !validID(m.Params.RequestID) {
		return nil
	}
	return m.Params.RequestID
}

// readLine reads one line without its line ending. A line longer than
// limit is read to its end and dropped (tooLong).
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > limit+2 { // room for "\r\n"
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSpace(buf), tooLong, err
	}
}

// rpcError is the error answer to a malformed message.
type rpcError struct {
	id      []byte // JSON: a string, an integer or null
	code    int64
	message string
}

var nullID = []byte("null")

// screen checks one line: a JSON-RPC 2.0 request, notification or
// response, as MCP sends them. It returns the message to pass on,
// re-encoded, and for a request its method and id (nil for a
// notification); or the error to answer.
func screen(line []byte) (msg []byte, method string, id []byte, _ *rpcError) {
	if depth(line) > maxDepth {
		return nil, "", nil, &rpcError{id: nullID, code: jsonrpc.CodeInvalidRequest, message: fmt.Sprintf("Invalid Request: nested more than %d levels deep", maxDepth)}
	}
	m, e := members(line)
	if e != nil {
		return nil, "", nil, e
	}
	rawID, hasID := m["id"]
	if hasID {
		if !validID(rawID) || (rawID.Kind() == '"' && !utf8.Valid(rawID)) {
			return nil, "", nil, &rpcError{id: nullID, code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: id must be a string or an integer"}
		}
		if string(rawID) == "null" {
			hasID = false
		}
	}
	answerID := nullID
	if hasID {
		answerID = rawID
	}
	invalid := func(why string) (msg []byte, method string, id []byte, _ *rpcError) {
		return nil, "", nil, &rpcError{id: answerID, code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: " + why}
	}
	if ver, ok := m["jsonrpc"]; !ok || string(ver) != `"2.0"` {
		return invalid(`"jsonrpc" must be "2.0"`)
	}
	out := map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`)}
	if hasID {
		out["id"] = json.RawMessage(rawID)
	}
	if rawMethod, ok := m["method"]; ok {
		if rawMethod.Kind() != '"' {
			return invalid(`"method" must be a string`)
		}
		if err := jsonv2.Unmarshal(rawMethod, &method); err != nil || method == "" {
			return invalid(`"method" must be a non-empty string`)
		}
		if _, ok := m["result"]; ok {
			return invalid(`a request has no "result"`)
		}
		if _, ok := m["error"]; ok {
			return invalid(`a request has no "error"`)
		}
		out["method"] = json.RawMessage(rawMethod)
		if p, ok := m["params"]; ok && string(p) != "null" {
			if p.Kind() != '{' {
				if !hasID {
					return nil, "", nil, nil // a notification gets no answer
				}
				return nil, "", nil, &rpcError{id: answerID, code: jsonrpc.CodeInvalidParams, message: `Invalid params: "params" must be an object`}
			}
			out["params"] = json.RawMessage(p)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return invalid(err.Error())
		}
		if hasID {
			id = rawID
		}
		return b, method, id, nil
	}
	// A response (to a question the gateway asked the client). One that
	// is malformed cannot be answered: JSON-RPC answers responses with
	// nothing; it is dropped.
	res, hasRes := m["result"]
	errv, hasErr := m["error"]
	switch {
	case !hasID, hasRes == hasErr:
		return invalid(`a message needs a "method" (a request) or an "id" and one of "result" and "error" (a response)`)
	case hasRes:
		out["result"] = json.RawMessage(res)
	default:
		var we struct {
			Code    *int64         `json:"code"`
			Message *string        `json:"message"`
			Data    jsontext.Value `json:"data"`
		}
		if errv.Kind() != '{' || jsonv2.Unmarshal(errv, &we) != nil || we.Code == nil || we.Message == nil {
			return invalid(`"error" must be an object with an integer "code" and a string "message"`)
		}
		e := map[string]any{"code": *we.Code, "message": *we.Message}
		if len(we.Data) > 0 {
			e["data"] = json.RawMessage(we.Data)
		}
		eb, err := json.Marshal(e)
		if err != nil {
			return invalid(err.Error())
		}
		out["error"] = eb
	}
	b, err := json.Marshal(out)
	if err != nil {
		return invalid(err.Error())
	}
	return b, "", nil, nil
}

// members reads a line's top-level object, member by member. Its
// members' values are taken as written: the arguments of a call are
// judged by the gateway (which refuses a name twice or invalid UTF-8 in
// them with an isError result the client can tie to its call), not here.
// The envelope's own names must each appear once.
func members(line []byte) (map[string]jsontext.Value, *rpcError) {
	parseErr := func(err error) *rpcError {
		return &rpcError{id: nullID, code: jsonrpc.CodeParseError, message: "Parse error: " + parseMessage(err)}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(line), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var m map[string]jsontext.Value
	var dup string
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, parseErr(err)
		}
		m = map[string]jsontext.Value{}
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, parseErr(err)
			}
			name := tok.String() // before the next read voids tok
			v, err := dec.ReadValue()
			if err != nil {
				return nil, parseErr(err)
			}
			if _, ok := m[name]; ok && dup == "" {
				dup = name
			}
			m[name] = bytes.Clone(v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, parseErr(err)
		}
	default:
		if _, err := dec.ReadValue(); err != nil {
			return nil, parseErr(err)
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("more than one JSON value on the line")
		}
		return nil, parseErr(err)
	}
	switch {
	case line[0] == '[':
		return nil, &rpcError{id: nullID, code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: batches are not supported (MCP removed JSON-RPC batching in 2025-06-18); send one message per line"}
	case m == nil:
		return nil, &rpcError{id: nullID, code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: a message must be a JSON object"}
	case dup != "":
		return nil, &rpcError{id: nullID, code: jsonrpc.CodeInvalidRequest, message: fmt.Sprintf("Invalid Request: the member %q appears twice", dup)}
	}
	return m, nil
}

// validID reports whether a JSON value may be a JSON-RPC id here: a
// string, an integer that fits an int64 (the SDK reads ids as such), or
// null.
func validID(v jsontext.Value) bool {
	switch v.Kind() {
	case '"', 'n':
		return true
	case '0':
		n, err := strconv.ParseFloat(string(v), 64)
		if err != nil || n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return false
		}
		_, err = strconv.ParseInt(string(v), 10, 64)
		return err == nil
	}
	return false
}

// preInitialize reports whether a request of method may not come before
// initialize: anything but initialize and ping, unless the request
// carries its protocol revision in _meta (2026-07-28 and later, which has
// no initialize).
func preInitialize(method string, msg []byte) bool {
	if method == "initialize" || method == "ping" || method == "server/discover" {
		return false
	}
	var m struct {
		Params struct {
			Meta map[string]jsontext.Value `json:"_meta"`
		} `json:"params"`
	}
	if jsonv2.Unmarshal(msg, &m, jsonv2.RejectUnknownMembers(false)) == nil {
		if _, ok := m.Params.Meta["io.modelcontextprotocol/protocolVersion"]; ok {
			return false
		}
	}
	return true
}

// depth is the deepest nesting of objects and arrays in a JSON text
// (strings skipped).
func depth(b []byte) int {
	d, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

func parseMessage(err error) string {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}
