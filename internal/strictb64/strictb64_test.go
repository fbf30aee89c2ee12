package strictb64

import (
	"bytes"
	"encoding/base64"
	"testing"
)

func TestDecodeString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []byte // nil: refused
	}{
		{"", []byte{}},
		{"AA==", []byte{0}},
		{"AQ==", []byte{1}},
		{"AB==", nil},   // non-zero padding bits: "AB==" and "AA==" would both read as 0x00
		{"AAB=", nil},   // the same with one byte of padding
		{"AA", nil},     // missing padding
		{"AA=", nil},    // short padding
		{"AA==\n", nil}, // a line break that encoding/base64 skips
		{"A\nA==", nil},
		{" AA==", nil},
		{"AA-_", nil}, // URL alphabet
		{"AAAA", []byte{0, 0, 0}},
	} {
		got, err := DecodeString(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("DecodeString(%q) = %x, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("DecodeString(%q) = %x, %v, want %x", tc.in, got, err, tc.want)
		}
	}
}

func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{"", "AA==", "AB==", "AAAA", "AA==\n", "desRvmcbyDmXhTGWo5DGFmJbn0t/RmY3Ctt/nL7cMTRF8set/IyOr2OOP76tX1eMQkO3IJr+LypLGSqIN4zsDQ=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := DecodeString(s)
		if err != nil {
			return
		}
		// Whatever is accepted is exactly what writ writes.
		if enc := base64.StdEncoding.EncodeToString(b); enc != s {
			t.Fatalf("DecodeString(%q) accepted text whose canonical form is %q", s, enc)
		}
	})
}
