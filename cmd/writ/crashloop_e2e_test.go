package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
