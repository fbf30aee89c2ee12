// Package strictb64 decodes the base64 that writ stores (signatures, keys,
// checkpoint roots) in its one canonical form, so that one stored value
// never has two encodings.
//
// Canonical means: RFC 4648 §4 standard alphabet, with '=' padding to a
// multiple of four characters, the unused bits of the last character zero
// (base64.StdEncoding.Strict()), and nothing else: no line breaks (which
// encoding/base64 skips even in strict mode), no spaces. It is exactly the
// text base64.StdEncoding.EncodeToString writes for the decoded bytes.
// The package never accepts what it would not write.
package strictb64

import (
	"encoding/base64"
	"errors"
)

// ErrNotCanonical is returned for text that decodes with a lenient base64
// decoder but is not the canonical encoding of what it decodes to.
var ErrNotCanonical = errors.New("not canonical base64 (stray line breaks, padding or non-zero padding bits)")

// DecodeString decodes s, which must be the canonical standard base64 of
// its bytes.
func DecodeString(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	// Strict() still skips '\r' and '\n': the round trip refuses them.
	if base64.StdEncoding.EncodeToString(b) != s {
		return nil, ErrNotCanonical
	}
	return b, nil
}
