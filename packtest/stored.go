package packtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
)

// compareRecord compares the fields of the sealed record that e names by
// dotted path (expect.record) with the values it wants: equal as JSON
// values (RFC 8785 forms compared), a missing field failing.
func (r *caseRun) compareRecord(prefix string, e pack.Expectation, d decided) {
	want, _ := e.Want.(map[string]any)
	if d.raw == nil {
		r.fail(e.Pos, prefix+"record", want, "nothing (the check has no decision record)")
		return
	}
	dec := json.NewDecoder(bytes.NewReader(d.raw))
	dec.UseNumber()
	var rec any
	if err := dec.Decode(&rec); err != nil {
		r.fail(e.Pos, prefix+"record", want, "the sealed record does not decode: "+err.Error())
		return
	}
	for _, path := range slices.Sorted(maps.Keys(want)) {
		got, ok := lookupPath(rec, strings.Split(path, "."))
		if !ok {
			r.fail(e.Pos, prefix+"record."+path, want[path], "nothing (the record has no "+path+")")
			continue
		}
		if !sameJSON(want[path], got) {
			r.fail(e.Pos, prefix+"record."+path, want[path], got)
		}
	}
}

// lookupPath follows a dotted path through decoded JSON: a name selects
// an object member, a number a list element.
func lookupPath(v any, path []string) (any, bool) {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b any) bool {
	ca, err1 := canonicalJSON(a)
	cb, err2 := canonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

func canonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	val := jsontext.Value(b)
	if err := val.Canonicalize(); err != nil {
		return nil, err
	}
	return val, nil
}

// compareStored checks expect.stored against what the case's ledger
// keeps for the check: its request envelope (after redaction), its
// sealed record and its receipt. A value in absent must be in none of
// them; a text in present must be in the envelope. The redaction rules
// whose placeholders the envelope holds are covered.
func (r *caseRun) compareStored(ctx context.Context, expect []pack.Expectation, d decided) {
	var e *pack.Expectation
	for i := range expect {
		if expect[i].Field == "stored" {
			e = &expect[i]
		}
	}
	if e == nil || d.err != nil {
		return
	}
	if d.rec == nil {
		r.fail(e.Pos, "stored", e.Want, "nothing (the check has no decision record)")
		return
	}
	rec := d.rec
	envelope, err := r.st.Envelope(ctx, rec.TenantID, rec.Audit.Seq, rec.Replay.ReplayPacketID)
	if err != nil {
		r.fail(e.Pos, "stored", e.Want, "the stored envelope cannot be read: "+describe(err))
		return
	}
	receipt, err := r.st.Receipt(ctx, rec.TenantID, rec.RecordID)
	if err != nil {
		r.fail(e.Pos, "stored", e.Want, "the stored receipt cannot be read: "+describe(err))
		return
	}
	for _, rr := range r.s.Pack.Controls.Redaction {
		if bytes.Contains(envelope, []byte(record.Placeholder(rr.ID))) {
			r.cov.redacted(rr.ID)
		}
	}
	want, _ := e.Want.(map[string]any)
	for _, v := range asStrings(want["absent"]) {
		for _, where := range []struct {
			name string
			data []byte
		}{{"request envelope", envelope}, {"sealed record", d.raw}, {"receipt", receipt}} {
			if containsJSONText(where.data, v) {
				r.fail(e.Pos, "stored.absent", v, fmt.Sprintf("%q is in the stored %s", v, where.name))
			}
		}
	}
	for _, v := range asStrings(want["present"]) {
		if !containsJSONText(envelope, v) {
			r.fail(e.Pos, "stored.present", v, fmt.Sprintf("%q is not in the stored request envelope", v))
		}
	}
}

// containsJSONText reports whether JSON data holds text, as it is or as
// JSON encodes it inside a string.
func containsJSONText(data []byte, text string) bool {
	if bytes.Contains(data, []byte(text)) {
		return true
	}
	enc, err := json.Marshal(text)
	if err != nil {
		return false
	}
	return bytes.Contains(data, enc[1:len(enc)-1])
}

func asStrings(v any) []string {
	var out []string
	for _, x := range asAnyList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asAnyList(v any) []any {
	l, _ := v.([]any)
	return l
}
