package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// TestUpstreamCallTimeout: a tool that never answers is cancelled when
// its upstream's call_timeout passes; the agent is told, the decision is
// reported failed (timeout), and the upstream's session stays up.
func TestUpstreamCallTimeout(t *testing.T) {
	up := &files{}
	eng, st, pol := newEngine(t, packDir())
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs.", CallTimeout: 200 * time.Millisecond}}}
	logs := &lockedBuffer{}
	f := startFixture(t, eng, st, pol, up, gateway.Options{Config: cfg, Transport: up.connect, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	cs := f.client(t, protocols[1])

	// The agent's own limit, far beyond the upstream's: without a call
	// time limit, the agent cancels and the test fails below.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": "/allowed/hang/a", "content": "x"}})
	if err != nil {
		t.Fatalf("call to a tool that hangs: %v (the gateway has no call time limit)", err)
	}
	if !res.IsError || !strings.Contains(text(res), "did not answer within 200ms") || !strings.Contains(text(res), "may or may not have taken effect") {
		t.Fatalf("call to a tool that hangs = %v %q, want isError naming the time limit", res.IsError, text(res))
	}
	// The upstream's handler saw the cancellation.
	for deadline := time.Now().Add(10 * time.Second); up.cancelled.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upstream was not told to cancel the call")
		}
	}
	ids := decisionsOf(t, eng, "files.write")
	if len(ids) != 1 {
		t.Fatalf("decisions of files.write = %v, want 1", ids)
	}
	kinds, story := story(t, eng, ids[0])
	if strings.Join(kinds, ",") != "check,execution_report" || story.State.Execution != writ.ExecutionFailed {
		t.Fatalf("story = %v, execution %q; want check,execution_report failed", kinds, story.State.Execution)
	}
	if rec := string(story.Records[1].Record); !strings.Contains(rec, `"code":"timeout"`) {
		t.Errorf("execution report = %s, want error code timeout", rec)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "did not answer a call in time") || !strings.Contains(l, "decision_id="+ids[0]) {
		t.Errorf("log = %q, want a warning naming the decision", l)
	}
	// The session stays: the next call is answered without a restart.
	res = call(t, cs, "fs.read_file", map[string]any{"path": "/allowed/x"})
	if res.IsError || text(res) != "contents of /allowed/x" {
		t.Errorf("call after the timeout = %v %q", res.IsError, text(res))
	}
	if n := up.sessions.Load(); n != 1 {
		t.Errorf("upstream sessions = %d, want 1 (a timeout does not restart the upstream)", n)
	}
	verifyLedger(t, f)
}

// silent is an upstream that reads what the gateway sends and never
// answers, as a tool server stuck before its handshake does.
func silent(ctx context.Context, _ gateway.Upstream) (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	conn, err := st.Connect(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		defer conn.Close()
		for {
			if _, err := conn.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	return ct, nil
}

// TestUpstreamConnectTimeout: a gateway whose upstream never completes
// MCP's handshake does not start, and says why, once connect_timeout
// has passed; an upstream that stops answering after a crash makes the
// next call not executed, and does not hold later calls.
func TestUpstreamConnectTimeout(t *testing.T) {
	eng, st, pol := newEngine(t, packDir())
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs.", ConnectTimeout: 200 * time.Millisecond}}}

	done := make(chan error, 1)
	go func() {
		gw, err := gateway.New(context.Background(), gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools, Transport: silent})
		if err == nil {
			gw.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connect_timeout") || !strings.Contains(err.Error(), "files") {
			t.Fatalf("New with a silent upstream = %v, want an error naming the upstream and connect_timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("New did not return: the handshake has no time limit")
	}

	// Started, then crashed, then silent on restart.
	up := &files{}
	var started bool
	connect := func(ctx context.Context, u gateway.Upstream) (mcp.Transport, error) {
		if started {
			return silent(ctx, u)
		}
		started = true
		return up.connect(ctx, u)
	}
	f := startFixture(t, eng, st, pol, up, gateway.Options{Config: cfg, Transport: connect})
	cs := f.client(t, protocols[1])
	call(t, cs, "fs.crash", map[string]any{"path": "/allowed/x"})
	for range 2 {
		res := call(t, cs, "fs.write_file", map[string]any{"path": "/allowed/y", "content": "x"})
		if !res.IsError || !strings.Contains(text(res), "Nothing was executed") || !strings.Contains(text(res), "connect_timeout") {
			t.Fatalf("call while the upstream is silent = %v %q, want not executed, naming connect_timeout", res.IsError, text(res))
		}
	}
	ids := decisionsOf(t, eng, "files.write")
	_, story := story(t, eng, ids[len(ids)-1])
	if story.State.Execution != writ.ExecutionNotExecuted {
		t.Errorf("execution = %q, want not_executed", story.State.Execution)
	}
	verifyLedger(t, f)
}

func TestParseConfigTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		call, conn time.Duration
		err        string
	}{
		{name: "defaults", yaml: "", call: gateway.DefaultCallTimeout, conn: gateway.DefaultConnectTimeout},
		{name: "set", yaml: "    call_timeout: 90s\n    connect_timeout: 1m30s\n", call: 90 * time.Second, conn: 90 * time.Second},
		{name: "zero", yaml: "    call_timeout: 0s\n", err: `gw.yaml:4: upstream "files": call_timeout must be longer than zero`},
		{name: "a number", yaml: "    connect_timeout: 30\n", err: "connect_timeout"},
		{name: "no unit", yaml: "    call_timeout: \"30\"\n", err: "call_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := "tenant: acme\nupstreams:\n  - stdio: {command: files}\n    name: files\n" + tc.yaml
			c, err := gateway.ParseConfig("gw.yaml", []byte(data))
			if tc.err != "" {
				var we *writ.Error
				if !errors.As(err, &we) || we.Code != writ.EINVALID || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseConfig = %v, want EINVALID containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u := c.Upstreams[0]
			if got := gateway.CallTimeoutOf(u); got != tc.call {
				t.Errorf("call timeout = %s, want %s", got, tc.call)
			}
			if got := gateway.ConnectTimeoutOf(u); got != tc.conn {
				t.Errorf("connect timeout = %s, want %s", got, tc.conn)
			}
		})
	}
}

// lockedBuffer is a log destination that tests read while the gateway
// writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
