package lint_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ/lint"
)

var update = flag.Bool("update", false, "rewrite the golden want.txt files of testdata/*")

// TestGolden lints each fixture under testdata/: one broken pack per rule,
// in a directory named after the rule, with its exact expected output in
// want.txt. Run with -update to rewrite the golden files.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		rule := filepath.Base(dir)
		rules[rule] = true
		t.Run(rule, func(t *testing.T) {
			r := lint.Lint(filepath.ToSlash(dir))
			var buf bytes.Buffer
			if err := r.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			got := filepath.ToSlash(buf.String())
			golden := filepath.Join(dir, "want.txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./lint -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("lint %s:\n--- got\n%s--- want\n%s", dir, got, want)
			}
			// The fixture exercises the rule it is named after.
			found := false
			for _, f := range r.Findings {
				found = found || f.Rule == rule
			}
			if !found {
				t.Errorf("fixture %s has no finding of rule %s", dir, rule)
			}
		})
	}
	for _, rule := range []string{
		lint.RuleSchema, lint.RuleCEL, lint.RuleMutatingVerification, lint.RuleExemption,
		lint.RuleRetryCeiling, lint.RuleRetryStrategy, lint.RuleGraphRoot, lint.RuleGraphUnreachable,
		lint.RuleGraphTerminal, lint.RuleGotoSelf, lint.RuleGraphCycle, lint.RuleGotoGuard, lint.RuleTemplate,
		lint.RuleClaimedToolCall, lint.RuleClaimedEvidence, lint.RuleProvenance, lint.RuleSessionBudget, lint.RuleEvidenceCapture,
		lint.RuleToolOutputs,
	} {
		if !rules[rule] {
			t.Errorf("rule %s has no fixture testdata/%s", rule, rule)
		}
	}
}

// TestExamples is what keeps "the example packs pass writ lint" true.
func TestExamples(t *testing.T) {
	dirs, err := filepath.Glob("../examples/*/pack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no example packs found")
	}
	for _, manifest := range dirs {
		dir := filepath.Dir(manifest)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			r := lint.Lint(dir)
			for _, f := range r.Findings {
				t.Log(f)
			}
			if !r.OK() {
				t.Errorf("%s", r.Summary())
			}
		})
	}
}

func TestMissingPack(t *testing.T) {
	r := lint.Lint("testdata/no-such-pack")
	if r.OK() || len(r.Findings) != 1 || r.Findings[0].Rule != lint.RuleSchema ||
		!strings.Contains(r.Findings[0].Message, "cannot open pack testdata/no-such-pack") {
		t.Errorf("findings = %v", r.Findings)
	}
}

func TestLintFS(t *testing.T) {
	r := lint.LintFS(os.DirFS("testdata/goto-self"), "goto-self")
	if r.Count(lint.Error) != 3 {
		t.Errorf("errors = %d, want 3: %v", r.Count(lint.Error), r.Findings)
	}
	for _, f := range r.Findings {
		if !strings.HasPrefix(f.File, "goto-self/") {
			t.Errorf("file %q is not named from the given dir", f.File)
		}
	}
}

// TestMutatingWithoutPolicies: the seed's mutating action classes are
// mutating with no workflow policies file (issue 31), so a browser_submit
// step without verification is an error there too.
func TestMutatingWithoutPolicies(t *testing.T) {
	fsys := fstest.MapFS{
		"pack.yaml": {Data: []byte("name: fixture\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: []\nworkflows: [workflow.yaml]\n")},
		"spec.yaml": {Data: []byte("decision_key: fixture.noop\nversion: 1.0.0\naction_class: local_edit\n")},
		"workflow.yaml": {Data: []byte("workflow_id: w\nversion: 1.0.0\nsteps:\n  - id: submit\n    action_class: browser_submit\n    prompt: Submit.\n    next: done\n" +
			"  - id: done\n    terminal: true\n")},
	}
	r := lint.LintFS(fsys, "p")
	if r.Count(lint.Error) != 1 || r.Findings[0].Rule != lint.RuleMutatingVerification || !strings.Contains(r.Findings[0].Message, "step submit is mutating (action class browser_submit)") {
		t.Errorf("findings = %v, want one mutating-verification error for step submit", r.Findings)
	}
}

// TestRequireVerificationOff: requireVerificationForMutating: false is a
// pack-wide exemption, and lint names each mutating step it lets through
// without proof (issue 31).
func TestRequireVerificationOff(t *testing.T) {
	fsys := fstest.MapFS{
		"pack.yaml": {Data: []byte("name: fixture\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: []\nworkflows: [workflow.yaml]\nworkflow_policies: wp.yaml\n")},
		"wp.yaml":   {Data: []byte("requireVerificationForMutating: false\n")},
		"spec.yaml": {Data: []byte("decision_key: fixture.noop\nversion: 1.0.0\naction_class: local_edit\n")},
		"workflow.yaml": {Data: []byte("workflow_id: w\nversion: 1.0.0\nsteps:\n  - id: submit\n    action_class: upload\n    prompt: Upload.\n    next: done\n" +
			"  - id: done\n    terminal: true\n")},
	}
	r := lint.LintFS(fsys, "p")
	want := "requireVerificationForMutating is false, so workflow w step submit (action class upload) is accepted without a verification contract"
	if r.Count(lint.Error) != 0 || r.Count(lint.Warning) != 1 || r.Findings[0].Rule != lint.RuleExemption || r.Findings[0].Message != want {
		t.Errorf("findings = %v, want one exemption warning: %s", r.Findings, want)
	}
}
