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

// testPack builds a pack from one rules file and a spec extension.
func testPack(t *testing.T, rules, specExtra, controls string) *policy.Policy {
	t.Helper()
	files := map[string]string{
		"pack.yaml":     "name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\ncontrols: controls.yaml\ntools: tools.yaml\nlimits: {cel_cost: 1000}\n",
		"spec.yaml":     "decision_key: t.act\nversion: 1.0.0\naction_class: record_mutation\npolicies: [B]\n" + specExtra,
		"rules.yaml":    "bundle_id: B\nversion: 2.0.0\nrules:" + orEmptyList(rules),
		"tools.yaml":    "tools:\n  - {name: act, decision_key: t.act, approval_mode_ceiling: network}\n  - {name: other, decision_key: t.act, approval_mode_ceiling: destructive}\n",
		"controls.yaml": "approval_gates:\n  - {id: G, target_hint: approvers}\n" + controls,
	}
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v)}
	}
	p, err := pack.LoadFS(m, "t")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return pol
}

func orEmptyList(rules string) string {
	if rules == "" {
		return " []\n"
	}
	return "\n" + rules
}

func rule(id, when, effect string, extra ...string) string {
	s := "  - id: " + id + "\n    when: " + quote(when) + "\n    effect: " + effect + "\n    reason: {code: " + strings.ToLower(id) + ", message: \"" + id + " on {{args.order}}\"}\n"
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

var now = time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC)

func decide(t *testing.T, pol *policy.Policy, req *writ.CheckRequest) (*policy.Decision, *writ.Receipt) {
	t.Helper()
	if req.TenantID == "" {
		req.TenantID = "acme"
	}
	r, err := pol.Resolve(req)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	d := pol.Decide(r, req, now)
	return d, d.Receipt(r, req, "dec_t")
}

func TestEffectsCombineBySeverity(t *testing.T) {
	rules := rule("R_WARN", "args.amount > 1", "warn") +
		rule("R_LOCAL", "args.amount > 2", "replan_local") +
		rule("R_UP", "args.amount > 3", "replan_upstream", "routing: {target_hint: sup, return_to_node: intake}") +
		rule("R_APPROVE", "args.amount > 4", "require_approval", "gate: G") +
		rule("R_ESC", "args.amount > 5", "escalate") +
		rule("R_DENY", "args.amount > 6", "deny")
	pol := testPack(t, rules, "", "")
	tests := []struct {
		amount   float64
		outcome  writ.Outcome
		mode     writ.Mode
		status   writ.Status
		safe     bool
		terminal bool
		target   string
		reasons  int
	}{
		{0, writ.OutcomeAllow, writ.ModeContinueDownstream, writ.StatusDecided, true, false, "", 0},
		{1.5, writ.OutcomeAllowWithWarning, writ.ModeContinueDownstream, writ.StatusDecided, true, false, "", 1},
		{2.5, writ.OutcomeReplanRequired, writ.ModeLocalReplan, writ.StatusDeferred, false, false, "", 2},
		{3.5, writ.OutcomeReplanRequired, writ.ModeUpstreamReplan, writ.StatusDeferred, false, false, "sup", 3},
		// The approval is deferred behind the replans (an approval cannot
		// help while they block): one more reason, approval_deferred.
		{4.5, writ.OutcomeReplanRequired, writ.ModeUpstreamReplan, writ.StatusDeferred, false, false, "sup", 5},
		{5.5, writ.OutcomeReplanRequired, writ.ModeHumanReview, writ.StatusEscalated, false, true, "", 5},
		{6.5, writ.OutcomeGoalFailTerminal, writ.ModeTerminalBlock, writ.StatusRejected, false, false, "", 6},
	}
	for _, tt := range tests {
		d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: map[string]any{"amount": tt.amount, "order": "o1"}})
		if rc.Outcome != tt.outcome || rc.Disposition.Mode != tt.mode || d.Effect.Status() != tt.status || rc.SafeToExecute != tt.safe || rc.HumanReviewTerminal != tt.terminal {
			t.Errorf("Decide(amount=%v) = %s/%s/%s safe=%v terminal=%v, want %s/%s/%s safe=%v terminal=%v",
				tt.amount, rc.Outcome, rc.Disposition.Mode, d.Effect.Status(), rc.SafeToExecute, rc.HumanReviewTerminal, tt.outcome, tt.mode, tt.status, tt.safe, tt.terminal)
		}
		if rc.Routing.TargetHint != tt.target {
			t.Errorf("Decide(amount=%v) routing.target_hint = %q, want %q", tt.amount, rc.Routing.TargetHint, tt.target)
		}
		if len(rc.Reasons) != tt.reasons {
			t.Errorf("Decide(amount=%v) has %d reasons, want %d (every fired rule, and approval_deferred)", tt.amount, len(rc.Reasons), tt.reasons)
		}
		if tt.reasons > 0 && rc.Reasons[0].Message == "" {
			t.Errorf("empty reason")
		}
		// Strongest first.
		if tt.amount > 6 && rc.Reasons[0].Code != "r_deny" {
			t.Errorf("first reason = %s, want r_deny", rc.Reasons[0].Code)
		}
		if !tt.safe && rc.Disposition.DownstreamAllowed {
			t.Errorf("a blocked receipt allows downstream")
		}
	}
}

func TestReceiptDerivation(t *testing.T) {
	pol := testPack(t, rule("R_UP", "true", "replan_upstream",
		"routing: {target_hint: sup, return_to_node: intake}",
		"safe_next_steps: [{code: ASK, message: 'Ask about {{args.order}}.'}]",
		"what_would_change_this: [{text: 'Approval of {{args.order}}', kind: expression, expression: 'context.ok == true'}]"), "", "")
	_, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: map[string]any{"order": "o7"}, Workflow: &writ.WorkflowRef{WorkflowID: "W1", NodeID: "n1"}})
	if rc.SafeNextSteps[0].Message != "Ask about o7." || rc.Reasons[0].Message != "R_UP on o7" {
		t.Errorf("templates rendered %q / %q", rc.SafeNextSteps[0].Message, rc.Reasons[0].Message)
	}
	want := writ.ResumeContract{RetryThisNode: true, PassReceiptUpstream: true, PassNewUpstreamContextOnRetry: true}
	got := rc.ResumeContract
	if got.RetryThisNode != want.RetryThisNode || got.PassReceiptUpstream != want.PassReceiptUpstream || got.PassNewUpstreamContextOnRetry != want.PassNewUpstreamContextOnRetry {
		t.Errorf("resume_contract = %+v, want %+v", got, want)
	}
	if len(got.ResumeWhen) != 1 || got.ResumeWhen[0] != "Approval of o7" || got.ResumeWhenConditions[0].Expression != "context.ok == true" {
		t.Errorf("resume_when = %v %v", got.ResumeWhen, got.ResumeWhenConditions)
	}
	if rc.Routing != (writ.Routing{Direction: "upstream", TargetHint: "sup", ReturnToNode: "intake", WorkflowID: "W1", NodeID: "n1"}) {
		t.Errorf("routing = %+v", rc.Routing)
	}
}

func TestEvaluationErrorFailsClosed(t *testing.T) {
	pol := testPack(t, rule("R", "args.amount > 10", "deny"), "", "")
	d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: map[string]any{"order": "o1"}}) // no amount
	if d.Effect != policy.Deny || !strings.Contains(rc.Reasons[0].Message, "could not be evaluated") || d.Applied[1].Firing.EvalError == "" {
		t.Errorf("a condition that cannot be evaluated = %v %+v, want the rule to fire", d.Effect, rc.Reasons)
	}
}

func TestRuntimeCostLimitFailsClosed(t *testing.T) {
	pol := testPack(t, rule("R", "subject_ids.exists(s, subject_ids.exists(x, x + s == 'never'))", "deny"), "", "")
	subjects := make([]string, 200)
	for i := range subjects {
		subjects[i] = "s"
	}
	d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", SubjectIDs: subjects})
	if d.Effect != policy.Deny || !strings.Contains(rc.Reasons[0].Message, "cost") {
		t.Errorf("an over-budget condition = %v %+v, want it to fire with a cost error", d.Effect, rc.Reasons)
	}
	// The same condition on a small input stays within the limit and passes.
	d, _ = decide(t, pol, &writ.CheckRequest{Tool: "act", SubjectIDs: []string{"a"}})
	if d.Effect != policy.Allow {
		t.Errorf("small input: effect %v, want allow", d.Effect)
	}
}

func TestAppliesToSelectsCandidates(t *testing.T) {
	pol := testPack(t,
		rule("R_ACT", "true", "warn", "applies_to: {tools: [act]}")+
			rule("R_CLASS", "true", "warn", "applies_to: {action_classes: [upload]}")+
			rule("R_ALL", "true", "warn"), "", "")
	ids := func(d *policy.Decision) (out []string) {
		for _, a := range d.Applied {
			out = append(out, a.ID.RuleID)
		}
		return out
	}
	d, _ := decide(t, pol, &writ.CheckRequest{Tool: "act"})
	if got := strings.Join(ids(d), ","); got != "approval_mode_ceiling,R_ACT,R_ALL" {
		t.Errorf("tool act evaluated %s", got)
	}
	d, _ = decide(t, pol, &writ.CheckRequest{Tool: "other"})
	if got := strings.Join(ids(d), ","); got != "approval_mode_ceiling,R_ALL" {
		t.Errorf("tool other evaluated %s", got)
	}
	d, _ = decide(t, pol, &writ.CheckRequest{DecisionKey: "t.act"})
	if got := strings.Join(ids(d), ","); got != "R_ALL" {
		t.Errorf("no tool evaluated %s", got)
	}
}

func TestEvidenceRequirements(t *testing.T) {
	pol := testPack(t, "", "required_evidence:\n  - {kind: idv, max_age: 1h}\n  - {kind: review, on_missing: replan_upstream}\n", "")
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	review := writ.Evidence{Kind: "review", ID: "r1"}
	tests := []struct {
		name     string
		evidence []writ.Evidence
		effect   policy.Effect
		code     string
	}{
		{"all present", []writ.Evidence{{Kind: "idv", ID: "i", ObservedAt: at(-time.Minute)}, review}, policy.Allow, ""},
		{"missing", []writ.Evidence{review}, policy.ReplanLocal, "missing_evidence"},
		{"stale", []writ.Evidence{{Kind: "idv", ID: "i", ObservedAt: at(-2 * time.Hour)}, review}, policy.ReplanLocal, "stale_evidence"},
		{"no timestamp", []writ.Evidence{{Kind: "idv", ID: "i"}, review}, policy.ReplanLocal, "stale_evidence"},
		{"other tenant", []writ.Evidence{{Kind: "idv", ID: "i", TenantID: "globex", ObservedAt: at(-time.Minute)}, review}, policy.ReplanLocal, "evidence_wrong_tenant"},
		{"from the future", []writ.Evidence{{Kind: "idv", ID: "i", ObservedAt: at(time.Hour)}, review}, policy.ReplanLocal, "evidence_from_future"},
		{"newest wins", []writ.Evidence{{Kind: "idv", ID: "old", ObservedAt: at(-3 * time.Hour)}, {Kind: "idv", ID: "new", ObservedAt: at(-time.Minute)}, review}, policy.Allow, ""},
		{"upstream missing", []writ.Evidence{{Kind: "idv", ID: "i", ObservedAt: at(-time.Minute)}}, policy.ReplanUpstream, "missing_evidence"},
	}
	for _, tt := range tests {
		d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Evidence: tt.evidence})
		if d.Effect != tt.effect {
			t.Errorf("%s: effect %v, want %v (%+v)", tt.name, d.Effect, tt.effect, rc.Reasons)
			continue
		}
		if tt.code != "" && rc.Reasons[0].Code != tt.code {
			t.Errorf("%s: reason %s, want %s", tt.name, rc.Reasons[0].Code, tt.code)
		}
		if tt.code != "" && (len(rc.WhatWouldChangeThisConditions) == 0 || rc.WhatWouldChangeThisConditions[0].Kind != writ.ConditionEvidence) {
			t.Errorf("%s: conditions %+v, want an evidence condition", tt.name, rc.WhatWouldChangeThisConditions)
		}
	}
}

func TestBudgets(t *testing.T) {
	pol := testPack(t, "", "budgets: {tool_calls: 5, cost_usd_cents: 1.5, on_exceed: escalate}\n", "")
	d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Usage: &writ.Usage{ToolCalls: 5, CostUSDCents: 1.5}})
	if d.Effect != policy.Allow {
		t.Errorf("usage at the budget: %v %+v, want allow", d.Effect, rc.Reasons)
	}
	d, rc = decide(t, pol, &writ.CheckRequest{Tool: "act", Usage: &writ.Usage{ToolCalls: 6, CostUSDCents: 1.6}})
	if d.Effect != policy.Escalate || len(rc.Reasons) != 2 || rc.Reasons[0].Code != "budget_exceeded" {
		t.Errorf("usage over two budgets: %v %+v, want escalate with two reasons", d.Effect, rc.Reasons)
	}
	if c := rc.WhatWouldChangeThisConditions; len(c) != 2 || c[0].Expression != "usage.tool_calls <= 5.0" {
		t.Errorf("budget conditions = %+v", c)
	}
}

func TestControls(t *testing.T) {
	pol := testPack(t, rule("R", "true", "warn"), "",
		"must_refuse:\n  - {id: frozen, when: \"context.frozen == true\", reason: {code: frozen, message: Frozen.}}\n"+
			"must_escalate:\n  - {id: fraud, when: \"context.fraud > 0.5\", reason: {code: fraud, message: Fraud.}, applies_to: {tools: [other]}}\n")
	d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Context: map[string]any{"frozen": true, "fraud": 0.9}})
	if d.Effect != policy.Deny || rc.Reasons[0].Code != "frozen" || !rc.MustNotRetrySameAction {
		t.Errorf("must_refuse: %v %+v", d.Effect, rc.Reasons)
	}
	r, _ := pol.Resolve(&writ.CheckRequest{TenantID: "a", Tool: "act"})
	if strings.Join(r.Controls.MustRefuse, ",") != "frozen" || len(r.Controls.MustEscalate) != 0 || strings.Join(r.Controls.ApprovalGatesActive, ",") != "" {
		t.Errorf("controls active for act = %+v", r.Controls)
	}
	d, rc = decide(t, pol, &writ.CheckRequest{Tool: "other", Context: map[string]any{"frozen": false, "fraud": 0.9}})
	if d.Effect != policy.Escalate || !rc.HumanReviewTerminal {
		t.Errorf("must_escalate: %v %+v", d.Effect, rc)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, rules, specExtra, want string
	}{
		{"syntax", rule("R", "args.amount >>> 1", "deny"), "", "rules.yaml:5: rule R: invalid CEL condition \"args.amount >>> 1\": column 14: Syntax error"},
		{"not bool", rule("R", "args.amount + 1", "deny"), "", "want bool"},
		{"unknown variable", rule("R", "request.amount > 1", "deny"), "", "undeclared reference to 'request'"},
		{"typed mismatch", rule("R", "tenant > 1", "deny"), "", "invalid CEL condition"},
		{"bad template", rule("R", "true", "deny", "safe_next_steps: [{code: X, message: '{{ nope.x }}'}]"), "", "\"nope\" is not a variable"},
		{"outcome not allowed", rule("R", "true", "deny"), "allowed_outcomes: [allow, replan_required]\n", "can decide goal_fail_terminal"},
		{"outcome not allowed through a tool", rule("R", "true", "deny", "applies_to: {tools: [act]}"), "allowed_outcomes: [allow, replan_required]\n", "rule R (B@2.0.0) can decide goal_fail_terminal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fstest.MapFS{
				"pack.yaml":     {Data: []byte("name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\ncontrols: controls.yaml\ntools: tools.yaml\n")},
				"spec.yaml":     {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: record_mutation\npolicies: [B]\n" + tt.specExtra)},
				"rules.yaml":    {Data: []byte("bundle_id: B\nversion: 2.0.0\nrules:\n" + tt.rules)},
				"controls.yaml": {Data: []byte("approval_gates: [{id: G}]\n")},
				"tools.yaml":    {Data: []byte("tools: [{name: act, decision_key: t.act, approval_mode_ceiling: network}]\n")},
			}
			p, err := pack.LoadFS(m, "t")
			if err != nil {
				t.Fatalf("LoadFS: %v", err)
			}
			_, err = policy.Compile(p)
			if writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile = %v, want EINVALID containing %q", err, tt.want)
			}
		})
	}
}

func FuzzTemplateRendering(f *testing.F) {
	f.Add("Refund {{args.amount}} for {{ args.order }}.", "o1")
	f.Add("{{workflow.workflow_id}} {{now}}", "")
	f.Add("{{", "x")
	f.Fuzz(func(t *testing.T, msg, order string) {
		rules := "  - id: R\n    when: 'true'\n    effect: warn\n    reason: {code: c, message: " + quote(msg) + "}\n"
		m := fstest.MapFS{
			"pack.yaml":  {Data: []byte("name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\n")},
			"spec.yaml":  {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: record_mutation\npolicies: [B]\n")},
			"rules.yaml": {Data: []byte("bundle_id: B\nversion: 2.0.0\nrules:\n" + rules)},
		}
		p, err := pack.LoadFS(m, "t")
		if err != nil {
			return
		}
		pol, err := policy.Compile(p)
		if err != nil {
			return
		}
		req := &writ.CheckRequest{TenantID: "a", DecisionKey: "t.act", Arguments: map[string]any{"order": order}}
		r, err := pol.Resolve(req)
		if err != nil {
			t.Fatal(err)
		}
		if d := pol.Decide(r, req, now); d.Effect != policy.Warn {
			t.Fatalf("effect %v, want warn", d.Effect)
		}
	})
}
