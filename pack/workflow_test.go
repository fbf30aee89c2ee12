package pack_test

import (
	"testing"

	"github.com/writhq/writ/pack"
)

func TestLoadWorkflowExample(t *testing.T) {
	p, err := pack.Load("../examples/storybook")
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workflows["ui.component.change"]
	if w == nil || w.Root().ID != "implement" || len(w.Steps) != 3 {
		t.Fatalf("workflow = %+v", w)
	}
	v := w.Step("visual_check").Verification
	if v == nil || len(v.Evidence) != 2 || v.Evidence[0].Expect != true || v.Evidence[1].Expect != "present" ||
		len(v.ToolCalls) != 1 || !v.ToolCalls[0].RequiresObserved() || v.ToolCalls[0].Min != 1 ||
		v.Retry.Budget != 2 || v.Retry.InitialDelay.String() != "2s" || v.OnFailure.Action != "abort" {
		t.Errorf("verification = %+v", v)
	}
	if !p.WorkflowPolicies.Mutating("browser_submit") || !p.WorkflowPolicies.RequiresVerification() {
		t.Errorf("policies = %+v", p.WorkflowPolicies)
	}
}
