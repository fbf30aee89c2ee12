package record

import (
	"encoding/json"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Redactor applies a pack's redaction rules before anything is stored:
// values under a listed field name (at any depth, case-insensitive) are
// replaced whole, and matches of a listed pattern inside any string are
// replaced. The replacement names the rule, "[redacted:<rule id>]", and
// keeps no hash of the value: the values redaction exists for (card
// numbers, national ids) are too guessable for a hash to hide them.
type Redactor struct {
	rules   []*pack.RedactionRule
	fields  map[string]string // lower-case field name → rule id
	classes map[string]string // classified rule id → its classification
}

// NewRedactor returns the redactor of rules; with no rules it changes nothing.
func NewRedactor(rules []*pack.RedactionRule) *Redactor {
	r := &Redactor{rules: rules, fields: map[string]string{}}
	for _, rule := range rules {
		if rule.Classification != "" {
			if r.classes == nil {
				r.classes = map[string]string{}
			}
			r.classes[rule.ID] = rule.Classification
		}
		for _, f := range rule.Fields {
			if _, ok := r.fields[strings.ToLower(f)]; !ok {
				r.fields[strings.ToLower(f)] = rule.ID
			}
		}
	}
	return r
}

// Active reports whether any rule is configured.
func (r *Redactor) Active() bool { return r != nil && len(r.rules) > 0 }

func marker(id string) string { return "[redacted:" + id + "]" }

// Placeholder is what redaction rule id leaves in place of what it
// removes: "[redacted:<id>]".
func Placeholder(id string) string { return marker(id) }

// String redacts pattern matches inside s.
func (r *Redactor) String(s string) string {
	if !r.Active() {
		return s
	}
	for _, rule := range r.rules {
		for _, re := range rule.Patterns {
			if re.MatchString(s) {
				s = re.ReplaceAllLiteralString(s, marker(rule.ID))
			}
		}
	}
	return s
}

// Strings redacts each string of ss, returning a new slice when any changed.
func (r *Redactor) Strings(ss []string) []string {
	if !r.Active() || ss == nil {
		return ss
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = r.String(s)
	}
	return out
}

// Value returns a redacted deep copy of a JSON value (the data model of
// encoding/json: maps, slices, strings, numbers, booleans, nil).
//
// A classified rule's fields are redacted like any other here: only the
// stored request envelope keeps a reference to them (ClassifiedEnvelope).
func (r *Redactor) Value(v any) any {
	if !r.Active() {
		return v
	}
	return r.value(v, nil)
}

// value is Value; with seal, the value under a field of a classified
// rule becomes what seal returns for it.
func (r *Redactor) value(v any, seal func(rule string, v any) any) any {
	switch x := v.(type) {
	case map[string]any:
		return r.mapOf(x, seal)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.value(e, seal)
		}
		return out
	case string:
		return r.String(x)
	}
	return v
}

// Map returns a redacted deep copy of m (nil stays nil).
func (r *Redactor) Map(m map[string]any) map[string]any {
	if !r.Active() || m == nil {
		return m
	}
	return r.mapOf(m, nil)
}

func (r *Redactor) mapOf(m map[string]any, seal func(rule string, v any) any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if id, ok := r.fields[strings.ToLower(k)]; ok {
			if _, classified := r.classes[id]; classified && seal != nil {
				out[k] = seal(id, v)
				continue
			}
			out[k] = marker(id)
			continue
		}
		out[k] = r.value(v, seal)
	}
	return out
}

// Envelope returns the JSON of the request as writ stores it for replay:
// the whole request, redacted, as encoding/json writes it (struct fields in
// declaration order, map keys sorted). Its Digest, over exactly these
// stored bytes, is the record's replay.replay_packet_id.
func Envelope(req *writ.CheckRequest, red *Redactor) ([]byte, error) {
	return EnvelopeOf(req, red)
}

// EnvelopeOf is Envelope for any request writ stores (a check, a step
// attempt).
func EnvelopeOf(req any, red *Redactor) ([]byte, error) {
	if !red.Active() {
		return json.Marshal(req)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.Marshal(red.Value(v))
}
