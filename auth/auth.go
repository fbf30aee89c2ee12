// Package auth issues and checks API keys.
//
// An API key belongs to one tenant and holds one or more roles. Its token,
// shown once when the key is created, is
//
//	writ_<key id>_<secret>
//
// where the key id is "key_" and 26 lowercase base32 characters and the
// secret is 64 lowercase hex digits (32 random bytes). Stores keep the key
// id, the tenant, the subject, the roles, the actor type and acts_for
// patterns (docs/trust.md) and the SHA-256 of the secret,
// never the secret: a high-entropy secret needs no slow hash, and a
// stolen table of hashes opens nothing. A key may carry an expiry time,
// which its signature covers. A key is revoked by appending a revocation;
// keys are never updated or deleted.
package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
)

// Key is a stored API key.
type Key struct {
	ID       string      `json:"key_id"`
	TenantID string      `json:"tenant_id"`
	Subject  string      `json:"subject"`
	Roles    []writ.Role `json:"roles"`
	// ActorType is the actor type the key acts as: AGENT, HUMAN or
	// SERVICE; empty means AGENT. The key's principal (ActorType and
	// Subject) is the actor of every check it makes (docs/trust.md).
	ActorType string `json:"actor_type,omitempty"`
	// ActsFor are the principals the key may act for besides its own
	// ("TYPE:ID" patterns, writ.ValidActsFor): an orchestrator's SERVICE
	// key acting for its agents, say. A record made that way names the
	// key's principal as the actor's acted_by. Both are covered by the
	// key's signature when set.
	ActsFor []string `json:"acts_for,omitempty"`
	// SecretHash is the hex SHA-256 of the token's secret.
	SecretHash string    `json:"-"`
	CreatedAt  time.Time `json:"created_at"`
	// ExpiresAt, when set, is when the key stops opening anything. It is
	// part of what the key's signature covers, so it cannot be moved or
	// removed without the signing key; a key that expires bounds how long
	// a stolen token is worth something, whatever happens to its
	// revocation.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// RevokedAfter, for a revoked key, is the seq of its tenant's chain
	// head when the store took the revocation (0 before the tenant's
	// first record): every checkpoint of a larger tree commits to the
	// revocation (ledger.RevocationsLine). Stores set it; nil when the
	// store holds none.
	RevokedAfter *int64 `json:"-"`
	// SignedBy is the id of the signing key that signed the key (a
	// keyring key id, "name+hash"), SignedAt when, and Signature the
	// Ed25519 signature of SignatureMessage. All three are empty for a
	// key that is not signed.
	SignedBy  string    `json:"signed_by,omitempty"`
	SignedAt  time.Time `json:"signed_at,omitzero"`
	Signature []byte    `json:"-"`
}

// Store keeps API keys. Both writ stores implement it.
type Store interface {
	// PutAPIKey stores a new key; an existing id is an ECONFLICT error.
	PutAPIKey(ctx context.Context, k *Key) error
	// APIKey returns a key by id (revoked or not), or ENOTFOUND.
	APIKey(ctx context.Context, id string) (*Key, error)
	// APIKeys lists the keys of a tenant (of every tenant when tenantID is
	// empty), oldest first, revoked ones included.
	APIKeys(ctx context.Context, tenantID string) ([]*Key, error)
	// RevokeAPIKey revokes a key from at on. Revoking a revoked key is a
	// no-op; an unknown id is ENOTFOUND.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
	// SignAPIKey stores the signature of a key stored without one (see
	// Sign): k's SignedBy, SignedAt and Signature. An unknown id is
	// ENOTFOUND; a key that is signed already is ECONFLICT. PutAPIKey
	// stores the signature of a key that has one.
	SignAPIKey(ctx context.Context, k *Key) error
}

// Prefix starts every token.
const Prefix = "writ_"

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewKey creates a key for tenant and subject with roles, and returns it
// with its token. random defaults to crypto/rand.
func NewKey(tenantID, subject string, roles []writ.Role, now time.Time, random io.Reader) (*Key, string, error) {
	if random == nil {
		random = rand.Reader
	}
	if tenantID == "" {
		return nil, "", writ.Errorf(writ.EINVALID, "an API key needs a tenant")
	}
	// The tenant is held to the rule every request is held to, so that
	// no key is made that POST /v1/check would then refuse.
	if !writ.TenantIDPattern.MatchString(tenantID) {
		return nil, "", writ.Errorf(writ.EINVALID, "invalid tenant %q: must be 1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit", tenantID)
	}
	if strings.TrimSpace(subject) == "" {
		return nil, "", writ.Errorf(writ.EINVALID, "an API key needs a subject: who holds it")
	}
	if !writ.ValidSubject(subject) {
		return nil, "", writ.Errorf(writ.EINVALID, "invalid subject %q: must be 1-%d bytes of printable text, without surrounding spaces or any of < > \" ' & `", subject, writ.MaxSubjectLen)
	}
	if len(roles) == 0 {
		return nil, "", writ.Errorf(writ.EINVALID, "an API key needs at least one role (agent, approver, auditor, admin, meter)")
	}
	var rs []writ.Role
	for _, r := range roles {
		if !r.Valid() {
			return nil, "", writ.Errorf(writ.EINVALID, "unknown role %q (want agent, approver, auditor, admin or meter)", r)
		}
		if !slices.Contains(rs, r) {
			rs = append(rs, r)
		}
	}
	var buf [16 + 32]byte
	if _, err := io.ReadFull(random, buf[:]); err != nil {
		return nil, "", fmt.Errorf("random: %w", err)
	}
	id := "key_" + strings.ToLower(idEncoding.EncodeToString(buf[:16]))
	secret := hex.EncodeToString(buf[16:])
	k := &Key{ID: id, TenantID: tenantID, Subject: subject, Roles: rs, SecretHash: hashSecret(secret), CreatedAt: now.UTC()}
	return k, Prefix + id + "_" + secret, nil
}

// SetActor sets the actor type the key acts as ("" for AGENT) and the
// principals it may act for, after checking them.
func (k *Key) SetActor(actorType string, actsFor []string) error {
	if actorType != "" && !writ.ValidActorType(actorType) {
		return writ.Errorf(writ.EINVALID, "invalid actor type %q (want AGENT, HUMAN or SERVICE)", actorType)
	}
	if actorType == writ.ActorAgent {
		actorType = ""
	}
	var pats []string
	for _, p := range actsFor {
		if err := writ.ValidActsFor(p); err != nil {
			return writ.Errorf(writ.EINVALID, "%v", err)
		}
		if !slices.Contains(pats, p) {
			pats = append(pats, p)
		}
	}
	k.ActorType, k.ActsFor = actorType, pats
	return nil
}

// ParseToken splits a token into its key id and secret. Only the exact
// form NewKey writes is accepted.
func ParseToken(token string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(token, Prefix)
	if !ok {
		return "", "", writ.Errorf(writ.EINVALID, "not a writ API key")
	}
	id, secret, ok = strings.Cut(rest, "_")
	// The key id itself holds one underscore: "key_" and 26 base32 characters.
	if !ok || id != "key" || len(secret) != 26+1+64 || secret[26] != '_' {
		return "", "", writ.Errorf(writ.EINVALID, "malformed writ API key")
	}
	id, secret = "key_"+secret[:26], secret[27:]
	for _, c := range id[4:] {
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return "", "", writ.Errorf(writ.EINVALID, "malformed writ API key")
		}
	}
	for _, c := range secret {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", "", writ.Errorf(writ.EINVALID, "malformed writ API key")
		}
	}
	return id, secret, nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Errors of Authenticate. Both answer 401; neither says which keys exist.
var (
	ErrNoKey      = writ.Errorf(writ.EUNAUTHENTICATED, "this request needs an API key: send Authorization: Bearer writ_…")
	ErrInvalidKey = writ.Errorf(writ.EUNAUTHENTICATED, "the API key is not valid (unknown, malformed, revoked, expired or not signed)")
)

// verifiedFor is how long an Authenticator trusts a key's signature
// without checking it again, as long as the stored key is unchanged: a
// signing key revoked with a time before the API key was signed takes
// effect within it.
const verifiedFor = time.Minute

// Authenticator checks API keys against a store, accepting only keys
// whose signature verifies under the ring. It remembers a verified key
// for a minute, so the Ed25519 check is not paid on every request; any
// change to the stored key (tenant, subject, roles, secret hash, times,
// signature) is checked again at once. It is safe for concurrent use.
type Authenticator struct {
	store Store
	keys  Verifier
	// refused is told about a key whose token was right but whose stored
	// row does not bear its signature out.
	refused func(k *Key, err error)

	mu       sync.Mutex
	verified map[string]verifiedKey
}

type verifiedKey struct {
	key   Key
	until time.Time
}

// NewAuthenticator returns an Authenticator over store whose keys'
// signatures are checked with keys. refused, if not nil, is called when a
// request presents the right token for a stored key whose signature is
// missing or does not verify: a row written or changed outside writ (the
// server logs it); the request is refused with ErrInvalidKey all the same.
func NewAuthenticator(store Store, keys Verifier, refused func(k *Key, err error)) *Authenticator {
	return &Authenticator{store: store, keys: keys, refused: refused, verified: map[string]verifiedKey{}}
}

// Authenticate returns the principal of token at the clock reading now.
// Unknown, malformed, revoked, expired and unsigned keys, and keys whose
// signature does not verify, all give ErrInvalidKey; a store failure is returned as
// it is.
func (a *Authenticator) Authenticate(ctx context.Context, token string, now time.Time) (*writ.Principal, error) {
	if token == "" {
		return nil, ErrNoKey
	}
	id, secret, err := ParseToken(token)
	if err != nil {
		return nil, ErrInvalidKey
	}
	k, err := a.store.APIKey(ctx, id)
	if writ.ErrorCode(err) == writ.ENOTFOUND {
		// Hash anyway, so an unknown key takes as long as a wrong secret.
		_ = subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(hashSecret(id)))
		return nil, ErrInvalidKey
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(k.SecretHash), []byte(hashSecret(secret))) != 1 {
		return nil, ErrInvalidKey
	}
	if k.RevokedAt != nil && !now.Before(*k.RevokedAt) || k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		return nil, ErrInvalidKey
	}
	if !a.remembered(k, now) {
		if err := Verify(k, a.keys); err != nil {
			if a.refused != nil {
				a.refused(k, err)
			}
			return nil, ErrInvalidKey
		}
		a.remember(k, now)
	}
	return &writ.Principal{TenantID: k.TenantID, KeyID: k.ID, Subject: k.Subject, Roles: slices.Clone(k.Roles),
		ActorType: k.ActorType, ActsFor: slices.Clone(k.ActsFor)}, nil
}

// remembered reports whether k, exactly as stored now, was verified less
// than verifiedFor ago.
func (a *Authenticator) remembered(k *Key, now time.Time) bool {
	a.mu.Lock()
	v, ok := a.verified[k.ID]
	a.mu.Unlock()
	return ok && now.Before(v.until) && sameKey(&v.key, k)
}

func (a *Authenticator) remember(k *Key, now time.Time) {
	v := verifiedKey{key: *k, until: now.Add(verifiedFor)}
	v.key.Roles, v.key.ActsFor, v.key.Signature, v.key.RevokedAt = slices.Clone(k.Roles), slices.Clone(k.ActsFor), slices.Clone(k.Signature), nil
	if k.ExpiresAt != nil {
		at := *k.ExpiresAt
		v.key.ExpiresAt = &at
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.verified[k.ID] = v
}

// sameKey reports whether a and b agree on everything a signature covers.
func sameKey(a, b *Key) bool {
	return a.ID == b.ID && a.TenantID == b.TenantID && a.Subject == b.Subject && slices.Equal(a.Roles, b.Roles) &&
		a.ActorType == b.ActorType && slices.Equal(a.ActsFor, b.ActsFor) &&
		a.SecretHash == b.SecretHash && a.CreatedAt.Equal(b.CreatedAt) && sameTime(a.ExpiresAt, b.ExpiresAt) &&
		a.SignedBy == b.SignedBy && a.SignedAt.Equal(b.SignedAt) && bytes.Equal(a.Signature, b.Signature)
}

func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}
