package lint

import (
	"maps"
	"slices"
	"strings"

	"github.com/writhq/writ/pack"
)

// toolOutputs warns about a tool whose spec has an outputs_schema that
// the outputs the tool proposes (tools.yaml outputs) cannot meet: an
// output the schema requires and the tool does not propose, or one the
// tool proposes and the schema does not allow (additionalProperties:
// false). The MCP gateway's check of such a call carries the proposed
// outputs only, so the schema refuses every call of the tool through the
// gateway. A caller of the HTTP API sends its own outputs, so this is a
// warning.
func (l *linter) toolOutputs() {
	tools := make([]*pack.Tool, 0, len(l.p.Tools))
	for _, t := range l.p.Tools {
		tools = append(tools, t)
	}
	slices.SortFunc(tools, func(a, b *pack.Tool) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tools {
		s := l.p.Specs[t.DecisionKey]
		if s == nil {
			continue
		}
		doc, ok := s.OutputsSchemaDoc.(map[string]any)
		if !ok {
			continue
		}
		var missing []string
		for _, v := range asStrings(doc["required"]) {
			if _, ok := t.Outputs[v]; !ok {
				missing = append(missing, v)
			}
		}
		if len(missing) > 0 {
			l.add(t.Pos, RuleToolOutputs, Warning, "tool %s's spec %s has an outputs_schema that requires %s, which %s's outputs do not propose: its calls through the MCP gateway are refused by the schema (docs/mcp.md, Proposed outputs)", t.Name, s.DecisionKey, strings.Join(missing, ", "), t.Name)
		}
		props, _ := doc["properties"].(map[string]any)
		if open, ok := doc["additionalProperties"].(bool); ok && !open {
			var extra []string
			for _, name := range slices.Sorted(maps.Keys(t.Outputs)) {
				if _, ok := props[name]; !ok {
					extra = append(extra, name)
				}
			}
			if len(extra) > 0 {
				l.add(t.Pos, RuleToolOutputs, Warning, "tool %s proposes outputs %s, which the outputs_schema of its spec %s does not allow (additionalProperties: false): its calls through the MCP gateway are refused by the schema (docs/mcp.md, Proposed outputs)", t.Name, strings.Join(extra, ", "), s.DecisionKey)
			}
		}
	}
}

// asStrings returns the strings of a YAML list, skipping anything else.
func asStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
