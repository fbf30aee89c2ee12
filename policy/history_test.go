package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

const historyRules = `
  - id: R_VELOCITY
    applies_to: {tools: [act]}
    when: history.per_customer >= 3.0
    effect: deny
    reason: {code: velocity, message: "{{history.per_customer}} already"}
  - id: R_SESSION_TOKENS
    applies_to: {tools: [act]}
    when: history["session_tokens"] + usage.tokens > 1000.0
    effect: deny
    reason: {code: session_budget, message: Session over budget.}
`

const historyDecls = `history:
  - {name: per_customer, aggregate: count, group_by: expression, expression: "args.customer", window: 24h, decision_keys: [t.act]}
  - {name: session_tokens, aggregate: sum, field: usage.tokens, group_by: session, window: 24h}
  - {name: amounts, aggregate: sum, field: args.amount, group_by: subject, window: 1h, filter: executed}
  - {name: per_actor, aggregate: count, group_by: actor, window: 1h}
  - {name: per_tool, aggregate: count, group_by: tool, window: 1h}
`

func historyPack(t *testing.T, decls, rules string) (*policy.Policy, error) {
	t.Helper()
	files := map[string]string{
		"pack.yaml":  "name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\ntools: tools.yaml\n" + decls,
		"spec.yaml":  "decision_key: t.act\nversion: 1.0.0\naction_class: record_mutation\npolicies: [B]\n",
		"rules.yaml": "bundle_id: B\nversion: 2.0.0\nrules:" + rules,
		"tools.yaml": "tools:\n  - {name: act, decision_key: t.act, approval_mode_ceiling: network}\n  - {name: quiet, decision_key: t.act, approval_mode_ceiling: network}\n",
	}
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v)}
	}
	p, err := pack.LoadFS(m, "t")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	return policy.Compile(p)
}

func TestHistoryPlan(t *testing.T) {
	pol, err := historyPack(t, historyDecls, historyRules)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	req := &writ.CheckRequest{TenantID: "acme", Tool: "act", Arguments: map[string]any{"customer": "c-1", "amount": 250.0},
		Actor: writ.Actor{Type: "AGENT", ID: "a-1"}, SubjectIDs: []string{"customer:c-1"},
		InputsRefs: &writ.InputsRefs{Session: "s-1"}, Usage: &writ.Usage{Tokens: 300}}
	r, err := pol.Resolve(req)
	if err != nil {
		t.Fatal(err)
	}
	plan := pol.HistoryPlan(r, req, now)
	// Only the aggregates the tool's rules name are read.
	if len(plan.Reads) != 2 || plan.Reads[0].Name != "per_customer" || plan.Reads[0].Group != "c-1" || !plan.Reads[0].Since.Equal(now.Add(-24*time.Hour)) ||
		plan.Reads[1].Name != "session_tokens" || plan.Reads[1].Group != "s-1" || !strings.HasPrefix(plan.Reads[1].Aggregate, "session_tokens:") {
		t.Errorf("Reads = %+v, want per_customer for c-1 and session_tokens for s-1, since 24h before", plan.Reads)
	}
	got := map[string]policy.Contribution{}
	for _, c := range plan.Allowed {
		got[c.Name] = c
	}
	if len(plan.Allowed) != 4 || got["per_customer"].Amount != 1 || got["session_tokens"].Amount != 300 || got["per_actor"].Group != "AGENT:a-1" || got["per_tool"].Group != "act" {
		t.Errorf("Allowed = %+v, want per_customer 1, session_tokens 300, per_actor AGENT:a-1, per_tool act", plan.Allowed)
	}
	if len(plan.Executed) != 1 || plan.Executed[0].Name != "amounts" || plan.Executed[0].Amount != 250 || plan.Executed[0].Group != "customer:c-1" {
		t.Errorf("Executed = %+v, want amounts 250 for customer:c-1", plan.Executed)
	}

	// A tool whose rules read nothing reads nothing, and still counts.
	quiet := *req
	quiet.Tool = "quiet"
	rq, _ := pol.Resolve(&quiet)
	if p := pol.HistoryPlan(rq, &quiet, now); len(p.Reads) != 0 || len(p.Allowed) != 4 {
		t.Errorf("plan of a tool without history rules = %+v, want no reads and 4 contributions", p)
	}
	// No group key, no read and no contribution (the rule then fails closed).
	bare := *req
	bare.Arguments = map[string]any{"amount": "many"}
	bare.SubjectIDs, bare.InputsRefs = nil, nil
	if p := pol.HistoryPlan(r, &bare, now); len(p.Reads) != 0 || len(p.Executed) != 0 {
		t.Errorf("plan without customer, session or numeric amount = %+v, want no reads and no executed contribution", p)
	}

	decide := func(h policy.History) *policy.Decision { return pol.DecideWith(r, req, now, h) }
	for _, tc := range []struct {
		h    policy.History
		want policy.Effect
		code string
	}{
		{policy.History{"per_customer": 2, "session_tokens": 700}, policy.Allow, ""},
		{policy.History{"per_customer": 3, "session_tokens": 0}, policy.Deny, "velocity"},
		{policy.History{"per_customer": 0, "session_tokens": 701}, policy.Deny, "session_budget"},
		{nil, policy.Deny, "velocity"}, // no values: fails closed
	} {
		d := decide(tc.h)
		if d.Effect != tc.want {
			t.Errorf("DecideWith(%v) = %s, want %s", tc.h, d.Effect, tc.want)
			continue
		}
		if tc.code != "" {
			rc := d.Receipt(r, req, "dec_1")
			if rc.Reasons[0].Code != tc.code {
				t.Errorf("DecideWith(%v) reasons %+v, want %s first", tc.h, rc.Reasons, tc.code)
			}
		}
	}
	if rc := decide(policy.History{"per_customer": 3, "session_tokens": 0}).Receipt(r, req, "dec_1"); rc.Reasons[0].Message != "3 already" {
		t.Errorf("message = %q, want the value rendered", rc.Reasons[0].Message)
	}
}

func TestHistoryExpressionChecked(t *testing.T) {
	for _, tc := range []struct{ name, expr, want string }{
		{"not a string", "args.customer.size()", "want string"},
		{"does not compile", "args.customer +", "invalid CEL expression"},
		{"reads history", "string(history.x)", "cannot read history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decl := "history:\n  - name: x\n    aggregate: count\n    group_by: expression\n    expression: '" + tc.expr + "'\n    window: 1h\n"
			_, err := historyPack(t, decl, " []\n")
			e, ok := err.(*writ.Error)
			if !ok || len(e.Details) != 1 || !strings.Contains(e.Details[0].Message, tc.want) || e.Details[0].Line != 10 {
				t.Fatalf("Compile = %v (%+v), want one problem at pack.yaml:10 saying %q", err, e, tc.want)
			}
		})
	}
}

// TestHistoryUndeclared: a rule that reads an aggregate the pack does not
// declare would fail closed on every check, so it does not compile.
func TestHistoryUndeclared(t *testing.T) {
	for _, when := range []string{"history.per_custmer >= 3.0", `history["nope"] > 1.0`} {
		rules := "\n  - id: R1\n    when: '" + when + "'\n    effect: deny\n    reason: {code: c, message: m}\n"
		_, err := historyPack(t, historyDecls, rules)
		e, ok := err.(*writ.Error)
		if !ok || len(e.Details) != 1 || !strings.Contains(e.Details[0].Message, "which the pack does not declare") || e.Details[0].Line != 4 {
			t.Errorf("rule %q: Compile = %v, want one problem at rules.yaml:4 naming the undeclared aggregate", when, err)
		}
	}
}

// TestHistorySumOfANonNumber: a check whose sum field is not a number
// still reads the aggregate (its group key is known, and others' amounts
// are there), but adds nothing to it.
func TestHistorySumOfANonNumber(t *testing.T) {
	pol, err := historyPack(t, "history:\n  - {name: spent, aggregate: sum, field: args.amount, group_by: subject, window: 24h}\n", `
  - id: R_SPENT
    applies_to: {tools: [act]}
    when: history.spent > 500.0
    effect: deny
    reason: {code: spent, message: Over the limit.}
`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		amount any
		counts bool
	}{{250.0, true}, {"many", false}, {nil, false}} {
		req := &writ.CheckRequest{TenantID: "acme", Tool: "act", Arguments: map[string]any{"amount": tc.amount},
			Actor: writ.Actor{Type: "AGENT", ID: "a-1"}, SubjectIDs: []string{"customer:c-1"}}
		r, err := pol.Resolve(req)
		if err != nil {
			t.Fatal(err)
		}
		plan := pol.HistoryPlan(r, req, now)
		if len(plan.Reads) != 1 || plan.Reads[0].Name != "spent" || plan.Reads[0].Group != "customer:c-1" {
			t.Errorf("amount %v: Reads = %+v, want spent for customer:c-1", tc.amount, plan.Reads)
		}
		if counted := len(plan.Allowed) == 1 && plan.Allowed[0].Amount == 250; counted != tc.counts || len(plan.Allowed) > 1 {
			t.Errorf("amount %v: Allowed = %+v, want counted %v", tc.amount, plan.Allowed, tc.counts)
		}
	}
}
