package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

func TestDecodeStrictKinds(t *testing.T) {
	type shape struct {
		Small int8    `json:"small"`
		Count uint16  `json:"count"`
		Ratio float32 `json:"ratio"`
		Flag  bool    `json:"flag"`
		Any   any     `json:"any"`
		Inner *struct {
			Name string `json:"name"`
		} `json:"inner"`
	}
	tests := []struct {
		body string
		want []writ.Detail
	}{
		{`{"small":127,"count":65535,"ratio":1e30,"flag":true,"any":[{"a":1},"x"],"inner":{"name":"n"}}`, nil},
		{`{"small":null,"count":null,"ratio":null,"flag":null,"any":null,"inner":null}`, nil},
		{`{"small":128}`, []writ.Detail{{Field: "small", Message: "must be an integer that fits in 8 bits, not 128"}}},
		{`{"small":1.5}`, []writ.Detail{{Field: "small", Message: "must be an integer that fits in 8 bits, not 1.5"}}},
		{`{"count":-1}`, []writ.Detail{{Field: "count", Message: "must be a non-negative integer that fits in 16 bits, not -1"}}},
		{`{"ratio":1e39}`, []writ.Detail{{Field: "ratio", Message: "number 1e39 is out of range"}}},
		{`{"any":{"n":1e400}}`, []writ.Detail{{Field: "any.n", Message: "number 1e400 is out of range"}}},
		{`{"flag":"true"}`, []writ.Detail{{Field: "flag", Message: "must be a boolean, not a string"}}},
		{`{"small":false}`, []writ.Detail{{Field: "small", Message: "must be an integer, not a boolean"}}},
		// Decoding stops at the first problem.
		{`{"inner":{"name":{"first":"a"}},"flag":1}`, []writ.Detail{{Field: "inner.name", Message: "must be a string, not an object"}}},
		{`{"any":{"k":[{"x":1,"x":2}]}}`, []writ.Detail{{Field: "any.k[0].x", Message: "duplicate field"}}},
		// Names that look like indexes are names in an object.
		{`{"any":{"0":[{"1":{"2":[3,{"x":1,"x":2}]}}]}}`, []writ.Detail{{Field: "any.0[0].1.2[1].x", Message: "duplicate field"}}},
		// JSON Pointer escapes are undone.
		{`{"inner":{"a/b~c":1}}`, []writ.Detail{{Field: "inner.a/b~c", Message: "unknown field"}}},
		{`{"Flag":true}`, []writ.Detail{{Field: "Flag", Message: "unknown field"}}},
		{`"text"`, []writ.Detail{{Message: "request body must be a JSON object, not a string"}}},
		{` [1]`, []writ.Detail{{Message: "request body must be a JSON object, not an array"}}},
		{`-1`, []writ.Detail{{Message: "request body must be a JSON object, not a number"}}},
		{`true`, []writ.Detail{{Message: "request body must be a JSON object, not a boolean"}}},
	}
	for _, tt := range tests {
		var got []writ.Detail
		err := decodeStrict([]byte(tt.body), &shape{})
		if e, ok := err.(*writ.Error); ok && e.Code == writ.EINVALID {
			got = e.Details
		}
		if (err == nil) != (tt.want == nil) || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("decodeStrict(%s) = %v, details %+v; want details %+v", tt.body, err, got, tt.want)
		}
	}

	// A kind decodeStrict does not know is a bug, not the caller's fault.
	type odd struct {
		C complex128 `json:"c"`
	}
	if err := decodeStrict([]byte(`{"c":1}`), &odd{}); writ.ErrorCode(err) != writ.EINTERNAL {
		t.Errorf("decodeStrict(complex128 field) error = %v, want an internal error", err)
	}
}

// TestDecodeStrictSyntax covers what is malformed, and where: malformed
// JSON anywhere comes before any problem of shape.
func TestDecodeStrictSyntax(t *testing.T) {
	tests := []struct{ body, msg string }{
		{"{\"foo\":1,\n \"x\" 1}", "malformed JSON at line 2, column 6 (byte offset 15)"},
		{`{"foo":1} x`, "single JSON value; unexpected data after it at line 1, column 11 (byte offset 10)"},
		{`[1] x`, "single JSON value"},
		{`[1`, "ends in the middle of a value"},
		{"{\"tenant_id\":\"a\xffb\"}", "malformed JSON at line 1, column 16 (byte offset 15): invalid UTF-8"},
		{"\v{}", "malformed JSON at line 1, column 1"},
	}
	for _, tt := range tests {
		var req writ.CheckRequest
		err := decodeStrict([]byte(tt.body), &req)
		if writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(writ.ErrorMessage(err), tt.msg) {
			t.Errorf("decodeStrict(%q) error = %v, want EINVALID %q", tt.body, err, tt.msg)
		}
	}
}

// TestDecodeCheckRequestAsBefore checks that DecodeCheckRequest decodes
// exactly what encoding/json decoded before it: the values feed digests.
func TestDecodeCheckRequestAsBefore(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*", "requests", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example requests: %v", err)
	}
	bodies := map[string][]byte{
		"edge cases": []byte(`{"tenant_id":"t","subject_ids":[],"arguments":{},"context":{"n":null,"big":12345678901234567890,` +
			`"small":1e-7,"neg":-0,"e":"\u00e9\ud83d\ude00\n","list":[1,"a",[],{}],"deep":{"a":{"b":[true,false]}}},` +
			`"evidence":[null,{"kind":"k","id":"1","observed_at":"2026-05-09T09:10:00.123456789+05:30"}],"actor":null,` +
			`"usage":{"tokens":-9223372036854775808},"scorecard":{"x":1.7976931348623157e308}}`),
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies[f] = data
	}
	for name, data := range bodies {
		var want writ.CheckRequest
		dec := stdjson.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("%s: encoding/json: %v", name, err)
		}
		got, err := DecodeCheckRequest(data)
		if err != nil {
			t.Fatalf("%s: DecodeCheckRequest: %v", name, err)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("%s: DecodeCheckRequest = %+v, encoding/json decoded %+v", name, got, &want)
		}
	}
}

func BenchmarkDecodeCheckRequest(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "examples", "refund", "requests", "refund-allow.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCheckRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
