package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// TestRecordsListScorecardFailed: with a pass mark in the refund spec,
// writ records list --scorecard failed lists the records whose scorecard
// fails it and no other; another value is refused.
func TestRecordsListScorecardFailed(t *testing.T) {
	dir := t.TempDir()
	pk := filepath.Join(dir, "pack")
	if err := os.CopyFS(pk, os.DirFS("../../examples/refund")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(pk, "specs", "refund-execute.yaml")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, append(b, "scorecard_pass: {policy: 1, safety: 1, utility: 0.95}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	var wantFailed []string
	for i, tc := range []struct {
		scorecard map[string]float64
		fails     bool
	}{
		{map[string]float64{"policy": 1, "utility": 0.94, "safety": 1}, true},
		{map[string]float64{"policy": 1, "utility": 0.96, "safety": 1}, false},
		{nil, false},
	} {
		var req map[string]any
		raw, err := os.ReadFile("../../examples/refund/requests/refund-allow.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		req["idempotency_key"] = "ik_scorecard_cli_" + string(rune('a'+i))
		delete(req, "scorecard")
		if tc.scorecard != nil {
			req["scorecard"] = tc.scorecard
		}
		out, _ := json.Marshal(req)
		file := filepath.Join(dir, "req.json")
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runLedgerCmd(t, "check", "--request", file, "--pack", pk, "--data", data, "--now", "2026-05-09T09:31:42Z")
		if code != 0 {
			t.Fatalf("writ check: exit %d: %s", code, stderr)
		}
		var resp struct {
			Metadata struct {
				RecordID string `json:"record_id"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(stdout), &resp); err != nil || resp.Metadata.RecordID == "" {
			t.Fatalf("writ check answered %q (%v)", stdout, err)
		}
		if tc.fails {
			wantFailed = append(wantFailed, resp.Metadata.RecordID)
		}
	}
	stdout, stderr, code := runLedgerCmd(t, "records", "list", "--data", data, "--tenant", "acme", "--json", "--scorecard", "failed")
	var got []string
	for line := range strings.Lines(stdout) {
		var r writ.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.RecordID)
		if !slices.Equal(r.ScorecardFailed, []string{"utility"}) {
			t.Errorf("record %s: scorecard_failed %q, want [utility]", r.RecordID, r.ScorecardFailed)
		}
	}
	if code != 0 || !slices.Equal(got, wantFailed) {
		t.Errorf("writ records list --scorecard failed: exit %d, %v, want %v%s", code, got, wantFailed, stderr)
	}
	if out, stderr, code := runLedgerCmd(t, "records", "list", "--data", data, "--tenant", "acme", "--scorecard", "passed"); code != 2 || out != "" || !strings.Contains(stderr, "--scorecard must be failed") {
		t.Errorf("writ records list --scorecard passed: exit %d, stdout %q, stderr %q; want exit 2 naming --scorecard", code, out, stderr)
	}
}
