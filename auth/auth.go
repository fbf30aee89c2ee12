// Package auth issues and checks API keys.
//
// An API key belongs to one tenant and holds one or more roles. Its token,
// shown once when the key is created, is
//
//	writ_<key id>_<secret>
//
// where the key id is "key_" and 26 lowercase base32 characters and the
// secret is 64 lowercase hex digits (32 random bytes). Stores keep the key
// id, the tenant, the subject, the roles and the SHA-256 of the secret,
// never the secret: a high-entropy secret needs no slow hash, and a
// stolen table of hashes opens nothing. A key is revoked by appending a
// revocation; keys are never updated or deleted.
package auth

import (
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
	"time"

	"github.com/writhq/writ"
)

// Key is a stored API key.
type Key struct {
	ID       string      `json:"key_id"`
	TenantID string      `json:"tenant_id"`
	Subject  string      `json:"subject"`
	Roles    []writ.Role `json:"roles"`
	// SecretHash is the hex SHA-256 of the token's secret.
	SecretHash string     `json:"-"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
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
	if strings.TrimSpace(subject) == "" {
		return nil, "", writ.Errorf(writ.EINVALID, "an API key needs a subject: who holds it")
	}
	if len(roles) == 0 {
		return nil, "", writ.Errorf(writ.EINVALID, "an API key needs at least one role (agent, approver, auditor, admin)")
	}
	var rs []writ.Role
	for _, r := range roles {
		if !r.Valid() {
			return nil, "", writ.Errorf(writ.EINVALID, "unknown role %q (want agent, approver, auditor or admin)", r)
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
	ErrInvalidKey = writ.Errorf(writ.EUNAUTHENTICATED, "the API key is not valid (unknown, malformed or revoked)")
)

// Authenticate returns the principal of token, checked against the store
// at the clock reading now. Unknown, malformed and revoked keys all give
// ErrInvalidKey; a store failure is returned as it is.
func Authenticate(ctx context.Context, s Store, token string, now time.Time) (*writ.Principal, error) {
	if token == "" {
		return nil, ErrNoKey
	}
	id, secret, err := ParseToken(token)
	if err != nil {
		return nil, ErrInvalidKey
	}
	k, err := s.APIKey(ctx, id)
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
	if k.RevokedAt != nil && !now.Before(*k.RevokedAt) {
		return nil, ErrInvalidKey
	}
	return &writ.Principal{TenantID: k.TenantID, KeyID: k.ID, Subject: k.Subject, Roles: slices.Clone(k.Roles)}, nil
}
