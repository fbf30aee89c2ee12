package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// goValueMarks are what fmt prints for Go values no person should read
// in an error: a struct pointer, a map, a bad verb.
var goValueMarks = []string{"&{", "map[", "%!", "<nil>", "0x"}

// TestOutputsSchemaMessagesForPeople feeds validateOutputs a value that
// breaks each keyword an outputs schema can use, and scans every message
// for Go value formatting (issue 38: "outputs.currency: &{USD INR}").
func TestOutputsSchemaMessagesForPeople(t *testing.T) {
	schemaDoc := `{
	  "type": "object",
	  "required": ["currency"],
	  "additionalProperties": false,
	  "properties": {
	    "currency": {"enum": ["USD", "INR"]},
	    "amount": {"type": "number", "minimum": 0, "maximum": 1000, "multipleOf": 0.5},
	    "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
	    "kind": {"const": "refund"},
	    "code": {"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 3, "maxLength": 3},
	    "when": {"type": "string", "format": "date-time"},
	    "tags": {"type": "array", "minItems": 1, "maxItems": 2, "uniqueItems": true, "items": {"type": "string"}},
	    "meta": {"type": "object", "minProperties": 1, "maxProperties": 1, "propertyNames": {"pattern": "^[a-z]+$"}},
	    "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
	    "any": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
	    "all": {"allOf": [{"type": "integer"}, {"minimum": 10}]},
	    "not": {"not": {"type": "string"}},
	    "dep": {"type": "object", "dependentRequired": {"a": ["b"]}},
	    "has": {"type": "array", "contains": {"const": 1}}
	  }
	}`
	var doc any
	if err := json.Unmarshal([]byte(schemaDoc), &doc); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("outputs.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("outputs.json")
	if err != nil {
		t.Fatal(err)
	}
	spec := &pack.Spec{DecisionKey: "refund", Version: "1", OutputsSchema: sch}
	for _, outputs := range []string{
		`{"currency": "EUR"}`,
		`{}`,
		`{"currency": "USD", "extra": 1}`,
		`{"currency": "USD", "amount": "ten"}`,
		`{"currency": "USD", "amount": -5}`,
		`{"currency": "USD", "amount": 5000}`,
		`{"currency": "USD", "amount": 0.3}`,
		`{"currency": "USD", "ratio": 0}`,
		`{"currency": "USD", "ratio": 1}`,
		`{"currency": "USD", "kind": "sale"}`,
		`{"currency": "USD", "code": "ab"}`,
		`{"currency": "USD", "code": "ABCD"}`,
		`{"currency": "USD", "when": "yesterday"}`,
		`{"currency": "USD", "tags": []}`,
		`{"currency": "USD", "tags": ["a", "b", "c"]}`,
		`{"currency": "USD", "tags": ["a", "a"]}`,
		`{"currency": "USD", "tags": [1]}`,
		`{"currency": "USD", "meta": {}}`,
		`{"currency": "USD", "meta": {"A": 1, "b": 2}}`,
		`{"currency": "USD", "either": 1.5}`,
		`{"currency": "USD", "any": 1}`,
		`{"currency": "USD", "all": 5}`,
		`{"currency": "USD", "not": "s"}`,
		`{"currency": "USD", "dep": {"a": 1}}`,
		`{"currency": "USD", "has": [2]}`,
	} {
		var v map[string]any
		if err := json.Unmarshal([]byte(outputs), &v); err != nil {
			t.Fatal(err)
		}
		err := validateOutputs(spec, v)
		e, ok := err.(*writ.Error)
		if !ok || len(e.Details) == 0 {
			t.Errorf("validateOutputs(%s) = %v, want an error with details", outputs, err)
			continue
		}
		texts := []string{e.Message}
		for _, d := range e.Details {
			texts = append(texts, d.Message)
		}
		for _, text := range texts {
			for _, mark := range goValueMarks {
				if strings.Contains(text, mark) {
					t.Errorf("validateOutputs(%s): message %q holds Go value formatting %q", outputs, text, mark)
				}
			}
		}
	}
}
