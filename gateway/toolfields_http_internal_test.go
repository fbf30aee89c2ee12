package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFieldsRoundTripper: the HTTP transport of a Streamable HTTP
// upstream's session keeps the other fields of the tools in the answer
// to a tools/list request it posted, whether the answer is
// application/json or a text/event-stream (however its bytes are cut),
// by the time the reader reaches the answer's end; the bytes pass
// through unchanged, and other answers are not taken for a tool list.
func TestFieldsRoundTripper(t *testing.T) {
	const list = `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"},"x-extra":[1,2]},{"name":"plain","inputSchema":{"type":"object"}}]}}`
	const other = `{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"t","execution":{"taskSupport":"forbidden"}}]}}`
	want := `{"execution":{"taskSupport":"required"},"x-extra":[1,2]}`
	cases := []struct {
		name        string
		posted      string // the request the SDK posts
		contentType string
		body        string
		want        string // the fields of t kept, as JSON; "" for none
	}{
		{"json", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`, "application/json", list, want},
		{"json with charset", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "application/json; charset=utf-8", list, want},
		{"sse", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "text/event-stream", "event: message\nid: 1\ndata: " + list + "\n\n", want},
		{"sse with CRLF, a comment and a notification first", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "text/event-stream",
			": hi\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\nevent: message\r\ndata: " + list + "\r\n\r\n", want},
		{"sse with the message over two data lines", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "text/event-stream",
			"data: " + list[:33] + "\ndata: " + list[33:] + "\n\n", want},
		{"sse ending without an empty line", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "text/event-stream", "data: " + list, want},
		{"an answer to another request", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "application/json", other, ""},
		{"an answer to a request that is not tools/list", `{"jsonrpc":"2.0","id":7,"method":"resources/list"}`, "application/json", list, ""},
		{"an error answer", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "application/json", `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"no"}}`, ""},
		{"another content type", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "text/plain", list, ""},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 7, 1 << 16} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if string(b) != c.posted {
					t.Errorf("%s: the upstream got %q, want %q", c.name, b, c.posted)
				}
				w.Header().Set("Content-Type", c.contentType)
				io.WriteString(w, c.body)
			}))
			var seen seenFields
			st := withFieldsClient(&mcp.StreamableClientTransport{Endpoint: srv.URL}, &seen)
			resp, err := st.HTTPClient.Post(srv.URL, "application/json", strings.NewReader(c.posted))
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			p := make([]byte, chunk)
			for {
				n, err := resp.Body.Read(p)
				got = append(got, p[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			resp.Body.Close()
			srv.Close()
			if string(got) != c.body {
				t.Errorf("%s, read %d bytes at a time: body = %q, want %q unchanged", c.name, chunk, got, c.body)
			}
			kept := ""
			if f := seen.of("t"); f != nil {
				b, err := jsonv2.Marshal(f, jsonv2.Deterministic(true))
				if err != nil {
					t.Fatal(err)
				}
				kept = string(b)
			}
			if kept != c.want {
				t.Errorf("%s, read %d bytes at a time: fields of t kept = %s, want %q", c.name, chunk, kept, c.want)
			}
			if f := seen.of("plain"); c.want != "" && len(f) != 0 {
				t.Errorf("%s: fields of plain = %v, want none", c.name, f)
			}
		}
	}
}
