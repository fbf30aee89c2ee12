package lint

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/writhq/writ/pack"
)

// placeholder matches one {{...}} of a step's text.
var placeholder = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// templates checks the placeholders of every step's prompt, retry prompt
// and reject messages: {{context.<key>}} names a key the workflow
// declares in context, and {{steps.<id>.<field>}} names an output a step
// declares, of a step that runs before this one.
func (l *linter) templates(g *graph) {
	for i, s := range g.steps {
		check := func(pos pack.Pos, key, what, text string) {
			if !strings.Contains(text, "{{") {
				return
			}
			at := l.locator(pos, key)
			for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
				l.placeholder(g, i, at(m[0]), fmt.Sprintf("step %s %s: {{%s}}", s.ID, what, m[1]), m[1])
			}
		}
		check(s.PromptPos, "prompt", "prompt", s.Prompt)
		v := s.Verification
		if v == nil {
			continue
		}
		check(v.Pos, "retryPrompt", "retryPrompt", v.RetryPrompt)
		for _, e := range v.Evidence {
			check(e.Pos, "rejectMessage", "evidence "+e.Path+" rejectMessage", e.RejectMessage)
		}
		for _, t := range v.ToolCalls {
			check(t.Pos, "rejectMessage", "tool call "+t.Name+" rejectMessage", t.RejectMessage)
		}
	}
}

// locator returns a function that finds the line of each placeholder, in
// order, of the value of key, whose mapping (or the key itself) is at pos:
// the key's line is the first line at or after pos that holds "key:", and
// the value spans that line and the lines after it that are blank or
// indented deeper than the key. A placeholder not found verbatim there
// (an escaped quoted string, say) is placed on the key's line.
func (l *linter) locator(pos pack.Pos, key string) func(raw string) pack.Pos {
	fallback := func(string) pack.Pos { return pos }
	data, ok := l.source(pos.File)
	if !ok || pos.Line < 1 {
		return fallback
	}
	lines := strings.Split(string(data), "\n")
	first, col := -1, 0
	for i := pos.Line - 1; i < len(lines); i++ {
		c := strings.Index(lines[i], key+":")
		if c < 0 {
			c = strings.Index(lines[i], key+`":`) // JSON
		}
		if c >= 0 {
			first, col = i, c
			break
		}
	}
	if first < 0 {
		return fallback
	}
	last := first
	for i := first + 1; i < len(lines); i++ {
		t := strings.TrimLeft(lines[i], " ")
		if t != "" && len(lines[i])-len(t) <= col {
			break
		}
		last = i
	}
	keyPos := pack.Pos{File: pos.File, Line: first + 1}
	line, off := first, col+len(key)+1 // search after the key
	return func(raw string) pack.Pos {
		for i, o := line, off; i <= last; i, o = i+1, 0 {
			if c := strings.Index(lines[i][o:], raw); c >= 0 {
				line, off = i, o+c+len(raw)
				return pack.Pos{File: pos.File, Line: i + 1}
			}
		}
		return keyPos
	}
}

// source returns the bytes of a pack file named as in positions.
func (l *linter) source(file string) ([]byte, bool) {
	if l.files == nil {
		l.files = map[string][]byte{}
		for _, f := range l.p.Files {
			l.files[filepath.Join(l.p.Dir, filepath.FromSlash(f.Path))] = f.Data
		}
	}
	data, ok := l.files[file]
	return data, ok
}

// longest returns the longest of names that is path or a dotted prefix
// of it, and what follows it (without the dot).
func longest(path string, names []string) (name, rest string, ok bool) {
	for _, n := range names {
		switch {
		case n == path && len(n) > len(name):
			name, rest, ok = n, "", true
		case strings.HasPrefix(path, n+".") && len(n) > len(name):
			name, rest, ok = n, path[len(n)+1:], true
		}
	}
	return name, rest, ok
}

func (l *linter) placeholder(g *graph, cur int, pos pack.Pos, what, expr string) {
	errorf := func(format string, args ...any) {
		l.errorf(pos, RuleTemplate, "%s: %s", what, fmt.Sprintf(format, args...))
	}
	const want = "want {{context.<key>}} or {{steps.<id>.<field>}}"
	switch {
	case strings.HasPrefix(expr, "context."):
		key := expr[len("context."):]
		if _, _, ok := longest(key, g.w.Context); ok {
			return
		}
		if key == "" {
			errorf("%s", want)
			return
		}
		declared := "the workflow declares no context"
		if len(g.w.Context) > 0 {
			declared = "declared: " + strings.Join(g.w.Context, ", ")
		}
		errorf("context key %q is not declared in the workflow's context (%s)", strings.SplitN(key, ".", 2)[0], declared)
	case strings.HasPrefix(expr, "steps."):
		rest := expr[len("steps."):]
		ids := make([]string, len(g.steps))
		for i, s := range g.steps {
			ids[i] = s.ID
		}
		id, field, ok := longest(rest, ids)
		if !ok {
			if rest == "" {
				errorf("%s", want)
				return
			}
			errorf("workflow %s has no step %q", g.w.WorkflowID, strings.SplitN(rest, ".", 2)[0])
			return
		}
		if field == "" {
			errorf("want {{steps.%s.<field>}}: name one of the step's outputs", id)
			return
		}
		field = strings.SplitN(field, ".", 2)[0]
		ref := g.index[id]
		s := g.steps[ref]
		if !slices.Contains(s.Outputs, field) {
			outputs := "it declares no outputs"
			if len(s.Outputs) > 0 {
				outputs = "outputs: " + strings.Join(s.Outputs, ", ")
			}
			errorf("step %s does not declare output %q (%s)", id, field, outputs)
			return
		}
		if ref == cur && !g.ancestors(cur)[ref] {
			errorf("step %s names its own output, which does not exist while it runs", id)
			return
		}
		if !g.ancestors(cur)[ref] {
			errorf("step %s does not come before step %s", id, g.steps[cur].ID)
			return
		}
		switch {
		case ref == cur:
			l.add(pos, RuleTemplate, Warning, "%s: step %s names its own output, which exists only on a later pass through a cycle", what, id)
		case g.reach[cur] && !g.dom[cur][ref]:
			l.add(pos, RuleTemplate, Warning, "%s: step %s may not have run: not every path from the root to step %s passes through it", what, id, g.steps[cur].ID)
		}
	default:
		errorf("%s", want)
	}
}
