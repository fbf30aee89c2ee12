package ledgertest

import (
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
	bob := newKey("acme", "bob@acme.example", t0.Add(time.Second), writ.RoleAgent, writ.RoleAuditor)
	carol := newKey("globex", "carol@globex.example", t0.Add(2*time.Second), writ.RoleAdmin)
	// Stored out of order: listing is by creation time.
	for _, k := range []*auth.Key{bob, carol, alice} {
		if err := ks.PutAPIKey(ctx, k); err != nil {
			t.Fatalf("PutAPIKey(%s) = %v", k.ID, err)
		}
	}

	sameKey := func(call string, got, want *auth.Key) {
		t.Helper()
		if got == nil || got.ID != want.ID || got.TenantID != want.TenantID || got.Subject != want.Subject || !slices.Equal(got.Roles, want.Roles) ||
			got.SecretHash != want.SecretHash || !got.CreatedAt.Equal(want.CreatedAt) || (got.RevokedAt == nil) != (want.RevokedAt == nil) ||
			(got.RevokedAt != nil && !got.RevokedAt.Equal(*want.RevokedAt)) {
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
}
