package policy

import "testing"

func TestVarIndexMatchesVariables(t *testing.T) {
	for i, name := range Variables {
		if got := varIndex(name); got != i {
			t.Errorf("varIndex(%q) = %d, want %d", name, got, i)
		}
	}
	if varIndex("request") != -1 {
		t.Error("varIndex(request) found an undeclared variable")
	}
}

func TestNumVariables(t *testing.T) {
	if numVariables != len(Variables) {
		t.Errorf("numVariables = %d, want len(Variables) = %d", numVariables, len(Variables))
	}
}
