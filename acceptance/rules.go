package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"

	"github.com/writhq/writ/pack"
)

// Evidence expectations.
const (
	expectTrue = iota + 1
	expectFalse
	expectPresent
	expectAbsent
	expectEquals
	expectPattern
	expectCEL
)

type evidenceRule struct {
	rule    *pack.EvidenceRule
	path    []segment
	kind    int
	equals  any // in JSON form
	pattern *regexp.Regexp
	prg     cel.Program
	ast     *cel.Ast
}

func (r *evidenceRule) check(in *input) Check {
	ch := Check{Kind: KindEvidence, Target: r.rule.Path, RejectMessage: r.rule.RejectMessage}
	val, found := resolve(in.result, r.path)
	present := found && val != nil
	ch.Passed, ch.Detail = r.test(in, val, found, present)
	return ch
}

func (r *evidenceRule) test(in *input, val any, found, present bool) (bool, string) {
	switch r.kind {
	case expectTrue, expectFalse:
		want := r.kind == expectTrue
		if !present {
			return false, absence(found)
		}
		if b, ok := val.(bool); ok {
			return b == want, "value is " + strconv.FormatBool(b)
		}
		return false, fmt.Sprintf("value is %s, not %t", describe(val), want)
	case expectPresent:
		if !present {
			return false, absence(found) + " (null counts as absent)"
		}
		return true, "value is " + describe(val)
	case expectAbsent:
		if present {
			return false, "value is present: " + describe(val)
		}
		return true, absence(found)
	case expectEquals:
		if !found {
			return false, "missing; want " + describe(r.equals)
		}
		if reflect.DeepEqual(val, r.equals) {
			return true, "value equals " + describe(r.equals)
		}
		return false, fmt.Sprintf("value is %s, want %s", describe(val), describe(r.equals))
	case expectPattern:
		if !present {
			return false, absence(found)
		}
		s, ok := val.(string)
		if !ok {
			return false, fmt.Sprintf("value is %s, not a string", describe(val))
		}
		if r.pattern.MatchString(s) {
			return true, fmt.Sprintf("value %s matches %s", describe(s), r.pattern)
		}
		return false, fmt.Sprintf("value %s does not match %s", describe(s), r.pattern)
	case expectCEL:
		ok, err := evalBool(r.prg, map[string]any{"value": val, "result": in.result, "context": in.context})
		switch {
		case err != nil:
			return false, fmt.Sprintf("the condition could not be evaluated: %v (writ fails closed)", err)
		case ok:
			return true, "the condition holds"
		}
		return false, "the condition is false (value is " + describe(val) + ")"
	}
	return false, "the rule has no expectation" // unreachable: Compile refuses it
}

func absence(found bool) string {
	if found {
		return "value is null"
	}
	return "missing"
}

type toolCallRule struct {
	rule *pack.ToolCallRule
	min  int
	prg  cel.Program // nil: every call counts
	// observed is set when only observed calls count: the default, and
	// always on a mutating step that is not exempted.
	observed bool
	// overridden is set when the rule writes observed: false on a
	// mutating step that is not exempted, which counts observed calls
	// all the same.
	overridden bool
}

// check counts the calls that meet the rule. Observed calls always
// count; claimed calls count unless the rule requires observed calls, and
// a claimed call that matches an observed one (same name, deeply equal
// arguments) is the same call, counted once.
func (r *toolCallRule) check(in *input) Check {
	name := r.rule.Name
	ch := Check{Kind: KindToolCall, Target: name, RejectMessage: r.rule.RejectMessage}
	if ch.RejectMessage == "" {
		by := ""
		switch {
		case r.rule.Executed:
			by = " observed by writ and reported executed"
		case r.observed:
			by = " observed by writ"
		}
		ch.RejectMessage = fmt.Sprintf("At least %s to %s%s %s required.", count(r.min, "call"), name, by, plural(r.min, "is", "are"))
	}

	var observed, executed, claimed, unmet int
	var evalErr error
	meets := func(c ToolCall, obs bool) bool {
		if r.prg == nil {
			return true
		}
		ok, err := evalBool(r.prg, map[string]any{"call": map[string]any{"name": c.Name, "args": c.Args, "result": c.Result, "observed": obs, "executed": c.Executed}})
		if err != nil && evalErr == nil {
			evalErr = err
		}
		if !ok {
			unmet++
		}
		return ok
	}
	seen := make([]bool, len(in.observed))
	for i, c := range in.observed {
		if c.Name == name {
			seen[i] = true
			if meets(c, true) {
				observed++
				if c.Executed {
					executed++
				}
			}
		}
	}
	used := make([]bool, len(in.observed))
	for _, c := range in.claimed {
		if c.Name != name || matchObserved(in.observed, seen, used, c) {
			continue
		}
		if meets(c, false) {
			claimed++
		}
	}

	var b strings.Builder
	if r.rule.Executed {
		ch.Passed = executed >= r.min
		fmt.Fprintf(&b, "%s: %s, need %d", name, count(executed, "executed call"), r.min)
		if observed > executed {
			fmt.Fprintf(&b, "; %s allowed but not reported succeeded", count(observed-executed, "observed call"))
		}
		if claimed > 0 {
			fmt.Fprintf(&b, "; %s that writ did not observe %s not count", count(claimed, "claimed call"), plural(claimed, "does", "do"))
		}
	} else if r.observed {
		ch.Passed = observed >= r.min
		fmt.Fprintf(&b, "%s: %s, need %d", name, count(observed, "observed call"), r.min)
		if claimed > 0 {
			fmt.Fprintf(&b, "; %s that writ did not observe %s not count", count(claimed, "claimed call"), plural(claimed, "does", "do"))
		}
		if r.overridden {
			b.WriteString(" (the step is mutating and not exempted, so observed: false does not let claimed calls count)")
		}
	} else {
		ch.Passed = observed+claimed >= r.min
		fmt.Fprintf(&b, "%s: %s (%d observed, %d claimed), need %d", name, count(observed+claimed, "call"), observed, claimed, r.min)
	}
	if unmet > 0 {
		fmt.Fprintf(&b, "; %s did not meet the when condition", count(unmet, "call"))
	}
	if evalErr != nil {
		fmt.Fprintf(&b, " (%v; writ fails closed)", evalErr)
	}
	ch.Detail = b.String()
	return ch
}

// claimedOnly lists the claimed calls that match no observed call (same
// name, deeply equal arguments; each observed call matches one claim).
func claimedOnly(in *input) []string {
	out := []string{}
	used := make([]bool, len(in.observed))
	for _, c := range in.claimed {
		named := make([]bool, len(in.observed))
		for i, o := range in.observed {
			named[i] = o.Name == c.Name
		}
		if !matchObserved(in.observed, named, used, c) {
			out = append(out, c.Name)
		}
	}
	return out
}

// matchObserved reports whether claimed call c is one of the observed
// calls of the same name not yet matched, and marks that call matched.
func matchObserved(observed []ToolCall, named, used []bool, c ToolCall) bool {
	for i, o := range observed {
		if named[i] && !used[i] && reflect.DeepEqual(o.Args, c.Args) {
			used[i] = true
			return true
		}
	}
	return false
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// segment is one step of an evidence path: a field or a list index.
type segment struct {
	key     string
	index   int
	isIndex bool
}

// parsePath parses a dotted path with [n] list indexes: "a.b[0].c".
func parsePath(p string) ([]segment, error) {
	var segs []segment
	rest := p
	for first := true; rest != ""; first = false {
		switch {
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed [", p)
			}
			n, err := strconv.Atoi(rest[1:end])
			if err != nil || n < 0 || strings.HasPrefix(rest[1:end], "+") {
				return nil, fmt.Errorf("path %q: %q is not a list index", p, rest[1:end])
			}
			segs = append(segs, segment{index: n, isIndex: true})
			rest = rest[end+1:]
		case first || rest[0] == '.':
			if !first {
				rest = rest[1:]
			}
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, fmt.Errorf("path %q: empty field name", p)
			}
			segs = append(segs, segment{key: rest[:end]})
			rest = rest[end:]
		default:
			return nil, fmt.Errorf("path %q: unexpected %q", p, rest[:1])
		}
	}
	if len(segs) == 0 || segs[0].isIndex {
		return nil, fmt.Errorf("path %q must start with a field name", p)
	}
	return segs, nil
}

// resolve returns the value at path in v (a JSON value) and whether the
// path exists.
func resolve(v any, path []segment) (any, bool) {
	for _, s := range path {
		if s.isIndex {
			l, ok := v.([]any)
			if !ok || s.index >= len(l) {
				return nil, false
			}
			v = l[s.index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// jsonValue returns v in its JSON form: objects map[string]any, lists
// []any, numbers float64.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// describe renders a JSON value briefly, with its kind.
func describe(v any) string {
	var kind string
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		kind = "a bool"
	case float64:
		kind = "a number"
	case string:
		kind = "a string"
	case []any:
		kind = "a list"
	case map[string]any:
		kind = "an object"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a JSON value
	s := strings.TrimSpace(buf.String())
	if r := []rune(s); len(r) > 80 {
		s = string(r[:77]) + "..."
	}
	return s + " (" + kind + ")"
}
