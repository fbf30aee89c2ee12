package acceptance_test

import (
	"strings"
	"testing"

	"github.com/writhq/writ/acceptance"
)

func TestToolCalls(t *testing.T) {
	browse := func(url string) acceptance.ToolCall {
		return acceptance.ToolCall{Name: "open_simple_browser", Args: map[string]any{"url": url}}
	}
	other := acceptance.ToolCall{Name: "run_tests", Args: map[string]any{}}
	calls := func(cs ...acceptance.ToolCall) []acceptance.ToolCall { return cs }

	tests := []struct {
		name              string
		rule              string // the tool-call rule's YAML after "name: open_simple_browser"
		claimed, observed []acceptance.ToolCall
		passed            bool
		detail            string
		rejectMessage     string
	}{
		{
			name: "observed required, only claimed", rule: "observed: true",
			claimed: calls(browse("a")),
			passed:  false, detail: "open_simple_browser: 0 observed calls, need 1; 1 claimed call that writ did not observe does not count",
			rejectMessage: "At least 1 call to open_simple_browser observed by writ is required.",
		},
		{
			name: "observed required, observed", rule: "observed: true",
			observed: calls(browse("a")),
			passed:   true, detail: "open_simple_browser: 1 observed call, need 1",
		},
		{
			name: "observed required, claimed and observed are one call", rule: "observed: true",
			claimed: calls(browse("a")), observed: calls(browse("a")),
			passed: true, detail: "open_simple_browser: 1 observed call, need 1",
		},
		{
			name: "observed required, a second claimed call writ did not see", rule: "observed: true\nmin: 2",
			claimed: calls(browse("a"), browse("b")), observed: calls(browse("a")),
			passed: false, detail: "open_simple_browser: 1 observed call, need 2; 1 claimed call that writ did not observe does not count",
			rejectMessage: "At least 2 calls to open_simple_browser observed by writ are required.",
		},
		{
			name: "observed required, nothing", rule: "observed: true",
			claimed: calls(other), observed: calls(other),
			passed: false, detail: "open_simple_browser: 0 observed calls, need 1",
			rejectMessage: "At least 1 call to open_simple_browser observed by writ is required.",
		},
		{
			// Issue 31: a rule that does not say counts observed calls only.
			name: "observed by default, only claimed", rule: "min: 1",
			claimed: calls(browse("a")),
			passed:  false, detail: "open_simple_browser: 0 observed calls, need 1; 1 claimed call that writ did not observe does not count",
			rejectMessage: "At least 1 call to open_simple_browser observed by writ is required.",
		},
		{
			name: "observed by default, observed", rule: "min: 1",
			claimed: calls(browse("a")), observed: calls(browse("a")),
			passed: true, detail: "open_simple_browser: 1 observed call, need 1",
		},
		{
			name: "claimed counts", rule: "observed: false\nmin: 1",
			claimed: calls(browse("a")),
			passed:  true, detail: "open_simple_browser: 1 call (0 observed, 1 claimed), need 1",
		},
		{
			name: "a call listed in both counts once", rule: "observed: false\nmin: 2",
			claimed: calls(browse("a")), observed: calls(browse("a")),
			passed: false, detail: "open_simple_browser: 1 call (1 observed, 0 claimed), need 2",
			rejectMessage: "At least 2 calls to open_simple_browser are required.",
		},
		{
			name: "different arguments are different calls", rule: "observed: false\nmin: 2",
			claimed: calls(browse("a")), observed: calls(browse("b")),
			passed: true, detail: "open_simple_browser: 2 calls (1 observed, 1 claimed), need 2",
		},
		{
			name: "two observed identical calls absorb one claimed", rule: "observed: false\nmin: 2",
			claimed: calls(browse("a")), observed: calls(browse("a"), browse("a")),
			passed: true, detail: "open_simple_browser: 2 calls (2 observed, 0 claimed), need 2",
		},
		{
			name: "nil and empty arguments are the same", rule: "observed: false\nmin: 2",
			claimed: calls(acceptance.ToolCall{Name: "open_simple_browser"}), observed: calls(acceptance.ToolCall{Name: "open_simple_browser", Args: map[string]any{}}),
			passed: false, detail: "open_simple_browser: 1 call (1 observed, 0 claimed), need 2",
			rejectMessage: "At least 2 calls to open_simple_browser are required.",
		},
		{
			name: "when filters", rule: "observed: false\nwhen: 'call.args.url.startsWith(\"http://localhost\")'",
			observed: calls(browse("https://example.com"), browse("http://localhost:6006")),
			passed:   true, detail: "open_simple_browser: 1 call (1 observed, 0 claimed), need 1; 1 call did not meet the when condition",
		},
		{
			name: "when filters everything", rule: "observed: false\nwhen: 'call.args.url.startsWith(\"http://localhost\")'",
			observed: calls(browse("https://example.com")),
			passed:   false, detail: "open_simple_browser: 0 calls (0 observed, 0 claimed), need 1; 1 call did not meet the when condition",
			rejectMessage: "At least 1 call to open_simple_browser is required.",
		},
		{
			name: "when sees observed", rule: "observed: false\nwhen: call.observed",
			claimed: calls(browse("a")),
			passed:  false, detail: "open_simple_browser: 0 calls (0 observed, 0 claimed), need 1; 1 call did not meet the when condition",
			rejectMessage: "At least 1 call to open_simple_browser is required.",
		},
		{
			name: "when sees the result", rule: "observed: false\nwhen: 'call.result.status == 200.0'",
			observed: calls(acceptance.ToolCall{Name: "open_simple_browser", Result: map[string]any{"status": 200}}),
			passed:   true, detail: "open_simple_browser: 1 call (1 observed, 0 claimed), need 1",
		},
		{
			name: "when error fails closed", rule: "observed: false\nwhen: 'call.args.missing == 1'",
			observed: calls(browse("a")),
			passed:   false, detail: "open_simple_browser: 0 calls (0 observed, 0 claimed), need 1; 1 call did not meet the when condition (no such key: missing; writ fails closed)",
			rejectMessage: "At least 1 call to open_simple_browser is required.",
		},
		{
			name: "own reject message", rule: "observed: false\nrejectMessage: Open the browser.",
			passed: false, detail: "open_simple_browser: 0 calls (0 observed, 0 claimed), need 1",
			rejectMessage: "Open the browser.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compile(t, contract("onMissingEvidence: warn\ntoolCalls:\n  - name: open_simple_browser\n    "+strings.ReplaceAll(tt.rule, "\n", "\n    ")+"\n"), "", "")
			v, err := c.Evaluate("w", "s", acceptance.Attempt{Claimed: tt.claimed, Observed: tt.observed}, 0, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := must1(t, v)
			want := acceptance.Check{Kind: acceptance.KindToolCall, Target: "open_simple_browser", Passed: tt.passed, Detail: tt.detail, RejectMessage: tt.rejectMessage}
			if tt.passed {
				want.RejectMessage = got.RejectMessage // not shown for a passing check
			}
			if got != want {
				t.Errorf("check =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}
