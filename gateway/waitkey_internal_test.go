package gateway

import (
	"testing"

	"github.com/writhq/writ"
)

// TestWaitKeyIsUnambiguous: calls that differ in any field never share a
// wait key, even when one field's characters could be read as the
// boundary to the next (a blocked decision is resumed only by its own
// call).
func TestWaitKeyIsUnambiguous(t *testing.T) {
	call := func(tenant, actorType, actorID, tool string) *writ.CheckRequest {
		return &writ.CheckRequest{TenantID: tenant, Actor: writ.Actor{Type: actorType, ID: actorID}, Tool: tool, Arguments: map[string]any{"a": 1.0}}
	}
	calls := []*writ.CheckRequest{
		call("acme", "AGENT", "bot", "fs.write"),
		call("acme\x00AGENT", "bot", "fs.write", ""),
		call("acme", "AGENT\x00bot", "", "fs.write"),
		call("acme", "AGENT", "bot\x00fs.write", ""),
		call(`acme","AGENT`, "bot", "fs.write", ""),
	}
	seen := map[string]int{}
	for i, c := range calls {
		k, err := waitKey(c)
		if err != nil {
			t.Fatalf("waitKey(call %d) = %v", i, err)
		}
		if j, ok := seen[k]; ok {
			t.Errorf("calls %d and %d share the wait key %q", j, i, k)
		}
		seen[k] = i
	}
}
