package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// TestNPMServers drives the gateway with the Go SDK's client in front of
// real MCP servers from the npm registry, which the gateway starts over
// stdio: @modelcontextprotocol/server-filesystem and
// @modelcontextprotocol/server-everything, installed in
// $WRIT_MCP_NODE_MODULES (.ci/run sets it to gateway/e2e/node_modules
// after npm ci). Without it, the test skips.
func TestNPMServers(t *testing.T) {
	mods := os.Getenv("WRIT_MCP_NODE_MODULES")
	if mods == "" {
		t.Skip("WRIT_MCP_NODE_MODULES is not set (npm ci in gateway/e2e, then point it at node_modules)")
	}
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range []string{"allowed", "outside"} {
				if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			hello := filepath.Join(root, "allowed", "hello.txt")
			if err := os.WriteFile(hello, []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
			mcpDir := filepath.Join(mods, "@modelcontextprotocol")
			cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{
				{Name: "files", Prefix: "fs.", Stdio: &gateway.StdioCommand{Command: "node", Args: []string{filepath.Join(mcpDir, "server-filesystem", "dist", "index.js"), root}}},
				{Name: "everything", Prefix: "ev.", Stdio: &gateway.StdioCommand{Command: "node", Args: []string{filepath.Join(mcpDir, "server-everything", "dist", "index.js"), "stdio"}}},
			}}
			eng, st, pol := newEngine(t, filepath.Join("e2e", "pack"))
			gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(gw.Close)
			f := &fixture{eng: eng, store: st, gw: gw, up: &files{}}
			cs := f.client(t, proto)

			if res := call(t, cs, "fs.read_text_file", map[string]any{"path": hello}); res.IsError || !strings.Contains(text(res), "hello") {
				t.Errorf("read = %q, want the file's contents", text(res))
			}
			evil := filepath.Join(root, "outside", "evil.txt")
			res := call(t, cs, "fs.write_file", map[string]any{"path": evil, "content": "x"})
			if rc := receipt(t, res); rc.Reasons[0].Code != "write_outside_allowed_path" {
				t.Errorf("write outside = %v, want write_outside_allowed_path", rc.Reasons)
			}
			if _, err := os.Stat(evil); err == nil {
				t.Error("the blocked write reached the file system")
			}
			if res := call(t, cs, "ev.echo", map[string]any{"message": "hi writ"}); res.IsError || !strings.Contains(text(res), "hi writ") {
				t.Errorf("echo = %q", text(res))
			}
			for _, id := range decisionsOf(t, eng, "files.read") {
				kinds, _ := story(t, eng, id)
				if strings.Join(kinds, ",") != "check,execution_report" {
					t.Errorf("decision %s: %v, want check,execution_report", id, kinds)
				}
			}
			page, err := eng.Records(context.Background(), writ.RecordQuery{TenantID: tenant})
			if err != nil || len(page.Records) != 5 {
				t.Errorf("records = %d, %v; want 5 (read and echo: check and report; the blocked write: its check)", len(page.Records), err)
			}
			verifyLedger(t, f)
		})
	}
}
