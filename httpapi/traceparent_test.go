package httpapi

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseTraceparent(t *testing.T) {
	const (
		trace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent = "00f067aa0ba902b7"
	)
	tests := []struct {
		values []string
		want   traceparent
		ok     bool
	}{
		{[]string{"00-" + trace + "-" + parent + "-01"}, traceparent{trace, parent, 1, ""}, true},
		{[]string{"00-" + trace + "-" + parent + "-00"}, traceparent{trace, parent, 0, ""}, true},
		{[]string{" 00-" + trace + "-" + parent + "-03 "}, traceparent{trace, parent, 3, ""}, true},
		{[]string{"01-" + trace + "-" + parent + "-01"}, traceparent{trace, parent, 1, ""}, true},
		{[]string{"fe-" + trace + "-" + parent + "-01-anything"}, traceparent{trace, parent, 1, ""}, true},
		{nil, traceparent{}, false},
		{[]string{""}, traceparent{}, false},
		{[]string{"00-" + trace + "-" + parent + "-01", "00-" + trace + "-" + parent + "-01"}, traceparent{}, false},
		{[]string{"00-" + trace + "-" + parent + "-01-"}, traceparent{}, false},
		{[]string{"01-" + trace + "-" + parent + "-01x"}, traceparent{}, false},
		{[]string{"ff-" + trace + "-" + parent + "-01"}, traceparent{}, false},
		{[]string{"0g-" + trace + "-" + parent + "-01"}, traceparent{}, false},
		{[]string{"00-" + strings.ToUpper(trace) + "-" + parent + "-01"}, traceparent{}, false},
		{[]string{"00-" + trace + "-" + strings.ToUpper(parent) + "-01"}, traceparent{}, false},
		{[]string{"00-" + trace + "-" + parent + "-0A"}, traceparent{}, false},
		{[]string{"00-" + strings.Repeat("0", 32) + "-" + parent + "-01"}, traceparent{}, false},
		{[]string{"00-" + trace + "-" + strings.Repeat("0", 16) + "-01"}, traceparent{}, false},
		{[]string{"00_" + trace + "_" + parent + "_01"}, traceparent{}, false},
		{[]string{"00-" + trace[:31] + "-" + parent + "-01"}, traceparent{}, false},
		{[]string{"00-" + trace + "-" + parent + "-1"}, traceparent{}, false},
	}
	for _, tt := range tests {
		got, ok := parseTraceparent(tt.values)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseTraceparent(%q) = %+v, %v; want %+v, %v", tt.values, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFormatTraceparent(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	// The first eight random bytes are zeros: an all-zero span id is never used.
	rand := bytes.NewReader(append(make([]byte, 8), 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1))
	got, err := formatTraceparent(trace, 0xff, rand)
	if want := "00-" + trace + "-deadbeef00000001-01"; got != want || err != nil {
		t.Errorf("formatTraceparent(%s, 0xff) = %q, %v; want %q", trace, got, err, want)
	}
	if tp, ok := parseTraceparent([]string{got}); !ok || tp != (traceparent{trace, "deadbeef00000001", 1, ""}) {
		t.Errorf("parseTraceparent(%q) = %+v, %v; want it back", got, tp, ok)
	}
	if got, err := formatTraceparent(trace, 0, bytes.NewReader(nil)); err == nil {
		t.Errorf("formatTraceparent with an empty random source = %q, want an error", got)
	}
}

func TestParseTracestate(t *testing.T) {
	long := "a=" + strings.Repeat("x", 255)
	var many []string
	for i := range 33 {
		many = append(many, "k"+strings.Repeat("k", i)+"=v")
	}
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{"absent", nil, ""},
		{"one entry", []string{"congo=t61rcWkgMzE"}, "congo=t61rcWkgMzE"},
		{"two headers form one list", []string{"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7"}, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{"spaces around entries", []string{"congo=t61rcWkgMzE , rojo=00f067aa0ba902b7"}, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{"multi-tenant key", []string{"fw529a3039@dt=abc"}, "fw529a3039@dt=abc"},
		{"uppercase key", []string{"Congo=t61rcWkgMzE"}, ""},
		{"no value separator", []string{"congo"}, ""},
		{"duplicate key", []string{"congo=a,congo=b"}, ""},
		{"33 entries", []string{strings.Join(many, ",")}, ""},
		{"over 512 bytes", []string{long + "," + "b=" + strings.Repeat("y", 255)}, ""},
	}
	for _, tt := range tests {
		if got := parseTracestate(tt.values); got != tt.want {
			t.Errorf("%s: parseTracestate(%q) = %q, want %q", tt.name, tt.values, got, tt.want)
		}
	}
}
