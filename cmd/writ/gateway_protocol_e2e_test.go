package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGatewayListChangedOverStdio: the built writ gateway, launched over
// stdio by the official Go SDK client on each revision (2025-11-25, and
// 2026-07-28, where the client opens subscriptions/listen after
// server/discover), tells the agent its tool list changed when an
// upstream's did (the test upstream adds a tool mid-session), and lists
// the new tool.
func TestGatewayListChangedOverStdio(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			dir := t.TempDir()
			config := filepath.Join(dir, "gateway.yaml")
			// unlisted: refuse, so that the added tool, which the pack does
			// not name, is listed (and refused when called).
			cfg := "tenant: acme\nunlisted: refuse\nupstreams:\n  - name: files\n    prefix: fs.\n    stdio:\n      command: " + strconvQuote(self) + "\n      env: {" + upstreamEnv + ": \"1\"}\n"
			if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			changed := make(chan struct{}, 16)
			c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			cmd := exec.Command(writBinary, "gateway", "--config", config, "--pack", filepath.Join("..", "..", "gateway", "testdata", "pack"),
				"--data", filepath.Join(dir, "data"), "--log-level", "error")
			ctx := context.Background()
			cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != rev {
				t.Fatalf("negotiated %s, want %s", got, rev)
			}
			if names := toolNames(t, cs); slices.Contains(names, "fs.added_tool") {
				t.Fatalf("tools before the change = %v", names)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file", Arguments: map[string]any{"path": "/allowed/a", "content": addToolContent}})
			if err != nil || res.IsError {
				t.Fatalf("the call that changes the upstream's tools = %+v, %v", res, err)
			}
			select {
			case <-changed:
			case <-time.After(time.Minute):
				t.Fatal("no notifications/tools/list_changed reached the agent")
			}
			if names := toolNames(t, cs); !slices.Contains(names, "fs.added_tool") {
				t.Fatalf("tools after the change = %v, want fs.added_tool among them", names)
			}
		})
	}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	return names
}
