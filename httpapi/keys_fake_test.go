package httpapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/pack"
)

// fakeKeys is an auth.Store in memory. Listing, storing and revoking
// note the call's principal and tenant on svc, as the service's fakes
// do; looking a key up does not (the routes look a key up before they
// change it).
type fakeKeys struct {
	svc  *fakeService
	mu   sync.Mutex
	keys []*auth.Key
}

// testSigner signs API keys for the fakes; testVerifier accepts its
// signatures and knows no other signer.
type testSigner struct{}

func (testSigner) KeyID() string                          { return "test-signer+00000000" }
func (testSigner) SignMessage(msg []byte) ([]byte, error) { return append([]byte("sig:"), msg...), nil }

type testVerifier struct{}

func (testVerifier) VerifyRecordSignature(id string, msg, sig []byte, _ time.Time) error {
	if id != (testSigner{}).KeyID() {
		return keyring.ErrUnknownKey
	}
	if string(sig) != "sig:"+string(msg) {
		return errors.New("bad signature")
	}
	return nil
}

// keyAdmin returns the key routes' configuration over k.
func (k *fakeKeys) keyAdmin() *KeyAdmin {
	return &KeyAdmin{Store: k, Signer: func(time.Time) (auth.Signer, error) { return testSigner{}, nil }, Verifier: testVerifier{}}
}

// newFakeKeys returns a store holding one signed approver key of acme
// (key_maria) and one of globex (key_globex_bob).
func newFakeKeys(svc *fakeService) *fakeKeys {
	k := &fakeKeys{svc: svc}
	for _, kk := range []struct{ id, tenant, subject string }{{"key_maria", "acme", "maria"}, {"key_globex_bob", "globex", "bob"}} {
		key := &auth.Key{ID: kk.id, TenantID: kk.tenant, Subject: kk.subject, Roles: []writ.Role{writ.RoleApprover}, SecretHash: "00", CreatedAt: testTime}
		if err := auth.Sign(key, testSigner{}, testTime); err != nil {
			panic(err)
		}
		k.keys = append(k.keys, key)
	}
	return k
}

func (k *fakeKeys) note(ctx context.Context, tenantID string) {
	if k.svc == nil {
		return
	}
	k.svc.mu.Lock()
	k.svc.saw(ctx, tenantID)
	k.svc.keyCalls++
	k.svc.mu.Unlock()
}

func (k *fakeKeys) PutAPIKey(ctx context.Context, key *auth.Key) error {
	k.note(ctx, key.TenantID)
	k.mu.Lock()
	defer k.mu.Unlock()
	if slices.ContainsFunc(k.keys, func(x *auth.Key) bool { return x.ID == key.ID }) {
		return writ.Errorf(writ.ECONFLICT, "key %s exists", key.ID)
	}
	c := *key
	k.keys = append(k.keys, &c)
	return nil
}

func (k *fakeKeys) APIKey(_ context.Context, id string) (*auth.Key, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, x := range k.keys {
		if x.ID == id {
			c := *x
			return &c, nil
		}
	}
	return nil, writ.Errorf(writ.ENOTFOUND, "API key %q not found", id)
}

func (k *fakeKeys) APIKeys(ctx context.Context, tenantID string) ([]*auth.Key, error) {
	k.note(ctx, tenantID)
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*auth.Key
	for _, x := range k.keys {
		if tenantID == "" || x.TenantID == tenantID {
			c := *x
			out = append(out, &c)
		}
	}
	return out, nil
}

func (k *fakeKeys) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	k.mu.Lock()
	var key *auth.Key
	for _, x := range k.keys {
		if x.ID == id {
			key = x
		}
	}
	k.mu.Unlock()
	if key == nil {
		return writ.Errorf(writ.ENOTFOUND, "API key %q not found", id)
	}
	k.note(ctx, key.TenantID)
	k.mu.Lock()
	defer k.mu.Unlock()
	if key.RevokedAt == nil {
		at = at.UTC()
		key.RevokedAt = &at
	}
	return nil
}

func (k *fakeKeys) SignAPIKey(context.Context, *auth.Key) error {
	return errors.New("fakeKeys: SignAPIKey is not used by the key routes")
}

// refundPack is the refund example's pack, which GET /v1/pack describes
// in the tests.
var refundPack = func() *pack.Pack {
	p, err := pack.Load("../examples/refund")
	if err != nil {
		panic(err)
	}
	return p
}()
