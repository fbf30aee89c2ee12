package record_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/writhq/writ/record"
)

// TestCanonicalizeRFC8785Vectors runs the scheme's reference test data.
func TestCanonicalizeRFC8785Vectors(t *testing.T) {
	inputs, err := filepath.Glob("testdata/rfc8785/input/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata/rfc8785/output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := record.Canonicalize(src)
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", name, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Canonicalize(%s) =\n%s\nwant\n%s", name, got, want)
			}
		})
	}
}

// TestCanonicalizeNumbers checks numbers against the ECMAScript forms of
// RFC 8785's appendix B (IEEE 754 bits, then the expected text).
func TestCanonicalizeNumbers(t *testing.T) {
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
		{0x4340000000000001, "9007199254740994"},
		{0x4340000000000002, "9007199254740996"},
	} {
		f := math.Float64frombits(tc.bits)
		in := strconv.FormatFloat(f, 'g', -1, 64)
		got, err := record.Canonicalize([]byte(in))
		if err != nil {
			t.Errorf("Canonicalize(%s): %v", in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Canonicalize(%s) (bits %016x) = %s, want %s", in, tc.bits, got, tc.want)
		}
	}
}

// TestCanonicalizeKeepsItsInput: Canonicalize must not write into the
// caller's bytes.
func TestCanonicalizeKeepsItsInput(t *testing.T) {
	in := []byte(`{ "b" : 1, "a" : [ 2 , 1.0 ] }`)
	keep := bytes.Clone(in)
	got, err := record.Canonicalize(in)
	if err != nil || string(got) != `{"a":[2,1],"b":1}` || !bytes.Equal(in, keep) {
		t.Errorf("Canonicalize(%s) = %s, %v; input now %s", keep, got, err, in)
	}
}

// FuzzCanonicalizeMatchesJCS holds record.Canonicalize byte-equal to
// gowebpki/jcs, the RFC 8785 implementation writ used before, on every
// JSON text either accepts; records sealed by either verify under the
// other. The one allowed difference is strictness: Canonicalize refuses
// duplicate member names and invalid UTF-8 (encoding/json, which builds
// every text writ canonicalizes, produces neither).
func FuzzCanonicalizeMatchesJCS(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `true`, `0`, `-0`, `-1.5e-7`, `1e21`, `1e-7`, `5e-324`, `123456789012345678901234567890`,
		`{"b":[1,{"d":2,"c":"x"}],"a":"\u00e9\u2028<>&\u001f\"\\"}`,
		`{"\ud83d\ude00":1,"\ue000":2,"a":3}`,
		`{"€":1e21,"audit":{"prev_hash":"x","seq":1}}`,
		`"\u0000\b\f\n\r\t\/"`,
		` [ 1 , 2.50 , -0.0 , 1E+2 ] `,
	} {
		f.Add([]byte(s))
	}
	if pre, err := record.Preseal(sampleRecord()); err == nil {
		f.Add(pre)
	}
	if b, err := json.Marshal(sampleRecord()); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantErr := jcs.Transform(bytes.Clone(in))
		got, err := record.Canonicalize(in)
		switch {
		case err == nil && wantErr == nil:
			if !bytes.Equal(got, want) {
				t.Fatalf("Canonicalize(%q) = %q, jcs.Transform = %q", in, got, want)
			}
		case err == nil && wantErr != nil:
			t.Fatalf("Canonicalize(%q) = %q, but jcs.Transform refuses it: %v", in, got, wantErr)
		case err != nil && wantErr == nil:
			// Only what encoding/json never produces may be refused.
			if json.Valid(in) && utf8.Valid(in) && !hasDuplicateNames(in) {
				t.Fatalf("Canonicalize(%q) refuses what jcs.Transform canonicalizes to %q: %v", in, want, err)
			}
		}
	})
}

// hasDuplicateNames reports whether some object of the valid JSON text in
// names a member twice (after unescaping).
func hasDuplicateNames(in []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(in))
	type frame struct {
		object bool
		names  map[string]bool
		key    bool // the next string token is a member name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.key
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, names: map[string]bool{}, key: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if isKey {
				if top.names[v] {
					return true
				}
				top.names[v] = true
				top.key = false
				continue
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}
