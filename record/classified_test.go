package record

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/writhq/writ/pack"
)

func classifiedRedactor() *Redactor {
	return NewRedactor([]*pack.RedactionRule{
		{ID: "pan", Fields: []string{"card_number"}},
		{ID: "fin", Fields: []string{"fraud_score", "order_total"}, Classification: "confidential"},
	})
}

// TestClassifiedEnvelope: a classified field leaves the envelope as a
// marker whose commitment binds the value under its salt, a plain
// redaction stays a placeholder, everything else is kept; Unseal puts
// the values back as they were, reports an erased or changed value, and
// the redacted forms (Map) are those of a plain redaction.
func TestClassifiedEnvelope(t *testing.T) {
	red := classifiedRedactor()
	req := map[string]any{"context": map[string]any{"fraud_score": 0.05, "order_total": 18000, "status": "ok", "nested": []any{map[string]any{"fraud_score": nil}}},
		"arguments": map[string]any{"card_number": "4111"}}
	env, sealed, err := ClassifiedEnvelope(req, red, bytes.NewReader(bytes.Repeat([]byte{7}, 1024)))
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != 3 {
		t.Fatalf("ClassifiedEnvelope sealed %d values, want 3", len(sealed))
	}
	for _, raw := range []string{"0.05", "18000", "4111"} {
		if strings.Contains(string(env), raw) {
			t.Errorf("envelope %s holds %s", env, raw)
		}
	}
	if !strings.Contains(string(env), `"[redacted:pan]"`) || !strings.Contains(string(env), `"status":"ok"`) {
		t.Errorf("envelope %s: want the plain redaction and the unclassified value kept", env)
	}
	byRef := map[string]Sealed{}
	for _, s := range sealed {
		if s.Rule != "fin" || s.Classification != "confidential" || Commit(s.Salt, s.Value) != s.Ref {
			t.Errorf("sealed %+v does not commit to its value under rule fin", s)
		}
		byRef[s.Ref] = s
	}
	refs, err := ClassifiedRefs(env)
	if err != nil || len(refs) != 3 {
		t.Fatalf("ClassifiedRefs = %v, %v; want 3", refs, err)
	}
	lookup := func(ref string) ([]byte, []byte, bool) { s, ok := byRef[ref]; return s.Salt, s.Value, ok }
	out, erased, mismatched, err := Unseal(env, lookup)
	if err != nil || erased != nil || mismatched != nil {
		t.Fatalf("Unseal = %v %v %v", erased, mismatched, err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	c := got["context"].(map[string]any)
	if c["fraud_score"] != 0.05 || c["order_total"] != float64(18000) || c["nested"].([]any)[0].(map[string]any)["fraud_score"] != nil {
		t.Errorf("Unseal put back %v, want the original values", c)
	}
	if m := red.Map(req["context"].(map[string]any)); m["fraud_score"] != "[redacted:fin]" {
		t.Errorf("Map(context)[fraud_score] = %v, want the plain placeholder", m["fraud_score"])
	}

	// One value erased, one changed.
	delete(byRef, refs[0])
	s := byRef[refs[1]]
	s.Value = []byte("0.9")
	byRef[refs[1]] = s
	out, erased, mismatched, err = Unseal(env, lookup)
	if err != nil || out != nil || len(erased) != 1 || erased[0] != refs[0] || len(mismatched) != 1 || mismatched[0] != refs[1] {
		t.Errorf("Unseal after an erasure and a change = %s, erased %v, mismatched %v, %v", out, erased, mismatched, err)
	}
}

func TestParseClassifiedMarker(t *testing.T) {
	ref := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in         string
		rule, want string
		ok         bool
	}{
		{ClassifiedMarker("fin", ref), "fin", ref, true},
		{ClassifiedMarker("a:b", ref), "a:b", ref, true},
		{"[classified:fin:" + strings.ToUpper(ref[7:]) + "]", "", "", false},
		{"[classified::" + ref + "]", "", "", false},
		{"[classified:fin:sha256:abc]", "", "", false},
		{"[redacted:fin]", "", "", false},
		{ClassifiedMarker("fin", "sha512:"+strings.Repeat("ab", 32)), "", "", false},
	} {
		rule, got, ok := ParseClassifiedMarker(tc.in)
		if rule != tc.rule || got != tc.want || ok != tc.ok {
			t.Errorf("ParseClassifiedMarker(%q) = %q, %q, %v; want %q, %q, %v", tc.in, rule, got, ok, tc.rule, tc.want, tc.ok)
		}
	}
}

// FuzzUnseal: whatever a stored envelope holds, Unseal either fails or
// returns JSON, and every marker it reads round-trips.
func FuzzUnseal(f *testing.F) {
	ref := "sha256:" + strings.Repeat("ab", 32)
	f.Add([]byte(`{"a":"` + ClassifiedMarker("fin", ref) + `"}`))
	f.Add([]byte(`["[classified:x:sha256:00]",1,null]`))
	f.Fuzz(func(t *testing.T, env []byte) {
		out, erased, _, err := Unseal(env, func(string) ([]byte, []byte, bool) { return nil, nil, false })
		if err != nil {
			return
		}
		if len(erased) == 0 && bytes.Contains(env, []byte(classifiedOpen)) && !json.Valid(out) {
			t.Fatalf("Unseal(%q) = %q, not JSON", env, out)
		}
		for _, r := range erased {
			if rule, got, ok := ParseClassifiedMarker(ClassifiedMarker("r", r)); !ok || got != r || rule != "r" {
				t.Fatalf("marker of %q does not round-trip", r)
			}
		}
	})
}
