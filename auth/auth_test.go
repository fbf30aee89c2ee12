package auth_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
)

var t0 = time.Date(2026, time.May, 9, 9, 0, 0, 0, time.UTC)

// fixedRandom is a reader of 48 known bytes: the key id's 16, then the
// secret's 32.
func fixedRandom() *bytes.Reader {
	b := make([]byte, 48)
	for i := range b {
		b[i] = byte(i)
	}
	return bytes.NewReader(b)
}

func TestNewKey(t *testing.T) {
	k, token, err := auth.NewKey("acme", "alice@acme.example", []writ.Role{writ.RoleApprover, writ.RoleAuditor, writ.RoleApprover},
		t0.In(time.FixedZone("CEST", 2*3600)), fixedRandom())
	if err != nil {
		t.Fatalf("NewKey() = %v", err)
	}
	// 0x00…0x0f in base32, and 0x10…0x2f in hex.
	const wantID = "key_aaaqeayeaudaocajbifqydiob4"
	const wantSecret = "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
	if k.ID != wantID || token != "writ_"+wantID+"_"+wantSecret {
		t.Errorf("NewKey() = id %q, token %q; want id %q, token writ_%s_%s", k.ID, token, wantID, wantID, wantSecret)
	}
	if k.TenantID != "acme" || k.Subject != "alice@acme.example" || !slices.Equal(k.Roles, []writ.Role{writ.RoleApprover, writ.RoleAuditor}) ||
		k.CreatedAt.Location() != time.UTC || !k.CreatedAt.Equal(t0) || k.RevokedAt != nil {
		t.Errorf("NewKey() = %+v, want tenant acme, subject alice@acme.example, roles [approver auditor], created %s UTC, not revoked", k, t0)
	}
	if strings.Contains(k.SecretHash, wantSecret) || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(k.SecretHash) {
		t.Errorf("NewKey() secret hash %q, want 64 hex digits that are not the secret", k.SecretHash)
	}

	// Two keys from crypto/rand differ.
	k2, token2, err := auth.NewKey("acme", "bob", []writ.Role{writ.RoleAgent}, t0, nil)
	if err != nil {
		t.Fatalf("NewKey(crypto/rand) = %v", err)
	}
	k3, token3, err := auth.NewKey("acme", "bob", []writ.Role{writ.RoleAgent}, t0, nil)
	if err != nil {
		t.Fatalf("NewKey(crypto/rand) = %v", err)
	}
	if k2.ID == k3.ID || token2 == token3 || k2.SecretHash == k3.SecretHash {
		t.Errorf("two NewKey() from crypto/rand gave %s and %s: want different keys", token2, token3)
	}
	if !regexp.MustCompile(`^writ_key_[a-z2-7]{26}_[0-9a-f]{64}$`).MatchString(token2) {
		t.Errorf("NewKey() token %q does not have the documented form", token2)
	}
}

func TestNewKeyInvalid(t *testing.T) {
	tests := []struct {
		name            string
		tenant, subject string
		roles           []writ.Role
		wantInMessage   string
	}{
		{"no tenant", "", "alice", []writ.Role{writ.RoleAgent}, "tenant"},
		{"no subject", "acme", "", []writ.Role{writ.RoleAgent}, "subject"},
		{"blank subject", "acme", " \t", []writ.Role{writ.RoleAgent}, "subject"},
		{"no roles", "acme", "alice", nil, "role"},
		{"empty roles", "acme", "alice", []writ.Role{}, "role"},
		{"unknown role", "acme", "alice", []writ.Role{writ.RoleAgent, "root"}, `"root"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, token, err := auth.NewKey(tc.tenant, tc.subject, tc.roles, t0, fixedRandom())
			if writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(err.Error(), tc.wantInMessage) || k != nil || token != "" {
				t.Errorf("NewKey(%q, %q, %v) = %v, %q, %v; want no key and an EINVALID error naming %s", tc.tenant, tc.subject, tc.roles, k, token, err, tc.wantInMessage)
			}
		})
	}
	// A random source that runs dry is an error, not a weak key.
	if k, _, err := auth.NewKey("acme", "alice", []writ.Role{writ.RoleAgent}, t0, bytes.NewReader(make([]byte, 47))); err == nil {
		t.Errorf("NewKey(47 random bytes) = %+v, want an error", k)
	}
}

func TestParseToken(t *testing.T) {
	const id = "key_aaaqeayeaudaocajbifqydiob4"
	secret := strings.Repeat("0123456789abcdef", 4)
	id2, secret2, err := auth.ParseToken("writ_" + id + "_" + secret)
	if err != nil || id2 != id || secret2 != secret {
		t.Errorf("ParseToken(good) = %q, %q, %v; want %q, %q", id2, secret2, err, id, secret)
	}
	for _, token := range []string{
		"",
		"writ_",
		"Bearer writ_" + id + "_" + secret,
		"wrut_" + id + "_" + secret,
		id + "_" + secret,                 // no prefix
		"writ_" + id + secret,             // no separator
		"writ_" + id + "_" + secret[:63],  // secret too short
		"writ_" + id + "_" + secret + "0", // secret too long
		"writ_" + id + "_" + strings.Repeat("g", 64), // not hex
		"writ_kez_abc_" + secret,                     // not a key id
		"writ__" + secret,
		"writ_key__" + secret,                            // empty key id
		"writ_key_aaaq_eayeaudaocajbifqydiob4_" + secret, // an underscore inside the id
		"writ_key_AAAQEAYEAUDAOCAJBIFQYDIOB4_" + secret,  // upper-case id
		"writ_key_aaaqeayeaudaocajbifqydiob1_" + secret,  // 1 is not base32
		"writ_" + id + "_" + strings.ToUpper(secret),     // upper-case hex never matches a hash
	} {
		if id, secret, err := auth.ParseToken(token); writ.ErrorCode(err) != writ.EINVALID || id != "" || secret != "" {
			t.Errorf("ParseToken(%q) = %q, %q, %v; want an EINVALID error", token, id, secret, err)
		}
	}
}

// memStore is an auth.Store in memory, with a failure to inject.
type memStore struct {
	keys map[string]*auth.Key
	err  error
}

func (m *memStore) PutAPIKey(ctx context.Context, k *auth.Key) error {
	if _, ok := m.keys[k.ID]; ok {
		return writ.Errorf(writ.ECONFLICT, "exists")
	}
	m.keys[k.ID] = k
	return nil
}

func (m *memStore) APIKey(ctx context.Context, id string) (*auth.Key, error) {
	if m.err != nil {
		return nil, m.err
	}
	k, ok := m.keys[id]
	if !ok {
		return nil, writ.Errorf(writ.ENOTFOUND, "API key %q not found", id)
	}
	c := *k
	return &c, nil
}

func (m *memStore) APIKeys(ctx context.Context, tenantID string) ([]*auth.Key, error) {
	return nil, errors.New("not used")
}

func (m *memStore) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	k, ok := m.keys[id]
	if !ok {
		return writ.Errorf(writ.ENOTFOUND, "API key %q not found", id)
	}
	if k.RevokedAt == nil {
		k.RevokedAt = &at
	}
	return nil
}

func TestAuthenticate(t *testing.T) {
	ctx := t.Context()
	store := &memStore{keys: map[string]*auth.Key{}}
	newKey := func(subject string, roles ...writ.Role) (*auth.Key, string) {
		k, token, err := auth.NewKey("acme", subject, roles, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.PutAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return k, token
	}
	alice, aliceToken := newKey("alice", writ.RoleApprover, writ.RoleAuditor)
	bob, bobToken := newKey("bob", writ.RoleAgent)
	now := t0.Add(time.Hour)
	if err := store.RevokeAPIKey(ctx, bob.ID, now); err != nil { // revoked from now on
		t.Fatal(err)
	}
	carol, carolToken := newKey("carol", writ.RoleAdmin)
	if err := store.RevokeAPIKey(ctx, carol.ID, now.Add(time.Nanosecond)); err != nil { // revoked from just after now
		t.Fatal(err)
	}
	unknownToken := "writ_key_aaaqeayeaudaocajbifqydiob4_" + strings.Repeat("0", 64)
	_, aliceSecret, _ := auth.ParseToken(aliceToken)
	wrongSecret := strings.TrimSuffix(aliceToken, aliceSecret) + strings.Repeat("0", 64)

	tests := []struct {
		name    string
		token   string
		want    *writ.Principal
		wantErr error
	}{
		{"valid key", aliceToken, &writ.Principal{TenantID: "acme", KeyID: alice.ID, Subject: "alice", Roles: []writ.Role{writ.RoleApprover, writ.RoleAuditor}}, nil},
		{"revoked later", carolToken, &writ.Principal{TenantID: "acme", KeyID: carol.ID, Subject: "carol", Roles: []writ.Role{writ.RoleAdmin}}, nil},
		{"wrong secret", wrongSecret, nil, auth.ErrInvalidKey},
		{"revoked at now", bobToken, nil, auth.ErrInvalidKey},
		{"unknown key", unknownToken, nil, auth.ErrInvalidKey},
		{"malformed", "writ_" + alice.ID + "_xyz", nil, auth.ErrInvalidKey},
		{"not a writ key", "sk-1234", nil, auth.ErrInvalidKey},
		{"no key", "", nil, auth.ErrNoKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.Authenticate(ctx, store, tc.token, now)
			if err != tc.wantErr {
				t.Fatalf("Authenticate(%s) = %v, want error %v", tc.name, err, tc.wantErr)
			}
			if tc.want == nil {
				if got != nil {
					t.Errorf("Authenticate(%s) = %+v, want no principal", tc.name, got)
				}
				return
			}
			if got == nil || got.TenantID != tc.want.TenantID || got.KeyID != tc.want.KeyID || got.Subject != tc.want.Subject || !slices.Equal(got.Roles, tc.want.Roles) {
				t.Errorf("Authenticate(%s) = %+v, want %+v", tc.name, got, tc.want)
			}
		})
	}
	// Both errors are 401s.
	for _, err := range []error{auth.ErrNoKey, auth.ErrInvalidKey} {
		if writ.ErrorCode(err) != writ.EUNAUTHENTICATED {
			t.Errorf("%v has code %q, want %q", err, writ.ErrorCode(err), writ.EUNAUTHENTICATED)
		}
	}

	// A store failure is passed through as it is, not hidden as an
	// invalid key.
	down := errors.New("connection refused")
	store.err = down
	if got, err := auth.Authenticate(ctx, store, aliceToken, now); !errors.Is(err, down) || got != nil {
		t.Errorf("Authenticate(store down) = %+v, %v; want the store's error", got, err)
	}
}
