package delegation_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/delegation"
)

var t0 = time.Date(2026, time.November, 29, 12, 0, 0, 0, time.UTC)

// signer is an issuer's private key with its key id.
type signer struct {
	key jwk.Key
	pub jwk.Key
}

func newSigner(t *testing.T, kid string) signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	pub, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return signer{key: k, pub: pub}
}

func (s signer) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	tok := jwt.New()
	for k, v := range claims {
		if err := tok.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA(), s.key))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeJWKS(t *testing.T, dir, name string, keys ...jwk.Key) string {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		if err := set.AddKey(k); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	idp, forger, globexIdP := newSigner(t, "idp-1"), newSigner(t, "idp-1"), newSigner(t, "g-1")
	writeJWKS(t, dir, "acme.jwks.json", idp.pub)
	writeJWKS(t, dir, "globex.jwks.json", globexIdP.pub)
	cfg := `{"tenants": {
		"acme": [{"issuer": "https://idp.acme.example", "jwks_file": "acme.jwks.json", "audience": "writ", "tenant_claim": "tenant"}],
		"globex": [{"issuer": "https://idp.globex.example", "jwks_file": "globex.jwks.json"}]}}`
	path := filepath.Join(dir, "issuers.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := delegation.Load(context.Background(), path)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	good := func() map[string]any {
		return map[string]any{"iss": "https://idp.acme.example", "sub": "user_42", "aud": []string{"writ"}, "tenant": "acme",
			"exp": t0.Add(time.Hour), "nbf": t0.Add(-time.Minute), "iat": t0.Add(-time.Minute)}
	}
	with := func(k string, val any) map[string]any {
		c := good()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	tests := []struct {
		name, tenant, token, wantErr string
	}{
		{"valid", "acme", idp.sign(t, good()), ""},
		{"bad signature", "acme", forger.sign(t, good()), "signature does not verify"},
		{"unknown issuer", "acme", idp.sign(t, with("iss", "https://evil.example")), `issuer "https://evil.example" is not one tenant "acme" trusts`},
		{"another tenant's issuer", "acme", globexIdP.sign(t, map[string]any{"iss": "https://idp.globex.example", "sub": "u", "exp": t0.Add(time.Hour)}), "a token for another tenant"},
		{"token for another tenant", "globex", idp.sign(t, good()), "a token for another tenant"},
		{"tenant claim names another tenant", "acme", idp.sign(t, with("tenant", "globex")), `not valid for tenant "acme"`},
		{"expired", "acme", idp.sign(t, with("exp", t0.Add(-time.Second))), "has expired"},
		{"not yet valid", "acme", idp.sign(t, with("nbf", t0.Add(time.Hour))), "not valid yet"},
		{"wrong audience", "acme", idp.sign(t, with("aud", []string{"other"})), `not for audience "writ"`},
		{"no subject", "acme", idp.sign(t, with("sub", nil)), "no subject"},
		{"no expiry", "acme", idp.sign(t, with("exp", nil)), "lacks a required claim"},
		{"not a JWT", "acme", "not-a-token", "not a JWT"},
		{"unsigned", "acme", unsigned(good()), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := v.Verify(context.Background(), tc.tenant, tc.token, t0)
			if tc.name == "unsigned" {
				if err == nil {
					t.Fatalf("Verify(unsigned) = %+v, want a refusal", d)
				}
				return
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want the delegation", err)
				}
				want := writ.Delegation{TenantID: "acme", Subject: "user_42", Issuer: "https://idp.acme.example"}
				if *d != want {
					t.Errorf("Verify = %+v, want %+v", *d, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || writ.ErrorCode(err) != writ.EFORBIDDEN {
				t.Errorf("Verify = %v (%s), want EFORBIDDEN containing %q", err, writ.ErrorCode(err), tc.wantErr)
			}
		})
	}
}

// unsigned is a token with alg none.
func unsigned(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(base64Std(b)), "=")
	}
	return enc(map[string]string{"alg": "none", "kid": "idp-1"}) + "." + enc(claims) + "."
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, "k")
	f := writeJWKS(t, dir, "k.json", s.pub)
	empty := writeJWKS(t, dir, "empty.json")
	tests := []struct {
		name string
		cfg  delegation.Config
		want string
	}{
		{"no iss", delegation.Config{Tenants: map[string][]delegation.Issuer{"acme": {{JWKSFile: f}}}}, "needs its iss"},
		{"no keys", delegation.Config{Tenants: map[string][]delegation.Issuer{"acme": {{Issuer: "i"}}}}, "exactly one of jwks_file and jwks_url"},
		{"both", delegation.Config{Tenants: map[string][]delegation.Issuer{"acme": {{Issuer: "i", JWKSFile: f, JWKSURL: "https://x"}}}}, "exactly one"},
		{"twice", delegation.Config{Tenants: map[string][]delegation.Issuer{"acme": {{Issuer: "i", JWKSFile: f}, {Issuer: "i", JWKSFile: f}}}}, "twice"},
		{"empty set", delegation.Config{Tenants: map[string][]delegation.Issuer{"acme": {{Issuer: "i", JWKSFile: empty}}}}, "holds no keys"},
		{"bad tenant", delegation.Config{Tenants: map[string][]delegation.Issuer{"-x": {{Issuer: "i", JWKSFile: f}}}}, "invalid tenant"},
	}
	for _, tc := range tests {
		if _, err := delegation.New(context.Background(), tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s) = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestFetchAgain: a JWKS URL is fetched again when a token names a key
// id the verifier does not hold (a rotated key).
func TestFetchAgain(t *testing.T) {
	old, rotated := newSigner(t, "k1"), newSigner(t, "k2")
	sets := []jwk.Key{old.pub}
	fetches := 0
	fetch := func(ctx context.Context, u string) (jwk.Set, error) {
		fetches++
		set := jwk.NewSet()
		for _, k := range sets {
			_ = set.AddKey(k)
		}
		return set, nil
	}
	v, err := delegation.New(context.Background(), delegation.Config{Tenants: map[string][]delegation.Issuer{"acme": {{Issuer: "i", JWKSURL: "https://idp.example/jwks"}}}}, fetch)
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": "i", "sub": "u1", "exp": time.Now().Add(time.Hour)}
	if _, err := v.Verify(context.Background(), "acme", old.sign(t, claims), time.Now()); err != nil {
		t.Fatalf("Verify(old key) = %v", err)
	}
	sets = append(sets, rotated.pub)
	// Fetched less than a minute ago: not fetched again, so refused.
	if _, err := v.Verify(context.Background(), "acme", rotated.sign(t, claims), time.Now()); err == nil {
		t.Fatal("Verify(rotated key) accepted a key the verifier never fetched")
	}
	if fetches != 1 {
		t.Errorf("fetches = %d, want 1 (at most one a minute)", fetches)
	}
}

func FuzzVerify(f *testing.F) {
	s := newSigner(&testing.T{}, "k")
	set := jwk.NewSet()
	_ = set.AddKey(s.pub)
	v, err := delegation.New(context.Background(), delegation.Config{Tenants: map[string][]delegation.Issuer{"acme": {{Issuer: "i", JWKSURL: "https://x"}}}},
		func(context.Context, string) (jwk.Set, error) { return set, nil })
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s.sign(&testing.T{}, map[string]any{"iss": "i", "sub": "u", "exp": t0.Add(time.Hour)}))
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		d, err := v.Verify(context.Background(), "acme", token, t0)
		if err == nil && (d.Subject == "" || d.Issuer != "i" || d.TenantID != "acme") {
			t.Fatalf("Verify(%q) = %+v without an error", token, d)
		}
		if err != nil && writ.ErrorCode(err) != writ.EFORBIDDEN {
			t.Fatalf("Verify(%q) = %v, want EFORBIDDEN", token, err)
		}
	})
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
