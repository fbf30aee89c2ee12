package acceptance_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/pack"
)

// storybook compiles the verification contract's example pack.
func storybook(t *testing.T) *acceptance.Contracts {
	t.Helper()
	p, err := pack.Load("../examples/storybook")
	if err != nil {
		t.Fatal(err)
	}
	c, err := acceptance.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// attemptFile reads one of the example's attempts: the result payload and
// the tool calls it claims.
func attemptFile(t *testing.T, name string) acceptance.Attempt {
	t.Helper()
	b, err := os.ReadFile("../examples/storybook/attempts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Result    map[string]any        `json:"result"`
		ToolCalls []acceptance.ToolCall `json:"tool_calls"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return acceptance.Attempt{Result: f.Result, Claimed: f.ToolCalls}
}

// TestStorybookClaimedCallNotObserved is the seed's scenario: the payload
// claims open_simple_browser, writ never observed it, and the contract
// requires observed calls. The step is rejected and the verdict says why.
func TestStorybookClaimedCallNotObserved(t *testing.T) {
	c := storybook(t)
	a := attemptFile(t, "visual-check-accepted.json") // the evidence itself is fine
	if len(a.Claimed) != 1 || a.Claimed[0].Name != "open_simple_browser" || a.Observed != nil {
		t.Fatalf("attempt = %+v", a)
	}
	ctx := map[string]any{"component": "Button", "ticket": "UI-1"}

	v, err := c.Evaluate("ui.component.change", "visual_check", a, 0, ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantFailed := []acceptance.Check{{
		Kind:          acceptance.KindToolCall,
		Target:        "open_simple_browser",
		Passed:        false,
		RejectMessage: "The browser was not opened through writ.",
		Detail:        "open_simple_browser: 0 observed calls, need 1; 1 claimed call that writ did not observe does not count",
	}}
	if got := v.State; got != acceptance.Retry {
		t.Errorf("State = %q, want %q", got, acceptance.Retry)
	}
	if !reflect.DeepEqual(v.Failed, wantFailed) {
		t.Errorf("Failed =\n%+v\nwant\n%+v", v.Failed, wantFailed)
	}
	if got, want := len(v.Checks), 3; got != want {
		t.Errorf("len(Checks) = %d, want %d", got, want)
	}
	if v.AttemptsUsed != 1 || v.AttemptsLeft != 2 || v.NextStep != "visual_check" ||
		v.RetryPrompt != "Return missing screenshots and validation details." {
		t.Errorf("verdict = %+v", v)
	}
	// The record carries the reason.
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"detail":"open_simple_browser: 0 observed calls, need 1; 1 claimed call that writ did not observe does not count"`) {
		t.Errorf("JSON = %s", b)
	}

	// The budget (2) is spent on the third attempt: onFailure aborts.
	v, err = c.Evaluate("ui.component.change", "visual_check", a, 2, ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != acceptance.Aborted || v.EscalateTo != "" || v.AttemptsUsed != 3 || v.AttemptsLeft != 0 || v.NextStep != "" || v.RetryPrompt != "" {
		t.Errorf("third attempt: verdict = %+v, want aborted once the budget is spent", v)
	}
}

func TestStorybookObservedCallAccepted(t *testing.T) {
	c := storybook(t)
	a := attemptFile(t, "visual-check-accepted.json")
	a.Observed = a.Claimed // writ saw the same call at its gateway

	v, err := c.Evaluate("ui.component.change", "visual_check", a, 0, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := &acceptance.Verdict{
		State: acceptance.Accepted,
		Checks: []acceptance.Check{
			{Kind: "evidence", Target: "visualVerification.performed", Passed: true, RejectMessage: "Visual verification was not executed.", Detail: "value is true"},
			{Kind: "evidence", Target: "storybookInstance.url", Passed: true, RejectMessage: "Storybook URL is missing.", Detail: `value is "http://localhost:6006/?path=/story/button--primary" (a string)`},
			{Kind: "tool_call", Target: "open_simple_browser", Passed: true, RejectMessage: "The browser was not opened through writ.", Detail: "open_simple_browser: 1 observed call, need 1"},
		},
		Failed:       []acceptance.Check{},
		AttemptsUsed: 1,
		NextStep:     "done",
		Claimed:      []string{},
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("verdict =\n%+v\nwant\n%+v", v, want)
	}
}

func TestStorybookMissingEvidence(t *testing.T) {
	c := storybook(t)
	a := attemptFile(t, "visual-check-missing-evidence.json")
	a.Observed = a.Claimed

	v, err := c.Evaluate("ui.component.change", "visual_check", a, 1, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []acceptance.Check{
		{Kind: "evidence", Target: "visualVerification.performed", Passed: false, RejectMessage: "Visual verification was not executed.", Detail: "value is false"},
		{Kind: "evidence", Target: "storybookInstance.url", Passed: false, RejectMessage: "Storybook URL is missing.", Detail: "missing (null counts as absent)"},
	}
	if v.State != acceptance.Retry || v.AttemptsUsed != 2 || v.AttemptsLeft != 1 {
		t.Errorf("verdict = %+v, want retry with 1 attempt left", v)
	}
	if !reflect.DeepEqual(v.Failed, want) {
		t.Errorf("Failed =\n%+v\nwant\n%+v", v.Failed, want)
	}
	// "summary": "Looks good to me." is prose, not evidence.
	if v.SelfReportIgnored {
		t.Errorf("SelfReportIgnored = true; summary is not a self-report field")
	}
}

func TestStorybookUnverifiedStep(t *testing.T) {
	c := storybook(t)
	// implement is a local edit (not mutating) without a contract.
	v, err := c.Evaluate("ui.component.change", "implement", acceptance.Attempt{Result: map[string]any{"diff_summary": "x"}}, 0, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != acceptance.Accepted || len(v.Checks) != 0 || v.NextStep != "visual_check" || v.Exempt != nil {
		t.Errorf("verdict = %+v", v)
	}
	v, err = c.Evaluate("ui.component.change", "done", acceptance.Attempt{}, 0, nil, 1)
	if err != nil || v.State != acceptance.Accepted || v.NextStep != "" {
		t.Errorf("terminal step: verdict = %+v, err = %v", v, err)
	}
}
