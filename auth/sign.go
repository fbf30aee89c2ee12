package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// Signing binds a stored key to the ledger's signing keys, so that an
// attacker who can write the API key table but holds no signing key cannot
// add a key for themselves or change one: its tenant, subject, roles,
// secret hash, creation time, actor type and acts_for patterns are covered by an Ed25519 signature of
// the key ring (the key that signs records), checked when the key is
// used and by `writ ledger verify`; so is its expiry, when it has one. A
// revocation is not signed: a forged one only denies service, and a
// deleted one cannot be told from one never made, which a key's expiry
// bounds (docs/security.md).

// Signer signs a key's message: a *keyring.Signer.
type Signer interface {
	KeyID() string
	SignMessage(msg []byte) ([]byte, error)
}

// Verifier checks a key's signature, its signing key's id and that the
// signing time lies inside that key's window: a *keyring.Ring.
type Verifier interface {
	VerifyRecordSignature(id string, msg, sig []byte, signedAt time.Time) error
}

// ErrUnsigned is the error Verify returns for a key that carries no
// signature: created before writ signed keys (sign it with `writ keys
// sign` once its row is known to be writ's), or written by someone else.
var ErrUnsigned = errors.New("the API key is not signed")

// signatureDomain separates a key's signature from every other message
// the ring signs (records sign "writ-record-signature-v1").
const signatureDomain = "writ-api-key-signature-v1\n"

// keyDocument is what a key's signature covers, as RFC 8785 JSON. Times
// are RFC 3339 in UTC with nanoseconds, as stored.
type keyDocument struct {
	KeyID      string      `json:"key_id"`
	TenantID   string      `json:"tenant_id"`
	Subject    string      `json:"subject"`
	Roles      []writ.Role `json:"roles"`
	SecretHash string      `json:"secret_hash"`
	CreatedAt  string      `json:"created_at"`
	// ExpiresAt is left out for a key without an expiry, so the
	// signatures of such keys are those of writ before keys expired.
	ExpiresAt string `json:"expires_at,omitempty"`
	// ActorType and ActsFor are left out when unset (an AGENT key that
	// acts for no one else), so the signatures of such keys are those of
	// writ before keys carried them.
	ActorType string   `json:"actor_type,omitempty"`
	ActsFor   []string `json:"acts_for,omitempty"`
	SignedBy  string   `json:"signed_by"`
	SignedAt  string   `json:"signed_at"`
}

// SignatureMessage returns what k's signature covers:
//
//	"writ-api-key-signature-v1\n" + hex(SHA-256(JCS(document))) + "\n"
//
// where the document holds the key's id, tenant, subject, roles, secret
// hash, creation time, expiry time (only when the key has one), actor
// type and acts_for patterns (only when set), signing key id and signing
// time (docs/ledger-format.md §3.5).
func (k *Key) SignatureMessage() ([]byte, error) {
	roles := k.Roles
	if roles == nil {
		roles = []writ.Role{}
	}
	d := keyDocument{
		KeyID: k.ID, TenantID: k.TenantID, Subject: k.Subject, Roles: roles, SecretHash: k.SecretHash,
		CreatedAt: k.CreatedAt.UTC().Format(time.RFC3339Nano),
		SignedBy:  k.SignedBy, SignedAt: k.SignedAt.UTC().Format(time.RFC3339Nano),
		ActorType: k.ActorType, ActsFor: k.ActsFor,
	}
	if k.ExpiresAt != nil {
		d.ExpiresAt = k.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	doc, err := record.Canonical(d)
	if err != nil {
		return nil, fmt.Errorf("API key %s: %w", k.ID, err)
	}
	sum := sha256.Sum256(doc)
	return []byte(signatureDomain + hex.EncodeToString(sum[:]) + "\n"), nil
}

// Sign signs k with s at the clock reading now, setting its SignedBy,
// SignedAt and Signature. s must be the signer of the ring's key valid at
// now (keyring.Ring.Signer(now)).
func Sign(k *Key, s Signer, now time.Time) error {
	k.SignedBy, k.SignedAt = s.KeyID(), now.UTC()
	msg, err := k.SignatureMessage()
	if err != nil {
		return err
	}
	sig, err := s.SignMessage(msg)
	if err != nil {
		return fmt.Errorf("sign API key %s: %w", k.ID, err)
	}
	k.Signature = sig
	return nil
}

// Verify checks k's signature against v: ErrUnsigned when it has none,
// else nil or the ring's error (an unknown signing key, a signature that
// does not verify, a signing time outside the key's window).
func Verify(k *Key, v Verifier) error {
	if k.SignedBy == "" && len(k.Signature) == 0 {
		return ErrUnsigned
	}
	msg, err := k.SignatureMessage()
	if err != nil {
		return err
	}
	return v.VerifyRecordSignature(k.SignedBy, msg, k.Signature, k.SignedAt)
}
