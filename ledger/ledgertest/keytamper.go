package ledgertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
)

// KeyTamperer edits a store's API key tables behind writ's back, its
// append-only triggers out of the way.
type KeyTamperer interface {
	// SetAPIKeyColumn sets one column of a key's api_keys row (roles,
	// tenant_id, secret_hash, …) to value.
	SetAPIKeyColumn(t *testing.T, keyID, column string, value any)
	// DeleteAPIKeySignature deletes a key's signature row.
	DeleteAPIKeySignature(t *testing.T, keyID string)
}

// RunKeyTamper edits the API key tables as someone who can write them but
// holds no signing key would, one fresh store each, and checks that
// verify.VerifyAPIKeys names the key and that an auth.Authenticator
// refuses it. open returns a fresh, empty store (closed by the suite) and
// its KeyTamperer.
func RunKeyTamper(t *testing.T, open func(t *testing.T) (ledger.Store, KeyTamperer)) {
	t0 := time.Date(2026, time.May, 9, 9, 0, 0, 0, time.UTC)
	skey, _, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{9}, 64)), "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keyring.FromEnv(skey, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ring.Signer(t0)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker's own secret, under a key id of their choosing.
	const mallorySecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	sum := sha256.Sum256([]byte(mallorySecret))
	malloryHash := hex.EncodeToString(sum[:])

	type fixture struct {
		ks    auth.Store
		alice *auth.Key // signed, agent of acme
		token string    // the token the finding's key is tried with
	}
	cases := []struct {
		name string
		// edit tampers and returns the key the finding must name and the
		// token that must be refused.
		edit func(t *testing.T, tm KeyTamperer, f *fixture) (keyID, token string)
		kind string
	}{
		{"Roles", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			tm.SetAPIKeyColumn(t, f.alice.ID, "roles", `["agent","admin"]`)
			return f.alice.ID, f.token
		}, verify.FindingAPIKeyMismatch},
		{"Tenant", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			tm.SetAPIKeyColumn(t, f.alice.ID, "tenant_id", "globex")
			return f.alice.ID, f.token
		}, verify.FindingAPIKeyMismatch},
		{"SecretHash", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			// Taking the key over with a secret of one's own.
			tm.SetAPIKeyColumn(t, f.alice.ID, "secret_hash", malloryHash)
			return f.alice.ID, auth.Prefix + f.alice.ID + "_" + mallorySecret
		}, verify.FindingAPIKeyMismatch},
		{"SignatureDeleted", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			tm.DeleteAPIKeySignature(t, f.alice.ID)
			return f.alice.ID, f.token
		}, verify.FindingAPIKeyUnsigned},
		{"ExpiryMovedLater", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			tm.SetAPIKeyColumn(t, f.alice.ID, "expires_ns", f.alice.ExpiresAt.Add(365*24*time.Hour).UnixNano())
			return f.alice.ID, f.token
		}, verify.FindingAPIKeyMismatch},
		{"ExpiryRemoved", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			tm.SetAPIKeyColumn(t, f.alice.ID, "expires_ns", nil)
			return f.alice.ID, f.token
		}, verify.FindingAPIKeyMismatch},
		{"KeyAdded", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			forged := &auth.Key{ID: "key_mmmmmmmmmmmmmmmmmmmmmmmmmm", TenantID: "acme", Subject: "mallory", Roles: []writ.Role{writ.RoleAdmin},
				SecretHash: malloryHash, CreatedAt: t0}
			if err := f.ks.PutAPIKey(t.Context(), forged); err != nil {
				t.Fatal(err)
			}
			return forged.ID, auth.Prefix + forged.ID + "_" + mallorySecret
		}, verify.FindingAPIKeyUnsigned},
		{"KeyAddedWithACopiedSignature", func(t *testing.T, tm KeyTamperer, f *fixture) (string, string) {
			forged := &auth.Key{ID: "key_mmmmmmmmmmmmmmmmmmmmmmmmmm", TenantID: "acme", Subject: "mallory", Roles: []writ.Role{writ.RoleAdmin},
				SecretHash: malloryHash, CreatedAt: t0, SignedBy: f.alice.SignedBy, SignedAt: f.alice.SignedAt, Signature: f.alice.Signature}
			if err := f.ks.PutAPIKey(t.Context(), forged); err != nil {
				t.Fatal(err)
			}
			return forged.ID, auth.Prefix + forged.ID + "_" + mallorySecret
		}, verify.FindingAPIKeyMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st, tm := open(t)
			closeAtEnd(t, st)
			ks, ok := st.(auth.Store)
			if !ok {
				t.Fatalf("%T does not implement auth.Store", st)
			}
			alice, token, err := auth.NewKey("acme", "alice", []writ.Role{writ.RoleAgent}, t0, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A key that expires in a day: its expiry is signed too.
			expires := t0.Add(24 * time.Hour)
			alice.ExpiresAt = &expires
			if err := auth.Sign(alice, signer, t0); err != nil {
				t.Fatal(err)
			}
			if err := ks.PutAPIKey(ctx, alice); err != nil {
				t.Fatal(err)
			}
			a := auth.NewAuthenticator(ks, ring, nil)
			if p, err := a.Authenticate(ctx, token, t0); err != nil || p.KeyID != alice.ID {
				t.Fatalf("Authenticate(alice) before the edit = %+v, %v", p, err)
			}
			if fs, err := verify.VerifyAPIKeys(ctx, ks, ring); err != nil || len(fs) != 0 {
				t.Fatalf("VerifyAPIKeys before the edit = %+v, %v", fs, err)
			}
			keyID, tried := tc.edit(t, tm, &fixture{ks: ks, alice: alice, token: token})
			fs, err := verify.VerifyAPIKeys(ctx, ks, ring)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(fs, func(f verify.Finding) bool {
				return f.Kind == tc.kind && f.KeyID == keyID && strings.Contains(f.Detail, keyID)
			}) {
				t.Errorf("VerifyAPIKeys after the edit = %+v, want a %s finding on %s", fs, tc.kind, keyID)
			}
			// A fresh authenticator, and the one that verified the key
			// before the edit: neither accepts it.
			for _, a := range []*auth.Authenticator{auth.NewAuthenticator(ks, ring, nil), a} {
				if p, err := a.Authenticate(ctx, tried, t0.Add(time.Second)); err != auth.ErrInvalidKey {
					t.Errorf("Authenticate(%s) after the edit = %+v, %v; want ErrInvalidKey", keyID, p, err)
				}
			}
		})
	}
}
