package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	ss, err := f.gw.Server().Connect(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW, MaxLineLength: maxLine}, nil)
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

// TestOversizedMessage: a message over the size limit ends the session
// with nothing checked, forwarded or recorded.
func TestOversizedMessage(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	w := newWire(t, f, 4096)
	w.initialize(t)
	big := strings.Repeat("a", 8192)
	// The gateway stops reading mid-message, so the write may fail.
	go io.WriteString(w.w, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs.write_file","arguments":{"path":"/allowed/x","content":"`+big+`"}}}`+"\n")
	w.ses.Wait()
	if n := f.up.calls.Load(); n != 0 {
		t.Errorf("the upstream received %d calls, want 0", n)
	}
	page, err := f.eng.Records(context.Background(), writRecordQuery())
	if err != nil || len(page.Records) != 0 {
		t.Errorf("records after an oversized message = %d, %v; want none", len(page.Records), err)
	}
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
