package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstream is one tool server and the gateway's session with it. A
// session that ends (the server died, the connection broke) is dropped;
// the next call starts a new one, and the upstream's tools are listed
// again, so a definition that changed meanwhile is seen (and, when the
// tool is pinned, refused).
type upstream struct {
	cfg     Upstream
	connect func(ctx context.Context) (mcp.Transport, error)
	// changed is called when the upstream says its tool list changed.
	changed func(u *upstream)

	// elicit and sample, when set, answer the upstream's own requests
	// (relay.go).
	elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	sample func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)

	// fields are the other fields of its tools (toolfields.go).
	fields seenFields

	mu sync.Mutex
	cs *mcp.ClientSession
	// inflight counts the agent's calls in progress on the upstream.
	inflight map[*mcp.CallToolRequest]int
}

// errUpstreamDown is returned when an upstream cannot be reached.
var errUpstreamDown = errors.New("upstream unavailable")

// session returns the live session, starting one when there is none;
// fresh is true when it was started by this call.
func (u *upstream) session(ctx context.Context) (cs *mcp.ClientSession, fresh bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return u.cs, false, nil
	}
	t, err := u.connect(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", errUpstreamDown, u.cfg.Name, err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "writ-gateway", Version: Version}, &mcp.ClientOptions{
		Capabilities:         &mcp.ClientCapabilities{},
		ElicitationHandler:   u.elicit,
		CreateMessageHandler: u.sample,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if u.changed != nil {
				go u.changed(u)
			}
		},
	})
	// The session outlives the call that started it, so the call's
	// cancellation does not end its handshake; the connect time limit
	// does (the SDK then closes the session, which stops a stdio
	// upstream's process).
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), u.cfg.connectTimeout())
	defer cancel()
	if k, ok := t.(interface{ kill() }); ok {
		// A process that has not completed the handshake by the deadline
		// is killed at once: the SDK would otherwise give it
		// TerminateDuration to exit, and connect_timeout would overrun by
		// as much.
		stop := context.AfterFunc(hctx, func() {
			if hctx.Err() == context.DeadlineExceeded {
				k.kill()
			}
		})
		defer stop()
	}
	if st, ok := t.(*mcp.StreamableClientTransport); ok {
		t = withFieldsClient(st, &u.fields)
	} else {
		t = &fieldsTransport{Transport: t, seen: &u.fields}
	}
	cs, err = c.Connect(hctx, t, nil)
	if err != nil {
		if hctx.Err() != nil {
			err = fmt.Errorf("no answer to MCP's handshake within %s (connect_timeout)", u.cfg.connectTimeout())
		}
		return nil, false, fmt.Errorf("%w: %s: %v", errUpstreamDown, u.cfg.Name, err)
	}
	u.cs = cs
	go func() {
		cs.Wait()
		u.drop(cs)
	}()
	return cs, true, nil
}

// drop forgets cs if it is the current session, and closes it.
func (u *upstream) drop(cs *mcp.ClientSession) {
	u.mu.Lock()
	if u.cs == cs {
		u.cs = nil
	}
	u.mu.Unlock()
	cs.Close()
}

// close ends the session, if any.
func (u *upstream) close() {
	u.mu.Lock()
	cs := u.cs
	u.cs = nil
	u.mu.Unlock()
	if cs != nil {
		cs.Close()
	}
}

// tools lists every tool of the upstream, page by page.
func (u *upstream) tools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools of upstream %s: %w", u.cfg.Name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// transport returns how to reach the upstream its configuration names.
func transport(u Upstream) func(ctx context.Context) (mcp.Transport, error) {
	switch {
	case u.Stdio != nil:
		return func(ctx context.Context) (mcp.Transport, error) {
			cmd := exec.Command(u.Stdio.Command, u.Stdio.Args...)
			if u.Stdio.InheritEnv {
				cmd.Env = os.Environ()
			} else {
				for _, k := range []string{"PATH", "HOME"} {
					if v, ok := os.LookupEnv(k); ok {
						cmd.Env = append(cmd.Env, k+"="+v)
					}
				}
			}
			for k, v := range u.Stdio.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Stderr = os.Stderr // the tool server's own log, beside the gateway's
			return &commandTransport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}}, nil
		}
	case u.HTTP != nil:
		hc := &http.Client{Transport: headers{h: u.HTTP.Headers, next: http.DefaultTransport}}
		return func(ctx context.Context) (mcp.Transport, error) {
			return &mcp.StreamableClientTransport{Endpoint: u.HTTP.URL, HTTPClient: hc}, nil
		}
	}
	return func(context.Context) (mcp.Transport, error) {
		return nil, fmt.Errorf("upstream %s has neither stdio nor http", u.Name)
	}
}

// headers adds configured headers to every request to an HTTP upstream.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (t headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, v)
		}
	}
	return t.next.RoundTrip(r)
}

// commandTransport is the SDK's CommandTransport with a way to kill its
// process (see session).
type commandTransport struct {
	mcp.CommandTransport
}

func (t *commandTransport) kill() {
	if p := t.Command.Process; p != nil {
		p.Kill()
	}
}
