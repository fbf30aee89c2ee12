package keyring

import (
	"crypto/ed25519"
	"strings"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/writhq/writ/internal/strictb64"
)

// recordVerifier checks record signatures by one key, the hot path of
// ledger verification (one signature per record). It keeps the public key
// expanded, decoded once into curve25519-voi's precomputed form, where
// crypto/ed25519 decodes it again on every call, and verifies with voi's
// crypto/ed25519 semantics: cofactorless, S below the group order, small-
// order and non-canonical A accepted, R compared as canonical bytes. So it
// accepts exactly the signatures ed25519.Verify accepts; verify_test.go
// holds both to that. It is about 30% faster per signature.
//
// Checkpoint notes are verified by note.Open with the note verifiers,
// which use crypto/ed25519.
type recordVerifier struct {
	key *voi.ExpandedPublicKey // nil for a key that is not a curve point
}

// stdlibSemantics is voi's preset for crypto/ed25519 semantics, copied so
// that nothing else can change it.
var stdlibSemantics = &voi.Options{Verify: func() *voi.VerifyOptions {
	o := *voi.VerifyOptionsStdLib
	return &o
}()}

// newRecordVerifier returns the verifier of the note verifier key vkey,
// which the caller has checked with note.NewVerifier.
func newRecordVerifier(vkey string) recordVerifier {
	_, rest, _ := strings.Cut(vkey, "+")
	_, key64, _ := strings.Cut(rest, "+")
	key, err := strictb64.DecodeString(key64)
	if err != nil || len(key) != 1+ed25519.PublicKeySize || key[0] != 1 {
		return recordVerifier{}
	}
	return newRecordVerifierOf(ed25519.PublicKey(key[1:]))
}

// newRecordVerifierOf returns the verifier of the public key pub.
// ed25519.Verify rejects every signature by a key that is not the
// encoding of a curve point, and so does the verifier of such a key.
func newRecordVerifierOf(pub ed25519.PublicKey) recordVerifier {
	if len(pub) != ed25519.PublicKeySize {
		return recordVerifier{}
	}
	key, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		return recordVerifier{}
	}
	return recordVerifier{key: key}
}

// verify reports whether sig is the Ed25519 signature of msg, exactly as
// ed25519.Verify would.
func (v recordVerifier) verify(msg, sig []byte) bool {
	if v.key == nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return voi.VerifyExpandedWithOptions(v.key, msg, sig, stdlibSemantics)
}
