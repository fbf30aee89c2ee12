package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// TestGatewayCallsMetered: the gateway's calls are observed, so a spec's
// tool_calls budget counts them, though the agent never sends usage: the
// gateway names the MCP session, not the agent (issue 31).
func TestGatewayCallsMetered(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(packDir())); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "specs", "write.yaml")
	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, append(data, "budgets:\n  tool_calls: 2\n  on_exceed: deny\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, dir, &files{}, "")
	cs := f.client(t, protocols[0])
	for i, path := range []string{"/allowed/a.txt", "/allowed/b.txt"} {
		if res := call(t, cs, "fs.write_file", map[string]any{"path": path, "content": "hi"}); res.IsError {
			t.Fatalf("call %d within the budget was blocked: %s", i+1, text(res))
		}
	}
	res := call(t, cs, "fs.write_file", map[string]any{"path": "/allowed/c.txt", "content": "hi"})
	if !res.IsError {
		t.Fatalf("third call over a budget of 2 was allowed: %s", text(res))
	}
	rc := receipt(t, res)
	if rc.SafeToExecute || rc.Outcome != writ.OutcomeGoalFailTerminal || rc.Reasons[0].Code != "budget_exceeded" || !strings.Contains(rc.Reasons[0].Message, "writ counted 3 in this session") {
		t.Errorf("third call: %s %v, want goal_fail_terminal budget_exceeded counting 3", rc.Outcome, rc.Reasons)
	}
	rec, err := f.eng.Record(t.Context(), tenant, rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if m := rec.Record.MeteredUsage; m == nil || m.ToolCalls != 3 || !strings.HasPrefix(rec.Record.InputsRefs.Session, "mcp:") {
		t.Errorf("record: metered_usage %+v, session %q; want 3 observed in an mcp: session", m, rec.Record.InputsRefs.Session)
	}
	verifyLedger(t, f)
}
