package acceptance_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/pack"
)

// Issue 31: what the agent merely claims is not what lets a step pass.

// TestMutatingWithoutPolicies: the seed's mutating action classes are
// mutating with no workflow policies file, so a browser_submit step with
// no verification block is refused, whatever the payload says.
func TestMutatingWithoutPolicies(t *testing.T) {
	for _, class := range pack.MutatingActionClasses {
		c := compile(t, stepWorkflow(class, "next: end\n"), "", "")
		_, err := c.Evaluate("w", "s", acceptance.Attempt{Result: map[string]any{"performed": false}}, 0, nil, 0)
		if writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(err.Error(), "is mutating and has no verification contract") {
			t.Errorf("Evaluate(%s step without verification, no policies file) = %v, want EINVALID: mutating, no contract", class, err)
		}
	}
	// Not mutating: accepted without a contract, as before.
	c := compile(t, stepWorkflow("local_edit", "next: end\n"), "", "")
	if v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: map[string]any{}}, 0, nil, 0); err != nil || v.State != acceptance.Accepted {
		t.Errorf("Evaluate(local_edit step without verification) = %+v, %v; want accepted", v, err)
	}
	// A policies file cannot take a seed class off the list; an
	// exemption relieves one step, and the verdict names it.
	policies := `{"mutatingActionClasses": ["deploy"], "exemptions": [{"workflow": "w", "step": "s", "reason": "the submit is a dry run"}]}`
	c = compile(t, stepWorkflow("browser_submit", "next: end\n"), policies, "")
	v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: map[string]any{}}, 0, nil, 0)
	if err != nil || v.State != acceptance.Accepted || v.Exempt == nil || v.Exempt.Reason != "the submit is a dry run" {
		t.Errorf("Evaluate(exempted browser_submit step) = %+v, %v; want accepted, naming the exemption", v, err)
	}
}

// TestClaimedCallOnMutatingStep: observed: false on a mutating step that
// is not exempted does not let a claimed call count; exempted, it does.
// The verdict lists the claimed calls either way.
func TestClaimedCallOnMutatingStep(t *testing.T) {
	body := "verification:\n  onMissingEvidence: reject-and-abort\n  toolCalls:\n    - name: submit_form\n      observed: false\nnext: end\n"
	claim := acceptance.Attempt{Result: map[string]any{}, Claimed: []acceptance.ToolCall{{Name: "submit_form"}, {Name: "screenshot"}}}
	c := compile(t, stepWorkflow("browser_submit", body), "", "")
	v, err := c.Evaluate("w", "s", claim, 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != acceptance.Aborted || !strings.Contains(v.Checks[0].Detail, "observed: false does not let claimed calls count") {
		t.Errorf("mutating step, claimed call only: %s %+v; want aborted, saying observed: false does not count there", v.State, v.Checks)
	}
	if want := []string{"submit_form", "screenshot"}; !reflect.DeepEqual(v.Claimed, want) {
		t.Errorf("claimed = %q, want %q", v.Claimed, want)
	}
	c = compile(t, stepWorkflow("browser_submit", body), `{"exemptions": [{"workflow": "w", "step": "s", "reason": "the form is a sandbox"}]}`, "")
	if v, err := c.Evaluate("w", "s", claim, 0, nil, 0); err != nil || v.State != acceptance.Accepted || v.Exempt == nil {
		t.Errorf("exempted mutating step, claimed call with observed: false = %+v, %v; want accepted under the exemption", v, err)
	}
	// Observed, the call counts, and the verdict lists only the call
	// writ did not see.
	seen := claim
	seen.Observed = []acceptance.ToolCall{{Name: "submit_form"}}
	c = compile(t, stepWorkflow("browser_submit", body), "", "")
	if v, err := c.Evaluate("w", "s", seen, 0, nil, 0); err != nil || v.State != acceptance.Accepted || !reflect.DeepEqual(v.Claimed, []string{"screenshot"}) {
		t.Errorf("mutating step, observed call = %+v, %v; want accepted, claimed [screenshot]", v, err)
	}
}

// TestLenientDefaults: contracts compiled leniently (to replay verdicts
// decided before issue 31) keep the old defaults.
func TestLenientDefaults(t *testing.T) {
	p, err := pack.LoadFS(packFS(stepWorkflow("browser_submit", "verification:\n  toolCalls:\n    - name: submit_form\nnext: end\n"), "", ""), "t")
	if err != nil {
		t.Fatal(err)
	}
	claim := acceptance.Attempt{Result: map[string]any{}, Claimed: []acceptance.ToolCall{{Name: "submit_form"}}}
	for _, tc := range []struct {
		lenient bool
		state   string
		claimed []string
	}{
		{false, acceptance.Aborted, []string{"submit_form"}},
		{true, acceptance.Accepted, nil},
	} {
		c, err := acceptance.CompileWith(p, acceptance.Options{Lenient: tc.lenient})
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Evaluate("w", "s", claim, 0, nil, 0)
		if err != nil || v.State != tc.state || !reflect.DeepEqual(v.Claimed, tc.claimed) {
			t.Errorf("CompileWith(Lenient: %v): claimed-only call = %+v, %v; want %s, claimed %q", tc.lenient, v, err, tc.state, tc.claimed)
		}
	}
}

// TestRequireVerificationOffIsAnExemption: with requireVerificationForMutating
// false, a mutating step without a contract is accepted, and its verdict
// names that as its exemption.
func TestRequireVerificationOffIsAnExemption(t *testing.T) {
	c := compile(t, stepWorkflow("upload", "next: end\n"), `{"requireVerificationForMutating": false}`, "")
	v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: map[string]any{}}, 0, nil, 0)
	if err != nil || v.State != acceptance.Accepted || v.Exempt == nil || v.Exempt.Reason != "requireVerificationForMutating is false in the workflow policies" {
		t.Errorf("Evaluate(upload step, verification not required) = %+v, %v; want accepted, naming the policies as its exemption", v, err)
	}
}
