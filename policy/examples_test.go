package policy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// exampleClock is the clock the examples are written for.
var exampleClock = time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)

func mustCompile(t testing.TB, dir string) *policy.Policy {
	t.Helper()
	p, err := pack.Load(dir)
	if err != nil {
		t.Fatalf("pack.Load(%s): %v", dir, err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatalf("policy.Compile(%s): %v", dir, err)
	}
	return pol
}

func readRequest(t testing.TB, path string) *writ.CheckRequest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req writ.CheckRequest
	if err := dec.Decode(&req); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &req
}

// The examples name their expected disposition in their file names.
func TestExampleOutcomes(t *testing.T) {
	want := map[string]struct {
		outcome  writ.Outcome
		mode     writ.Mode
		terminal bool
	}{
		"allow":              {writ.OutcomeAllow, writ.ModeContinueDownstream, false},
		"allow-with-warning": {writ.OutcomeAllowWithWarning, writ.ModeContinueDownstream, false},
		"local-replan":       {writ.OutcomeReplanRequired, writ.ModeLocalReplan, false},
		"upstream-replan":    {writ.OutcomeReplanRequired, writ.ModeUpstreamReplan, false},
		"human-review":       {writ.OutcomeReplanRequired, writ.ModeHumanReview, false},
		"terminal-review":    {writ.OutcomeReplanRequired, writ.ModeHumanReview, true},
		"goal-fail":          {writ.OutcomeGoalFailTerminal, writ.ModeTerminalBlock, false},
	}
	files, _ := filepath.Glob("../examples/*/requests/*.json")
	if len(files) == 0 {
		t.Fatal("no example requests found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			pol := mustCompile(t, filepath.Dir(filepath.Dir(f)))
			req := readRequest(t, f)
			r, err := pol.Resolve(req)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			// A tenant with no history yet (every aggregate read is 0)
			// that set no parameter (the pack's defaults).
			params := pol.Pack.EffectiveParams(nil)
			hist := policy.History{}
			for _, k := range pol.HistoryPlanWith(r, req, exampleClock, params).Reads {
				hist[k.Name] = 0
			}
			d := pol.DecideInputs(r, req, exampleClock, policy.Inputs{History: hist, Params: params})
			rc := d.Receipt(r, req, "dec_test")
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			var matched bool
			for suffix, w := range want {
				if !strings.HasSuffix(name, "-"+suffix) || (suffix == "allow" && strings.HasSuffix(name, "with-warning")) {
					continue
				}
				matched = true
				if rc.Outcome != w.outcome || rc.Disposition.Mode != w.mode || rc.HumanReviewTerminal != w.terminal {
					got, _ := json.MarshalIndent(rc, "", "  ")
					t.Errorf("Decide(%s) = %s/%s terminal=%v, want %s/%s terminal=%v\n%s", name, rc.Outcome, rc.Disposition.Mode, rc.HumanReviewTerminal, w.outcome, w.mode, w.terminal, got)
				}
			}
			if !matched {
				t.Fatalf("example %s does not name its expected disposition", name)
			}
		})
	}
}
