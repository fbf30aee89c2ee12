package acceptance_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
)

// outcome is the part of a verdict the state machine decides.
type outcome struct {
	State                      string
	NextStep                   string
	AttemptsUsed, AttemptsLeft int
	RetryPrompt, EscalateTo    string
	Failed                     []string // targets
}

func outcomeOf(v *acceptance.Verdict) outcome {
	o := outcome{State: v.State, NextStep: v.NextStep, AttemptsUsed: v.AttemptsUsed, AttemptsLeft: v.AttemptsLeft, RetryPrompt: v.RetryPrompt, EscalateTo: v.EscalateTo}
	for _, f := range v.Failed {
		o.Failed = append(o.Failed, f.Target)
	}
	return o
}

func TestStateMachine(t *testing.T) {
	const rule = "evidence:\n  - path: ok\n    expect: true\n    rejectMessage: Not ok.\n"
	const retry2 = "retryPrompt: Try again.\nretry: {budget: 2}\n"
	var (
		pass = obj("ok", true)
		fail = obj("ok", false)
	)
	tests := []struct {
		name         string
		verification string
		policies     string
		result       map[string]any
		prior        int
		want         outcome
	}{
		// onMissingEvidence
		{"all pass", rule + retry2, "", pass, 0,
			outcome{State: "accepted", NextStep: "end", AttemptsUsed: 1}},
		{"all pass on a retry", rule + retry2, "", pass, 2,
			outcome{State: "accepted", NextStep: "end", AttemptsUsed: 3}},
		{"warn", "onMissingEvidence: warn\n" + rule + retry2, "", fail, 0,
			outcome{State: "accepted_with_warnings", NextStep: "end", AttemptsUsed: 1, Failed: []string{"ok"}}},
		{"warn, all pass", "onMissingEvidence: warn\n" + rule, "", pass, 0,
			outcome{State: "accepted", NextStep: "end", AttemptsUsed: 1}},
		{"reject-and-retry, 1st of 3", "onMissingEvidence: reject-and-retry\n" + rule + retry2, "", fail, 0,
			outcome{State: "retry", NextStep: "s", AttemptsUsed: 1, AttemptsLeft: 2, RetryPrompt: "Try again.", Failed: []string{"ok"}}},
		{"reject-and-retry, 2nd of 3", rule + retry2, "", fail, 1,
			outcome{State: "retry", NextStep: "s", AttemptsUsed: 2, AttemptsLeft: 1, RetryPrompt: "Try again.", Failed: []string{"ok"}}},
		{"reject-and-retry, 3rd of 3: budget spent", rule + retry2, "", fail, 2,
			outcome{State: "aborted", AttemptsUsed: 3, Failed: []string{"ok"}}},
		{"reject-and-retry, past the budget", rule + retry2, "", fail, 7,
			outcome{State: "aborted", AttemptsUsed: 8, Failed: []string{"ok"}}},
		{"reject-and-retry without retry: budget 0", rule + "retryPrompt: Try again.\n", "", fail, 0,
			outcome{State: "aborted", AttemptsUsed: 1, Failed: []string{"ok"}}},
		{"reject-and-retry, budget 0", rule + "retry: {budget: 0}\n", "", fail, 0,
			outcome{State: "aborted", AttemptsUsed: 1, Failed: []string{"ok"}}},
		{"reject-and-retry, default retry prompt", rule + "retry: {budget: 1}\n", "", fail, 0,
			outcome{State: "retry", NextStep: "s", AttemptsUsed: 1, AttemptsLeft: 1, RetryPrompt: "The step was not accepted:\n- Not ok.", Failed: []string{"ok"}}},
		{"reject-and-retry, maxBudget caps the budget", rule + "retry: {budget: 5}\n", `{"retry": {"maxBudget": 1}}`, fail, 1,
			outcome{State: "aborted", AttemptsUsed: 2, Failed: []string{"ok"}}},
		{"reject-and-abort ignores the budget", "onMissingEvidence: reject-and-abort\n" + rule + retry2, "", fail, 0,
			outcome{State: "aborted", AttemptsUsed: 1, Failed: []string{"ok"}}},

		// onFailure, after the budget and under reject-and-abort
		{"onFailure absent", rule + retry2, "", fail, 2,
			outcome{State: "aborted", AttemptsUsed: 3, Failed: []string{"ok"}}},
		{"onFailure abort", rule + retry2 + "onFailure: {action: abort}\n", "", fail, 2,
			outcome{State: "aborted", AttemptsUsed: 3, Failed: []string{"ok"}}},
		{"onFailure escalate", rule + retry2 + "onFailure: {action: escalate, target_hint: reviewers}\n", "", fail, 2,
			outcome{State: "escalated", AttemptsUsed: 3, EscalateTo: "reviewers", Failed: []string{"ok"}}},
		{"onFailure escalate without a target", rule + "onFailure: {action: escalate}\n", "", fail, 0,
			outcome{State: "escalated", AttemptsUsed: 1, Failed: []string{"ok"}}},
		{"onFailure goto", rule + retry2 + "onFailure: {action: goto, step: fix}\n", "", fail, 2,
			outcome{State: "aborted", NextStep: "fix", AttemptsUsed: 3, Failed: []string{"ok"}}},
		{"reject-and-abort, onFailure escalate", "onMissingEvidence: reject-and-abort\n" + rule + "onFailure: {action: escalate, target_hint: reviewers}\n", "", fail, 0,
			outcome{State: "escalated", AttemptsUsed: 1, EscalateTo: "reviewers", Failed: []string{"ok"}}},
		{"reject-and-abort, onFailure goto", "onMissingEvidence: reject-and-abort\n" + rule + "onFailure: {action: goto, step: fix}\n", "", fail, 0,
			outcome{State: "aborted", NextStep: "fix", AttemptsUsed: 1, Failed: []string{"ok"}}},
		{"onFailure is not used while budget remains", rule + retry2 + "onFailure: {action: escalate, target_hint: reviewers}\n", "", fail, 1,
			outcome{State: "retry", NextStep: "s", AttemptsUsed: 2, AttemptsLeft: 1, RetryPrompt: "Try again.", Failed: []string{"ok"}}},
		{"warn never applies onFailure", "onMissingEvidence: warn\n" + rule + "onFailure: {action: goto, step: fix}\n", "", fail, 9,
			outcome{State: "accepted_with_warnings", NextStep: "end", AttemptsUsed: 10, Failed: []string{"ok"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compile(t, contract(tt.verification), tt.policies, "")
			v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: tt.result}, tt.prior, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomeOf(v); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if len(v.Checks) != 1 {
				t.Errorf("checks = %+v, want the one rule", v.Checks)
			}
		})
	}
}

// TestSelfReportedSuccess: the agent's own "success" decides nothing.
func TestSelfReportedSuccess(t *testing.T) {
	c := compile(t, contract("evidence:\n  - path: tests.passed\n    expect: true\n    rejectMessage: Tests did not pass.\nretry: {budget: 1}\n"), "", "")
	a := acceptance.Attempt{Result: obj("success", true, "status", "done", "summary", "All good, tests pass.")}
	v, err := c.Evaluate("w", "s", a, 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := outcome{State: "retry", NextStep: "s", AttemptsUsed: 1, AttemptsLeft: 1, RetryPrompt: "The step was not accepted:\n- Tests did not pass.", Failed: []string{"tests.passed"}}
	if got := outcomeOf(v); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if !v.SelfReportIgnored {
		t.Error("SelfReportIgnored = false, want true")
	}

	// A self-report field is evidence only when a rule reads it.
	for _, tt := range []struct {
		rule   string
		result map[string]any
		want   bool
	}{
		{"path: success\n    expect: true", obj("success", true), false},
		{"path: success\n    expect: true", obj("success", true, "status", "done"), true}, // status is unread
		{"path: x\n    cel: 'has(result.success) && result[\"status\"] == \"done\"'", obj("success", true, "status", "done"), false},
		{"path: x\n    cel: 'result.size() > 0'", obj("success", true, "status", "done"), false}, // reads the whole result
		{"path: x\n    expect: present", obj("summary", "Looks good."), false},                   // prose, not a self-report field
	} {
		c := compile(t, contract("onMissingEvidence: warn\nevidence:\n  - "+tt.rule+"\n    rejectMessage: r\n"), "", "")
		v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: tt.result}, 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v.SelfReportIgnored != tt.want {
			t.Errorf("%s over %v: SelfReportIgnored = %v, want %v", tt.rule, tt.result, v.SelfReportIgnored, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	// retries 1..6 of a step that always fails.
	tests := []struct {
		name  string
		retry string
		want  []time.Duration
	}{
		{"no delay", "{budget: 10}", []time.Duration{0, 0, 0}},
		{"fixed", "{budget: 10, strategy: fixed, initialDelay: 2s, maxDelay: 1m}", []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"default strategy is fixed", "{budget: 10, initialDelay: 2s}", []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"fixed above maxDelay", "{budget: 10, strategy: fixed, initialDelay: 2s, maxDelay: 1s}", []time.Duration{time.Second, time.Second}},
		{"linear", "{budget: 10, strategy: linear, initialDelay: 2s, maxDelay: 7s}", []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second, 7 * time.Second, 7 * time.Second}},
		{"exponential", "{budget: 10, strategy: exponential, initialDelay: 1s, maxDelay: 10s}", []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}},
		{"exponential without maxDelay", "{budget: 10, strategy: exponential, initialDelay: 500ms}", []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compile(t, contract("evidence:\n  - {path: ok, expect: true, rejectMessage: r}\nretry: "+tt.retry+"\n"), "", "")
			var got []time.Duration
			for prior := range tt.want {
				v, err := c.Evaluate("w", "s", acceptance.Attempt{}, prior, nil, 42)
				if err != nil {
					t.Fatal(err)
				}
				if v.State != acceptance.Retry {
					t.Fatalf("attempt %d: state %s", prior+1, v.State)
				}
				got = append(got, v.RetryAfter)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("delays = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("many retries do not overflow", func(t *testing.T) {
		c := compile(t, contract("evidence:\n  - {path: ok, expect: true, rejectMessage: r}\nretry: {budget: 1000, strategy: exponential, initialDelay: 1s, jitter: 0.5}\n"), "", "")
		for _, prior := range []int{62, 63, 64, 500} {
			v, err := c.Evaluate("w", "s", acceptance.Attempt{}, prior, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			if v.RetryAfter <= 0 {
				t.Errorf("retry %d: RetryAfter = %v, want positive", prior+1, v.RetryAfter)
			}
		}
	})

	t.Run("jitter", func(t *testing.T) {
		c := compile(t, contract("evidence:\n  - {path: ok, expect: true, rejectMessage: r}\nretry: {budget: 10, strategy: exponential, initialDelay: 1s, maxDelay: 10s, jitter: 0.2}\n"), "", "")
		delay := func(prior int, seed uint64) time.Duration {
			v, err := c.Evaluate("w", "s", acceptance.Attempt{}, prior, nil, seed)
			if err != nil {
				t.Fatal(err)
			}
			return v.RetryAfter
		}
		for _, tc := range []struct {
			prior  int
			base   time.Duration
			lo, hi time.Duration
		}{
			{prior: 0, base: 1 * time.Second, lo: 800 * time.Millisecond, hi: 1200 * time.Millisecond},
			{prior: 2, base: 4 * time.Second, lo: 3200 * time.Millisecond, hi: 4800 * time.Millisecond},
			// At the cap the jitter can only shorten: maxDelay is a ceiling.
			{prior: 5, base: 10 * time.Second, lo: 8 * time.Second, hi: 10 * time.Second},
		} {
			seen := map[time.Duration]bool{}
			var below, above int
			for seed := uint64(0); seed < 200; seed++ {
				d := delay(tc.prior, seed)
				if d < tc.lo || d > tc.hi {
					t.Errorf("retry %d, seed %d: %v outside [%v, %v]", tc.prior+1, seed, d, tc.lo, tc.hi)
				}
				if again := delay(tc.prior, seed); again != d {
					t.Errorf("retry %d, seed %d: %v then %v; want the same delay", tc.prior+1, seed, d, again)
				}
				seen[d] = true
				if d < tc.base {
					below++
				} else if d > tc.base {
					above++
				}
			}
			if len(seen) < 50 {
				t.Errorf("retry %d: %d distinct delays over 200 seeds, want jitter", tc.prior+1, len(seen))
			}
			if below == 0 || (tc.hi > tc.base && above == 0) {
				t.Errorf("retry %d: %d below and %d above %v, want both sides", tc.prior+1, below, above, tc.base)
			}
		}
	})
}

func TestGoto(t *testing.T) {
	wf := stepWorkflow("local_edit",
		"goto:\n"+
			"  - {when: 'has(result.kind) && result.kind == \"big\"', step: big}\n"+
			"  - {when: 'context.fast == true', step: fast}\n"+
			"verification:\n  onMissingEvidence: warn\n  evidence:\n    - {path: ok, expect: true, rejectMessage: r}\n"+
			"next: end\n") +
		"  - id: big\n    terminal: true\n  - id: fast\n    terminal: true\n"
	c := compile(t, wf, "", "")
	tests := []struct {
		name   string
		result map[string]any
		ctx    map[string]any
		want   string
	}{
		{"first goto", obj("ok", true, "kind", "big"), obj("fast", false), "big"},
		{"second goto", obj("ok", true, "kind", "small"), obj("fast", true), "fast"},
		{"first that holds wins", obj("ok", true, "kind", "big"), obj("fast", true), "big"},
		{"none: next", obj("ok", true), obj("fast", false), "end"},
		{"accepted with warnings routes too", obj("ok", false, "kind", "big"), obj("fast", false), "big"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: tt.result}, 0, tt.ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if v.NextStep != tt.want {
				t.Errorf("NextStep = %q, want %q", v.NextStep, tt.want)
			}
		})
	}

	t.Run("a condition that cannot be evaluated", func(t *testing.T) {
		// context.fast is missing: writ does not guess where the run goes.
		_, err := c.Evaluate("w", "s", acceptance.Attempt{Result: obj("ok", true)}, 0, nil, 0)
		var we *writ.Error
		if !errors.As(err, &we) || we.Code != writ.EINVALID || len(we.Details) != 1 || we.Details[0].File != "t/wf.yaml" || we.Details[0].Line != 8 ||
			!strings.Contains(we.Message, "could not be evaluated") {
			t.Errorf("err = %#v, want EINVALID at t/wf.yaml:8", err)
		}
	})
}

func TestMutatingSteps(t *testing.T) {
	const policies = `{"mutatingActionClasses": ["browser_submit"], "exemptions": [{"workflow": "w", "step": "s", "reason": "A human submits the form."}]}`
	const strict = `{"mutatingActionClasses": ["browser_submit"]}`
	const lax = `{"mutatingActionClasses": ["browser_submit"], "requireVerificationForMutating": false}`
	verified := "verification:\n  evidence:\n    - {path: ok, expect: true, rejectMessage: r}\nnext: end\n"

	t.Run("no contract", func(t *testing.T) {
		for _, body := range []string{"next: end\n", "verification: {onMissingEvidence: warn}\nnext: end\n"} {
			c := compile(t, stepWorkflow("browser_submit", body), strict, "")
			v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: obj("success", true)}, 0, nil, 0)
			var we *writ.Error
			if v != nil || !errors.As(err, &we) || we.Code != writ.EINVALID ||
				!strings.Contains(we.Message, "step s is mutating and has no verification contract") ||
				!reflect.DeepEqual(we.Details, []writ.Detail{{File: "t/wf.yaml", Line: 4, Message: "step s is mutating and has no verification contract"}}) {
				t.Errorf("%q: verdict %+v, err %#v; want EINVALID", body, v, err)
			}
		}
	})
	t.Run("exempted", func(t *testing.T) {
		c := compile(t, stepWorkflow("browser_submit", "next: end\n"), policies, "")
		v, err := c.Evaluate("w", "s", acceptance.Attempt{}, 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != acceptance.Accepted || v.NextStep != "end" || v.Exempt == nil || v.Exempt.Reason != "A human submits the form." {
			t.Errorf("verdict = %+v, want accepted and exempt", v)
		}
	})
	t.Run("exempted with a contract: the contract still applies", func(t *testing.T) {
		c := compile(t, stepWorkflow("browser_submit", verified), policies, "")
		v, err := c.Evaluate("w", "s", acceptance.Attempt{}, 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != acceptance.Aborted || v.Exempt == nil {
			t.Errorf("verdict = %+v, want aborted and exempt", v)
		}
	})
	t.Run("verification not required", func(t *testing.T) {
		c := compile(t, stepWorkflow("browser_submit", "next: end\n"), lax, "")
		v, err := c.Evaluate("w", "s", acceptance.Attempt{}, 0, nil, 0)
		// Since issue 31 the verdict names the pack-wide exemption.
		if err != nil || v.State != acceptance.Accepted || v.Exempt == nil || v.Exempt.Reason != "requireVerificationForMutating is false in the workflow policies" {
			t.Errorf("verdict = %+v, err = %v; want accepted, exempt by the policies", v, err)
		}
	})
	t.Run("not mutating", func(t *testing.T) {
		c := compile(t, stepWorkflow("local_edit", "next: end\n"), strict, "")
		v, err := c.Evaluate("w", "s", acceptance.Attempt{}, 0, nil, 0)
		if err != nil || v.State != acceptance.Accepted || v.Exempt != nil {
			t.Errorf("verdict = %+v, err = %v; want accepted", v, err)
		}
	})
}

func TestEvaluateRefuses(t *testing.T) {
	c := compile(t, contract("evidence:\n  - {path: ok, expect: true, rejectMessage: r}\n"), "", "")
	tests := []struct {
		name, workflow, step string
		a                    acceptance.Attempt
		prior                int
		want                 string
	}{
		{"unknown workflow", "nope", "s", acceptance.Attempt{}, 0, `unknown workflow "nope"`},
		{"unknown step", "w", "nope", acceptance.Attempt{}, 0, `workflow w has no step "nope"`},
		{"negative prior attempts", "w", "s", acceptance.Attempt{}, -1, "prior attempts -1 is negative"},
		{"payload not JSON", "w", "s", acceptance.Attempt{Result: obj("f", func() {})}, 0, "the result payload is not JSON: json: unsupported type: func()"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := c.Evaluate(tt.workflow, tt.step, tt.a, tt.prior, nil, 0)
			if v != nil || writ.ErrorCode(err) != writ.EINVALID || writ.ErrorMessage(err) != tt.want {
				t.Errorf("verdict %+v, err %v; want EINVALID %q", v, err, tt.want)
			}
		})
	}
}
