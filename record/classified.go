package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// A classified value is a value under a field of a classified redaction
// rule (pack.RedactionRule.Classification). The stored request envelope
// keeps, in its place, a marker naming the rule and a salted commitment
// to the value:
//
//	[classified:<rule id>:sha256:<64 hex digits>]
//
// and the raw value, with its salt, is kept apart, in the classified
// store, until an erasure deletes it. The commitment is
//
//	SHA-256("writ classified value v1\n" || salt || value)
//
// where salt is 32 random bytes and value the RFC 8785 form of the JSON
// value. It is the value's reference too. With the salt it binds the
// value (the store's copy is checked against it before replay uses it);
// without it, it hides the value, however guessable (an amount, a score),
// so erasing the salt with the value leaves nothing in the ledger that
// reveals it, while every record, envelope, proof and checkpoint still
// hashes as sealed.

// ClassifiedSaltLen is the length of a classified value's salt.
const ClassifiedSaltLen = 32

const (
	classifiedOpen   = "[classified:"
	classifiedDomain = "writ classified value v1\n"
	refPrefix        = "sha256:"
	refLen           = len(refPrefix) + 2*sha256.Size
)

// Sealed is a classified value taken out of what is stored: its
// reference (the commitment), the rule and classification that took it,
// its salt and its RFC 8785 JSON.
type Sealed struct {
	Ref            string
	Rule           string
	Classification string
	Salt           []byte
	Value          []byte
}

// Commit is the commitment to value (RFC 8785 JSON) under salt.
func Commit(salt, value []byte) string {
	h := sha256.New()
	h.Write([]byte(classifiedDomain))
	h.Write(salt)
	h.Write(value)
	return refPrefix + hex.EncodeToString(h.Sum(nil))
}

// ClassifiedMarker is what the stored envelope carries in place of a
// classified value.
func ClassifiedMarker(rule, ref string) string {
	return classifiedOpen + rule + ":" + ref + "]"
}

// ParseClassifiedMarker returns the rule and reference of a marker, or
// ok false when s is not one.
func ParseClassifiedMarker(s string) (rule, ref string, ok bool) {
	if !strings.HasPrefix(s, classifiedOpen) || !strings.HasSuffix(s, "]") {
		return "", "", false
	}
	body := s[len(classifiedOpen) : len(s)-1]
	if len(body) < refLen+2 || body[len(body)-refLen-1] != ':' {
		return "", "", false
	}
	rule, ref = body[:len(body)-refLen-1], body[len(body)-refLen:]
	if !strings.HasPrefix(ref, refPrefix) {
		return "", "", false
	}
	if _, err := hex.DecodeString(ref[len(refPrefix):]); err != nil || strings.ToLower(ref) != ref {
		return "", "", false
	}
	return rule, ref, true
}

// Classifies reports whether any rule of the redactor is classified.
func (r *Redactor) Classifies() bool { return r != nil && len(r.classes) > 0 }

// ClassifiedEnvelope is EnvelopeOf with the values under classified
// fields sealed: each becomes ClassifiedMarker(rule, ref) with a fresh
// salt read from random, and is returned as a Sealed for the classified
// store. Everything else is redacted as EnvelopeOf redacts it. A
// redactor without classified rules returns EnvelopeOf's bytes and no
// values.
func ClassifiedEnvelope(req any, red *Redactor, random io.Reader) ([]byte, []Sealed, error) {
	if !red.Classifies() {
		b, err := EnvelopeOf(req, red)
		return b, nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, nil, err
	}
	var sealed []Sealed
	var sealErr error
	out := red.value(v, func(rule string, val any) any {
		if sealErr != nil {
			return nil
		}
		c, err := Canonical(val)
		if err != nil {
			sealErr = fmt.Errorf("classified value under rule %s: %w", rule, err)
			return nil
		}
		salt := make([]byte, ClassifiedSaltLen)
		if _, err := io.ReadFull(random, salt); err != nil {
			sealErr = fmt.Errorf("salt: %w", err)
			return nil
		}
		ref := Commit(salt, c)
		sealed = append(sealed, Sealed{Ref: ref, Rule: rule, Classification: red.classes[rule], Salt: salt, Value: c})
		return ClassifiedMarker(rule, ref)
	})
	if sealErr != nil {
		return nil, nil, sealErr
	}
	env, err := json.Marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return env, sealed, nil
}

// ClassifiedRefs lists the references of the classified values an
// envelope holds, in the order encoding/json walks it (each once).
func ClassifiedRefs(envelope []byte) ([]string, error) {
	if !bytes.Contains(envelope, []byte(classifiedOpen)) {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(envelope, &v); err != nil {
		return nil, err
	}
	var refs []string
	seen := map[string]bool{}
	walkStrings(v, func(s string) (any, bool) {
		if _, ref, ok := ParseClassifiedMarker(s); ok && !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
		return nil, false
	})
	return refs, nil
}

// Unseal returns the envelope with each classified marker replaced by
// its raw value, as value(ref) returns it (salt and RFC 8785 JSON; ok
// false when the store no longer has it). erased lists the references
// value did not have, mismatched those whose stored value and salt do
// not hash to the reference; with either non-empty the bytes are nil.
// An envelope without markers is returned as it is.
func Unseal(envelope []byte, value func(ref string) (salt, val []byte, ok bool)) (out []byte, erased, mismatched []string, err error) {
	if !bytes.Contains(envelope, []byte(classifiedOpen)) {
		return envelope, nil, nil, nil
	}
	var v any
	if err := json.Unmarshal(envelope, &v); err != nil {
		return nil, nil, nil, err
	}
	v = walkStrings(v, func(s string) (any, bool) {
		_, ref, ok := ParseClassifiedMarker(s)
		if !ok {
			return nil, false
		}
		salt, val, ok := value(ref)
		switch {
		case !ok:
			erased = append(erased, ref)
			return nil, false
		case Commit(salt, val) != ref:
			mismatched = append(mismatched, ref)
			return nil, false
		}
		return json.RawMessage(val), true
	})
	if len(erased) > 0 || len(mismatched) > 0 {
		return nil, erased, mismatched, nil
	}
	out, err = json.Marshal(v)
	return out, nil, nil, err
}

// walkStrings returns v with every string s (not map keys) for which
// f(s) answers true replaced by f's value, changing v in place.
func walkStrings(v any, f func(string) (any, bool)) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = walkStrings(e, f)
		}
	case []any:
		for i, e := range x {
			x[i] = walkStrings(e, f)
		}
	case string:
		if r, ok := f(x); ok {
			return r
		}
	}
	return v
}
