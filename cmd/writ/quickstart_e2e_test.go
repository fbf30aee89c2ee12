package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickStart runs the quick start of docs/mcp.md as written: its
// five commands, in a fresh directory holding the example and the writ
// this test built (the first command builds it). The filesystem server
// comes from npx, so the test needs Node.js and the network, like the
// other npm tests (WRIT_MCP_NODE_MODULES).
func TestQuickStart(t *testing.T) {
	if os.Getenv("WRIT_MCP_NODE_MODULES") == "" {
		t.Skip("WRIT_MCP_NODE_MODULES is not set (the npm tests are off)")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("no npx on PATH")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n## Quick start\n")
	if !ok {
		t.Fatal("docs/mcp.md has no ## Quick start")
	}
	_, block, _ := strings.Cut(after, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	cmds := strings.Split(strings.TrimSpace(block), "\n")
	if len(cmds) != 5 || cmds[0] != "go build -o writ ./cmd/writ" {
		t.Fatalf("the quick start is %d commands, the first %q; want five, the first building writ", len(cmds), cmds[0])
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples", "mcp-files"), os.DirFS(filepath.Join("..", "..", "examples", "mcp-files"))); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(writBinary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "writ"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		c := exec.Command("sh", "-ec", cmd)
		c.Dir = dir
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
		}
		return string(out)
	}
	run(cmds[1])
	if listed := run(cmds[2]); !strings.Contains(listed, "fs.move_file") || !strings.Contains(listed, "files.move") {
		t.Errorf("--list-tools printed:\n%s\nwant fs.move_file mapped to files.move", listed)
	}
	answers := map[float64]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(run(cmds[3])))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			ID     float64        `json:"id"`
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("the gateway wrote %q: %v", sc.Text(), err)
		}
		answers[m.ID] = m.Result
	}
	textOf := func(id float64) string {
		b, _ := json.Marshal(answers[id]["content"])
		return string(b)
	}
	for _, c := range []struct {
		id      float64
		isError bool
		want    string
	}{
		{2, false, "hello from writ"},
		{3, true, "write_outside_sandbox"},
		{4, false, "hello.txt"},
		{5, true, "move_needs_approval"},
	} {
		res := answers[c.id]
		if res == nil || (res["isError"] == true) != c.isError || !strings.Contains(textOf(c.id), c.want) {
			t.Errorf("answer %v = %v, want isError %v and %q", c.id, res, c.isError, c.want)
		}
	}
	if meta, _ := answers[2]["_meta"].(map[string]any); meta == nil || meta["io.github.writhq/decision_id"] == nil {
		t.Errorf("the allowed read's _meta = %v, want its decision id", answers[2]["_meta"])
	}
	if b, err := os.ReadFile(filepath.Join(dir, "demo", "sandbox", "hello.txt")); err != nil || string(b) != "written through writ" {
		t.Errorf("demo/sandbox/hello.txt = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "demo", "notes.txt")); string(b) != "hello from writ\n" {
		t.Errorf("demo/notes.txt = %q, want it untouched", b)
	}
	records := run(cmds[4])
	for _, want := range []string{"REJECTED", "ESCALATED", "execution:files.write"} {
		if !strings.Contains(records, want) {
			t.Errorf("records list:\n%s\nlacks %s", records, want)
		}
	}
	if n := strings.Count(strings.TrimSpace(records), "\n"); n != 6 {
		t.Errorf("records list has %d records, want 6:\n%s", n, records)
	}
}
