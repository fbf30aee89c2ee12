package lint

import (
	"slices"
	"strings"

	"github.com/writhq/writ/pack"
)

// captures warns about a tool whose spec requires evidence another tool
// captures (tools.yaml captures) but that names no subject_ids: the MCP
// gateway cites captured items only to calls whose subject ids share one
// with the item's, so calls of that tool through the gateway never cite
// what the session captured, and are refused for want of it.
func (l *linter) captures() {
	captured := map[string][]string{} // kind → tools capturing it
	tools := make([]*pack.Tool, 0, len(l.p.Tools))
	for _, t := range l.p.Tools {
		tools = append(tools, t)
		if t.Captures != nil {
			captured[t.Captures.Kind] = append(captured[t.Captures.Kind], t.Name)
		}
	}
	slices.SortFunc(tools, func(a, b *pack.Tool) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tools {
		s := l.p.Specs[t.DecisionKey]
		if s == nil || len(t.SubjectIDs) > 0 {
			continue
		}
		for _, r := range s.RequiredEvidence {
			by := captured[r.Kind]
			if len(by) == 0 {
				continue
			}
			slices.Sort(by)
			l.add(t.Pos, RuleEvidenceCapture, Warning, "tool %s's spec %s requires %s evidence, which %s captures, but %s names no subject_ids: the MCP gateway cites a captured item only to a call that shares a subject id with it, so its calls through the gateway are refused for want of it (docs/mcp.md, Evidence from tool results)", t.Name, s.DecisionKey, r.Kind, strings.Join(by, ", "), t.Name)
		}
	}
}
