package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 (JCS) form of v's JSON encoding.
func Canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
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
	return jcs.Transform(b)
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
	ca, err1 := jcs.Transform(a)
	cb, err2 := jcs.Transform(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
