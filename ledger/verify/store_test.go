package verify_test

import (
	"testing"

	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger/verify"
)

// A full verification without the ring or the rules is refused, not run
// with fewer checks.
func TestVerifyStoreRefusesPartial(t *testing.T) {
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]verify.StoreOptions{
		"no ring and no rules": {},
		"no rules":             {Ring: ring},
		"no ring":              {Rules: verify.NewRules(nil)},
	} {
		if rep, err := verify.VerifyStore(t.Context(), nil, opts); err == nil {
			t.Errorf("%s: VerifyStore() = %+v, want an error", name, rep)
		}
	}
}
