package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
)

const msgNull = "must not be null; leave the member out instead"

func bigNumber(n string) string {
	return "number " + n + " is beyond ±9007199254740991 (2^53-1), the largest magnitude writ keeps exactly; send it as a string"
}

func outsideWindow(t string) string {
	return "date-time " + t + " is outside the window writ accepts (from 1970-01-01T00:00:00Z, before 2200-01-01T00:00:00Z)"
}

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
		List  []string   `json:"list"`
		Score float64    `json:"score"`
		When  time.Time  `json:"when"`
		At    *time.Time `json:"at"`
	}
	tests := []struct {
		body string
		want []writ.Detail
	}{
		{`{"small":127,"count":65535,"ratio":1e30,"flag":true,"any":[{"a":1},"x"],"inner":{"name":"n"}}`, nil},
		// null is a value only of free-form data; everywhere else it is
		// refused, naming the member (issue 38).
		{`{"any":null}`, nil},
		{`{"any":{"k":null,"l":[null]}}`, nil},
		{`{"small":null}`, []writ.Detail{{Field: "small", Message: msgNull}}},
		{`{"count":null}`, []writ.Detail{{Field: "count", Message: msgNull}}},
		{`{"ratio":null}`, []writ.Detail{{Field: "ratio", Message: msgNull}}},
		{`{"flag":null}`, []writ.Detail{{Field: "flag", Message: msgNull}}},
		{`{"inner":null}`, []writ.Detail{{Field: "inner", Message: msgNull}}},
		{`{"inner":{"name":null}}`, []writ.Detail{{Field: "inner.name", Message: msgNull}}},
		{`{"list":null}`, []writ.Detail{{Field: "list", Message: msgNull}}},
		{`{"list":[null]}`, []writ.Detail{{Field: "list[0]", Message: msgNull}}},
		{`{"when":null}`, []writ.Detail{{Field: "when", Message: msgNull}}},
		// Numbers are kept exactly up to 2^53-1 in magnitude, and refused
		// beyond: a record's canonical JSON holds IEEE doubles.
		{`{"any":[9007199254740991,-9007199254740991,1.5e-300]}`, nil},
		{`{"any":9007199254740992}`, []writ.Detail{{Field: "any", Message: bigNumber("9007199254740992")}}},
		{`{"any":{"n":9007199254740993}}`, []writ.Detail{{Field: "any.n", Message: bigNumber("9007199254740993")}}},
		{`{"any":[1,-9223372036854775808]}`, []writ.Detail{{Field: "any[1]", Message: bigNumber("-9223372036854775808")}}},
		{`{"any":1e20}`, []writ.Detail{{Field: "any", Message: bigNumber("1e20")}}},
		{`{"score":9223372036854775807}`, []writ.Detail{{Field: "score", Message: bigNumber("9223372036854775807")}}},
		// Date-times lie in a window.
		{`{"when":"1970-01-01T00:00:00Z","at":"2199-12-31T23:59:59.999Z"}`, nil},
		{`{"when":"0001-01-01T00:00:00Z"}`, []writ.Detail{{Field: "when", Message: outsideWindow(`"0001-01-01T00:00:00Z"`)}}},
		{`{"at":"9999-12-31T23:59:59Z"}`, []writ.Detail{{Field: "at", Message: outsideWindow(`"9999-12-31T23:59:59Z"`)}}},
		{`{"at":"yesterday"}`, []writ.Detail{{Field: "at", Message: "must be an RFC 3339 date-time, such as 2026-05-09T09:31:42Z"}}},
		{`{"small":128}`, []writ.Detail{{Field: "small", Message: "must be an integer that fits in 8 bits, not 128"}}},
		{`{"small":1.5}`, []writ.Detail{{Field: "small", Message: "must be an integer that fits in 8 bits, not 1.5"}}},
		{`{"count":-1}`, []writ.Detail{{Field: "count", Message: "must be a non-negative integer that fits in 16 bits, not -1"}}},
		{`{"ratio":1e39}`, []writ.Detail{{Field: "ratio", Message: "number 1e39 is out of range"}}},
		{`{"any":{"n":1e400}}`, []writ.Detail{{Field: "any.n", Message: bigNumber("1e400")}}},
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
		"edge cases": []byte(`{"tenant_id":"t","subject_ids":[],"arguments":{},"context":{"n":null,"big":9007199254740991,` +
			`"small":1e-7,"neg":-0,"e":"\u00e9\ud83d\ude00\n","list":[1,"a",[],{}],"deep":{"a":{"b":[true,false,null]}}},` +
			`"evidence":[{"kind":"k","id":"1","observed_at":"2026-05-09T09:10:00.123456789+05:30"}],` +
			`"usage":{"tokens":-9223372036854775808},"scorecard":{"x":-9007199254740991}}`),
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

// TestDecodeCheckRequestRefuses: what encoding/json let through and
// writ now refuses (issue 38), with the member named.
func TestDecodeCheckRequestRefuses(t *testing.T) {
	for _, tt := range []struct{ body, field, msg string }{
		{`{"tenant_id":"t","actor":null}`, "actor", msgNull},
		{`{"tenant_id":"t","evidence":[null]}`, "evidence[0]", msgNull},
		{`{"tenant_id":"t","idempotency_key":null}`, "idempotency_key", msgNull},
		{`{"tenant_id":"t","arguments":null}`, "arguments", msgNull},
		{`{"tenant_id":"t","arguments":{"amount":9007199254740993}}`, "arguments.amount", bigNumber("9007199254740993")},
		{`{"tenant_id":"t","arguments":{"id":9223372036854775808}}`, "arguments.id", bigNumber("9223372036854775808")},
		{`{"tenant_id":"t","context":{"n":[1e400]}}`, "context.n[0]", bigNumber("1e400")},
		{`{"tenant_id":"t","scorecard":{"x":1.7976931348623157e308}}`, "scorecard.x", bigNumber("1.7976931348623157e308")},
		{`{"tenant_id":"t","evidence":[{"kind":"k","id":"1","observed_at":"0001-01-01T00:00:00Z"}]}`, "evidence[0].observed_at", outsideWindow(`"0001-01-01T00:00:00Z"`)},
	} {
		_, err := DecodeCheckRequest([]byte(tt.body))
		var e *writ.Error
		if !errors.As(err, &e) || e.Code != writ.EINVALID || len(e.Details) != 1 || e.Details[0].Field != tt.field || e.Details[0].Message != tt.msg {
			t.Errorf("DecodeCheckRequest(%s) = %v, want EINVALID naming %s: %s", tt.body, err, tt.field, tt.msg)
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
