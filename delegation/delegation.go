// Package delegation verifies delegation tokens: JWTs that name the human
// user an agent acts for (actor.delegated_user_id), signed by an issuer
// the tenant configured. A verified token's subject becomes the delegated
// user, authenticated; without one, a delegated user is the caller's word
// (claimed). See docs/trust.md.
//
// A Verifier holds, per tenant, the issuers it trusts: each an issuer
// name (the token's iss), its signing keys as a JWKS (a file, or a URL
// fetched when the verifier is made and again, at most once a minute,
// when a token names a key id it does not hold), an audience the token
// must carry (optional), and a claim that must name the tenant
// (optional). It checks the signature, the issuer, the audience, exp and
// nbf against the caller's clock reading, and the tenant binding; a token
// without sub or exp is refused. It never trusts a key the token carries
// or points at (jku, jwk, x5u): only the configured JWKS.
//
// It uses github.com/lestrrat-go/jwx/v3 for JWKS parsing and fetching,
// JWS verification and claim validation.
package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/writhq/writ"
)

// Header is the HTTP header a delegation token travels in:
//
//	Writ-Delegation: <JWT>
const Header = "Writ-Delegation"

// MaxTokenBytes bounds a delegation token.
const MaxTokenBytes = 8 << 10

// Issuer is one issuer a tenant trusts.
type Issuer struct {
	// Issuer is the token's iss, exactly. Required.
	Issuer string `json:"issuer"`
	// JWKSFile is a file holding the issuer's public keys as a JWK Set.
	JWKSFile string `json:"jwks_file,omitempty"`
	// JWKSURL is where the issuer publishes its JWK Set (https, or
	// http on a loopback address for tests). Exactly one of JWKSFile and
	// JWKSURL is set.
	JWKSURL string `json:"jwks_url,omitempty"`
	// Audience, when set, must be one of the token's aud.
	Audience string `json:"audience,omitempty"`
	// TenantClaim, when set, names a claim whose value must be the
	// tenant's id (for an issuer that serves several tenants).
	TenantClaim string `json:"tenant_claim,omitempty"`
}

// Config is the delegation issuers file (writ serve --delegation-issuers):
// the issuers each tenant trusts.
//
//	{"tenants": {"acme": [{"issuer": "https://idp.acme.example",
//	  "jwks_file": "acme-idp.jwks.json", "audience": "writ"}]}}
//
// A relative jwks_file is read relative to the file's directory.
type Config struct {
	Tenants map[string][]Issuer `json:"tenants"`
}

// Verifier verifies delegation tokens. It is safe for concurrent use.
type Verifier struct {
	tenants map[string][]*issuer
	fetch   func(ctx context.Context, url string) (jwk.Set, error)
}

type issuer struct {
	Issuer
	mu      sync.Mutex
	keys    jwk.Set
	fetched time.Time // when JWKSURL was last fetched
}

// refetchEvery bounds how often a JWKS URL is fetched again when a token
// names a key id it does not hold.
const refetchEvery = time.Minute

// Load reads the issuers file at path and returns its Verifier, its JWK
// Sets read or fetched.
func Load(ctx context.Context, path string) (*Verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("delegation issuers: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("delegation issuers %s: %w", path, err)
	}
	dir := ""
	if i := bytes.LastIndexByte([]byte(path), os.PathSeparator); i >= 0 {
		dir = path[:i+1]
	}
	for _, list := range cfg.Tenants {
		for i := range list {
			if f := list[i].JWKSFile; f != "" && f[0] != os.PathSeparator {
				list[i].JWKSFile = dir + f
			}
		}
	}
	return New(ctx, cfg, nil)
}

// New returns the Verifier of cfg. fetch fetches a JWKS URL (default
// jwk.Fetch).
func New(ctx context.Context, cfg Config, fetch func(ctx context.Context, url string) (jwk.Set, error)) (*Verifier, error) {
	if fetch == nil {
		fetch = func(ctx context.Context, u string) (jwk.Set, error) { return jwk.Fetch(ctx, u) }
	}
	v := &Verifier{tenants: map[string][]*issuer{}, fetch: fetch}
	for tenant, list := range cfg.Tenants {
		if !writ.TenantIDPattern.MatchString(tenant) {
			return nil, fmt.Errorf("delegation issuers: invalid tenant %q", tenant)
		}
		for _, is := range list {
			if is.Issuer == "" {
				return nil, fmt.Errorf("delegation issuers: tenant %s: an issuer needs its iss (issuer)", tenant)
			}
			if (is.JWKSFile == "") == (is.JWKSURL == "") {
				return nil, fmt.Errorf("delegation issuers: tenant %s, issuer %s: set exactly one of jwks_file and jwks_url", tenant, is.Issuer)
			}
			if slices.ContainsFunc(v.tenants[tenant], func(o *issuer) bool { return o.Issuer.Issuer == is.Issuer }) {
				return nil, fmt.Errorf("delegation issuers: tenant %s names issuer %s twice", tenant, is.Issuer)
			}
			it := &issuer{Issuer: is}
			var err error
			if is.JWKSFile != "" {
				it.keys, err = jwk.ReadFile(is.JWKSFile)
			} else {
				it.keys, err = fetch(ctx, is.JWKSURL)
				it.fetched = time.Now()
			}
			if err != nil {
				return nil, fmt.Errorf("delegation issuers: tenant %s, issuer %s: JWKS: %w", tenant, is.Issuer, err)
			}
			if it.keys.Len() == 0 {
				return nil, fmt.Errorf("delegation issuers: tenant %s, issuer %s: the JWKS holds no keys", tenant, is.Issuer)
			}
			v.tenants[tenant] = append(v.tenants[tenant], it)
		}
	}
	return v, nil
}

// Verify verifies token for tenantID at the clock reading now and
// returns the delegation it carries. Every refusal is an EFORBIDDEN error
// that says why: a malformed token, an issuer the tenant does not trust
// (one another tenant trusts says so), a signature that does not verify
// under the issuer's keys, a wrong audience, an expired token or one not
// valid yet, a token without sub or exp, a tenant claim naming another
// tenant.
func (v *Verifier) Verify(ctx context.Context, tenantID, token string, now time.Time) (*writ.Delegation, error) {
	if len(token) > MaxTokenBytes {
		return nil, refused("the delegation token is longer than %d bytes", MaxTokenBytes)
	}
	// The issuer names which keys to verify with; nothing else of the
	// token is read before its signature verifies.
	unverified, err := jwt.ParseInsecure([]byte(token))
	if err != nil {
		return nil, refused("the delegation token is not a JWT: %v", err)
	}
	iss, _ := unverified.Issuer()
	var is *issuer
	for _, it := range v.tenants[tenantID] {
		if it.Issuer.Issuer == iss {
			is = it
		}
	}
	if is == nil {
		for t, list := range v.tenants {
			if t != tenantID && slices.ContainsFunc(list, func(o *issuer) bool { return o.Issuer.Issuer == iss }) {
				return nil, refused("the delegation token's issuer %q is trusted by another tenant, not by tenant %q: a token for another tenant", iss, tenantID)
			}
		}
		return nil, refused("the delegation token's issuer %q is not one tenant %q trusts", iss, tenantID)
	}
	tok, err := is.parse(ctx, token, now, tenantID, v.fetch)
	if err != nil {
		return nil, err
	}
	sub, _ := tok.Subject()
	if sub == "" {
		return nil, refused("the delegation token has no subject (sub): it names no delegated user")
	}
	if !writ.ValidSubject(sub) {
		return nil, refused("the delegation token's subject is not a valid user id (1-%d bytes of printable text)", writ.MaxSubjectLen)
	}
	return &writ.Delegation{TenantID: tenantID, Subject: sub, Issuer: iss}, nil
}

// parse verifies token under is's keys (fetching them again, at most once
// a minute, when the token names a key id they lack) and validates its
// claims.
func (is *issuer) parse(ctx context.Context, token string, now time.Time, tenantID string, fetch func(context.Context, string) (jwk.Set, error)) (jwt.Token, error) {
	is.mu.Lock()
	keys := is.keys
	if is.JWKSURL != "" && !holdsKid(keys, token) && time.Since(is.fetched) > refetchEvery {
		is.fetched = time.Now()
		if set, err := fetch(ctx, is.JWKSURL); err == nil && set.Len() > 0 {
			is.keys, keys = set, set
		}
	}
	is.mu.Unlock()
	opts := []jwt.ParseOption{
		jwt.WithKeySet(keys, jws.WithInferAlgorithmFromKey(true)),
		jwt.WithValidate(true),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })),
		jwt.WithIssuer(is.Issuer.Issuer),
		jwt.WithRequiredClaim("exp"),
	}
	if is.Audience != "" {
		opts = append(opts, jwt.WithAudience(is.Audience))
	}
	if is.TenantClaim != "" {
		opts = append(opts, jwt.WithClaimValue(is.TenantClaim, tenantID))
	}
	tok, err := jwt.ParseString(token, opts...)
	switch {
	case err == nil:
		return tok, nil
	case errors.Is(err, jwt.TokenExpiredError()):
		return nil, refused("the delegation token has expired (exp is not after %s)", now.UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return nil, refused("the delegation token is not valid yet (nbf is after %s)", now.UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.InvalidAudienceError()):
		return nil, refused("the delegation token is not for audience %q", is.Audience)
	case errors.Is(err, jwt.InvalidIssuerError()):
		return nil, refused("the delegation token's issuer is not %q", is.Issuer.Issuer)
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return nil, refused("the delegation token lacks a required claim (exp): %v", err)
	case errors.Is(err, jwt.ValidateError()):
		if is.TenantClaim != "" {
			return nil, refused("the delegation token is not valid for tenant %q (claim %s must name it): %v", tenantID, is.TenantClaim, err)
		}
		return nil, refused("the delegation token's claims are not valid: %v", err)
	}
	return nil, refused("the delegation token's signature does not verify under the keys of issuer %q: %v", is.Issuer.Issuer, err)
}

// holdsKid reports whether keys hold the key id token's header names (or
// the token names none).
func holdsKid(keys jwk.Set, token string) bool {
	msg, err := jws.ParseString(token)
	if err != nil || len(msg.Signatures()) == 0 {
		return true
	}
	kid, ok := msg.Signatures()[0].ProtectedHeaders().KeyID()
	if !ok || kid == "" {
		return true
	}
	_, found := keys.LookupKeyID(kid)
	return found
}

func refused(format string, args ...any) error {
	return &writ.Error{Code: writ.EFORBIDDEN, Message: "delegation refused: " + fmt.Sprintf(format, args...),
		Details: []writ.Detail{{Field: Header, Message: "not accepted"}}}
}
