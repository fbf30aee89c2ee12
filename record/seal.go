package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/writhq/writ"
)

// The seal of a record is its audit block. In RFC 8785 member order it is
//
//	"audit":{"prev_hash":P,"record_hash":H,"seq":N,"signature":S,"signed_by":K}
//
// and the bytes that record_hash covers are the record's canonical form
// with record_hash, signature and signed_by left out, that is with
//
//	"audit":{"prev_hash":P,"seq":N}
//
// In RFC 8785 order the record's members before "audit" are action_class,
// actor, approval_mode_effective and approvals, all typed by writ, so the
// first occurrence of `"audit":{"prev_hash":"` in a canonical record is
// its top-level audit block. Sealing and splitting rely on that: they
// splice the audit block instead of canonicalizing again. Tests hold both
// against canonicalizing from scratch.

// Seal is what a record is sealed with.
type Seal struct {
	Seq      int64
	PrevHash string
	// Sign, when set, signs the record's hash; it returns the key id
	// (signed_by) and the signature (standard base64).
	Sign func(recordHash string) (keyID, signature string, err error)
}

// SealPresealed seals a presealed record (see Preseal): it returns the
// bytes to store and the record hash.
func SealPresealed(presealed []byte, s Seal) (sealed []byte, hash string, err error) {
	head, tail, hash, err := hashPresealed(presealed, s.Seq, s.PrevHash)
	if err != nil {
		return nil, "", err
	}
	seq := strconv.FormatInt(s.Seq, 10)
	audit := `"audit":{"prev_hash":"` + s.PrevHash + `","record_hash":"` + hash + `","seq":` + seq
	if s.Sign != nil {
		kid, sig, err := s.Sign(hash)
		if err != nil {
			return nil, "", fmt.Errorf("sign record: %w", err)
		}
		if !safeJSONString(kid) || !safeJSONString(sig) {
			return nil, "", fmt.Errorf("signature or key id %q holds characters a seal does not allow", kid)
		}
		audit += `,"signature":"` + sig + `","signed_by":"` + kid + `"`
	}
	audit += `}`
	sealed = make([]byte, 0, len(presealed)+len(audit))
	sealed = append(sealed, head...)
	sealed = append(sealed, audit...)
	sealed = append(sealed, tail...)
	return sealed, hash, nil
}

// PresealedHash returns the record_hash SealPresealed gives a presealed
// record sealed at seq after prevHash, without sealing it: a store
// computes a batch's chain with it and then signs the records in parallel.
func PresealedHash(presealed []byte, seq int64, prevHash string) (string, error) {
	_, _, hash, err := hashPresealed(presealed, seq, prevHash)
	return hash, err
}

// hashPresealed splits a presealed record around its audit block and
// returns the record hash of sealing it at seq after prevHash.
func hashPresealed(presealed []byte, seq int64, prevHash string) (head, tail []byte, hash string, err error) {
	i := bytes.Index(presealed, unsealedAudit)
	if i < 0 {
		return nil, nil, "", fmt.Errorf("record was not presealed")
	}
	if !safeJSONString(prevHash) {
		return nil, nil, "", fmt.Errorf("prev_hash %q is not a digest", prevHash)
	}
	head, tail = presealed[:i], presealed[i+len(unsealedAudit):]
	input := make([]byte, 0, len(presealed)+64)
	input = append(input, head...)
	input = append(input, `"audit":{"prev_hash":"`+prevHash+`","seq":`+strconv.FormatInt(seq, 10)+`}`...)
	input = append(input, tail...)
	sum := sha256.Sum256(input)
	return head, tail, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// safeJSONString reports whether s can be written between JSON quotes as
// is and is canonical there: printable ASCII other than '"' and '\'; and,
// so that a seal's end is its first '}', no braces.
func safeJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '{' || c == '}' {
			return false
		}
	}
	return true
}

// SplitSeal reads the seal of a stored record and returns it with the
// bytes its record_hash covers, without canonicalizing: the stored bytes
// are the sealed bytes, so the hash input is them with the hash and the
// signature members cut out. A verifier checks Digest(input) against
// audit.RecordHash; any change to the stored bytes breaks that equality.
func SplitSeal(raw []byte) (input []byte, audit writ.Audit, err error) {
	audit, start, end, err := readSeal(raw)
	if err != nil {
		return nil, audit, err
	}
	block := hashedBlock(audit)
	input = make([]byte, 0, len(raw))
	input = append(input, raw[:start]...)
	input = append(input, block...)
	input = append(input, raw[end:]...)
	return input, audit, nil
}

// SealDigest reads the seal of a stored record like SplitSeal and returns
// it with the Digest of the bytes its record_hash covers, hashed where
// they lie instead of copied out first: a verifier of many records saves
// a copy and an allocation of each.
func SealDigest(raw []byte) (digest string, audit writ.Audit, err error) {
	audit, start, end, err := readSeal(raw)
	if err != nil {
		return "", audit, err
	}
	h := sha256.New()
	h.Write(raw[:start])
	h.Write([]byte(hashedBlock(audit)))
	h.Write(raw[end:])
	var sum [sha256.Size]byte
	return "sha256:" + hex.EncodeToString(h.Sum(sum[:0])), audit, nil
}

// readSeal reads the audit block of a stored record by its one canonical
// layout and returns it with the block's bounds in raw.
func readSeal(raw []byte) (audit writ.Audit, start, end int, err error) {
	i := bytes.Index(raw, auditPrefix)
	if i < 0 {
		return audit, 0, 0, fmt.Errorf("record has no audit block starting with prev_hash")
	}
	// The stored seal must be exactly the seal writ writes: whitespace, an
	// extra member or another order would change the stored bytes (and
	// the Merkle leaf) without changing what record_hash covers. So the
	// block is read by its one canonical layout, and anything else is
	// refused.
	p := sealParser{b: raw, at: i + len(auditPrefix)}
	audit.PrevHash = p.str()
	p.lit(`,"record_hash":"`)
	audit.RecordHash = p.str()
	p.lit(`,"seq":`)
	audit.Seq = p.int()
	if p.peek(`,"signature":"`) {
		p.lit(`,"signature":"`)
		audit.Signature = p.str()
		p.lit(`,"signed_by":"`)
		audit.SignedBy = p.str()
	}
	p.lit(`}`)
	if p.err != nil {
		return audit, 0, 0, fmt.Errorf("record's audit block is not in canonical form: %w", p.err)
	}
	return audit, i, p.at, nil
}

// hashedBlock is the audit block of the hash input: the seal without
// record_hash, signature and signed_by.
func hashedBlock(a writ.Audit) string {
	return `"audit":{"prev_hash":"` + a.PrevHash + `","seq":` + strconv.FormatInt(a.Seq, 10) + `}`
}

// sealParser reads the canonical audit block; the first error sticks.
type sealParser struct {
	b   []byte
	at  int
	err error
}

func (p *sealParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format+" at byte %d", append(args, p.at)...)
	}
}

func (p *sealParser) peek(s string) bool {
	return p.err == nil && bytes.HasPrefix(p.b[p.at:], []byte(s))
}

func (p *sealParser) lit(s string) {
	if !p.peek(s) {
		p.fail("want %s", s)
		return
	}
	p.at += len(s)
}

// str reads a string value up to its closing quote (the opening one is
// part of the literal before it); seal values are plain printable ASCII.
func (p *sealParser) str() string {
	if p.err != nil {
		return ""
	}
	n := bytes.IndexByte(p.b[p.at:], '"')
	if n < 0 {
		p.fail("unterminated string")
		return ""
	}
	v := string(p.b[p.at : p.at+n])
	if !safeJSONString(v) {
		p.fail("value %q is not a plain seal value", v)
		return ""
	}
	p.at += n + 1
	return v
}

// int reads a canonical non-negative integer (no leading zeros).
func (p *sealParser) int() int64 {
	if p.err != nil {
		return 0
	}
	j := p.at
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	digits := string(p.b[p.at:j])
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != digits {
		p.fail("seq %q is not a canonical integer", digits)
		return 0
	}
	p.at = j
	return v
}

// CheckSealHash splits a stored record's seal and checks its record_hash
// against the bytes it covers.
func CheckSealHash(raw []byte) (writ.Audit, error) {
	input, audit, err := SplitSeal(raw)
	if err != nil {
		return audit, err
	}
	if got := Digest(input); got != audit.RecordHash {
		return audit, fmt.Errorf("record_hash %s does not match the record's bytes (%s)", audit.RecordHash, got)
	}
	return audit, nil
}

// SignatureMessage is what a record's signature covers: a domain
// separation line and the record hash.
func SignatureMessage(recordHash string) []byte {
	return []byte("writ-record-signature-v1\n" + recordHash + "\n")
}
