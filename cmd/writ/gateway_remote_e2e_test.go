package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
	"github.com/writhq/writ/gateway/remote"
)

// TestGatewayRemoteForwardsCallersKeys: writ gateway --server URL
// --listen ADDR in front of a real writ serve that has API keys. Each
// caller's bearer key is checked with writ serve (GET /v1/whoami) and
// forwarded with its calls, so the records carry the key's tenant and
// subject, whatever the gateway's own key; it listens off loopback. A key
// writ serve refuses (none, bogus, without the agent role, revoked) gets
// nothing decided or forwarded.
func TestGatewayRemoteForwardsCallersKeys(t *testing.T) {
	data := t.TempDir()
	acme, acmeID := keyFor(t, data, "acme", "agent-7", "agent")
	globex, _ := keyFor(t, data, "globex", "agent-9", "agent")
	own, _ := keyFor(t, data, "initech", "the-gateway", "agent")
	approver, _ := keyFor(t, data, "acme", "ann", "approver")
	pack := filepath.Join("..", "..", "gateway", "testdata", "pack")
	srv := startServer(t, data, pack)

	// Every interface: remote mode is not held to loopback.
	gp := startGateway(t, []string{"WRIT_API_KEY=" + own}, "--config", testUpstreamConfig(t), "--pack", pack, "--server", srv.url, "--listen", "0.0.0.0:0")
	stderr, stop := gp.stderr, gp.stop
	addr := strings.TrimSuffix(strings.TrimPrefix(gp.url, "http://"), "/mcp")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:" + port + "/mcp"

	ctx := context.Background()
	connect := func(tok string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok}}, MaxRetries: -1}, nil)
	}
	for name, tok := range map[string]string{"no key": "", "an approver's key": approver, "a bogus key": "writ_bogus"} {
		if cs, err := connect(tok); err == nil {
			cs.Close()
			t.Errorf("connecting with %s succeeded; want it refused", name)
		}
	}
	write := func(cs *mcp.ClientSession, path string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": path, "content": "x"}})
		if err != nil {
			t.Fatalf("CallTool(%s): %v\n%s", path, err, stderr)
		}
		return res
	}
	a, err := connect(acme)
	if err != nil {
		t.Fatalf("connect with acme's key: %v\n%s", err, stderr)
	}
	g, err := connect(globex)
	if err != nil {
		t.Fatalf("connect with globex's key: %v\n%s", err, stderr)
	}
	if res := write(a, "/allowed/a"); res.IsError {
		t.Fatalf("acme's allowed write = %q", textOf(res))
	}
	if res := write(g, "/allowed/g"); res.IsError {
		t.Fatalf("globex's allowed write = %q", textOf(res))
	}
	if res := write(a, "/etc/x"); !res.IsError {
		t.Fatalf("acme's write outside /allowed/ = %q, want blocked", textOf(res))
	}

	// Revoked at writ serve: whether the gateway still trusts the key for
	// a while or not, writ serve refuses its checks, and nothing is
	// forwarded.
	if out, err := exec.Command(writBinary, "keys", "revoke", "--data", data, acmeID).CombinedOutput(); err != nil {
		t.Fatalf("writ keys revoke: %v\n%s", err, out)
	}
	res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": "/allowed/after-revoke", "content": "x"}})
	if err == nil && (!res.IsError || !strings.Contains(textOf(res), "not forwarded")) {
		t.Errorf("a call with a revoked key = %q, want refused", textOf(res))
	}
	a.Close()
	g.Close()
	stop()
	srv.stop(t)

	records := func(tenant string) []string {
		t.Helper()
		list, err := exec.Command(writBinary, "records", "list", "--data", data, "--tenant", tenant, "--json").Output()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
			if line == "" {
				continue
			}
			var r struct {
				Status string `json:"status"`
				Actor  struct {
					ID string `json:"id"`
				} `json:"actor"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Actor.ID+":"+r.Status)
		}
		// Execution reports are recorded in the background: in any order.
		slices.Sort(got)
		return got
	}
	if got, want := strings.Join(records("acme"), ","), "agent-7:CLOSED,agent-7:IN_FLIGHT,agent-7:REJECTED"; got != want {
		t.Errorf("acme's records = %s, want %s", got, want)
	}
	if got, want := strings.Join(records("globex"), ","), "agent-9:CLOSED,agent-9:IN_FLIGHT"; got != want {
		t.Errorf("globex's records = %s, want %s", got, want)
	}
	if got := records("initech"); len(got) != 0 {
		t.Errorf("the gateway's own key decided %v, want nothing", got)
	}
	if out, err := exec.Command(writBinary, "ledger", "verify", "--data", data).CombinedOutput(); err != nil {
		t.Errorf("writ ledger verify: %v\n%s", err, out)
	}
}

// TestGatewayRemoteDoesNotAskWithItsOwnKey: a configuration's user would
// be asked, and their answer sent with the gateway's own key, which writ
// does not let approve the checks it made; against a server with API
// keys the gateway says so at start and asks nobody.
func TestGatewayRemoteDoesNotAskWithItsOwnKey(t *testing.T) {
	data := t.TempDir()
	own, _ := keyFor(t, data, "acme", "the-gateway", "agent")
	pack := filepath.Join("..", "..", "gateway", "testdata", "pack")
	srv := startServer(t, data, pack)
	config := testUpstreamConfig(t)
	body, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, append([]byte("user: alice@acme.example\n"), body...), 0o644); err != nil {
		t.Fatal(err)
	}
	gp := startGateway(t, []string{"WRIT_API_KEY=" + own}, "--config", config, "--pack", pack, "--server", srv.url, "--listen", "127.0.0.1:0")
	gp.stop()
	if s := gp.stderr.String(); !strings.Contains(s, "the user is never asked") || !strings.Contains(s, `"user":"alice@acme.example"`) {
		t.Errorf("the gateway did not say its user is never asked:\n%s", s)
	}
	if _, ok := gateway.Writ(withoutApprovals{remote.New(srv.url, nil)}).(interface {
		DecideApproval(context.Context, *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error)
	}); ok {
		t.Error("withoutApprovals still decides approvals")
	}
}
