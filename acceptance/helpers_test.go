package acceptance_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/pack"
)

// packFS builds an in-memory pack "t" with one workflow file wf.yaml and,
// when policies is not empty, a workflow policies file wp.json.
func packFS(workflow, policies, manifestExtra string) fstest.MapFS {
	manifest := "name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: []\nworkflows: [wf.yaml]\n" + manifestExtra
	m := fstest.MapFS{
		"spec.yaml": {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: local_edit\n")},
		"wf.yaml":   {Data: []byte(workflow)},
	}
	if policies != "" {
		manifest += "workflow_policies: wp.json\n"
		m["wp.json"] = &fstest.MapFile{Data: []byte(policies)}
	}
	m["pack.yaml"] = &fstest.MapFile{Data: []byte(manifest)}
	return m
}

// compile loads and compiles an in-memory pack, failing the test on error.
func compile(t *testing.T, workflow, policies, manifestExtra string) *acceptance.Contracts {
	t.Helper()
	p, err := pack.LoadFS(packFS(workflow, policies, manifestExtra), "t")
	if err != nil {
		t.Fatalf("LoadFS: %v\n%s", err, workflow)
	}
	c, err := acceptance.Compile(p)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, workflow)
	}
	return c
}

// stepWorkflow is workflow "w": step s (with the given action class and
// YAML body, indented four spaces) then end; fix is the step an onFailure
// goto names.
func stepWorkflow(actionClass, body string) string {
	return "workflow_id: w\nversion: 1.0.0\nsteps:\n" +
		"  - id: s\n    action_class: " + actionClass + "\n" + indent(body, "    ") +
		"  - id: fix\n    next: end\n" +
		"  - id: end\n    terminal: true\n"
}

// contract is workflow w whose step s has the given verification block
// (indented six spaces) and next: end.
func contract(verification string) string {
	return stepWorkflow("local_edit", "verification:\n"+indent(verification, "  ")+"next: end\n")
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			b.WriteString(prefix + line)
		}
	}
	return b.String()
}

// must1 returns the verdict's only check.
func must1(t *testing.T, v *acceptance.Verdict) acceptance.Check {
	t.Helper()
	if len(v.Checks) != 1 {
		t.Fatalf("checks = %+v, want one", v.Checks)
	}
	return v.Checks[0]
}
