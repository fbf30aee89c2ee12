package ledgertest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/ledger"
)

// testAPIKeys stores, reads, lists and revokes API keys: every writ store
// keeps them (auth.Store) next to the ledger.
func testAPIKeys(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	ks, ok := st.(auth.Store)
	if !ok {
		t.Fatalf("%T does not implement auth.Store", st)
	}
	t0 := time.Date(2026, time.May, 9, 9, 0, 0, 123456789, time.UTC)
	newKey := func(tenant, subject string, at time.Time, roles ...writ.Role) *auth.Key {
		t.Helper()
		k, _, err := auth.NewKey(tenant, subject, roles, at, nil)
		if err != nil {
			t.Fatalf("NewKey(%s, %s) = %v", tenant, subject, err)
		}
		return k
	}
	alice := newKey("acme", "alice@acme.example", t0, writ.RoleApprover)
	// The store keeps a key's signature as it is given; whether it
	// verifies is auth.Verify's question.
	alice.SignedBy, alice.SignedAt, alice.Signature = "writ-test+0badc0de", t0.Add(5), bytes.Repeat([]byte{0xa5}, 64)
	bob := newKey("acme", "bob@acme.example", t0.Add(time.Second), writ.RoleAgent, writ.RoleAuditor)
	carol := newKey("globex", "carol@globex.example", t0.Add(2*time.Second), writ.RoleAdmin)
	// An expiry is kept to the nanosecond.
	expires := t0.Add(90*24*time.Hour + 7)
	carol.ExpiresAt = &expires
	// An actor type and acts_for patterns are kept as given (docs/trust.md).
	if err := bob.SetActor(writ.ActorService, []string{"AGENT:agt_*", "*:bot-7"}); err != nil {
		t.Fatalf("SetActor = %v", err)
	}
	// Stored out of order: listing is by creation time.
	for _, k := range []*auth.Key{bob, carol, alice} {
		if err := ks.PutAPIKey(ctx, k); err != nil {
			t.Fatalf("PutAPIKey(%s) = %v", k.ID, err)
		}
	}

	sameKey := func(call string, got, want *auth.Key) {
		t.Helper()
		if got == nil || got.ID != want.ID || got.TenantID != want.TenantID || got.Subject != want.Subject || !slices.Equal(got.Roles, want.Roles) ||
			got.ActorType != want.ActorType || !slices.Equal(got.ActsFor, want.ActsFor) ||
			got.SecretHash != want.SecretHash || !got.CreatedAt.Equal(want.CreatedAt) || (got.RevokedAt == nil) != (want.RevokedAt == nil) ||
			(got.ExpiresAt == nil) != (want.ExpiresAt == nil) || (got.ExpiresAt != nil && !got.ExpiresAt.Equal(*want.ExpiresAt)) ||
			(got.RevokedAt != nil && !got.RevokedAt.Equal(*want.RevokedAt)) ||
			got.SignedBy != want.SignedBy || !got.SignedAt.Equal(want.SignedAt) || !bytes.Equal(got.Signature, want.Signature) {
			t.Errorf("%s = %+v, want %+v", call, got, want)
		}
	}
	for _, k := range []*auth.Key{alice, bob, carol} {
		got, err := ks.APIKey(ctx, k.ID)
		if err != nil {
			t.Fatalf("APIKey(%s) = %v", k.ID, err)
		}
		sameKey("APIKey("+k.ID+")", got, k)
	}
	list := func(tenant string, want ...*auth.Key) {
		t.Helper()
		got, err := ks.APIKeys(ctx, tenant)
		if err != nil {
			t.Fatalf("APIKeys(%q) = %v", tenant, err)
		}
		if len(got) != len(want) {
			t.Fatalf("APIKeys(%q) = %d keys, want %d", tenant, len(got), len(want))
		}
		for i := range want {
			sameKey("APIKeys("+tenant+")["+string(rune('0'+i))+"]", got[i], want[i])
		}
	}
	list("acme", alice, bob)
	list("globex", carol)
	list("", alice, bob, carol)
	list("initech")

	// A key id is stored once.
	wantCode(t, "PutAPIKey(alice again)", ks.PutAPIKey(ctx, alice), writ.ECONFLICT)
	impostor := *carol
	impostor.ID, impostor.TenantID, impostor.Subject = alice.ID, "globex", "mallory"
	wantCode(t, "PutAPIKey(another key under alice's id)", ks.PutAPIKey(ctx, &impostor), writ.ECONFLICT)
	if got, err := ks.APIKey(ctx, alice.ID); err != nil {
		t.Fatalf("APIKey(%s) = %v", alice.ID, err)
	} else {
		sameKey("APIKey(alice) after the conflicts", got, alice)
	}

	// Revocation: the first time stays.
	revokedAt := t0.Add(time.Hour + 7)
	if err := ks.RevokeAPIKey(ctx, bob.ID, revokedAt); err != nil {
		t.Fatalf("RevokeAPIKey(%s) = %v", bob.ID, err)
	}
	for _, again := range []time.Time{revokedAt.Add(time.Hour), revokedAt.Add(-time.Minute)} {
		if err := ks.RevokeAPIKey(ctx, bob.ID, again); err != nil {
			t.Errorf("RevokeAPIKey(%s) again at %s = %v, want a no-op", bob.ID, again, err)
		}
	}
	revoked := *bob
	revoked.RevokedAt = &revokedAt
	if got, err := ks.APIKey(ctx, bob.ID); err != nil {
		t.Fatalf("APIKey(%s) = %v", bob.ID, err)
	} else {
		sameKey("APIKey(bob) after revocations", got, &revoked)
	}
	list("acme", alice, &revoked)

	_, err := ks.APIKey(ctx, "key_nope")
	wantCode(t, "APIKey(key_nope)", err, writ.ENOTFOUND)
	wantCode(t, "RevokeAPIKey(key_nope)", ks.RevokeAPIKey(ctx, "key_nope", t0), writ.ENOTFOUND)
	list("", alice, &revoked, carol)

	// A key stored without a signature is signed once.
	signed := *carol
	signed.SignedBy, signed.SignedAt, signed.Signature = "writ-test+0badc0de", t0.Add(time.Hour), bytes.Repeat([]byte{0x5a}, 64)
	if err := ks.SignAPIKey(ctx, &signed); err != nil {
		t.Fatalf("SignAPIKey(%s) = %v", carol.ID, err)
	}
	again := signed
	again.Signature = bytes.Repeat([]byte{0x11}, 64)
	wantCode(t, "SignAPIKey(a signed key)", ks.SignAPIKey(ctx, &again), writ.ECONFLICT)
	aliceAgain := *alice
	aliceAgain.Signature = bytes.Repeat([]byte{0x11}, 64)
	wantCode(t, "SignAPIKey(alice, signed when stored)", ks.SignAPIKey(ctx, &aliceAgain), writ.ECONFLICT)
	unknown := signed
	unknown.ID = "key_nope"
	wantCode(t, "SignAPIKey(key_nope)", ks.SignAPIKey(ctx, &unknown), writ.ENOTFOUND)
	short := *bob
	short.SignedBy, short.SignedAt, short.Signature = "writ-test+0badc0de", t0, []byte{1, 2, 3}
	wantCode(t, "SignAPIKey(a 3-byte signature)", ks.SignAPIKey(ctx, &short), writ.EINVALID)
	noSigner := *bob
	noSigner.SignedAt, noSigner.Signature = t0, bytes.Repeat([]byte{1}, 64)
	wantCode(t, "SignAPIKey(no signing key id)", ks.SignAPIKey(ctx, &noSigner), writ.EINVALID)
	halfSigned, _, err := auth.NewKey("acme", "dave", []writ.Role{writ.RoleAgent}, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	halfSigned.Signature = bytes.Repeat([]byte{1}, 64)
	wantCode(t, "PutAPIKey(a signature without its signing key)", ks.PutAPIKey(ctx, halfSigned), writ.EINVALID)
	for _, at := range []time.Time{t0, t0.Add(-time.Hour), ledger.MaxTime.Add(time.Hour)} {
		early, _, err := auth.NewKey("acme", "erin", []writ.Role{writ.RoleAgent}, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		early.ExpiresAt = &at
		wantCode(t, "PutAPIKey(expiring at "+at.String()+")", ks.PutAPIKey(ctx, early), writ.EINVALID)
		if _, err := ks.APIKey(ctx, early.ID); writ.ErrorCode(err) != writ.ENOTFOUND {
			t.Errorf("APIKey(%s) after a refused put = %v, want ENOTFOUND", early.ID, err)
		}
	}
	if _, err := ks.APIKey(ctx, halfSigned.ID); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("APIKey(a key refused for its signature) = %v, want ENOTFOUND: nothing stored", err)
	}
	list("globex", &signed)
}
