package packtest

import (
	"encoding/json"
	"testing"
)

// TestEqualLists: a wanted list matches the same codes in any order, a
// code writ lists twice included; a missing or extra code does not.
func TestEqualLists(t *testing.T) {
	for _, tc := range []struct {
		want []any
		got  []string
		ok   bool
	}{
		{[]any{}, []string{}, true},
		{[]any{}, []string{"A"}, false},
		{[]any{"A", "B"}, []string{"B", "A"}, true},
		{[]any{"A", "B"}, []string{"B", "A", "B"}, true},
		{[]any{"A"}, []string{"A", "A"}, true},
		{[]any{"A", "B"}, []string{"A"}, false},
		{[]any{"A"}, []string{"A", "B"}, false},
	} {
		if got := equal(tc.want, tc.got); got != tc.ok {
			b, _ := json.Marshal(tc.want)
			t.Errorf("equal(%s, %q) = %v, want %v", b, tc.got, got, tc.ok)
		}
	}
}
