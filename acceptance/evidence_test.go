package acceptance_test

import (
	"strings"
	"testing"

	"github.com/writhq/writ/acceptance"
)

func TestEvidenceExpectations(t *testing.T) {
	tests := []struct {
		name   string
		rule   string // the evidence rule's YAML from its path on, keys two spaces in
		result map[string]any
		passed bool
		detail string // exact, or a prefix when it ends in "..."
	}{
		{"true/true", "a\n  expect: true", obj("a", true), true, "value is true"},
		{"true/false", "a\n  expect: true", obj("a", false), false, "value is false"},
		{"true/string", "a\n  expect: true", obj("a", "true"), false, `value is "true" (a string), not true`},
		{"true/number", "a\n  expect: true", obj("a", 1), false, `value is 1 (a number), not true`},
		{"true/missing", "a\n  expect: true", obj(), false, "missing"},
		{"true/null", "a\n  expect: true", obj("a", nil), false, "value is null"},
		{"false/false", "a\n  expect: false", obj("a", false), true, "value is false"},
		{"false/true", "a\n  expect: false", obj("a", true), false, "value is true"},
		{"false/missing", "a\n  expect: false", obj(), false, "missing"},

		{"present/string", "a\n  expect: present", obj("a", "x"), true, `value is "x" (a string)`},
		{"present/false", "a\n  expect: present", obj("a", false), true, `value is false (a bool)`},
		{"present/empty", "a\n  expect: present", obj("a", ""), true, `value is "" (a string)`},
		{"present/missing", "a\n  expect: present", obj(), false, "missing (null counts as absent)"},
		{"present/null", "a\n  expect: present", obj("a", nil), false, "value is null (null counts as absent)"},
		{"absent/missing", "a\n  expect: absent", obj(), true, "missing"},
		{"absent/null", "a\n  expect: absent", obj("a", nil), true, "value is null"},
		{"absent/present", "a\n  expect: absent", obj("a", 0), false, "value is present: 0 (a number)"},

		{"equals/string", "a\n  equals: done", obj("a", "done"), true, `value equals "done" (a string)`},
		{"equals/string mismatch", "a\n  equals: done", obj("a", "Done"), false, `value is "Done" (a string), want "done" (a string)`},
		{"equals/string vs number", "a\n  equals: '3'", obj("a", 3), false, `value is 3 (a number), want "3" (a string)`},
		{"equals/int vs float", "a\n  equals: 3", obj("a", 3.0), true, "value equals 3 (a number)"},
		{"equals/float vs int", "a\n  equals: 2.5", obj("a", 2.5), true, "value equals 2.5 (a number)"},
		{"equals/Go int", "a\n  equals: 3", obj("a", int64(3)), true, "value equals 3 (a number)"},
		{"equals/number mismatch", "a\n  equals: 3", obj("a", 4), false, "value is 4 (a number), want 3 (a number)"},
		{"equals/object", "a\n  equals: {k: [1, x], z: null}", obj("a", obj("z", nil, "k", []any{1.0, "x"})), true, `value equals {"k":[1,"x"],"z":null} (an object)`},
		{"equals/object mismatch", "a\n  equals: {k: [1, x]}", obj("a", obj("k", []any{1})), false, `value is {"k":[1]} (an object), want {"k":[1,"x"]} (an object)`},
		{"equals/object extra key", "a\n  equals: {k: 1}", obj("a", obj("k", 1, "j", 2)), false, `value is {"j":2,"k":1} (an object), want {"k":1} (an object)`},
		{"equals/null", "a\n  equals: null", obj("a", nil), true, "value equals null"},
		{"equals/missing", "a\n  equals: done", obj(), false, `missing; want "done" (a string)`},

		{"pattern/match", "url\n  pattern: '^https?://localhost:[0-9]+/'", obj("url", "http://localhost:6006/x"), true, `value "http://localhost:6006/x" (a string) matches ^https?://localhost:[0-9]+/`},
		{"pattern/mismatch", "url\n  pattern: '^https?://localhost:[0-9]+/'", obj("url", "ftp://example.com/"), false, `value "ftp://example.com/" (a string) does not match ^https?://localhost:[0-9]+/`},
		{"pattern/not a string", "url\n  pattern: '^[0-9]+$'", obj("url", 6006), false, "value is 6006 (a number), not a string"},
		{"pattern/missing", "url\n  pattern: x", obj(), false, "missing"},
		{"pattern/null", "url\n  pattern: x", obj("url", nil), false, "value is null"},

		{"cel/pass", "n\n  cel: 'value > 2 && result.kind == \"x\" && context.env == \"prod\"'", obj("n", 3, "kind", "x"), true, "the condition holds"},
		{"cel/fail", "n\n  cel: 'value > 2'", obj("n", 2), false, "the condition is false (value is 2 (a number))"},
		{"cel/missing is null", "n\n  cel: 'value == null'", obj(), true, "the condition holds"},
		{"cel/error", "n\n  cel: 'value.size() > 0'", obj("n", 5), false, "the condition could not be evaluated: no such overload..."},
		{"cel/error missing key", "n\n  cel: 'result.other == 1'", obj("n", 5), false, "the condition could not be evaluated: no such key: other..."},
		{"cel/dyn not bool", "n\n  cel: 'value'", obj("n", "yes"), false, "the condition could not be evaluated: the condition yielded yes (string), not a bool (writ fails closed)"},

		{"path/list index", "shots[1].ok\n  expect: true", obj("shots", []any{obj("ok", false), obj("ok", true)}), true, "value is true"},
		{"path/list index first", "shots[0].ok\n  expect: true", obj("shots", []any{obj("ok", false), obj("ok", true)}), false, "value is false"},
		{"path/index out of range", "shots[2].ok\n  expect: present", obj("shots", []any{obj("ok", true)}), false, "missing (null counts as absent)"},
		{"path/index into an object", "shots[0]\n  expect: present", obj("shots", obj("0", true)), false, "missing (null counts as absent)"},
		{"path/field of a list", "shots.ok\n  expect: present", obj("shots", []any{obj("ok", true)}), false, "missing (null counts as absent)"},
		{"path/nested lists", "m[0][1]\n  equals: 7", obj("m", []any{[]any{1, 7}}), true, "value equals 7 (a number)"},
		{"path/dashed key", "a-b.c_d\n  expect: true", obj("a-b", obj("c_d", true)), true, "value is true"},
	}
	ctx := map[string]any{"env": "prod"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compile(t, contract("onMissingEvidence: warn\nevidence:\n  - path: "+strings.ReplaceAll(tt.rule, "\n", "\n  ")+"\n    rejectMessage: rejected\n"), "", "")
			v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: tt.result}, 0, ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := must1(t, v)
			if got.Passed != tt.passed {
				t.Errorf("Passed = %v, want %v (detail %q)", got.Passed, tt.passed, got.Detail)
			}
			if want, ok := strings.CutSuffix(tt.detail, "..."); ok {
				if !strings.HasPrefix(got.Detail, want) {
					t.Errorf("Detail = %q, want prefix %q", got.Detail, want)
				}
			} else if got.Detail != tt.detail {
				t.Errorf("Detail = %q, want %q", got.Detail, tt.detail)
			}
			if got.Kind != acceptance.KindEvidence || got.RejectMessage != "rejected" {
				t.Errorf("check = %+v", got)
			}
		})
	}
}

func TestEvidenceCELCostLimit(t *testing.T) {
	c := compile(t, contract("evidence:\n  - path: xs\n    cel: 'value.all(a, value.all(b, value.all(c, true)))'\n    rejectMessage: no\n"), "", "limits: {cel_cost: 1000}\n")
	xs := make([]any, 50)
	v, err := c.Evaluate("w", "s", acceptance.Attempt{Result: obj("xs", xs)}, 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := must1(t, v)
	if got.Passed || !strings.Contains(got.Detail, "cost limit") || !strings.HasSuffix(got.Detail, "(writ fails closed)") {
		t.Errorf("check = %+v, want a failure over the cost limit", got)
	}
	v, err = c.Evaluate("w", "s", acceptance.Attempt{Result: obj("xs", xs[:2])}, 0, nil, 0)
	if err != nil || !must1(t, v).Passed {
		t.Errorf("a small list: verdict = %+v, err = %v", v, err)
	}
}

// obj builds a JSON object from key, value pairs.
func obj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}
