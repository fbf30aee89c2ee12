package httpapi

import (
	"reflect"
	"testing"

	"github.com/writhq/writ"
)

func TestCheckShapeKinds(t *testing.T) {
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
		{`{"count":-1}`, []writ.Detail{{Field: "count", Message: "must be a non-negative integer that fits in 16 bits, not -1"}}},
		{`{"ratio":1e39}`, []writ.Detail{{Field: "ratio", Message: "number 1e39 is out of range"}}},
		{`{"flag":"true"}`, []writ.Detail{{Field: "flag", Message: "must be a boolean, not a string"}}},
		{`{"inner":{"name":{"first":"a"}},"flag":1}`, []writ.Detail{
			{Field: "inner.name", Message: "must be a string, not an object"},
			{Field: "flag", Message: "must be a boolean, not a number"},
		}},
		{`{"any":{"k":[{"x":1,"x":2}]}}`, []writ.Detail{{Field: "any.k[0].x", Message: "duplicate field"}}},
		{`"text"`, []writ.Detail{{Message: "request body must be a JSON object, not a string"}}},
	}
	for _, tt := range tests {
		got, err := checkShape([]byte(tt.body), reflect.TypeFor[shape]())
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("checkShape(%s) = %+v, %v; want %+v", tt.body, got, err, tt.want)
		}
	}

	// A kind checkShape does not know is a bug, not the caller's fault.
	type odd struct {
		C complex128 `json:"c"`
	}
	if got, err := checkShape([]byte(`{"c":1}`), reflect.TypeFor[odd]()); err == nil {
		t.Errorf("checkShape(complex128 field) = %+v, nil; want an error", got)
	}
	if err := decodeStrict([]byte(`{"c":1}`), &odd{}); writ.ErrorCode(err) != writ.EINTERNAL {
		t.Errorf("decodeStrict(complex128 field) error = %v, want an internal error", err)
	}
}
