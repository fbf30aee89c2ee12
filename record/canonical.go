package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/writhq/writ"
)

// Canonical returns the RFC 8785 (JCS) form of v's JSON encoding.
func Canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return canonicalize(b)
}

// Canonicalize returns the RFC 8785 (JCS) form of the JSON text b.
// Members are sorted by their names' UTF-16 code units, strings take their
// shortest escaping, numbers the ECMAScript form of their IEEE 754 double,
// and whitespace goes. Invalid UTF-8, duplicate member names and numbers
// beyond the double range are errors.
func Canonicalize(b []byte) ([]byte, error) {
	return canonicalize(b)
}

// canonicalOpts are jsontext's RFC 8785 options (what Value.Canonicalize
// sets).
var canonicalOpts = []jsontext.Options{
	jsontext.CanonicalizeRawInts(true),
	jsontext.CanonicalizeRawFloats(true),
	jsontext.ReorderRawObjects(true),
}

// maxDouble is the canonical form of the largest double, which jsontext
// also gives a number beyond the double range (1e400).
var maxDouble = []byte("1.7976931348623157e+308")

// canonicalize works on the JSON text as it stands (go-json-experiment's
// jsontext), without decoding it into Go values first; a differential
// fuzz test (FuzzCanonicalizeMatchesJCS) holds it byte-equal to
// gowebpki/jcs, the implementation writ used before.
func canonicalize(b []byte) ([]byte, error) {
	out, err := jsontext.AppendFormat(make([]byte, 0, len(b)), b, canonicalOpts...)
	if err != nil {
		return nil, err
	}
	// RFC 8785 section 3.2.2.3: a number a double cannot hold is an error,
	// where jsontext rounds it to the largest double. Only then is the
	// input scanned again.
	if bytes.Contains(out, maxDouble) {
		if err := checkDoubleRange(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkDoubleRange reports a number of the valid JSON text b that lies
// beyond the double range.
func checkDoubleRange(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if tok.Kind() == '0' {
			if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
				return fmt.Errorf("number %s is not an IEEE 754 double (RFC 8785, 3.2.2.3)", tok.String())
			}
		}
	}
}

// Digest returns "sha256:" and the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CanonicalDigest returns the Digest of v's canonical JSON.
func CanonicalDigest(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return Digest(b), nil
}

// sealFields are the audit fields left out of the hashed bytes: the hash
// itself and the signature over it.
var sealFields = []string{"record_hash", "signed_by", "signature"}

// HashInput returns the bytes a record's record_hash covers, given the
// record's stored JSON: the RFC 8785 form of the record with
// audit.record_hash, audit.signed_by and audit.signature removed.
func HashInput(raw []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("record is not a JSON object: %w", err)
	}
	auditRaw, ok := m["audit"]
	if !ok {
		return nil, fmt.Errorf("record has no audit block")
	}
	var audit map[string]json.RawMessage
	if err := json.Unmarshal(auditRaw, &audit); err != nil {
		return nil, fmt.Errorf("record audit block is not an object: %w", err)
	}
	for _, f := range sealFields {
		delete(audit, f)
	}
	b, err := json.Marshal(audit)
	if err != nil {
		return nil, err
	}
	m["audit"] = b
	b, err = json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return canonicalize(b)
}

// Link is what a record says about its place in the chain.
type Link struct {
	Seq        int64  `json:"seq"`
	PrevHash   string `json:"prev_hash"`
	RecordHash string `json:"record_hash"`
}

// ParseLink reads the audit link of a stored record.
func ParseLink(raw []byte) (Link, error) {
	var r struct {
		Audit Link `json:"audit"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return Link{}, err
	}
	return r.Audit, nil
}

// CheckHash recomputes a stored record's hash and compares it with the
// record_hash it carries.
func CheckHash(raw []byte) (Link, error) {
	link, err := ParseLink(raw)
	if err != nil {
		return link, err
	}
	in, err := HashInput(raw)
	if err != nil {
		return link, err
	}
	if got := Digest(in); got != link.RecordHash {
		return link, fmt.Errorf("record_hash %s does not match the record's canonical bytes (%s)", link.RecordHash, got)
	}
	return link, nil
}

// Equal reports whether two JSON documents have the same canonical form.
func Equal(a, b []byte) bool {
	ca, err1 := Canonicalize(a)
	cb, err2 := Canonicalize(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// auditPrefix opens the top-level audit object of a canonical record. In
// RFC 8785 order the record's members before "audit" are action_class,
// actor, approval_mode_effective and approvals, all typed by writ, so the
// first occurrence of this prefix is the top-level audit block.
var auditPrefix = []byte(`"audit":{"prev_hash":"`)

// AddRecordHash returns the canonical bytes of a record whose canonical
// bytes without audit.record_hash are body, once record_hash is set. The
// member is inserted where RFC 8785 orders it (after prev_hash, before
// seq), so the result equals canonicalizing the whole record again,
// without paying for a second canonicalization.
func AddRecordHash(body []byte, hash string) ([]byte, error) {
	i := bytes.Index(body, auditPrefix)
	if i < 0 {
		return nil, fmt.Errorf("record has no audit block starting with prev_hash")
	}
	start := i + len(auditPrefix)
	end := bytes.IndexByte(body[start:], '"')
	if end < 0 {
		return nil, fmt.Errorf("record's audit.prev_hash is not terminated")
	}
	at := start + end + 1
	member := `,"record_hash":"` + hash + `"`
	out := make([]byte, 0, len(body)+len(member))
	out = append(out, body[:at]...)
	out = append(out, member...)
	return append(out, body[at:]...), nil
}

// unsealedAudit is the canonical audit block of a record before sealing.
var unsealedAudit = []byte(`"audit":{"prev_hash":"","seq":0}`)

// Preseal returns the canonical bytes of rec with an empty audit block
// (prev_hash "" and seq 0). It is the expensive half of sealing and does
// not depend on the chain, so callers run it concurrently; SealBody then
// fills in the chain position cheaply.
func Preseal(rec *writ.Record) ([]byte, error) {
	rec.Audit = writ.Audit{}
	return Canonical(rec)
}
