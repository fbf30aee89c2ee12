package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// template is a message with {{path}} placeholders, such as
// "Obtain legal review approval for {{args.workflow_ref}}.". A path starts
// with one of the condition variables; a placeholder whose value is absent
// renders as "<path unknown>" so a message never silently loses meaning.
type template struct {
	parts []templatePart
}

type templatePart struct {
	lit  string
	path []string // nil for a literal
}

var placeholder = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)
var pathPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_\-]+)*$`)

func parseTemplate(s string) (template, error) {
	var t template
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > last {
			t.parts = append(t.parts, templatePart{lit: s[last:m[0]]})
		}
		expr := s[m[2]:m[3]]
		if !pathPattern.MatchString(expr) {
			return t, fmt.Errorf("template {{%s}}: want a dotted path such as args.order_id", expr)
		}
		path := strings.Split(expr, ".")
		if !slices.Contains(Variables, path[0]) {
			return t, fmt.Errorf("template {{%s}}: %q is not a variable (want one of %s)", expr, path[0], strings.Join(Variables, ", "))
		}
		t.parts = append(t.parts, templatePart{path: path})
		last = m[1]
	}
	if last < len(s) {
		t.parts = append(t.parts, templatePart{lit: s[last:]})
	}
	return t, nil
}

func (t template) render(v *vars) string {
	if len(t.parts) == 1 && t.parts[0].path == nil {
		return t.parts[0].lit
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
			continue
		}
		val, ok := v.lookup(p.path)
		if !ok {
			b.WriteString("<" + strings.Join(p.path, ".") + " unknown>")
			continue
		}
		b.WriteString(formatValue(val))
	}
	return b.String()
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}
