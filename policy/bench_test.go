package policy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// writeBenchPack writes a pack with one spec, ten tools and one 50-rule
// bundle: five rules scoped to each tool, so a check of one tool has five
// candidate rules, an evidence requirement and two budgets.
func writeBenchPack(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	write := func(name, body string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write("pack.yaml", "name: bench\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\ntools: tools.yaml\ncontrols: controls.yaml\n")
	write("spec.yaml", `decision_key: bench.payment
version: 1.0.0
action_class: record_mutation
policies: [BENCH]
required_evidence:
  - kind: identity_verification
    max_age: 24h
budgets: {tool_calls: 50, tokens: 100000}
`)
	var tools, rules strings.Builder
	tools.WriteString("tools:\n")
	for i := range 10 {
		fmt.Fprintf(&tools, "  - {name: tool_%d, decision_key: bench.payment, approval_mode_ceiling: destructive}\n", i)
	}
	write("tools.yaml", tools.String())
	write("controls.yaml", `approval_gates:
  - {id: GATE_BENCH, approval_mode: destructive}
`)
	rules.WriteString("bundle_id: BENCH\nversion: 1.0.0\nrules:\n")
	conds := []string{
		"args.amount > 10000 && context.region == 'eu'",
		"has(context.risk) && context.risk >= 0.8",
		"args.currency != 'EUR' && args.currency != 'USD'",
		"'vip' in subject_ids || actor.type == 'HUMAN'",
		"usage.tool_calls > 40.0 || now.getHours() < 2",
	}
	effects := []string{"require_approval", "escalate", "deny", "warn", "replan_local"}
	for i := range 50 {
		fmt.Fprintf(&rules, "  - id: R_%02d\n    applies_to: {tools: [tool_%d]}\n    when: %q\n    effect: %s\n", i, i/5, conds[i%5], effects[i%5])
		if effects[i%5] == "require_approval" {
			rules.WriteString("    gate: GATE_BENCH\n")
		}
		fmt.Fprintf(&rules, "    reason: {code: r_%02d, message: \"Rule %d fired for {{args.order_id}}.\"}\n", i, i)
	}
	write("rules.yaml", rules.String())
	return dir
}

func benchRequest() *writ.CheckRequest {
	seen := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	return &writ.CheckRequest{
		TenantID:   "acme",
		Tool:       "tool_3",
		Arguments:  map[string]any{"order_id": "ord_1", "amount": 420.0, "currency": "EUR"},
		Actor:      writ.Actor{Type: "AGENT", ID: "agt_1"},
		SubjectIDs: []string{"customer:c1"},
		Evidence:   []writ.Evidence{{Kind: "identity_verification", ID: "idv_1", TenantID: "acme", ObservedAt: &seen}},
		Context:    map[string]any{"region": "eu", "risk": 0.1},
		Usage:      &writ.Usage{ToolCalls: 3, Tokens: 1000},
	}
}

// BenchmarkDecide measures the pure decision on a 50-rule bundle.
func BenchmarkDecide(b *testing.B) {
	pol := mustCompile(b, writeBenchPack(b))
	req := benchRequest()
	r, err := pol.Resolve(req)
	if err != nil {
		b.Fatal(err)
	}
	if d := pol.Decide(r, req, exampleClock); d.Effect != 0 || len(d.Applied) != 9 {
		b.Fatalf("Decide = effect %v with %d checks, want allow with 9", d.Effect, len(d.Applied))
	}
	b.ReportAllocs()
	for b.Loop() {
		pol.Decide(r, req, exampleClock)
	}
}

// BenchmarkResolveDecideReceipt adds resolution and the receipt.
func BenchmarkResolveDecideReceipt(b *testing.B) {
	pol := mustCompile(b, writeBenchPack(b))
	req := benchRequest()
	b.ReportAllocs()
	for b.Loop() {
		r, err := pol.Resolve(req)
		if err != nil {
			b.Fatal(err)
		}
		pol.Decide(r, req, exampleClock).Receipt(r, req, "dec_1")
	}
}
