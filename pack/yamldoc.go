package pack

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// document is one parsed YAML file: its generic value (for JSON Schema
// validation), its node tree (for typed decoding) and the line of every
// value by JSON pointer (for error messages).
type document struct {
	path  string
	root  *yaml.Node
	value any
	lines map[string]int
}

func parseDocument(path string, data []byte) (*document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(path, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil, problemAt(path, 0, "the file is empty")
	}
	d := &document{path: path, root: root.Content[0], lines: map[string]int{}}
	v, err := d.convert(d.root, "")
	if err != nil {
		return nil, err
	}
	d.value = v
	return d, nil
}

// line returns the line of the value at the JSON pointer ptr, or of its
// nearest ancestor that has one.
func (d *document) line(ptr string) int {
	for {
		if l, ok := d.lines[ptr]; ok {
			return l
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return d.root.Line
		}
		ptr = ptr[:i]
	}
}

// convert turns a YAML node into the JSON data model, refusing what JSON
// cannot express (aliases, non-string keys, NaN).
func (d *document) convert(n *yaml.Node, ptr string) (any, error) {
	d.lines[ptr] = n.Line
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int" && k.Tag != "!!bool") {
				return nil, problemAt(d.path, k.Line, "mapping keys must be strings")
			}
			if _, dup := m[k.Value]; dup {
				return nil, problemAt(d.path, k.Line, "key %q is defined twice", k.Value)
			}
			child := ptr + "/" + escapePointer(k.Value)
			cv, err := d.convert(v, child)
			if err != nil {
				return nil, err
			}
			d.lines[child] = k.Line
			m[k.Value] = cv
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			cv, err := d.convert(c, ptr+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			s = append(s, cv)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, problemAt(d.path, n.Line, "%v", err)
			}
			return b, nil
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, problemAt(d.path, n.Line, "%v", err)
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, problemAt(d.path, n.Line, "%s is not a JSON number", n.Value)
			}
			return json.Number(strconv.FormatFloat(f, 'f', -1, 64)), nil
		case "!!binary":
			// The schema would check the base64 text, and the file's
			// value would be the bytes it encodes.
			return nil, problemAt(d.path, n.Line, "binary values (!!binary) are not supported")
		default:
			return n.Value, nil
		}
	case yaml.AliasNode:
		return nil, problemAt(d.path, n.Line, "YAML aliases are not supported in packs")
	}
	return nil, problemAt(d.path, n.Line, "unsupported YAML node")
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// yamlError prefixes a YAML syntax error with the file name; yaml.v3
// already says "line N".
func yamlError(path string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
		msg = strings.TrimSpace(msg[strings.IndexByte(msg, ':')+1:])
		return problemAt(path, line, "%s", msg)
	}
	return problemAt(path, 0, "%s", msg)
}
