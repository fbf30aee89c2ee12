package policy

import "testing"

func TestCostBounded(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		expr string
		want bool
	}{
		{"args.amount > 10000", true},
		{"has(context.risk) && context.risk >= 0.8", true},
		{"'vip' in subject_ids", false},
		{"args.note.contains('refund')", true}, // linear in a bounded string
		{"args.note.matches(args.pattern)", false},
		{"subject_ids.exists(s, s.startsWith('customer:'))", false},
		{"args.currency != 'EUR' && args.currency != 'USD'", true},
	}
	for _, tt := range tests {
		ast, iss := env.Compile(tt.expr)
		if iss.Err() != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, iss.Err())
		}
		max, got := costBounded(env, ast, 100_000)
		if got != tt.want {
			t.Errorf("costBounded(%q) = %v (max %d), want %v", tt.expr, got, max, tt.want)
		}
	}
}
