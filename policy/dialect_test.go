package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// TestCELDialect holds what docs/pack-format.md says of the dialect:
// matches is RE2 and unanchored, raw strings keep backslashes, and a
// literal pattern that does not compile is a compile error.
func TestCELDialect(t *testing.T) {
	for _, tt := range []struct {
		when string
		to   string
		want bool
	}{
		{`args.to.matches('@acme\\.example$')`, "a@acme.example", true},
		{`args.to.matches('@acme\\.example$')`, "a@acmeXexample", false},
		{`args.to.matches(r'@acme\.example$')`, "a@acme.example", true},
		{`args.to.matches(r'@acme\.example$')`, "a@acmeXexample", false},
		{`args.to.matches('acme')`, "a@acme.example", true}, // unanchored
		{`args.to.matches('^acme')`, "a@acme.example", false},
		{`r'a\b' == 'a\\b'`, "", true},
		{`'''it's'''.size() == 4`, "", true},
	} {
		pol := testPack(t, rule("R", tt.when, "deny"), "", "")
		d, _ := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: map[string]any{"to": tt.to, "order": "o"}})
		if got := d.Effect.String() == "deny"; got != tt.want || d.Applied[len(d.Applied)-1].Firing != nil && d.Applied[len(d.Applied)-1].Firing.EvalError != "" {
			t.Errorf("%s with to=%q fires = %v, want %v", tt.when, tt.to, got, tt.want)
		}
	}
	_, err := compileRules(t, rule("R", `args.to.matches('(')`, "deny"))
	if ds := writ.ErrorDetails(err); len(ds) != 1 || !strings.Contains(ds[0].Message, "rule R") {
		t.Errorf("a literal pattern that does not compile: Compile = %v, want one problem naming rule R", ds)
	}
}

// compileRules compiles the test pack with rules, returning the error.
func compileRules(t *testing.T, rules string) (*policy.Policy, error) {
	t.Helper()
	files := fstest.MapFS{
		"pack.yaml":  {Data: []byte("name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\n")},
		"spec.yaml":  {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: x\npolicies: [B]\n")},
		"rules.yaml": {Data: []byte("bundle_id: B\nversion: 1.0.0\nrules:\n" + rules)},
	}
	p, err := pack.LoadFS(files, "t")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	return policy.Compile(p)
}

// Conditions read controls.yaml's named patterns as patterns.<id>; a
// pattern the file does not define is a compile error.
func TestNamedPatternsInCEL(t *testing.T) {
	controls := "patterns:\n  - {id: internal, regex: '@acme\\.example$'}\n"
	pol := testPack(t, rule("R", "args.to.matches(patterns.internal)", "deny"), "", controls)
	for to, want := range map[string]policy.Effect{"a@acme.example": policy.Deny, "a@acmeXexample": policy.Allow} {
		d, _ := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: map[string]any{"to": to, "order": "o"}})
		if d.Effect != want {
			t.Errorf("matches(patterns.internal) with to=%s = %s, want %s", to, d.Effect, want)
		}
	}
	_, err := compileRules(t, rule("R", "args.to.matches(patterns.nope)", "deny"))
	if ds := writ.ErrorDetails(err); len(ds) != 1 || !strings.Contains(ds[0].Message, "reads patterns.nope, which controls.yaml does not define") {
		t.Errorf("undefined pattern: Compile = %v", ds)
	}
}
