package pack

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/writhq/writ"
)

// Schemas holds the JSON Schemas of pack files, one per kind of file:
// pack.schema.json, spec.schema.json, policy.schema.json,
// controls.schema.json, tools.schema.json, workflow.schema.json,
// workflow-policies.schema.json and test.schema.json, the schema of a
// pack's test files (defs.schema.json is shared).
//
//go:embed schema/*.schema.json
var Schemas embed.FS

const schemaBase = "https://writ.invalid/schema/"

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Schema
	schemasErr  error
)

func loadSchemas() (map[string]*jsonschema.Schema, error) {
	schemasOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		entries, err := fs.ReadDir(Schemas, "schema")
		if err != nil {
			schemasErr = err
			return
		}
		for _, e := range entries {
			data, _ := fs.ReadFile(Schemas, "schema/"+e.Name())
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
			if err != nil {
				schemasErr = fmt.Errorf("schema %s: %w", e.Name(), err)
				return
			}
			if err := c.AddResource(schemaBase+e.Name(), doc); err != nil {
				schemasErr = err
				return
			}
		}
		schemas = map[string]*jsonschema.Schema{}
		for _, name := range []string{"pack", "spec", "policy", "controls", "tools", "workflow", "workflow-policies", "test", "params"} {
			s, err := c.Compile(schemaBase + name + ".schema.json")
			if err != nil {
				schemasErr = fmt.Errorf("schema %s: %w", name, err)
				return
			}
			schemas[name] = s
		}
	})
	return schemas, schemasErr
}

var printer = message.NewPrinter(language.English)

// validate checks doc against the named schema and returns one detail per
// leaf error, each with the line of the offending value.
func validate(name string, doc *document) []writ.Detail {
	all, err := loadSchemas()
	if err != nil {
		return []writ.Detail{{File: doc.path, Message: "internal: pack schemas do not compile: " + err.Error()}}
	}
	return validateWith(all[name], doc)
}

// validateWith checks doc against schema, one detail per leaf error.
func validateWith(schema *jsonschema.Schema, doc *document) []writ.Detail {
	err := schema.Validate(doc.value)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []writ.Detail{{File: doc.path, Message: err.Error()}}
	}
	var out []writ.Detail
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		ptr := ""
		for _, tok := range e.InstanceLocation {
			ptr += "/" + escapePointer(tok)
		}
		where := strings.Join(e.InstanceLocation, ".")
		msg := e.ErrorKind.LocalizedString(printer)
		if where != "" {
			msg = where + ": " + msg
		}
		line := doc.line(ptr)
		if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok && len(ap.Properties) > 0 {
			// Point at the first unknown key rather than at its parent.
			line = doc.line(ptr + "/" + escapePointer(ap.Properties[0]))
			msg = where + ": unknown field " + quoteAll(ap.Properties)
			if where == "" {
				msg = "unknown field " + quoteAll(ap.Properties)
			}
		}
		key := ptr + "\x00" + msg
		if seen[key] {
			return
		}
		seen[key] = true
		out = append(out, writ.Detail{File: doc.path, Line: line, Message: msg})
	}
	walk(ve)
	slices.SortStableFunc(out, func(a, b writ.Detail) int { return a.Line - b.Line })
	return out
}

// compileOutputsSchema compiles a spec's outputs schema (JSON Schema
// 2020-12 unless it names another draft).
func compileOutputsSchema(decisionKey string, doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := schemaBase + "outputs/" + decisionKey + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// problem is an error located in a pack file.
type problem writ.Detail

func (p *problem) Error() string { return writ.Detail(*p).String() }

func problemAt(file string, line int, format string, args ...any) error {
	return &problem{File: file, Line: line, Message: fmt.Sprintf(format, args...)}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func asPathError(err error, target **fs.PathError) bool { return errors.As(err, target) }

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
