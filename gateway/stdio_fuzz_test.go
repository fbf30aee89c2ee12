package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ/gateway"
)

// FuzzStdioStream feeds the gateway's stdio session any input stream,
// as an agent's client (or anything else writing to the gateway's
// standard input) might send it. Whatever comes, the session goes on:
// after the input, a ping is answered, every line the gateway wrote is a
// JSON-RPC 2.0 message, and the session ends only when its input ends.
func FuzzStdioStream(f *testing.F) {
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`
	for _, seed := range []string{
		initialize + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		initialize + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs.read_file","arguments":{"path":"/allowed/a"}}}`,
		initialize + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs.write_file","arguments":{"path":"/etc/x","content":"y"},"_meta":{"io.github.writhq/approval_id":7}}}`,
		`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"`,
		"hello\r\n42\n\"ping\"\n[]\n[{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}]",
		`{"id":6,"method":"ping"}` + "\n" + `{"jsonrpc":"1.0","id":7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}`,
		initialize + "\n" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	} {
		f.Add([]byte(seed))
	}
	fx := newFixture(f, packDir(), &files{}, "")
	f.Fuzz(func(t *testing.T, input []byte) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ss, err := fx.gw.Server().Connect(ctx, &gateway.StdioTransport{Reader: inR, Writer: outW, MaxMessage: 64 << 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		defer outR.Close()
		const pingID = "fuzz-final-ping"
		go func() {
			inW.Write(input)
			inW.Write([]byte("\n" + `{"jsonrpc":"2.0","id":"` + pingID + `","method":"ping"}` + "\n"))
		}()
		ended := make(chan struct{})
		go func() { ss.Wait(); close(ended) }()
		stop := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("no answer to the final ping; input %q", input)) })
		defer stop.Stop()
		lines := bufio.NewReader(outR)
		for {
			line, err := lines.ReadBytes('\n')
			if err != nil {
				t.Fatalf("the session ended before its input did (%v); input %q", err, input)
			}
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("the gateway wrote %q, not a JSON-RPC 2.0 message; input %q", line, input)
			}
			if string(m.ID) == `"`+pingID+`"` && !bytes.Contains(line, []byte(`"error"`)) {
				break
			}
			if string(m.ID) == `"`+pingID+`"` && !strings.Contains(string(input), pingID) {
				t.Fatalf("the final ping was refused: %s; input %q", line, input)
			}
		}
		select {
		case <-ended:
			t.Fatalf("the session ended before its input did; input %q", input)
		default:
		}
		go io.Copy(io.Discard, outR)
		inW.Close()
		<-ended
	})
}
