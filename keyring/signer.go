package keyring

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ/internal/strictb64"
)

// signerKey is a parsed note signer key. The private key is reachable
// only through the sign closure (as in note's own signer): neither fmt,
// whatever the verb and however deep the value sits in another, nor
// encoding/json nor reflection can show a closure's captured variables.
type signerKey struct {
	name string
	hash uint32
	vkey string      // the matching note verifier key
	note note.Signer // note's own signer for the same key
	sign func(msg []byte) []byte
}

// errSignerKey never includes the key text.
var errSignerKey = errors.New("not a note Ed25519 signer key (PRIVATE+KEY+<name>+<hash>+<keydata>)")

// parseSignerKey parses a note signer key text,
// "PRIVATE+KEY+<name>+<hash>+base64(0x01 || 32-byte seed)". note.NewSigner
// validates it (name, hash against the derived public key); the seed is
// decoded here so that messages can be signed with crypto/ed25519. Errors
// never include the key text.
func parseSignerKey(skey string) (*signerKey, error) {
	skey = strings.TrimSpace(skey)
	ns, err := note.NewSigner(skey)
	if err != nil {
		return nil, errSignerKey
	}
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 {
		return nil, errSignerKey
	}
	raw, err := strictb64.DecodeString(parts[4])
	defer clear(raw)
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return nil, errSignerKey
	}
	priv := ed25519.NewKeyFromSeed(raw[1:])
	vkey, err := note.NewEd25519VerifierKey(ns.Name(), priv.Public().(ed25519.PublicKey))
	if err != nil || !strings.HasPrefix(vkey, KeyID(ns.Name(), ns.KeyHash())+"+") {
		return nil, errSignerKey
	}
	sign := func(msg []byte) []byte { return ed25519.Sign(priv, msg) }
	return &signerKey{name: ns.Name(), hash: ns.KeyHash(), vkey: vkey, note: ns, sign: sign}, nil
}

// ExternalSigner signs with a key that writ does not hold, for example in
// a KMS. Sign must return the 64-byte Ed25519 signature of msg by the key
// named by KeyID (whose note name and key hash are Name and KeyHash).
type ExternalSigner interface {
	KeyID() string
	Name() string
	KeyHash() uint32
	Sign(msg []byte) ([]byte, error)
}

// Signer signs with one key of a ring. It implements note.Signer, so it
// can sign notes (checkpoints) with note.Sign, and SignMessage signs record
// messages with the same key. A Signer is immutable and safe for
// concurrent use. It never logs, and it formats as its key id only.
type Signer struct {
	key    Key
	hash   uint32
	verify note.Verifier
	// Either note and sign are set (writ holds the private key, reachable
	// only through these closures) or ext is (the key is held elsewhere).
	note note.Signer
	sign func(msg []byte) []byte
	ext  ExternalSigner
}

var _ note.Signer = (*Signer)(nil)

// Name returns the key's note name.
func (s *Signer) Name() string { return s.key.Name }

// KeyHash returns the key's note key hash.
func (s *Signer) KeyHash() uint32 { return s.hash }

// KeyID returns the key's id, "name+hash": the record's audit.signed_by.
func (s *Signer) KeyID() string { return s.key.ID }

// Key returns the public description of the signing key.
func (s *Signer) Key() Key { return s.key.clone() }

// Sign signs a note text (note.Signer). Use note.Sign rather than calling
// it directly.
func (s *Signer) Sign(msg []byte) ([]byte, error) {
	if s.note != nil {
		return s.note.Sign(msg)
	}
	return s.signExternal(msg)
}

// SignMessage returns the Ed25519 signature of msg (64 bytes) by the key.
// The caller chooses msg and must domain-separate it (see the package
// documentation). The signature verifies with VerifyRecordSignature.
//
// Signer does not know the time: the caller picks the Signer with
// Ring.Signer at the time it will date the signed record with, so that
// the record's time lies inside the key's window.
func (s *Signer) SignMessage(msg []byte) ([]byte, error) {
	if s.sign != nil {
		return s.sign(msg), nil
	}
	return s.signExternal(msg)
}

// signExternal signs with the external signer and checks the signature
// against the key's public key, so that a misconfigured KMS (another key,
// another algorithm) fails at signing time instead of producing records
// that never verify.
func (s *Signer) signExternal(msg []byte) ([]byte, error) {
	if s.ext == nil {
		return nil, fmt.Errorf("keyring: signer %s has no key", s.key.ID)
	}
	sig, err := s.ext.Sign(msg)
	if err != nil {
		return nil, fmt.Errorf("external signer for %s: %w", s.key.ID, err)
	}
	if len(sig) != ed25519.SignatureSize || !s.verify.Verify(msg, sig) {
		return nil, fmt.Errorf("external signer for %s returned a signature that does not verify under %s", s.key.ID, s.key.VerifierKey)
	}
	return sig, nil
}

// String returns "keyring.Signer(<key id>)". It never shows key material.
func (s *Signer) String() string {
	if s == nil {
		return "keyring.Signer(nil)"
	}
	return "keyring.Signer(" + s.key.ID + ")"
}

// GoString is String: %#v shows no key material either.
func (s *Signer) GoString() string { return s.String() }

// Format prints String for every verb.
func (s *Signer) Format(f fmt.State, verb rune) { io.WriteString(f, s.String()) }
