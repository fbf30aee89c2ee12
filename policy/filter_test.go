package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

func filterPolicy(t *testing.T, filter string) (*policy.Policy, error) {
	t.Helper()
	files := fstest.MapFS{
		"pack.yaml":  {Data: []byte("name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\ntools: tools.yaml\nhistory:\n  - name: external\n    aggregate: count\n    group_by: actor\n    window: 24h\n    filter_expression: " + quote(filter) + "\n")},
		"spec.yaml":  {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: x\npolicies: [B]\n")},
		"rules.yaml": {Data: []byte("bundle_id: B\nversion: 1.0.0\nrules:\n  - {id: R, when: 'history.external >= 2.0', effect: deny, reason: {code: r, message: m}}\n")},
		"tools.yaml": {Data: []byte("tools:\n  - {name: act, decision_key: t.act, approval_mode_ceiling: network}\n")},
	}
	p, err := pack.LoadFS(files, "t")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	return policy.Compile(p)
}

// A filter_expression decides which decided checks count, over the
// check and its outcome; one that cannot be evaluated counts the check
// (fail closed: a limit never loses a decision to an error).
func TestHistoryFilterCounted(t *testing.T) {
	pol, err := filterPolicy(t, "!args.to.endsWith('@acme.example') && outcome == 'allow'")
	if err != nil {
		t.Fatalf("Compile: %v", writ.ErrorDetails(err))
	}
	for _, tt := range []struct {
		args    map[string]any
		outcome writ.Outcome
		counted bool
	}{
		{map[string]any{"to": "a@customer.example"}, writ.OutcomeAllow, true},
		{map[string]any{"to": "a@acme.example"}, writ.OutcomeAllow, false},
		{map[string]any{"to": "a@customer.example"}, writ.OutcomeAllowWithWarning, false},
		{map[string]any{}, writ.OutcomeAllow, true}, // no "to": cannot be evaluated, counted
	} {
		req := &writ.CheckRequest{TenantID: "acme", Tool: "act", Actor: writ.Actor{Type: "AGENT", ID: "a1"}, Arguments: tt.args}
		r, err := pol.Resolve(req)
		if err != nil {
			t.Fatal(err)
		}
		plan := pol.HistoryPlan(r, req, now)
		if len(plan.Reads) != 1 || len(plan.Allowed) != 1 {
			t.Fatalf("HistoryPlan = %+v, want one read and one contribution", plan)
		}
		allowed, _ := plan.Counted(tt.outcome)
		if got := len(allowed) == 1; got != tt.counted {
			t.Errorf("Counted(%v, %s) counts = %v, want %v", tt.args, tt.outcome, got, tt.counted)
		}
	}
}

func TestHistoryFilterCompileErrors(t *testing.T) {
	for _, tt := range []struct{ filter, want string }{
		{"outcome", "has type string, want bool"},
		{"outcome ==", "invalid CEL condition"},
		{"history.external > 1.0", "a filter cannot read history"},
		{"nope == 1", "undeclared reference to 'nope'"},
	} {
		_, err := filterPolicy(t, tt.filter)
		ds := writ.ErrorDetails(err)
		if len(ds) != 1 || ds[0].Line != 11 || !strings.Contains(ds[0].Message, tt.want) {
			t.Errorf("Compile(filter_expression: %s) = %v, want one problem at pack.yaml:11 containing %q", tt.filter, ds, tt.want)
		}
	}
}
