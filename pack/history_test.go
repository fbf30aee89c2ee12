package pack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

const okHistory = `history:
  - name: acts_per_customer
    aggregate: count
    group_by: subject
    window: 24h
    decision_keys: [demo.act]
  - name: session_tokens
    aggregate: sum
    field: usage.tokens
    group_by: session
    window: 90m
    filter: executed
`

func TestHistoryValid(t *testing.T) {
	p, err := pack.LoadFS(fsWith(map[string]string{"pack.yaml": okManifest + okHistory}), "demo")
	if err != nil {
		t.Fatalf("LoadFS = %v", err)
	}
	if len(p.History) != 2 {
		t.Fatalf("History = %d aggregates, want 2", len(p.History))
	}
	a, s := p.History[0], p.History[1]
	if a.Name != "acts_per_customer" || a.Kind != "count" || a.Window != 24*time.Hour || a.Filter != pack.FilterAllowed || a.Pos.Line != 8 {
		t.Errorf("first aggregate = %+v, want count over 24h, filter allowed by default, at line 8", a)
	}
	if s.Field != "usage.tokens" || s.Window != 90*time.Minute || s.Filter != pack.FilterExecuted {
		t.Errorf("second aggregate = %+v, want a sum of usage.tokens over 90m counting executed decisions", s)
	}
}

// TestHistoryInvalid: each mistake is reported at its file and line.
func TestHistoryInvalid(t *testing.T) {
	for _, tc := range []struct{ name, history, want string }{
		{"sum without field", "history:\n  - {name: x, aggregate: sum, group_by: tool, window: 1h}\n", "pack.yaml:8"},
		{"count with field", "history:\n  - {name: x, aggregate: count, field: args.a, group_by: tool, window: 1h}\n", "pack.yaml:8"},
		{"expression without expression", "history:\n  - {name: x, aggregate: count, group_by: expression, window: 1h}\n", "pack.yaml:8"},
		{"field of no source", "history:\n  - {name: x, aggregate: sum, field: context.a, group_by: tool, window: 1h}\n", "pack.yaml:8"},
		{"bad window", "history:\n  - {name: x, aggregate: count, group_by: tool, window: 1d}\n", "pack.yaml:8"},
		{"window too long", "history:\n  - {name: x, aggregate: count, group_by: tool, window: 8785h}\n", "pack.yaml:8"},
		{"zero window", "history:\n  - {name: x, aggregate: count, group_by: tool, window: 0h}\n", "pack.yaml:8"},
		{"unknown filter", "history:\n  - {name: x, aggregate: count, group_by: tool, window: 1h, filter: denied}\n", "pack.yaml:8"},
		{"duplicate name", "history:\n  - {name: x, aggregate: count, group_by: tool, window: 1h}\n  - {name: x, aggregate: count, group_by: actor, window: 1h}\n", "pack.yaml:9"},
		{"unknown decision key", "history:\n  - {name: x, aggregate: count, group_by: tool, window: 1h, decision_keys: [demo.nope]}\n", "pack.yaml:8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pack.LoadFS(fsWith(map[string]string{"pack.yaml": okManifest + tc.history}), "demo")
			e, ok := err.(*writ.Error)
			if !ok || len(e.Details) == 0 {
				t.Fatalf("LoadFS = %v, want problems", err)
			}
			var got []string
			for _, d := range e.Details {
				got = append(got, d.String())
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("problems %q, want one at %s", got, tc.want)
			}
		})
	}
}
