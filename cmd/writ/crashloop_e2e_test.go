package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCrashLoop runs writ crashloop (20 cycles of load, SIGKILL at a
// random moment, restart) on SQLite and, with WRIT_TEST_POSTGRES, on
// PostgreSQL: every acknowledged check keeps its record and the ledger
// verifies intact after every crash.
func TestCrashLoop(t *testing.T) {
	stores := map[string][]string{"sqlite": nil}
	if dsn := os.Getenv("WRIT_TEST_POSTGRES"); dsn != "" {
		stores["postgres"] = []string{"--store", isolatedSchema(t, dsn)}
	}
	for name, extra := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"crashloop", "--pack", "../../examples/wf-2302", "--data", filepath.Join(t.TempDir(), "data"), "--cycles", "20", "--json"}, extra...)
			out, err := exec.Command(writBinary, args...).Output()
			var sum crashSummary
			if jerr := json.Unmarshal(out, &sum); err != nil || jerr != nil {
				t.Fatalf("writ crashloop: %v (%v)\n%s", err, jerr, out)
			}
			if sum.Cycles != 20 || sum.Lost != 0 || sum.Failed || sum.Acknowledged < 20 || sum.Records < sum.Acknowledged {
				t.Errorf("writ crashloop = %+v, want 20 cycles, nothing lost, every acknowledged record in the ledger", sum)
			}
			t.Logf("%s: %d cycles, %d acknowledged, %d lost, %d records, %.1f s (seed %d)", name, sum.Cycles, sum.Acknowledged, sum.Lost, sum.Records, sum.Seconds, sum.Seed)
		})
	}
}

// TestCrashLoopCountsALostRecordOnce: an acknowledgement whose record is
// missing is counted and printed once, by the cycle that finds it, not
// again by the final look at every acknowledgement; one whose record is
// there is not counted at all.
func TestCrashLoopCountsALostRecordOnce(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	stdout, stderr, code := runLedgerCmd(t, "check", "--request", "../../examples/wf-2302/requests/wf-2302-allow.json", "--data", data)
	if code != exitOK {
		t.Fatalf("writ check: exit %d: %s", code, stderr)
	}
	var rc struct {
		DecisionID string `json:"decision_id"`
		Metadata   struct {
			RecordID string `json:"record_id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(stdout), &rc); err != nil || rc.Metadata.RecordID == "" {
		t.Fatalf("receipt: %v\n%s", err, stdout)
	}
	var report bytes.Buffer
	l := &crashLoop{m: &Main{}, data: data, lost: map[ack]bool{}, report: &report}
	kept := ack{tenant: "acme", recordID: rc.Metadata.RecordID, decisionID: rc.DecisionID}
	gone := ack{tenant: kept.tenant, recordID: "dr_01m80jsdt3zgfzvtqswwwk2ewt", decisionID: "dec_01m80jsdt3vhdb4ttnh7zr9zmh"}
	for i, want := range []int64{1, 0} {
		lost, err := l.missing(context.Background(), []ack{kept, gone})
		if err != nil {
			t.Fatal(err)
		}
		if lost != want {
			t.Errorf("look %d: %d lost, want %d", i+1, lost, want)
		}
	}
	if n := strings.Count(report.String(), "LOST: record "+gone.recordID); n != 1 {
		t.Errorf("%d LOST lines for the missing record, want 1:\n%s", n, report.String())
	}
}
