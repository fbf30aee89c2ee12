package auth_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/keyring"
	"golang.org/x/mod/sumdb/note"
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
		// Tenant names are held to the rule of POST /v1/check
		// (writ.TenantIDPattern): a key for a tenant no request can
		// name would never work.
		{"markup in the tenant", "<b>acme</b>", "alice", []writ.Role{writ.RoleAgent}, "invalid tenant"},
		{"a space in the tenant", "acme corp", "alice", []writ.Role{writ.RoleAgent}, "invalid tenant"},
		{"a tenant starting with a dash", "-acme", "alice", []writ.Role{writ.RoleAgent}, "invalid tenant"},
		{"a tenant of 129 bytes", strings.Repeat("a", 129), "alice", []writ.Role{writ.RoleAgent}, "invalid tenant"},
		{"markup in the subject", "acme", "<img src=x onerror=alert(1)>", []writ.Role{writ.RoleApprover}, "invalid subject"},
		{"a quote in the subject", "acme", `o"brien`, []writ.Role{writ.RoleApprover}, "invalid subject"},
		{"a control character in the subject", "acme", "ali\nce", []writ.Role{writ.RoleApprover}, "invalid subject"},
		{"a subject with surrounding spaces", "acme", " alice", []writ.Role{writ.RoleApprover}, "invalid subject"},
		{"a subject of 129 bytes", "acme", strings.Repeat("a", 129), []writ.Role{writ.RoleApprover}, "invalid subject"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, token, err := auth.NewKey(tc.tenant, tc.subject, tc.roles, t0, fixedRandom())
			if writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(err.Error(), tc.wantInMessage) || k != nil || token != "" {
				t.Errorf("NewKey(%q, %q, %v) = %v, %q, %v; want no key and an EINVALID error naming %s", tc.tenant, tc.subject, tc.roles, k, token, err, tc.wantInMessage)
			}
		})
	}
	// What POST /v1/check takes, a key takes: every tenant the engine
	// accepts, and the subjects people have.
	for _, ok := range [][2]string{{"acme", "alice@acme.example"}, {"a", "b"}, {strings.Repeat("a", 128), strings.Repeat("b", 128)},
		{"acme.eu-1:prod_2", "Maria José (finance)"}, {"9acme", "support-bot"}} {
		if _, _, err := auth.NewKey(ok[0], ok[1], []writ.Role{writ.RoleAgent}, t0, fixedRandom()); err != nil {
			t.Errorf("NewKey(%q, %q) = %v, want a key", ok[0], ok[1], err)
		}
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

func (m *memStore) SignAPIKey(ctx context.Context, k *auth.Key) error {
	return errors.New("not used")
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

// testRing returns a ring of one key valid from the Unix epoch, from a
// fixed seed, and its signer at t0.
func testRing(t testing.TB, seed byte) (*keyring.Ring, *keyring.Signer) {
	t.Helper()
	skey, _, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{seed}, 64)), "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keyring.FromEnv(skey, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ring.Signer(t0)
	if err != nil {
		t.Fatal(err)
	}
	return ring, s
}

// putSigned stores a new agent key of tenant acme for subject, signed by
// signer at t0, and returns it with its token.
func putSigned(t testing.TB, store auth.Store, signer auth.Signer, subject string) (*auth.Key, string) {
	t.Helper()
	k, token, err := auth.NewKey("acme", subject, []writ.Role{writ.RoleAgent}, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Sign(k, signer, t0); err != nil {
		t.Fatal(err)
	}
	if err := store.PutAPIKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	return k, token
}

func TestAuthenticate(t *testing.T) {
	ctx := t.Context()
	store := &memStore{keys: map[string]*auth.Key{}}
	ring, signer := testRing(t, 1)
	_, otherSigner := testRing(t, 2)
	newKey := func(subject string, sign bool, roles ...writ.Role) (*auth.Key, string) {
		k, token, err := auth.NewKey("acme", subject, roles, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sign {
			if err := auth.Sign(k, signer, t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.PutAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return k, token
	}
	alice, aliceToken := newKey("alice", true, writ.RoleApprover, writ.RoleAuditor)
	bob, bobToken := newKey("bob", true, writ.RoleAgent)
	now := t0.Add(time.Hour)
	if err := store.RevokeAPIKey(ctx, bob.ID, now); err != nil { // revoked from now on
		t.Fatal(err)
	}
	carol, carolToken := newKey("carol", true, writ.RoleAdmin)
	if err := store.RevokeAPIKey(ctx, carol.ID, now.Add(time.Nanosecond)); err != nil { // revoked from just after now
		t.Fatal(err)
	}
	unknownToken := "writ_key_aaaqeayeaudaocajbifqydiob4_" + strings.Repeat("0", 64)
	_, aliceSecret, _ := auth.ParseToken(aliceToken)
	wrongSecret := strings.TrimSuffix(aliceToken, aliceSecret) + strings.Repeat("0", 64)
	// What someone who can write the table but holds no signing key can
	// do: add a key, change a key's roles, copy a signature, sign with a
	// key of their own.
	_, daveToken := newKey("dave", false, writ.RoleAdmin)
	erin, erinToken := newKey("erin", true, writ.RoleAgent)
	store.keys[erin.ID].Roles = []writ.Role{writ.RoleAgent, writ.RoleAdmin}
	frank, frankToken := newKey("frank", false, writ.RoleAdmin)
	store.keys[frank.ID].SignedBy, store.keys[frank.ID].SignedAt, store.keys[frank.ID].Signature = alice.SignedBy, alice.SignedAt, alice.Signature
	grace, graceToken := newKey("grace", false, writ.RoleAdmin)
	if err := auth.Sign(store.keys[grace.ID], otherSigner, t0); err != nil {
		t.Fatal(err)
	}
	// Keys that expire: at now, just after now, and one whose expiry was
	// moved later behind writ's back.
	expiring := func(subject string, at time.Time) (*auth.Key, string) {
		k, token, err := auth.NewKey("acme", subject, []writ.Role{writ.RoleAgent}, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		k.ExpiresAt = &at
		if err := auth.Sign(k, signer, t0); err != nil {
			t.Fatal(err)
		}
		if err := store.PutAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return k, token
	}
	_, heidiToken := expiring("heidi", now)
	ivan, ivanToken := expiring("ivan", now.Add(time.Nanosecond))
	judy, judyToken := expiring("judy", now.Add(-time.Minute))
	later := now.Add(24 * time.Hour)
	store.keys[judy.ID].ExpiresAt = &later
	kate, kateToken := expiring("kate", now.Add(-time.Minute))
	store.keys[kate.ID].ExpiresAt = nil

	tests := []struct {
		name    string
		token   string
		want    *writ.Principal
		wantErr error
		refused bool // the refusal hook hears of it
	}{
		{"valid key", aliceToken, &writ.Principal{TenantID: "acme", KeyID: alice.ID, Subject: "alice", Roles: []writ.Role{writ.RoleApprover, writ.RoleAuditor}}, nil, false},
		{"revoked later", carolToken, &writ.Principal{TenantID: "acme", KeyID: carol.ID, Subject: "carol", Roles: []writ.Role{writ.RoleAdmin}}, nil, false},
		{"wrong secret", wrongSecret, nil, auth.ErrInvalidKey, false},
		{"revoked at now", bobToken, nil, auth.ErrInvalidKey, false},
		{"unknown key", unknownToken, nil, auth.ErrInvalidKey, false},
		{"malformed", "writ_" + alice.ID + "_xyz", nil, auth.ErrInvalidKey, false},
		{"not a writ key", "sk-1234", nil, auth.ErrInvalidKey, false},
		{"no key", "", nil, auth.ErrNoKey, false},
		{"unsigned", daveToken, nil, auth.ErrInvalidKey, true},
		{"roles changed after signing", erinToken, nil, auth.ErrInvalidKey, true},
		{"another key's signature", frankToken, nil, auth.ErrInvalidKey, true},
		{"signed by a key outside the ring", graceToken, nil, auth.ErrInvalidKey, true},
		{"expires at now", heidiToken, nil, auth.ErrInvalidKey, false},
		{"expires later", ivanToken, &writ.Principal{TenantID: "acme", KeyID: ivan.ID, Subject: "ivan", Roles: []writ.Role{writ.RoleAgent}}, nil, false},
		{"expiry moved after signing", judyToken, nil, auth.ErrInvalidKey, true},
		{"expiry removed after signing", kateToken, nil, auth.ErrInvalidKey, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var refused []string
			a := auth.NewAuthenticator(store, ring, func(k *auth.Key, err error) { refused = append(refused, k.ID) })
			got, err := a.Authenticate(ctx, tc.token, now)
			if err != tc.wantErr {
				t.Fatalf("Authenticate(%s) = %v, want error %v", tc.name, err, tc.wantErr)
			}
			if (len(refused) > 0) != tc.refused {
				t.Errorf("Authenticate(%s) told the refusal hook of %v, want a refusal: %v", tc.name, refused, tc.refused)
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
	a := auth.NewAuthenticator(store, ring, nil)
	if got, err := a.Authenticate(ctx, aliceToken, now); !errors.Is(err, down) || got != nil {
		t.Errorf("Authenticate(store down) = %+v, %v; want the store's error", got, err)
	}
}

// A verified key is remembered, but a change to its row is seen at the
// next request, and the memory lapses.
func TestAuthenticatorRemembers(t *testing.T) {
	ctx := t.Context()
	store := &memStore{keys: map[string]*auth.Key{}}
	ring, signer := testRing(t, 1)
	k, token := putSigned(t, store, signer, "alice")
	counting := &countingVerifier{v: ring}
	a := auth.NewAuthenticator(store, counting, nil)
	for i := range 3 {
		if _, err := a.Authenticate(ctx, token, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("Authenticate #%d = %v", i, err)
		}
	}
	if counting.n != 1 {
		t.Errorf("three requests within a minute verified the signature %d times, want 1", counting.n)
	}
	if _, err := a.Authenticate(ctx, token, t0.Add(2*time.Minute)); err != nil || counting.n != 2 {
		t.Errorf("Authenticate two minutes later = %v after %d verifications, want nil after 2", err, counting.n)
	}
	for _, edit := range []struct {
		name string
		do   func(k *auth.Key)
	}{
		{"roles", func(k *auth.Key) { k.Roles = append(k.Roles, writ.RoleAdmin) }},
		{"tenant", func(k *auth.Key) { k.TenantID = "globex" }},
		{"subject", func(k *auth.Key) { k.Subject = "mallory" }},
		{"created", func(k *auth.Key) { k.CreatedAt = k.CreatedAt.Add(time.Nanosecond) }},
		{"signed at", func(k *auth.Key) { k.SignedAt = k.SignedAt.Add(time.Nanosecond) }},
		{"signature", func(k *auth.Key) { k.Signature = bytes.Repeat([]byte{1}, 64) }},
	} {
		saved := *store.keys[k.ID]
		saved.Roles = slices.Clone(saved.Roles)
		edit.do(store.keys[k.ID])
		if got, err := a.Authenticate(ctx, token, t0.Add(2*time.Minute+time.Second)); err != auth.ErrInvalidKey {
			t.Errorf("Authenticate with the %s changed after the key was remembered = %+v, %v; want ErrInvalidKey", edit.name, got, err)
		}
		store.keys[k.ID] = &saved
	}
}

type countingVerifier struct {
	v auth.Verifier
	n int
}

func (c *countingVerifier) VerifyRecordSignature(id string, msg, sig []byte, signedAt time.Time) error {
	c.n++
	return c.v.VerifyRecordSignature(id, msg, sig, signedAt)
}

// The message a key's signature covers, byte for byte (the example of
// docs/ledger-format.md §3.5).
func TestSignatureMessage(t *testing.T) {
	k := &auth.Key{
		ID: "key_aaaqeayeaudaocajbifqydiob4", TenantID: "acme", Subject: "alice@acme.example",
		Roles:      []writ.Role{writ.RoleApprover, writ.RoleAuditor},
		SecretHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		CreatedAt:  time.Date(2026, time.May, 9, 9, 0, 0, 123456789, time.UTC),
		SignedBy:   "writ-2026-05-01T000000Z+1a2b3c4d",
		SignedAt:   time.Date(2026, time.May, 9, 9, 0, 0, 123456789, time.UTC),
	}
	// The RFC 8785 document is
	// {"created_at":"2026-05-09T09:00:00.123456789Z","key_id":"key_aaaqeayeaudaocajbifqydiob4","roles":["approver","auditor"],"secret_hash":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","signed_at":"2026-05-09T09:00:00.123456789Z","signed_by":"writ-2026-05-01T000000Z+1a2b3c4d","subject":"alice@acme.example","tenant_id":"acme"}
	const want = "writ-api-key-signature-v1\n" + "93e00570f77f7c865b14e1209f8e0aea43d01fdbafb3f891647e720beb106951" + "\n"
	got, err := k.SignatureMessage()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("SignatureMessage() = %q, want %q", got, want)
	}

	// With an expiry, expires_at joins the document (the second example).
	expires := time.Date(2026, time.August, 7, 9, 0, 0, 0, time.UTC)
	k.ExpiresAt = &expires
	// {"created_at":"2026-05-09T09:00:00.123456789Z","expires_at":"2026-08-07T09:00:00Z","key_id":…}
	const wantExpiring = "writ-api-key-signature-v1\n" + "864d791d773f4558b988959ae5758334090415b0a00a3565e8eb608102ff8b5d" + "\n"
	if got, err = k.SignatureMessage(); err != nil {
		t.Fatal(err)
	}
	if string(got) != wantExpiring {
		t.Errorf("SignatureMessage() with an expiry = %q, want %q", got, wantExpiring)
	}
}

// BenchmarkAuthenticate is a request's authentication once its key is
// remembered (the steady state) and when its signature is verified
// (the first request of a key each minute).
func BenchmarkAuthenticate(b *testing.B) {
	ctx := b.Context()
	store := &memStore{keys: map[string]*auth.Key{}}
	ring, signer := testRing(b, 1)
	_, token := putSigned(b, store, signer, "alice")
	b.Run("remembered", func(b *testing.B) {
		a := auth.NewAuthenticator(store, ring, nil)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Authenticate(ctx, token, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verified", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := auth.NewAuthenticator(store, ring, nil).Authenticate(ctx, token, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// One Authenticator serves every request of a server at once.
func TestAuthenticatorConcurrent(t *testing.T) {
	ctx := t.Context()
	store := &memStore{keys: map[string]*auth.Key{}}
	ring, signer := testRing(t, 1)
	var tokens []string
	for _, subject := range []string{"alice", "bob", "carol"} {
		_, token := putSigned(t, store, signer, subject)
		tokens = append(tokens, token)
	}
	a := auth.NewAuthenticator(store, ring, nil)
	errs := make(chan error, 8*50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := a.Authenticate(ctx, tokens[(g+i)%len(tokens)], t0.Add(time.Duration(i)*time.Second)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Authenticate = %v", err)
	}
}
