package ledgertest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
)

// revocationFixture is a store with two API keys of acme, a key of
// globex, and a signer for checkpoints.
type revocationFixture struct {
	st       ledger.Store
	ks       auth.Store
	signer   note.Signer
	verifier note.Verifier
	t0       time.Time
	alice    *auth.Key
	bob      *auth.Key
	carol    *auth.Key // of globex, which has no record
}

func newRevocationFixture(t *testing.T, st ledger.Store) *revocationFixture {
	t.Helper()
	ks, ok := st.(auth.Store)
	if !ok {
		t.Fatalf("%T does not implement auth.Store", st)
	}
	f := &revocationFixture{st: st, ks: ks, signer: testSigner(t), verifier: testVerifier(t), t0: time.Date(2026, time.May, 9, 9, 0, 0, 0, time.UTC)}
	for _, k := range []struct {
		key    **auth.Key
		tenant string
	}{{&f.alice, "acme"}, {&f.bob, "acme"}, {&f.carol, "globex"}} {
		var err error
		if *k.key, _, err = auth.NewKey(k.tenant, "someone", []writ.Role{writ.RoleAgent}, f.t0, nil); err != nil {
			t.Fatal(err)
		}
		if err := ks.PutAPIKey(t.Context(), *k.key); err != nil {
			t.Fatalf("PutAPIKey = %v", err)
		}
	}
	return f
}

func (f *revocationFixture) revoke(t *testing.T, k *auth.Key, at time.Time) {
	t.Helper()
	if err := f.ks.RevokeAPIKey(t.Context(), k.ID, at); err != nil {
		t.Fatalf("RevokeAPIKey(%s) = %v", k.ID, err)
	}
}

// checkpoint issues a checkpoint of acme's tree as it stands and returns
// what it states of the revocations.
func (f *revocationFixture) checkpoint(t *testing.T) (*ledger.Checkpoint, ledger.Revocations) {
	t.Helper()
	cp, err := ledger.IssueCheckpoint(t.Context(), checkpointStore(t, f.st), f.signer, "writ", "acme", f.t0)
	if err != nil {
		t.Fatalf("IssueCheckpoint = %v", err)
	}
	n, err := note.Open(cp.Note, note.VerifierList(f.verifier))
	if err != nil {
		t.Fatalf("note.Open(checkpoint) = %v", err)
	}
	r, err := ledger.CheckpointRevocations(n.Text)
	if err != nil {
		t.Fatalf("CheckpointRevocations(%q) = %v", n.Text, err)
	}
	return cp, r
}

func (f *revocationFixture) key(t *testing.T, id string) *auth.Key {
	t.Helper()
	k, err := f.ks.APIKey(t.Context(), id)
	if err != nil {
		t.Fatalf("APIKey(%s) = %v", id, err)
	}
	return k
}

// verify runs verify.Verify over the store (hashes, chain, tree and
// checkpoints: the records of the suite are not signed), read through a
// wrapper that has only ledger.Store's methods: the revocations are
// checked because the caller hands over the API keys, never because
// verification found them on the source (a wrapper used to lose them,
// and the check with them, without a word).
func (f *revocationFixture) verify(t *testing.T) *verify.Report {
	t.Helper()
	wrapped := struct{ ledger.Store }{f.st}
	rep, err := verify.Verify(t.Context(), wrapped, verify.VerifyOptions{Hashes: wrapped, Revocations: f.ks})
	if err != nil {
		t.Fatalf("Verify = %v", err)
	}
	return rep
}

// testRevocations: a revocation is placed after its tenant's chain head,
// and the first checkpoint of a larger tree commits to it.
func testRevocations(t *testing.T, st ledger.Store) {
	f := newRevocationFixture(t, st)
	// Before acme's first record: placed at 0.
	f.revoke(t, f.alice, f.t0.Add(time.Minute))
	mustAppend(t, st, entries(records("acme", 1, 3)...)...)
	f.revoke(t, f.bob, f.t0.Add(2*time.Minute))
	// Revoking again changes neither the time nor the place.
	mustAppend(t, st, entries(records("acme", 4, 1)...)...)
	f.revoke(t, f.bob, f.t0.Add(time.Hour))
	f.revoke(t, f.carol, f.t0.Add(3*time.Minute))

	alice, bob := f.key(t, f.alice.ID), f.key(t, f.bob.ID)
	for _, c := range []struct {
		k    *auth.Key
		at   time.Time
		head int64
	}{{alice, f.t0.Add(time.Minute), 0}, {bob, f.t0.Add(2 * time.Minute), 3}} {
		if c.k.RevokedAt == nil || !c.k.RevokedAt.Equal(c.at) || c.k.RevokedAfter == nil || *c.k.RevokedAfter != c.head {
			t.Errorf("key %s: revoked at %v after %v, want %v after %d", c.k.ID, c.k.RevokedAt, c.k.RevokedAfter, c.at, c.head)
		}
	}
	keys, err := f.ks.APIKeys(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint of size 4 commits to both (placed at 0 and 3).
	cp, stated := f.checkpoint(t)
	if want := ledger.RevocationsBefore(keys, 4); cp.Size != 4 || stated != want || stated.Count != 2 {
		t.Errorf("checkpoint of size %d states %+v, want size 4 and %+v", cp.Size, stated, want)
	}
	if !strings.Contains(string(cp.Note), "\nwrit-revocations 2 sha256:") {
		t.Errorf("checkpoint note %q has no revocations line", cp.Note)
	}
	rep := f.verify(t)
	if len(rep.Findings) != 0 {
		t.Fatalf("Verify findings = %+v, want none", rep.Findings)
	}
	// globex has no record: its revocation is uncovered, acme's are not.
	var notices []string
	for _, n := range rep.Notices {
		if n.Kind == verify.FindingUncoveredRevocations {
			notices = append(notices, n.TenantID+": "+n.Detail)
		}
	}
	if len(notices) != 1 || !strings.HasPrefix(notices[0], "globex: ") || !strings.Contains(notices[0], f.carol.ID) {
		t.Errorf("uncovered revocation notices = %q, want one for globex naming %s", notices, f.carol.ID)
	}
	// With RequireCheckpoints it is a finding.
	rep, err = verify.Verify(t.Context(), st, verify.VerifyOptions{RequireCheckpoints: true, Hashes: st, Revocations: revocationSource(t, st)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != verify.FindingUncoveredRevocations || rep.Findings[0].TenantID != "globex" {
		t.Errorf("Verify(RequireCheckpoints) findings = %+v, want one uncovered_revocations of globex", rep.Findings)
	}
}

// RevocationTamperer edits a store's API key revocations behind writ's
// back, its append-only triggers out of the way.
type RevocationTamperer interface {
	// SetRevocationColumn sets one column of a key's revocation
	// (revoked_ns, head_seq) to value.
	SetRevocationColumn(t *testing.T, keyID, column string, value any)
	// DeleteRevocation deletes a key's revocation.
	DeleteRevocation(t *testing.T, keyID string)
	// InsertRevocation stores a revocation as given.
	InsertRevocation(t *testing.T, keyID string, revokedNS, headSeq int64)
	// DeleteAPIKey deletes a key's row (not its revocation).
	DeleteAPIKey(t *testing.T, keyID string)
}

// RunRevocationTamper edits the revocations of API keys as someone who can
// write the store but holds no signing key would, one fresh store each,
// after checkpoints committed to them, and checks that verify.Verify
// reports a revocation_mismatch on a checkpoint of the tenant. open
// returns a fresh, empty store (closed by the suite) and its
// RevocationTamperer.
func RunRevocationTamper(t *testing.T, open func(t *testing.T) (ledger.Store, RevocationTamperer)) {
	cases := []struct {
		name string
		edit func(t *testing.T, tm RevocationTamperer, f *revocationFixture)
		// sizes are the checkpoints that must report a mismatch.
		sizes []int64
	}{
		{"Deleted", func(t *testing.T, tm RevocationTamperer, f *revocationFixture) {
			// The stolen key opens again; the checkpoint says it was revoked.
			tm.DeleteRevocation(t, f.alice.ID)
		}, []int64{3}},
		{"TimeMovedLater", func(t *testing.T, tm RevocationTamperer, f *revocationFixture) {
			tm.SetRevocationColumn(t, f.alice.ID, "revoked_ns", f.t0.Add(30*24*time.Hour).UnixNano())
		}, []int64{3}},
		{"PlacedLater", func(t *testing.T, tm RevocationTamperer, f *revocationFixture) {
			tm.SetRevocationColumn(t, f.alice.ID, "head_seq", int64(3))
		}, []int64{3}},
		{"PlacedEarlier", func(t *testing.T, tm RevocationTamperer, f *revocationFixture) {
			tm.SetRevocationColumn(t, f.alice.ID, "head_seq", int64(1))
		}, []int64{2}},
		{"PlaceRemoved", func(t *testing.T, tm RevocationTamperer, f *revocationFixture) {
			tm.SetRevocationColumn(t, f.alice.ID, "head_seq", nil)
		}, []int64{3}},
		{"KeysDeleted", func(t *testing.T, tm RevocationTamperer, f *revocationFixture) {
			// Every key of the tenant gone, and the revocation with them.
			tm.DeleteRevocation(t, f.alice.ID)
			tm.DeleteAPIKey(t, f.alice.ID)
			tm.DeleteAPIKey(t, f.bob.ID)
		}, []int64{3}},
		{"Forged", func(t *testing.T, tm RevocationTamperer, f *revocationFixture) {
			// Bob's key revoked behind writ's back, as if before record 2.
			tm.InsertRevocation(t, f.bob.ID, f.t0.UnixNano(), 1)
		}, []int64{2, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, tm := open(t)
			closeAtEnd(t, st)
			f := newRevocationFixture(t, st)
			mustAppend(t, st, entries(records("acme", 1, 2)...)...)
			if _, r := f.checkpoint(t); r.Count != 0 {
				t.Fatalf("checkpoint 2 states %+v, want no revocation", r)
			}
			f.revoke(t, f.alice, f.t0.Add(time.Hour)) // placed at 2
			mustAppend(t, st, entries(records("acme", 3, 1)...)...)
			if _, r := f.checkpoint(t); r.Count != 1 {
				t.Fatalf("checkpoint 3 states %+v, want one revocation", r)
			}
			if rep := f.verify(t); len(rep.Findings) != 0 {
				t.Fatalf("Verify before the edit: findings %+v", rep.Findings)
			}
			tc.edit(t, tm, f)
			rep := f.verify(t)
			var sizes []int64
			for _, fd := range rep.Findings {
				if fd.Kind != verify.FindingRevocationMismatch || fd.TenantID != "acme" {
					t.Errorf("finding %+v, want only revocation_mismatch of acme", fd)
					continue
				}
				sizes = append(sizes, fd.TreeSize)
			}
			if !slices.Equal(sizes, tc.sizes) {
				t.Errorf("revocation_mismatch on checkpoints %v, want %v (findings %+v)", sizes, tc.sizes, rep.Findings)
			}
		})
	}
}
