package bundle_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/witness"
)

// cosignStored cosigns the stored checkpoint of size with a new witness
// key named name, stores the cosignature, and returns the key.
func cosignStored(t *testing.T, st ledger.Store, tenant string, size int64, name string) witness.Key {
	t.Helper()
	ctx := context.Background()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	k, err := witness.ParseKey(cv)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := st.CheckpointAt(ctx, tenant, size)
	if err != nil {
		t.Fatal(err)
	}
	text := noteText(t, cp.Note)
	signed, err := note.Sign(&note.Note{Text: text}, signer)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(signed, []byte("\n"))
	line := lines[len(lines)-2]
	at, err := witness.Verify(cp.Note, line, k)
	if err != nil {
		t.Fatal(err)
	}
	c := &ledger.Cosignature{TenantID: tenant, Size: size, Witness: k.Name(), KeyHash: k.Hash(), Line: line, CosignedAt: at, ReceivedAt: time.Now()}
	if err := st.(ledger.CosignatureStore).PutCosignature(ctx, c); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestExportCarriesCosignatures: the witnesses' cosignatures of exported
// checkpoints are in the bundle as tenants/<t>/cosignatures/<size>.sigs,
// byte for byte; export --cosigned ends each tenant at its newest
// cosigned checkpoint; verify-bundle --witness (CheckQuorum) reads them.
func TestExportCarriesCosignatures(t *testing.T) {
	ctx := context.Background()
	ring := seededRing(t, "writ", 1, exampleClock.Add(-time.Hour))
	st := buildRefundLedger(t, ring, newSeededReader(1), refundRequests(t))
	head, err := st.Head(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	n := head.Seq
	k1 := cosignStored(t, st, "acme", n, "w1.example/w")
	k2 := cosignStored(t, st, "acme", n, "w2.example/w")

	// The ledger grows past the cosigned checkpoint, and a checkpoint no
	// witness cosigned covers the new record.
	if err := st.Append(ctx, []*ledger.Entry{ledgertest.NewEntry(ledgertest.NewRecord("acme", 1000))}, ledger.Seal); err != nil {
		t.Fatal(err)
	}
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.IssueCheckpoint(ctx, st, signer, "writ", "acme", exampleClock); err != nil {
		t.Fatal(err)
	}

	full := export(t, st, ring.Keys())
	a := readArchive(t, full)
	member := "tenants/acme/cosignatures/" + strconv.FormatInt(n, 10) + ".sigs"
	cos, err := st.Cosignatures(ctx, "acme")
	if err != nil || len(cos) != 2 {
		t.Fatalf("Cosignatures = %d, %v", len(cos), err)
	}
	if got, want := a.files[member], append(append([]byte(nil), cos[0].Line...), cos[1].Line...); !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, want the stored lines %q", member, got, want)
	}
	b := openBytes(t, full)
	if got, err := b.CosignatureLines(ctx, "acme", n); err != nil || len(got) == 0 {
		t.Fatalf("CosignatureLines(acme, %d) = %q, %v", n, got, err)
	}
	// The full export's newest checkpoint is not cosigned.
	fs, err := witness.CheckQuorum(ctx, b, []witness.Key{k1, k2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Kind != witness.FindingWitnessQuorum || fs[0].TreeSize != n+1 {
		t.Errorf("CheckQuorum(full export) = %+v, want witness_quorum at %d", fs, n+1)
	}

	var buf bytes.Buffer
	sum, err := bundle.ExportWith(ctx, st, &buf, bundle.Options{Keys: ring.Keys(), Cosigned: true, CreatedAt: exampleClock.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != n || sum.Cosignatures != 2 {
		t.Errorf("ExportWith(Cosigned) = %d records and %d cosignatures, want %d and 2", sum.Records, sum.Cosignatures, n)
	}
	cb := openBytes(t, buf.Bytes())
	if rep := verifyBundle(t, cb); !rep.Intact() {
		t.Errorf("verifyBundle(export --cosigned) = %v, want intact", kinds(rep))
	}
	if fs, err := witness.CheckQuorum(ctx, cb, []witness.Key{k1, k2}, 2); err != nil || len(fs) != 0 {
		t.Errorf("CheckQuorum(export --cosigned, 2 of 2) = %+v, %v; want none", fs, err)
	}
	if meta := cb.Meta(); len(meta.Tenants) != 1 || meta.Tenants[0].Records != n {
		t.Errorf("export --cosigned bundle.json tenants = %+v, want acme with %d records", meta.Tenants, n)
	}

	if _, err := bundle.ExportWith(ctx, st, &bytes.Buffer{}, bundle.Options{Cosigned: true, Signer: signer}); err == nil {
		t.Error("ExportWith(Cosigned and Signer) = nil error")
	}

	for _, name := range []string{"tenants/acme/cosignatures/0.sigs", "tenants/acme/cosignatures/01.sigs", "tenants/acme/cosignatures/5.sig", "tenants/acme/cosignatures/x.sigs"} {
		bad := a.clone()
		bad.set(name, cos[0].Line)
		data := bad.bytes(t)
		if _, err := bundle.Open(bytes.NewReader(data), int64(len(data))); err == nil || !strings.Contains(err.Error(), "cosignatures") {
			t.Errorf("Open(bundle with %s) = %v, want an error about cosignatures", name, err)
		}
	}
}
