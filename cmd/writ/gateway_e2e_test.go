package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamEnv, set in a child's environment, makes the test binary an
// MCP tool server over stdio (see runTestUpstream), so the gateway's
// end-to-end tests start a real stdio upstream without node.
const upstreamEnv = "WRIT_TEST_MCP_UPSTREAM"

// addToolContent, written by the test upstream's write_file, makes it add
// the tool added_tool to its list.
const addToolContent = "add a tool"

// runTestUpstream serves write_file over stdio and exits, when the test
// binary was started as a gateway upstream.
func runTestUpstream() {
	if os.Getenv(upstreamEnv) != "1" {
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "test-files", Version: "1"}, nil)
	type args struct {
		Path    string `json:"path"`
		Content string `json:"content,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file."}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		if a.Content == addToolContent {
			// The server's tools change: the SDK tells its client
			// (notifications/tools/list_changed).
			mcp.AddTool(s, &mcp.Tool{Name: "added_tool", Description: "A tool added mid-session."}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil, nil
			})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + a.Path}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "The process dies mid-call."}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// bearer adds an API key to every request, on a transport of its own
// (http.DefaultTransport validates writ API responses against
// openapi.yaml; MCP responses are not writ API responses).
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return (&http.Transport{}).RoundTrip(r)
}

// TestGatewayOverHTTPWithKeys: writ gateway --listen serves MCP over
// Streamable HTTP; an agent key is the bearer token, and its tenant and
// subject become the check's tenant and actor. No key, or a key without
// the agent role, is refused.
func TestGatewayOverHTTPWithKeys(t *testing.T) {
	data := t.TempDir()
	token, _ := keyFor(t, data, "acme", "agent-7", "agent")
	approverToken, _ := keyFor(t, data, "acme", "ann", "approver")
	g := startGateway(t, nil, "--config", testUpstreamConfig(t), "--pack", filepath.Join("..", "..", "gateway", "testdata", "pack"), "--data", data, "--listen", "127.0.0.1:0")
	url, stderr, stop := g.url, g.stderr, g.stop

	ctx := context.Background()
	connect := func(tok string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok}}, MaxRetries: -1}, nil)
	}
	for name, tok := range map[string]string{"no key": "", "an approver's key": approverToken, "a bogus key": "writ_bogus"} {
		if cs, err := connect(tok); err == nil {
			cs.Close()
			t.Errorf("connecting with %s succeeded; want it refused", name)
		}
	}
	cs, err := connect(token)
	if err != nil {
		t.Fatalf("connect with the agent's key: %v\n%s", err, stderr)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": "/allowed/a", "content": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool = %+v, %v\n%s", res, err, stderr)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": "/etc/x", "content": "x"}})
	if err != nil || !res.IsError {
		t.Fatalf("a write outside /allowed/ = %+v, %v; want blocked", res, err)
	}
	// The tool server's process dies mid-call: the call fails, and the
	// next call starts it again.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.crash", Arguments: map[string]any{"path": "/allowed/c"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "the tool server failed") {
		t.Fatalf("a call whose upstream dies = %+v, %v; want isError, the tool server failed", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": "/allowed/d", "content": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("the call after the crash = %+v, %v; want the upstream started again\n%s", res, err, stderr)
	}
	cs.Close()
	stop()

	list, err := exec.Command(writBinary, "records", "list", "--data", data, "--tenant", "acme", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The records of each decision, decisions in the order of their
	// checks: an execution report is recorded after its call returns, so
	// it may come after the next call's check in the chain.
	var decisions []string
	kinds := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		var r struct {
			DecisionID string `json:"decision_id"`
			Status     string `json:"status"`
			Actor      struct {
				ID string `json:"id"`
			} `json:"actor"`
			TenantID  string `json:"tenant_id"`
			Execution *struct {
				Status string `json:"status"`
			} `json:"execution"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Actor.ID != "agent-7" || r.TenantID != "acme" {
			t.Errorf("record of %s/%s, want the key's tenant acme and subject agent-7", r.TenantID, r.Actor.ID)
		}
		k := r.Status
		if r.Status == "CLOSED" && r.Execution != nil {
			k += ":" + r.Execution.Status
		}
		if kinds[r.DecisionID] == nil {
			decisions = append(decisions, r.DecisionID)
		}
		kinds[r.DecisionID] = append(kinds[r.DecisionID], k)
	}
	var got []string
	for _, id := range decisions {
		got = append(got, strings.Join(kinds[id], ","))
	}
	if got, want := strings.Join(got, " | "), "IN_FLIGHT,CLOSED:succeeded | REJECTED | IN_FLIGHT,CLOSED:failed | IN_FLIGHT,CLOSED:succeeded"; got != want {
		t.Errorf("records by decision = %s, want %s", got, want)
	}
	if out, err := exec.Command(writBinary, "ledger", "verify", "--data", data).CombinedOutput(); err != nil {
		t.Errorf("writ ledger verify: %v\n%s", err, out)
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// testUpstreamConfig writes a gateway configuration whose one upstream,
// "files" under the prefix "fs.", is this test binary started as a stdio
// tool server (runTestUpstream).
func testUpstreamConfig(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "gateway.yaml")
	cfgText := "upstreams:\n  - name: files\n    prefix: fs.\n    stdio:\n      command: " + strconvQuote(self) + "\n      env: {" + upstreamEnv + ": \"1\"}\n"
	if err := os.WriteFile(config, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// gatewayProcess is a running writ gateway --listen.
type gatewayProcess struct {
	url    string // the MCP endpoint it printed
	stderr *lockedWriter
	stop   func() // interrupts it and waits for it to exit; once
}

// startGateway runs writ gateway with args (which must include --listen)
// and extra environment variables, and waits until it says where it
// listens. It is stopped when the test ends.
func startGateway(t *testing.T, env []string, args ...string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(writBinary, append([]string{"gateway", "--log-level", "warn"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayProcess{stderr: &lockedWriter{w: &strings.Builder{}}}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	sc := bufio.NewScanner(out)
	re := regexp.MustCompile(`listening on (http://\S+)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			g.url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, out)
	go func() { done <- cmd.Wait() }()
	if g.url == "" {
		<-done
		t.Fatalf("writ gateway did not start: %s", g.stderr)
	}
	stopped := false
	g.stop = func() {
		if !stopped {
			stopped = true
			cmd.Process.Signal(os.Interrupt)
			<-done
		}
	}
	t.Cleanup(g.stop)
	return g
}
