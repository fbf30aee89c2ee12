package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWritTest runs writ test as a user would: a passing example, a
// failing fixture (exit 1, the diff on stdout), --json, --junit,
// --min-coverage and --run.
func TestWritTest(t *testing.T) {
	// packtest's TestExamples runs every example; one small one will do here.
	if out, stderr, code := runLedgerCmd(t, "test", "--min-coverage", "100", "../../examples/wf-2302"); code != exitOK || !strings.Contains(out, "ok workflow-ops@1.0.0") {
		t.Fatalf("writ test examples/wf-2302: exit %d\n%s%s", code, out, stderr)
	}
	junit := filepath.Join(t.TempDir(), "junit.xml")
	out, stderr, code := runLedgerCmd(t, "test", "--junit", junit, "../../packtest/testdata/untested")
	if code != exitError || !strings.Contains(out, `want: "replan_required"`) || !strings.Contains(stderr, "1 of 2 cases failed") {
		t.Errorf("writ test on the failing fixture: exit %d, want 1 with the diff\n%s%s", code, out, stderr)
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(data, &suites); err != nil || suites.Tests != 2 || suites.Failures != 1 {
		t.Errorf("junit report: %+v %v\n%s", suites, err, data)
	}
	out, _, code = runLedgerCmd(t, "test", "--json", "--run", "small", "--min-coverage", "60", "../../packtest/testdata/untested")
	var rep struct {
		Passed, Failed int
		Coverage       struct{ Percent float64 }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Passed != 1 || rep.Failed != 0 {
		t.Fatalf("--json --run small: %v %+v\n%s", err, rep, out)
	}
	if code != exitError || rep.Coverage.Percent != 0 {
		t.Errorf("--run small covers %.1f%% and exits %d; want 0%% (the small transfer fires nothing) and exit 1 under --min-coverage 60", rep.Coverage.Percent, code)
	}
	for _, bad := range [][]string{{"test"}, {"test", "a", "b"}, {"test", "--min-coverage", "101", "x"}, {"test", "--run", "(", "x"}} {
		if _, _, code := runLedgerCmd(t, bad...); code != exitUsage {
			t.Errorf("writ %v: exit %d, want 2", bad, code)
		}
	}
	if _, stderr, code := runLedgerCmd(t, "test", t.TempDir()); code != exitError {
		t.Errorf("writ test on a directory without a pack: exit %d, want 1: %s", code, stderr)
	}
}

// TestWritDiff runs writ diff on an example and its second version.
func TestWritDiff(t *testing.T) {
	out, stderr, code := runLedgerCmd(t, "diff", "../../examples/refund", "../../packdiff/testdata/refund-v2")
	if code != exitOK || !strings.Contains(out, "tightened rule R_GIFT_CARD_REFUND") {
		t.Errorf("writ diff: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code = runLedgerCmd(t, "diff", "--json", "../../examples/refund", "../../examples/refund")
	var d struct{ Changes []any }
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != exitOK || len(d.Changes) != 0 {
		t.Errorf("writ diff --json of a pack with itself: exit %d, %v, %s", code, err, out)
	}
	if _, _, code := runLedgerCmd(t, "diff", "../../examples/refund"); code != exitUsage {
		t.Errorf("writ diff with one pack: exit %d, want 2", code)
	}
}
