package bundle_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/sqlite"
)

// TestRevocationsInBundle exports a ledger whose tenant revoked an API
// key between two records: the bundle carries the revocation, its
// checkpoint commits to it, and verify-bundle checks the one against
// the other: deleted or retimed, it is a revocation_mismatch.
func TestRevocationsInBundle(t *testing.T) {
	ctx := context.Background()
	ring := seededRingFromKey(t, seedKey(t, exampleKey, exampleSeed()), time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pk, err := pack.Load(examplePack)
	if err != nil {
		t.Fatal(err)
	}
	blobs := []ledger.Blob{{Hash: pk.Hash, Kind: "pack_manifest", Data: pk.Manifest}}
	for _, f := range pk.Files {
		blobs = append(blobs, ledger.Blob{Hash: f.Hash, Kind: "pack_file", Data: f.Data})
	}
	if err := st.PutBlobs(ctx, blobs); err != nil {
		t.Fatal(err)
	}
	seal := ledger.NewSeal(keySource(ring))
	recs := exampleRecords(pk.Hash)
	appendRec := func(rec *writ.Record) {
		if err := st.Append(ctx, []*ledger.Entry{ledgertest.NewEntry(rec)}, seal); err != nil {
			t.Fatal(err)
		}
	}
	appendRec(recs[0])
	key, _, err := auth.NewKey(exampleTenant, "alice@acme.example", []writ.Role{"auditor"}, recs[0].Timestamp, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAPIKey(ctx, key.ID, recs[0].Timestamp.Add(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	appendRec(recs[1])
	appendRec(recs[2])
	signer, err := ring.Signer(time.Date(2026, 5, 9, 9, 32, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ledger.IssueCheckpoint(ctx, st, signer, "writ", exampleTenant, time.Date(2026, 5, 9, 9, 32, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cp.Note, []byte("\nwrit-revocations 1 sha256:")) {
		t.Fatalf("the checkpoint commits to no revocation:\n%s", cp.Note)
	}
	var buf bytes.Buffer
	if _, err := bundle.ExportWith(ctx, st, &buf, bundle.Options{Keys: ring.Keys(), LedgerName: "writ", CreatedAt: time.Date(2026, 5, 9, 9, 35, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	published, err := keyring.Publish("writ", ring.Keys(), time.Date(2026, 5, 9, 9, 35, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := keyring.ParsePublished(published)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, data []byte) *verify.Report {
		t.Helper()
		rep, err := openBytes(t, data).Verify(ctx, bundle.VerifyConfig{Trusted: trusted})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rep
	}
	a := readArchive(t, buf.Bytes())
	const entry = "tenants/acme/revocations.json"
	if !strings.Contains(string(a.files[entry]), key.ID) {
		t.Fatalf("%s = %q, want the revocation of %s", entry, a.files[entry], key.ID)
	}
	if rep := check("the export", buf.Bytes()); !rep.Intact() || len(rep.Notices) != 0 {
		t.Fatalf("the export: %+v", rep)
	}
	for _, tc := range []struct {
		name   string
		tamper func(a *archive)
	}{
		{"revocations deleted", func(a *archive) { a.remove(entry) }},
		{"revocation retimed", func(a *archive) {
			a.files[entry] = bytes.Replace(a.files[entry], []byte(`"revoked_at": "2026-05-09T09:31:42.5Z"`), []byte(`"revoked_at": "2026-05-09T09:31:43Z"`), 1)
		}},
		{"revocation moved after the checkpoint", func(a *archive) {
			a.files[entry] = bytes.Replace(a.files[entry], []byte(`"position": 1`), []byte(`"position": 3`), 1)
		}},
	} {
		c := a.clone()
		tc.tamper(c)
		if bytes.Equal(c.bytes(t), a.bytes(t)) {
			t.Fatalf("%s: the tamper changed nothing:\n%s", tc.name, a.files[entry])
		}
		if got := kinds(check(tc.name, c.bytes(t))); !slices.Contains(got, verify.FindingRevocationMismatch) {
			t.Errorf("%s: findings %v, want %s", tc.name, got, verify.FindingRevocationMismatch)
		}
	}
	// Malformed: refused when the bundle is opened.
	for _, bad := range []string{`{}`, `[{"key_id":"","revoked_at":"2026-05-09T09:31:42Z","position":1}]`, `[{"key_id":"k","revoked_at":"2026-05-09T09:31:42Z","position":1,"x":1}]`,
		`[{"key_id":"b","revoked_at":"2026-05-09T09:31:42Z","position":1},{"key_id":"a","revoked_at":"2026-05-09T09:31:42Z","position":1}]`} {
		c := a.clone()
		c.files[entry] = []byte(bad)
		data := c.bytes(t)
		if _, err := bundle.Open(bytes.NewReader(data), int64(len(data))); err == nil || !strings.Contains(err.Error(), "revocations.json") {
			t.Errorf("Open(revocations.json %s) = %v, want an error naming it", bad, err)
		}
	}
}

// withoutKeys is a store that has every method of ledger.Store and no
// others: it cannot list its API keys.
type withoutKeys struct{ ledger.Store }

// TestExportRefusesAStoreWithoutKeys: an export from a store that cannot
// list its API keys is refused, not written as if no key had been
// revoked (a bundle that silently drops revocations fails open).
func TestExportRefusesAStoreWithoutKeys(t *testing.T) {
	ring := seededRing(t, "writ", 1, time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC))
	st := buildRefundLedger(t, ring, newSeededReader(2), refundRequests(t)[:1])
	var buf bytes.Buffer
	_, err := bundle.ExportWith(t.Context(), withoutKeys{st}, &buf, bundle.Options{Keys: ring.Keys(), LedgerName: "writ"})
	if err == nil || !strings.Contains(err.Error(), "cannot list its API keys") {
		t.Fatalf("ExportWith(a store without API keys) = %v, want it refused", err)
	}
	if _, err := bundle.ExportWith(t.Context(), st, &buf, bundle.Options{Keys: ring.Keys(), LedgerName: "writ"}); err != nil {
		t.Fatalf("ExportWith(the store itself) = %v", err)
	}
}
