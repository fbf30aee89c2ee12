package httpapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/writhq/writ"
)

// The OpenAPI document and the decoders describe the same bodies twice:
// FuzzOpenAPIAgreesWithDecoders holds them to each other. A decoder
// checks a body's shape: its members (no unknown or duplicate one), the
// JSON type of each value, no null where the type is not nullable, times
// as RFC 3339 in writ's window, numbers writ keeps exactly. What the
// values must then be (the schema's required, enum, pattern, length and
// bounds) the handler or the engine checks after decoding, with the same
// 400. So for each request body the server decodes, with the shape of its
// component schema (shapeOf: the schema without those value keywords),
//
//   - a body the decoder accepts, the shape accepts: the document never
//     refuses the shape of what the server takes;
//   - a body the decoder refuses, the whole schema refuses too (a decoder
//     insists on a few required members itself), unless each reason it
//     gives is one of the rules JSON Schema does not spell
//     (decoderOnlyRules), which docs/http-api.md documents.
//
// A body the decoder refuses must be refused as EINVALID, never as an
// internal error.

// decodedBodies pairs each decoder with the schema of its body, indexed by
// the fuzz target's first argument (modulo their number).
var decodedBodies = []struct {
	schema string
	decode func([]byte) error
}{
	{"CheckRequest", decodeAs[writ.CheckRequest]},
	{"ExecutionReport", decodeAs[writ.ExecutionReport]},
	{"DecideApprovalBody", decodeAs[decideBody]},
	{"WithdrawApprovalBody", decodeAs[withdrawBody]},
	{"ResumeBody", decodeAs[resumeBody]},
	{"AttemptBody", decodeAs[attemptBody]},
	{"StartRunRequest", decodeAs[writ.StartRunRequest]},
	{"AuthZENEvaluation", decodeAs[azEvaluation]},
	{"AuthZENEvaluations", decodeAs[azEvaluations]},
}

func decodeAs[T any](body []byte) error {
	var v T
	return decodeStrict(body, &v)
}

// decoderOnlyRules are the refusals of the decoder that the schemas do not
// express, each known by its message: an integer a float64 does not hold
// exactly, an instant outside writ's window of time, and what I-JSON (RFC
// 7493) forbids and a JSON Schema validator reads past: a duplicate
// member, a string that is not UTF-8.
var decoderOnlyRules = []string{
	"is beyond ±9007199254740991 (2^53-1)",
	"outside the window",
	"duplicate field",
	"invalid UTF-8",
}

// decoderOnly reports whether every reason err gives is one of
// decoderOnlyRules.
func decoderOnly(err error) bool {
	var e *writ.Error
	if !errors.As(err, &e) {
		return false
	}
	reasons := []string{e.Message}
	if len(e.Details) > 0 {
		reasons = reasons[:0]
		for _, d := range e.Details {
			reasons = append(reasons, d.Message)
		}
	}
	for _, r := range reasons {
		known := false
		for _, rule := range decoderOnlyRules {
			known = known || strings.Contains(r, rule)
		}
		if !known {
			return false
		}
	}
	return true
}

func FuzzOpenAPIAgreesWithDecoders(f *testing.F) {
	shape, whole := compileDocument(f, shapeOf), compileSchemas(f)
	shapes := make([]*jsonschema.Schema, len(decodedBodies))
	wholes := make([]*jsonschema.Schema, len(decodedBodies))
	for i, b := range decodedBodies {
		shapes[i], wholes[i] = shape(b.schema), whole(b.schema)
	}
	seeds := map[string][]string{
		"CheckRequest": {
			`{"tenant_id":"acme","tool":"t","arguments":{"a":[1,2.5,"x",null,true]}}`,
			`{"tenant_id":"acme","actor":{"type":"AGENT","id":"a"},"tool":"payments.issue_refund","arguments":{"amount_inr":9007199254740993}}`,
			`{"tenant_id":"acme","actor":null}`,
			`{"tenant_id":"acme","evidence":[{"ref":"e","observed_at":"0001-01-01T00:00:00Z"}]}`,
			`{"tenant_id":1}`,
		},
		"ExecutionReport": {
			`{"status":"succeeded","tool_result_id":"tr_121","started_at":"2026-05-09T09:31:50Z","ended_at":"2026-05-09T09:31:52Z"}`,
			`{"status":"failed","error":{"code":"provider_down","message":"503"},"usage":{"tokens":12,"cost_usd_cents":0.5}}`,
			`{"status":"succeeded","tool_result_id":null}`,
			`{"status":"succeeded","ended_at":"9999-12-31T23:59:59Z"}`,
		},
		"DecideApprovalBody":   {`{"approver":"usr_lead","reason":"ok","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`, `{"reason":null}`, `{}`},
		"WithdrawApprovalBody": {`{"reason":"no longer needed"}`, `{}`, `{"trace_id":null}`},
		"ResumeBody":           {`{"request":{"tool":"payments.issue_refund","arguments":{"amount_inr":15000}},"wait":"30s"}`, `{"wait":null}`},
		"AttemptBody":          {`{"actor":{"type":"AGENT","id":"a"},"result":{"ok":true},"tool_calls":[{"tool":"x","args":{}}]}`, `{"tool_calls":null}`},
		"StartRunRequest":      {`{"tenant_id":"acme","workflow":"w","run_id":"r1"}`, `{"tenant_id":"acme","inputs":{"n":-5}}`},
		"AuthZENEvaluation": {
			`{"subject":{"type":"agent","id":"a"},"action":{"name":"payments.issue_refund","properties":{"amount_inr":-5}},"resource":{"type":"customer","id":"c1"},"context":{"tenant_id":"acme"}}`,
			`{"subject":null}`,
		},
		"AuthZENEvaluations": {
			`{"subject":{"type":"agent","id":"a"},"evaluations":[{"action":{"name":"x"},"resource":{"type":"customer","id":"c1"}}]}`,
			`{"evaluations":[]}`,
		},
	}
	for i, b := range decodedBodies {
		if len(seeds[b.schema]) == 0 {
			f.Fatalf("no seeds for %s", b.schema)
		}
		for _, s := range seeds[b.schema] {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		i := int(which) % len(decodedBodies)
		b := decodedBodies[i]
		decErr := b.decode(body)
		if decErr != nil && writ.ErrorCode(decErr) != writ.EINVALID {
			t.Fatalf("decoding %s %q = %v, want an EINVALID error", b.schema, body, decErr)
		}
		shapeErr := validate(shapes[i], body)
		switch {
		case decErr == nil && shapeErr != nil:
			t.Fatalf("the decoder accepts %s %q, the shape of its OpenAPI schema refuses it: %v", b.schema, body, shapeErr)
		case decErr != nil && validate(wholes[i], body) == nil && !decoderOnly(decErr):
			t.Fatalf("the OpenAPI schema accepts %s %q, the decoder refuses it for a reason the document does not give: %v", b.schema, body, describeError(decErr))
		}
	})
}

// valueKeywords are the JSON Schema keywords that constrain a value
// rather than its shape; shapeOf drops them. (format stays for
// date-time, which the decoder parses.)
var valueKeywords = []string{"required", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
	"enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}

// shapeOf strips the value keywords from every component schema of the
// OpenAPI document doc, in place.
func shapeOf(doc map[string]any) {
	var walk func(v any)
	walkAll := func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, s := range v {
				walk(s)
			}
		case []any:
			for _, s := range v {
				walk(s)
			}
		}
	}
	walk = func(v any) {
		s, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range valueKeywords {
			delete(s, k)
		}
		if f, ok := s["format"]; ok && f != "date-time" {
			delete(s, "format")
		}
		for _, k := range []string{"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"} {
			walk(s[k])
		}
		for _, k := range []string{"properties", "patternProperties", "$defs", "allOf", "anyOf", "oneOf", "prefixItems"} {
			walkAll(s[k])
		}
	}
	walkAll(doc["components"].(map[string]any)["schemas"])
}

// describeError spells err with its details.
func describeError(err error) string {
	var e *writ.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	s := e.Message
	for _, d := range e.Details {
		s += "; " + d.Field + ": " + d.Message
	}
	return s
}
