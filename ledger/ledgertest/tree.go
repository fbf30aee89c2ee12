package ledgertest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// testTree appends records in batches of varying sizes and checks the
// stored tree against the records: every root, every inclusion proof and
// consistency proofs between sizes, all checked with tlog's verifiers.
func testTree(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	var raws [][]byte
	n := 0
	for _, batch := range []int{1, 2, 5, 1, 13, 3, 8, 4} {
		es := entries(records("acme", n+1, batch)...)
		// Another tenant in the same transaction keeps its own tree.
		es = append(es, entries(records("globex", n+1, 1)...)...)
		mustAppend(t, st, es...)
		for _, e := range es[:batch] {
			raws = append(raws, e.Raw)
		}
		n += batch
	}
	r := ledger.HashReader(ctx, st, "acme")
	// The leaf of each record is its stored bytes.
	var leaves []tlog.Hash
	for _, raw := range raws {
		leaves = append(leaves, tlog.RecordHash(raw))
	}
	roots := make([]tlog.Hash, n+1)
	for size := int64(1); size <= int64(n); size++ {
		root, err := tlog.TreeHash(size, r)
		if err != nil {
			t.Fatalf("TreeHash(%d) = %v", size, err)
		}
		roots[size] = root
		if want := referenceRoot(leaves[:size]); root != want {
			t.Errorf("TreeHash(%d) = %x, want %x from the records' leaves", size, root, want)
		}
	}
	for seq := int64(1); seq <= int64(n); seq++ {
		for _, size := range []int64{seq, int64(n)} {
			p, err := ledger.ProveInclusion(ctx, st, "acme", seq, size)
			if err != nil {
				t.Fatalf("ProveInclusion(%d, %d) = %v", seq, size, err)
			}
			if p.LeafHash != leaves[seq-1] {
				t.Errorf("ProveInclusion(%d, %d).LeafHash = %x, want %x", seq, size, p.LeafHash, leaves[seq-1])
			}
			if err := tlog.CheckRecord(p.Proof, size, roots[size], seq-1, leaves[seq-1]); err != nil {
				t.Errorf("CheckRecord(record %d in tree %d) = %v", seq, size, err)
			}
		}
	}
	for old := int64(1); old <= int64(n); old += 3 {
		p, err := ledger.ProveConsistency(ctx, st, "acme", old, int64(n))
		if err != nil {
			t.Fatalf("ProveConsistency(%d, %d) = %v", old, n, err)
		}
		if err := tlog.CheckTree(p, int64(n), roots[n], old, roots[old]); err != nil {
			t.Errorf("CheckTree(%d -> %d) = %v", old, n, err)
		}
	}
	if _, err := ledger.ProveInclusion(ctx, st, "acme", int64(n)+1, int64(n)+1); err == nil {
		t.Errorf("ProveInclusion beyond the tree = nil error")
	}
	// Hashes are per tenant.
	g, err := tlog.TreeHash(1, ledger.HashReader(ctx, st, "globex"))
	if err != nil || g == roots[1] {
		t.Errorf("globex's tree = %x, %v; want its own root", g, err)
	}
	if _, err := st.ReadHashes(ctx, "acme", []int64{tlog.StoredHashIndex(0, int64(n))}); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("ReadHashes(beyond the tree) = %v, want ENOTFOUND", err)
	}
}

// referenceRoot is RFC 6962's Merkle tree hash written out directly, to
// check the stored tree against something that shares no code with it.
func referenceRoot(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return tlog.NodeHash(referenceRoot(leaves[:k]), referenceRoot(leaves[k:]))
}

// testCheckpoints issues and stores checkpoints and checks that a second,
// different checkpoint of the same size is refused.
func testCheckpoints(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	signer := testSigner(t)
	verifiers := note.VerifierList(testVerifier(t))
	now := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
	if cp, err := st.LatestCheckpoint(ctx, "acme"); err != nil || cp != nil {
		t.Fatalf("LatestCheckpoint(empty) = %v, %v; want nil, nil", cp, err)
	}
	if _, err := ledger.IssueCheckpoint(ctx, checkpointStore(t, st), signer, "writ", "acme", now); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("IssueCheckpoint(no records) = %v, want ENOTFOUND", err)
	}
	mustAppend(t, st, entries(records("acme", 1, 5)...)...)
	cp5, err := ledger.IssueCheckpoint(ctx, checkpointStore(t, st), signer, "writ", "acme", now)
	if err != nil {
		t.Fatalf("IssueCheckpoint = %v", err)
	}
	origin, size, root, err := ledger.OpenCheckpoint(cp5.Note, verifiers)
	if err != nil || origin != "writ/acme" || size != 5 || root != cp5.Root {
		t.Errorf("OpenCheckpoint = %q %d %x %v, want writ/acme 5 %x", origin, size, root, err, cp5.Root)
	}
	again, err := ledger.IssueCheckpoint(ctx, checkpointStore(t, st), signer, "writ", "acme", now.Add(time.Second))
	if err != nil || again.Size != 5 || string(again.Note) != string(cp5.Note) {
		t.Errorf("IssueCheckpoint with no new records = %+v, %v; want the same checkpoint", again, err)
	}
	mustAppend(t, st, entries(records("acme", 6, 3)...)...)
	cp8, err := ledger.IssueCheckpoint(ctx, checkpointStore(t, st), signer, "writ", "acme", now.Add(2*time.Second))
	if err != nil || cp8.Size != 8 {
		t.Fatalf("IssueCheckpoint after 3 more = %+v, %v", cp8, err)
	}
	// Storing the same checkpoint again is fine; a different one of the same size is not.
	if err := st.PutCheckpoint(ctx, cp5); err != nil {
		t.Errorf("PutCheckpoint(same) = %v", err)
	}
	forged := *cp5
	forged.Root[0] ^= 1
	forged.Note, _ = note.Sign(&note.Note{Text: ledger.CheckpointText("writ/acme", 5, forged.Root)}, signer)
	if err := st.PutCheckpoint(ctx, &forged); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("PutCheckpoint(different root at size 5) = %v, want ECONFLICT", err)
	}
	all, err := st.Checkpoints(ctx, "acme")
	if err != nil || len(all) != 2 || all[0].Size != 5 || all[1].Size != 8 || all[0].Root != cp5.Root {
		t.Errorf("Checkpoints = %v, %v; want sizes 5 and 8", all, err)
	}
	latest, err := st.LatestCheckpoint(ctx, "acme")
	if err != nil || latest.Size != 8 || !latest.IssuedAt.Equal(cp8.IssuedAt) {
		t.Errorf("LatestCheckpoint = %+v, %v; want size 8", latest, err)
	}
	if at, err := st.CheckpointAt(ctx, "acme", 5); err != nil || at.Root != cp5.Root || string(at.Note) != string(cp5.Note) {
		t.Errorf("CheckpointAt(5) = %+v, %v; want the size-5 checkpoint", at, err)
	}
	if _, err := st.CheckpointAt(ctx, "acme", 6); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("CheckpointAt(6) = %v, want ENOTFOUND", err)
	}
	if _, err := st.CheckpointAt(ctx, "globex", 5); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("CheckpointAt(another tenant) = %v, want ENOTFOUND", err)
	}
	if other, err := st.Checkpoints(ctx, "globex"); err != nil || len(other) != 0 {
		t.Errorf("Checkpoints(globex) = %v, %v; want none", other, err)
	}
	if _, _, _, err := ledger.OpenCheckpoint(cp5.Note, note.VerifierList()); !errors.As(err, new(*note.UnverifiedNoteError)) {
		t.Errorf("OpenCheckpoint without the key = %v, want an unverified note", err)
	}
}

const testSeed = "writ-ledgertest-checkpoint-seed!"

// testKeys is a fixed note key pair (deterministic, for tests only).
func testKeys(t *testing.T) (skey, vkey string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(bytes.NewReader([]byte(testSeed)), "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	return skey, vkey
}

func testSigner(t *testing.T) note.Signer {
	t.Helper()
	skey, _ := testKeys(t)
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testVerifier(t *testing.T) note.Verifier {
	t.Helper()
	_, vkey := testKeys(t)
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
