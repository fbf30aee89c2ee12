package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors of Verify. Each says why a delivery must be rejected; none of
// them is worth retrying with the same header.
var (
	// ErrMalformedSignature: the header does not parse (no "t", two of
	// them, no "v1", a field without "=", a value of the wrong form).
	ErrMalformedSignature = errors.New("webhook: malformed signature header")
	// ErrStaleSignature: the timestamp is further from now than the
	// tolerance, in either direction. The delivery may be a replay.
	ErrStaleSignature = errors.New("webhook: signature timestamp outside tolerance")
	// ErrSignatureMismatch: no v1 signature matches the body under the
	// secret.
	ErrSignatureMismatch = errors.New("webhook: signature does not match")
)

// Sign returns the Writ-Signature header value of body sent at t under
// secret: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks a Writ-Signature header against the raw body a receiver
// got, following the steps of the package documentation: it returns nil
// only if the header's timestamp is within tolerance of now and one of its
// v1 signatures matches, compared in constant time. Otherwise it returns
// an error wrapping ErrMalformedSignature, ErrStaleSignature or
// ErrSignatureMismatch, or an error about its own arguments: a secret
// shorter than MinSecretSize or a tolerance that is not positive (the
// zero values must not verify anything).
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secret) < MinSecretSize {
		return fmt.Errorf("webhook: the secret has %d bytes; it needs at least %d", len(secret), MinSecretSize)
	}
	if tolerance <= 0 {
		return errors.New("webhook: the tolerance must be positive")
	}
	ts, sigs, err := parseSignature(header)
	if err != nil {
		return err
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp out of range", ErrMalformedSignature)
	}
	sent := time.Unix(t, 0)
	if now.Sub(sent) > tolerance || sent.Sub(now) > tolerance {
		return fmt.Errorf("%w: signed at %s, now is %s", ErrStaleSignature, sent.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		// Every candidate is compared, so the time taken does not say
		// which one matched.
		ok = hmac.Equal(s, want) || ok
	}
	if !ok {
		return ErrSignatureMismatch
	}
	return nil
}

// parseSignature splits a Writ-Signature header into its timestamp digits
// and its decoded v1 signatures, ignoring fields with other keys.
func parseSignature(header string) (ts string, sigs [][]byte, err error) {
	seenT := false
	for field := range strings.SplitSeq(header, ",") {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return "", nil, fmt.Errorf("%w: field %q has no '='", ErrMalformedSignature, truncate(field))
		}
		switch key {
		case "t":
			if seenT {
				return "", nil, fmt.Errorf("%w: more than one t", ErrMalformedSignature)
			}
			if !isDigits(value) {
				return "", nil, fmt.Errorf("%w: t is not decimal digits", ErrMalformedSignature)
			}
			seenT, ts = true, value
		case "v1":
			s, err := hex.DecodeString(value)
			if err != nil || len(s) != sha256.Size {
				return "", nil, fmt.Errorf("%w: v1 is not %d hexadecimal digits", ErrMalformedSignature, 2*sha256.Size)
			}
			sigs = append(sigs, s)
		}
	}
	if !seenT {
		return "", nil, fmt.Errorf("%w: no t", ErrMalformedSignature)
	}
	if len(sigs) == 0 {
		return "", nil, fmt.Errorf("%w: no v1", ErrMalformedSignature)
	}
	return ts, sigs, nil
}

// mac is HMAC-SHA256(secret, ts "." body).
func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// truncate shortens untrusted input quoted in an error.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
