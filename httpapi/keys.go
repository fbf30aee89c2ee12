package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/keyring"
)

// KeyAdmin is what the API-key routes (GET /v1/keys, POST /v1/keys, POST
// /v1/keys/{id}/revoke) need: the store of keys, the signer that signs a
// new key (the signing key ring's key valid at the time, as `writ keys
// create` signs with), and the ring that checks a key's signature.
type KeyAdmin struct {
	Store    auth.Store
	Signer   func(at time.Time) (auth.Signer, error)
	Verifier auth.Verifier
}

var errNoKeyAdmin = writ.Errorf(writ.ENOTFOUND, "this server manages no API keys")

// wireKey is an API key as the key routes answer it: never its secret or
// its secret's hash. Signature says whether its signature verifies (ok,
// unsigned, unknown signer or invalid, as `writ keys list` says).
type wireKey struct {
	ID       string      `json:"key_id"`
	TenantID string      `json:"tenant_id"`
	Subject  string      `json:"subject"`
	Roles    []writ.Role `json:"roles"`
	// ActorType and ActsFor are the principal the key acts as and the
	// ones it may act for (docs/trust.md).
	ActorType string     `json:"actor_type"`
	ActsFor   []string   `json:"acts_for,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	SignedBy  string     `json:"signed_by,omitempty"`
	Signature string     `json:"signature"`
	// Token is answered once, when the key is created.
	Token string `json:"token,omitempty"`
}

func (s *Server) wireKey(k *auth.Key) wireKey {
	status := "ok"
	switch err := auth.Verify(k, s.cfg.APIKeys.Verifier); {
	case err == nil:
	case errors.Is(err, auth.ErrUnsigned):
		status = "unsigned"
	case errors.Is(err, keyring.ErrUnknownKey):
		status = "unknown signer"
	default:
		status = "invalid"
	}
	roles := k.Roles
	if roles == nil {
		roles = []writ.Role{}
	}
	actorType := k.ActorType
	if actorType == "" {
		actorType = writ.ActorAgent
	}
	return wireKey{ID: k.ID, TenantID: k.TenantID, Subject: k.Subject, Roles: roles, ActorType: actorType, ActsFor: k.ActsFor, CreatedAt: k.CreatedAt.UTC(),
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, SignedBy: k.SignedBy, Signature: status}
}

// handleKeys serves GET /v1/keys: the tenant's API keys, oldest first,
// revoked ones included.
func (s *Server) handleKeys(w http.ResponseWriter, r *http.Request) {
	if s.cfg.APIKeys == nil {
		s.writeError(w, r, errNoKeyAdmin)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	keys, err := s.cfg.APIKeys.Store.APIKeys(r.Context(), tenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]wireKey, 0, len(keys))
	for _, k := range keys {
		if k.TenantID != tenantID {
			s.writeError(w, r, fmt.Errorf("the key store answered key %s of tenant %q for tenant %q", k.ID, k.TenantID, tenantID))
			return
		}
		out = append(out, s.wireKey(k))
	}
	s.writeJSON(w, r, http.StatusOK, struct {
		Keys []wireKey `json:"keys"`
	}{out})
}

// createKeyBody is the body of POST /v1/keys.
type createKeyBody struct {
	TenantID  string      `json:"tenant_id,omitempty"`
	Subject   string      `json:"subject"`
	Roles     []writ.Role `json:"roles"`
	ExpiresAt *time.Time  `json:"expires_at,omitempty"`
	// ActorType (default AGENT) and ActsFor, as writ keys create
	// --actor-type and --acts-for.
	ActorType string   `json:"actor_type,omitempty"`
	ActsFor   []string `json:"acts_for,omitempty"`
}

// handleCreateKey serves POST /v1/keys: a new key of the tenant, signed
// and stored, answered with its token, which is shown this once (writ
// keeps only its hash).
func (s *Server) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	if s.cfg.APIKeys == nil {
		s.writeError(w, r, errNoKeyAdmin)
		return
	}
	b, err := decodeTenantBody(s, w, r, func(b *createKeyBody) *string { return &b.TenantID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.cfg.Now()
	if b.ExpiresAt != nil && !b.ExpiresAt.After(now) {
		s.writeError(w, r, &writ.Error{Code: writ.EINVALID, Message: "the key would expire before it is created",
			Details: []writ.Detail{{Field: "expires_at", Message: "must be in the future"}}})
		return
	}
	k, token, err := auth.NewKey(b.TenantID, b.Subject, b.Roles, now, s.rand)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k.ExpiresAt = b.ExpiresAt
	if err := k.SetActor(b.ActorType, b.ActsFor); err != nil {
		s.writeError(w, r, err)
		return
	}
	signer, err := s.cfg.APIKeys.Signer(now)
	if err == nil {
		err = auth.Sign(k, signer, now)
	}
	if err == nil {
		err = s.cfg.APIKeys.Store.PutAPIKey(r.Context(), k)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.auditKey(r.Context(), "API key created", k)
	out := s.wireKey(k)
	out.Token = token
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, out)
}

// revokeKeyBody is the body of POST /v1/keys/{id}/revoke.
type revokeKeyBody struct {
	TenantID string `json:"tenant_id,omitempty"`
}

// handleRevokeKey serves POST /v1/keys/{id}/revoke: the key stops opening
// anything. A key of another tenant is not found; revoking a revoked key
// changes nothing.
func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	if s.cfg.APIKeys == nil {
		s.writeError(w, r, errNoKeyAdmin)
		return
	}
	b, err := decodeTenantBody(s, w, r, func(b *revokeKeyBody) *string { return &b.TenantID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	notFound := writ.Errorf(writ.ENOTFOUND, "API key %q not found", id)
	k, err := s.cfg.APIKeys.Store.APIKey(r.Context(), id)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND || err == nil && k.TenantID != b.TenantID:
		s.writeError(w, r, notFound)
		return
	case err != nil:
		s.writeError(w, r, err)
		return
	}
	if p := writ.PrincipalFrom(r.Context()); p != nil && p.KeyID == k.ID {
		s.writeError(w, r, &writ.Error{Code: writ.ECONFLICT, Message: "a key cannot revoke itself: sign in with another admin key"})
		return
	}
	if err := s.cfg.APIKeys.Store.RevokeAPIKey(r.Context(), id, s.cfg.Now()); err != nil {
		s.writeError(w, r, err)
		return
	}
	if k, err = s.cfg.APIKeys.Store.APIKey(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.auditKey(r.Context(), "API key revoked", k)
	s.writeJSON(w, r, http.StatusOK, s.wireKey(k))
}

// auditKey logs a change to a key with who made it.
func (s *Server) auditKey(ctx context.Context, msg string, k *auth.Key) {
	by := "development mode"
	if p := writ.PrincipalFrom(ctx); p != nil {
		by = p.Subject + " (key " + p.KeyID + ")"
	}
	roles := make([]string, len(k.Roles))
	for i, r := range k.Roles {
		roles[i] = string(r)
	}
	slices.Sort(roles)
	s.log.InfoContext(ctx, msg, slog.String("key", k.ID), slog.String("tenant", k.TenantID), slog.String("subject", k.Subject),
		slog.String("roles", strings.Join(roles, ",")), slog.String("by", by))
}
