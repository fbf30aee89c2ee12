package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/replay"
)

// emissionPack declares what the seed's lineage, approval and controls
// rules read: a spec that requires two lineage pins, a gate required from
// destructive up, a refusal control and a redaction rule.
var emissionPack = map[string]string{
	"pack.yaml": `name: emission
version: 1.0.0
specs: [specs/*.yaml]
policies: [policies/*.yaml]
controls: controls.yaml
tools: tools.yaml
`,
	"specs/change.yaml": `decision_key: ops.change
version: 1.0.0
action_class: system_change
approval_mode: network
policies: [OPS_V1]
required_pins: [model_profile, evaluator_suite]
`,
	"policies/ops.yaml": `bundle_id: OPS_V1
version: 1.0.0
rules:
  - id: R_NO_DROP
    when: has(args.statement) && args.statement.startsWith('DROP')
    effect: deny
    reason: {code: drop_refused, message: No DROP statements.}
`,
	"controls.yaml": `must_refuse:
  - id: frozen
    when: has(context.frozen) && context.frozen == true
    reason: {code: frozen, message: The system is frozen.}
approval_gates:
  - id: GATE_DESTRUCTIVE
    approval_mode: destructive
    required: true
    target_hint: ops_leads
redaction:
  - id: secrets
    fields: [secret]
`,
	"tools.yaml": `tools:
  - name: ops.apply
    decision_key: ops.change
    approval_mode_ceiling: destructive
`,
}

func writePack(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bothStores runs fn on a fresh SQLite store and, with WRIT_TEST_POSTGRES,
// on a fresh PostgreSQL schema (testStore).
func bothStores(t *testing.T, fn func(t *testing.T, st ledger.Store)) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) { fn(t, testStore(t, name)) })
	}
}

func emissionEngine(t *testing.T, st ledger.Store) *engine.Engine {
	t.Helper()
	eng, err := engine.New(context.Background(), engine.Config{Policy: compile(t, writePack(t, emissionPack)), Store: st, BindingKey: testBindingKey,
		Now: func() time.Time { return exampleClock }, Random: newSeededReader(7)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func opsCheck() *writ.CheckRequest {
	return &writ.CheckRequest{TenantID: "acme", Tool: "ops.apply", Actor: writ.Actor{Type: writ.ActorAgent, ID: "agt_ops"},
		Arguments: map[string]any{"statement": "ALTER TABLE t ADD c int", "secret": "s3cr3t"},
		Lineage:   &writ.CallerLineage{ModelProfile: "model_profile.ops@1.0.0", EvaluatorSuite: "eval.ops@1.0.0"}}
}

func checkOK(t *testing.T, eng *engine.Engine, ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, *writ.StoredRecord) {
	t.Helper()
	rc, err := eng.Check(ctx, req)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	sr, err := eng.Record(ctx, req.TenantID, rc.Metadata.RecordID)
	if err != nil {
		t.Fatalf("Record(%s): %v", rc.Metadata.RecordID, err)
	}
	return rc, sr
}

func codesOf(rc *writ.Receipt) []string {
	var out []string
	for _, r := range rc.Reasons {
		out = append(out, r.Code)
	}
	return out
}

// caught asserts that the rules, reading the pinned pack from the store,
// find rec broken under rule, with a finding that contains want.
func caught(t *testing.T, st ledger.Store, rec *writ.Record, rule, want string) {
	t.Helper()
	broken := verify.NewRules(pinned.NewPacks(st)).CheckRecord(context.Background(), rec)
	if !slices.ContainsFunc(broken, func(b string) bool { return strings.HasPrefix(b, rule+": ") && strings.Contains(b, want) }) {
		t.Errorf("the rules did not catch the broken %s rule (want a finding with %q); found %q", rule, want, broken)
	}
}

// TestEmissionRules breaks each of the seed's lineage, approval, trace and
// controls rules on purpose and shows it caught, on both stores: at
// decision time (the check is not allowed, or refused) and, for a record
// edited to break it, by the rules ledger verify and verify-bundle run.
func TestEmissionRules(t *testing.T) {
	bothStores(t, func(t *testing.T, st ledger.Store) {
		ctx := context.Background()
		eng := emissionEngine(t, st)
		rules := verify.NewRules(pinned.NewPacks(st))

		// A check with its pins is allowed, and its record breaks no rule.
		rc, allowed := checkOK(t, eng, ctx, opsCheck())
		if !rc.SafeToExecute {
			t.Fatalf("the pinned check was not allowed: %s %v", rc.Outcome, codesOf(rc))
		}
		if broken := rules.CheckRecord(ctx, &allowed.Record); len(broken) > 0 {
			t.Fatalf("the allowed record breaks rules: %q", broken)
		}

		t.Run("lineage", func(t *testing.T) {
			req := opsCheck()
			req.Lineage.EvaluatorSuite = ""
			rc, sr := checkOK(t, eng, ctx, req)
			if rc.SafeToExecute || sr.Record.Status != writ.StatusDeferred || !slices.Contains(codesOf(rc), "missing_lineage_pin") {
				t.Fatalf("a check without its evaluator_suite pin: %s %s %v; want DEFERRED, missing_lineage_pin", rc.Outcome, sr.Record.Status, codesOf(rc))
			}
			if !strings.Contains(rc.Reasons[0].Message, "Lineage rule") {
				t.Errorf("the reason does not name the rule: %q", rc.Reasons[0].Message)
			}
			broken := allowed.Record
			broken.Lineage.ModelProfile = ""
			caught(t, st, &broken, "lineage", "lineage.model_profile")
		})

		t.Run("approval", func(t *testing.T) {
			req := opsCheck()
			req.ApprovalMode = writ.ModeDestructive
			rc, sr := checkOK(t, eng, ctx, req)
			if rc.SafeToExecute || sr.Record.Status != writ.StatusEscalated || len(rc.Metadata.ApprovalIDs) != 1 || !slices.Contains(codesOf(rc), "approval_mode_requires_gate") {
				t.Fatalf("a destructive check without an approval: %s %s %v %v; want ESCALATED at the required gate", rc.Outcome, sr.Record.Status, codesOf(rc), rc.Metadata.ApprovalIDs)
			}
			if _, err := eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: rc.Metadata.ApprovalIDs[0], Decision: writ.ApprovalApproved, Approver: "usr_ops_lead", Reason: "reviewed"}); err != nil {
				t.Fatal(err)
			}
			again := *req
			again.ApprovalIDs = rc.Metadata.ApprovalIDs
			rc, sr = checkOK(t, eng, ctx, &again)
			if !rc.SafeToExecute || len(sr.Record.Approvals) != 1 || sr.Record.Approvals[0].GateID != "GATE_DESTRUCTIVE" {
				t.Fatalf("the approved check: %s %v approvals %+v; want allowed with the gate's approval attached", rc.Outcome, codesOf(rc), sr.Record.Approvals)
			}
			broken := sr.Record
			broken.Approvals = []writ.Approval{}
			caught(t, st, &broken, "approval", "requires an approval at gate GATE_DESTRUCTIVE")
		})

		t.Run("trace", func(t *testing.T) {
			span := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
			tctx := trace.ContextWithSpanContext(ctx, span)
			before := headSeq(t, st)
			req := opsCheck()
			req.TraceID = "0af7651916cd43dd8448eb211c80319c"
			if _, err := eng.Check(tctx, req); writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(err.Error(), "trace rule") {
				t.Fatalf("a trace_id that is not the runtime span's: %v; want EINVALID naming the trace rule", err)
			}
			if after := headSeq(t, st); after != before {
				t.Errorf("the refused check wrote %d records", after-before)
			}
			req.TraceID = ""
			_, sr := checkOK(t, eng, tctx, req)
			if sr.Record.TraceID != span.TraceID().String() {
				t.Errorf("trace_id %s, want the runtime span's %s", sr.Record.TraceID, span.TraceID())
			}
			req.TraceID = span.TraceID().String()
			req.Arguments = map[string]any{"statement": "ALTER TABLE t ADD d int"}
			if _, err := eng.Check(tctx, req); err != nil {
				t.Errorf("a trace_id that is the runtime span's: %v", err)
			}
		})

		t.Run("controls", func(t *testing.T) {
			for _, c := range []struct {
				name string
				edit func(*writ.ControlsActive)
				want string
			}{
				{"approval gate dropped", func(c *writ.ControlsActive) { c.ApprovalGatesActive = []string{} }, "approval gate control GATE_DESTRUCTIVE was active at compile time"},
				{"refusal dropped", func(c *writ.ControlsActive) { c.MustRefuse = []string{} }, "must_refuse control frozen was active"},
				{"redaction dropped", func(c *writ.ControlsActive) { c.RedactionRulesActive = []string{} }, "redaction control secrets was active"},
				{"escalation invented", func(c *writ.ControlsActive) { c.MustEscalate = []string{"frozen"} }, "must_escalate control frozen is listed but was not active"},
			} {
				t.Run(c.name, func(t *testing.T) {
					broken := allowed.Record
					broken.ControlsActive = writ.ControlsActive{MustRefuse: slices.Clone(broken.ControlsActive.MustRefuse), MustEscalate: slices.Clone(broken.ControlsActive.MustEscalate),
						ApprovalGatesActive: slices.Clone(broken.ControlsActive.ApprovalGatesActive), RedactionRulesActive: slices.Clone(broken.ControlsActive.RedactionRulesActive)}
					c.edit(&broken.ControlsActive)
					caught(t, st, &broken, "controls", c.want)
				})
			}
		})

		// Every record the rules shaped (deferred for a pin, escalated at
		// the required gate, allowed with its approval) replays equal.
		n := 0
		if _, err := replay.New(st, replay.Options{}).Tenant(ctx, "acme", func(r *replay.Result) error {
			n++
			if r.Status != replay.StatusEqual {
				t.Errorf("replay of %s (%s): %s %v", r.RecordID, r.Kind, r.Status, r.Classes)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n < 7 {
			t.Errorf("replayed %d records, want at least 7", n)
		}
	})
}

func headSeq(t *testing.T, st ledger.Store) int64 {
	t.Helper()
	h, err := st.Head(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return h.Seq
}
