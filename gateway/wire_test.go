package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// wire drives the gateway's MCP server over a newline-delimited stream,
// as a stdio client would, with raw bytes.
type wire struct {
	w   io.WriteCloser
	r   *bufio.Reader
	ses *mcp.ServerSession
}

func newWire(t *testing.T, f *fixture, maxLine int) *wire {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ss, err := f.gw.Server().Connect(context.Background(), &gateway.StdioTransport{Reader: inR, Writer: outW, MaxMessage: maxLine}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close(); outR.Close(); ss.Close() })
	return &wire{w: inW, r: bufio.NewReader(outR), ses: ss}
}

func (w *wire) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(w.w, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (w *wire) recv(t *testing.T) map[string]any {
	t.Helper()
	line, err := w.r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return m
}

func (w *wire) initialize(t *testing.T) {
	t.Helper()
	w.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := w.recv(t); m["result"] == nil {
		t.Fatalf("initialize = %v", m)
	}
	w.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// TestMalformedJSONRPC: a request that is not JSON-RPC is answered with
// a JSON-RPC error; nothing is checked, forwarded or recorded.
func TestMalformedJSONRPC(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	w := newWire(t, f, 0)
	w.initialize(t)
	for _, tc := range []struct{ name, line string }{
		{"arguments not an object", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs.write_file","arguments":[1,2]}}`},
		{"no tool name", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}`},
		{"unknown tool", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs.format_disk","arguments":{}}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":2,"method":"tools/explode","params":{}}`},
	} {
		w.send(t, tc.line)
		m := w.recv(t)
		res, _ := m["result"].(map[string]any)
		if m["error"] == nil && (res == nil || res["isError"] != true) {
			t.Errorf("%s: reply %v, want a JSON-RPC error or an isError result", tc.name, m)
		}
	}
	if n := f.up.calls.Load(); n != 0 {
		t.Errorf("the upstream received %d calls, want 0", n)
	}
	page, err := f.eng.Records(context.Background(), writRecordQuery())
	if err != nil || len(page.Records) != 0 {
		t.Errorf("records after malformed input = %d, %v; want none", len(page.Records), err)
	}
}

// TestOversizedMessage: a message over the size limit is answered with
// -32600 and skipped; the session goes on, and nothing is checked,
// forwarded or recorded.
func TestOversizedMessage(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	w := newWire(t, f, 4096)
	w.initialize(t)
	big := strings.Repeat("a", 8192)
	w.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs.write_file","arguments":{"path":"/allowed/x","content":"`+big+`"}}}`)
	if m := w.recv(t); errorCode(m) != -32600 || m["id"] != nil {
		t.Errorf("reply to an oversized message = %v, want error -32600 with id null", m)
	}
	w.ping(t, 3)
	if n := f.up.calls.Load(); n != 0 {
		t.Errorf("the upstream received %d calls, want 0", n)
	}
	page, err := f.eng.Records(context.Background(), writRecordQuery())
	if err != nil || len(page.Records) != 0 {
		t.Errorf("records after an oversized message = %d, %v; want none", len(page.Records), err)
	}
}

// TestMalformedMessagesKeepTheSession: every malformed message gets the
// JSON-RPC error the specification names, and the session goes on (a
// ping after each is answered). The SDK's own stdio connection ends the
// session on the first of them.
func TestMalformedMessagesKeepTheSession(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	w := newWire(t, f, 0)
	// Before initialize: only initialize and ping.
	w.send(t, `{"jsonrpc":"2.0","id":"early","method":"tools/list"}`)
	if m := w.recv(t); errorCode(m) != -32600 || m["id"] != "early" {
		t.Errorf("tools/list before initialize = %v, want error -32600 with id \"early\"", m)
	}
	w.ping(t, 0)
	w.initialize(t)
	for _, tc := range []struct {
		name, line string
		code       float64
		id         any
	}{
		{"truncated JSON", `{"jsonrpc":"2.0","id":5,"method":"ping"`, -32700, nil},
		{"not JSON at all", `hello gateway`, -32700, nil},
		{"a trailing comma", `{"jsonrpc":"2.0","id":5,"method":"ping",}`, -32700, nil},
		{"a JSON number", `42`, -32600, nil},
		{"a JSON string", `"ping"`, -32600, nil},
		{"no jsonrpc member", `{"id":6,"method":"ping"}`, -32600, float64(6)},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":7,"method":"ping"}`, -32600, float64(7)},
		{"a batch", `[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, nil},
		{"an empty batch", `[]`, -32600, nil},
		{"an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{"a fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, nil},
		{"a member name twice", `{"jsonrpc":"2.0","id":10,"id":11,"method":"ping"}`, -32600, nil},
		{"a method that is not a string", `{"jsonrpc":"2.0","id":12,"method":7}`, -32600, float64(12)},
		{"params that are not an object", `{"jsonrpc":"2.0","id":13,"method":"tools/list","params":[1]}`, -32602, float64(13)},
		{"an unknown method", `{"jsonrpc":"2.0","id":14,"method":"tools/explode","params":{}}`, -32601, float64(14)},
		{"a response without an id", `{"jsonrpc":"2.0","result":{}}`, -32600, nil},
		{"a response whose error is a string", `{"jsonrpc":"2.0","id":15,"error":"no"}`, -32600, float64(15)},
		{"nested 1,001 levels", `{"jsonrpc":"2.0","id":16,"method":"ping","params":{"a":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}}`, -32600, nil},
	} {
		w.send(t, tc.line)
		m := w.recv(t)
		if got := errorCode(m); got != tc.code || m["id"] != tc.id {
			t.Errorf("%s: reply %v, want error %v with id %v", tc.name, m, tc.code, tc.id)
		}
		w.ping(t, 100)
	}
	// A blank line is no message, and a well-formed call still works.
	w.send(t, "")
	w.send(t, `{"jsonrpc":"2.0","id":17,"method":"tools/list"}`)
	if m := w.recv(t); m["result"] == nil {
		t.Errorf("tools/list after the malformed messages = %v", m)
	}
	if n := f.up.calls.Load(); n != 0 {
		t.Errorf("the upstream received %d calls, want 0", n)
	}
}

// TestSessionEndsOnlyAtEOF: the stdio session ends when its input ends,
// not before, and a call made just before the input ends is answered
// (and executed and recorded), not cancelled.
func TestSessionEndsOnlyAtEOF(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	w := newWire(t, f, 0)
	w.send(t, "{\"jsonrpc\":")
	w.recv(t)
	w.ping(t, 1)
	w.initialize(t)
	w.send(t, `{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"fs.write_file","arguments":{"path":"/allowed/last.txt","content":"x"}}}`)
	w.w.Close()
	m := w.recv(t)
	res, _ := m["result"].(map[string]any)
	if m["id"] != "last" || res == nil || res["isError"] == true {
		t.Errorf("the call sent just before the input ended = %v, want its result", m)
	}
	w.ses.Wait()
	if n := f.up.calls.Load(); n != 1 {
		t.Errorf("the upstream received %d calls, want 1", n)
	}
}

func (w *wire) ping(t *testing.T, id int) {
	t.Helper()
	w.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
	if m := w.recv(t); m["error"] != nil || m["id"] != float64(id) {
		t.Fatalf("ping %d = %v: the session did not go on", id, m)
	}
}

func errorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestAmbiguousArguments: arguments whose bytes mean different things
// to different JSON parsers (a member name twice, which the check would
// read as its last value and an upstream may read as its first; invalid
// UTF-8, which the check would read as U+FFFD) are refused: the bytes
// forwarded are the arguments checked, so such a call is neither
// checked nor forwarded.
func TestAmbiguousArguments(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	w := newWire(t, f, 0)
	w.initialize(t)
	for _, args := range []string{
		`{"path":"/etc/passwd","path":"/allowed/a","content":"x"}`,
		`{"path":"/allowed/a","content":"x","content":"y"}`,
		"{\"path\":\"/allowed/\xff\",\"content\":\"x\"}",
	} {
		w.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs.write_file","arguments":`+args+`}}`)
		m := w.recv(t)
		res, _ := m["result"].(map[string]any)
		if res == nil || res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "the arguments must be a JSON object") {
			t.Errorf("arguments %q: reply %v, want an isError result refusing them", args, m)
		}
	}
	if n := f.up.calls.Load(); n != 0 {
		t.Errorf("the upstream received %d calls, want 0", n)
	}
	page, err := f.eng.Records(context.Background(), writRecordQuery())
	if err != nil || len(page.Records) != 0 {
		t.Errorf("records after ambiguous arguments = %d, %v; want none", len(page.Records), err)
	}
}

// TestCancelledCallNotAnswered: a call the client cancels
// (notifications/cancelled) gets no answer, as MCP asks of the receiver;
// the upstream is told to cancel, the decision is reported failed with
// code cancelled, and the session goes on.
func TestCancelledCallNotAnswered(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	w := newWire(t, f, 0)
	w.initialize(t)
	w.send(t, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"fs.write_file","arguments":{"path":"/allowed/hang/a","content":"x"}}}`)
	for deadline := time.Now().Add(10 * time.Second); f.up.calls.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not reach the upstream")
		}
	}
	w.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"the user gave up"}}`)
	for deadline := time.Now().Add(10 * time.Second); f.up.cancelled.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upstream was not told to cancel the call")
		}
	}
	// Once the decision is reported, the gateway has let go of the call:
	// the next message on the stream answers the ping, not the call. (The
	// report is awaited by reading the ledger, not with Flush: the call may
	// not have reached its report yet, and a Flush then would race it.)
	var ids, kinds []string
	var st *writ.DecisionStory
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ids = decisionsOf(t, f.eng, "files.write"); len(ids) == 1 {
			if kinds, st = story(t, f.eng, ids[0]); len(kinds) >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("decisions of files.write = %v, story %v; want one decision, reported", ids, kinds)
		}
	}
	story := st
	if strings.Join(kinds, ",") != "check,execution_report" || story.State.Execution != writ.ExecutionFailed ||
		!strings.Contains(string(story.Records[1].Record), `"code":"cancelled"`) {
		t.Fatalf("story = %v, execution %q; want check,execution_report failed with code cancelled", kinds, story.State.Execution)
	}
	w.ping(t, 3)
}

// TestRevisionNegotiation: initialize negotiates each revision of the
// initialize era the SDK supports (2024-11-05 to 2025-11-25), answering
// the client's own when it is one of them; an initialize asking for
// 2026-07-28 (or one the gateway does not know) is answered with
// 2025-11-25, because 2026-07-28 has no initialize (SEP-2575: the
// revision travels in each request's _meta, and server/discover lists
// it). A fresh session per row, over the stdio framing.
func TestRevisionNegotiation(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	for _, tc := range []struct{ asked, want string }{
		{"2024-11-05", "2024-11-05"},
		{"2025-03-26", "2025-03-26"},
		{"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"},
		{"2026-07-28", "2025-11-25"},
		{"2099-01-01", "2025-11-25"},
	} {
		w := newWire(t, f, 0)
		w.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+tc.asked+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		m := w.recv(t)
		res, _ := m["result"].(map[string]any)
		if got, _ := res["protocolVersion"].(string); got != tc.want {
			t.Errorf("initialize asking for %s = %v, want protocolVersion %s", tc.asked, m, tc.want)
		}
	}
	w := newWire(t, f, 0)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	w.send(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`)
	m := w.recv(t)
	res, _ := m["result"].(map[string]any)
	if got := fmt.Sprint(res["supportedVersions"]); !strings.Contains(got, "2026-07-28") || !strings.Contains(got, "2025-11-25") {
		t.Fatalf("server/discover = %v, want supportedVersions with 2026-07-28 and 2025-11-25", m)
	}
	w.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta+`}}`)
	if m := w.recv(t); m["result"] == nil {
		t.Fatalf("tools/list on 2026-07-28 = %v, want the tools", m)
	}
}
