package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/sqlite"
)

// refundLedger is the refund examples' ledger, built once: every request
// through the real engine, signed by a key of a ring in a temporary
// directory, generated at the examples' clock.
type refundLedger struct {
	st     *sqlite.Store
	ring   *keyring.Ring
	bundle []byte
}

func newRefundLedger(t *testing.T) *refundLedger {
	t.Helper()
	ring, err := keyring.Open(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Generate(rand.Reader, exampleClock, ""); err != nil {
		t.Fatal(err)
	}
	st := buildRefundLedger(t, ring, nil, refundRequests(t))
	return &refundLedger{st: st, ring: ring, bundle: export(t, st, ring.Keys())}
}

func TestExportRoundTrip(t *testing.T) {
	ctx := context.Background()
	l := newRefundLedger(t)
	b := openBytes(t, l.bundle)
	if got, want := b.LedgerName(), "writ"; got != want {
		t.Errorf("LedgerName = %q, want %q", got, want)
	}
	if !slices.EqualFunc(b.Keys(), l.ring.Keys(), func(a, b keyring.Key) bool { return a.ID == b.ID && a.ValidFrom.Equal(b.ValidFrom) }) {
		t.Errorf("Keys = %v, want %v", b.Keys(), l.ring.Keys())
	}
	tenants, _ := l.st.Tenants(ctx)
	got, _ := b.Tenants(ctx)
	if !slices.Equal(got, tenants) || len(got) == 0 {
		t.Fatalf("Tenants = %v, want %v", got, tenants)
	}
	for _, tenant := range tenants {
		// Records exactly as sealed, in seq order, paged as the store pages.
		for _, limit := range []int{1, 3, 2048} {
			var after int64
			var all [][]byte
			for {
				page, err := b.Chain(ctx, tenant, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page {
					all = append(all, r)
				}
				if len(page) < limit {
					break
				}
				after += int64(len(page))
			}
			want, _ := l.st.Chain(ctx, tenant, 0, 1<<20)
			if len(all) != len(want) {
				t.Fatalf("limit %d: %d records, want %d", limit, len(all), len(want))
			}
			for i := range want {
				if !bytes.Equal(all[i], want[i]) {
					t.Fatalf("record %d differs from the stored bytes:\n%s\n%s", i+1, all[i], want[i])
				}
			}
		}
		head, _ := l.st.Head(ctx, tenant)
		if h, _ := b.Head(ctx, tenant); h != head {
			t.Errorf("Head = %+v, want %+v", h, head)
		}
		cps, _ := b.Checkpoints(ctx, tenant)
		want, _ := l.st.Checkpoints(ctx, tenant)
		if len(cps) != len(want) || len(cps) == 0 {
			t.Fatalf("%d checkpoints, want %d (>0)", len(cps), len(want))
		}
		for i := range cps {
			if cps[i].Size != want[i].Size || cps[i].Root != want[i].Root || !bytes.Equal(cps[i].Note, want[i].Note) {
				t.Errorf("checkpoint %d differs from the stored one", i)
			}
		}
	}
	// The pinned pack travels with the records.
	if _, err := pack.LoadPinned(ctx, b, packHashOf(t, l.st)); err != nil {
		t.Errorf("the pinned pack does not load from the bundle: %v", err)
	}
	// The same ledger exported at the same time gives the same bytes.
	if again := export(t, l.st, l.ring.Keys()); !bytes.Equal(again, l.bundle) {
		t.Error("exporting twice gave different bundles")
	}
}

func packHashOf(t *testing.T, st *sqlite.Store) string {
	t.Helper()
	raws, err := st.Chain(context.Background(), "acme", 0, 1)
	if err != nil || len(raws) == 0 {
		t.Fatal("no record", err)
	}
	var r struct {
		Lineage struct {
			PackHash string `json:"pack_hash"`
		} `json:"lineage"`
	}
	if err := json.Unmarshal(raws[0], &r); err != nil {
		t.Fatal(err)
	}
	return r.Lineage.PackHash
}

func TestExportVerifiesIntact(t *testing.T) {
	l := newRefundLedger(t)
	rep := verifyBundle(t, openBytes(t, l.bundle))
	if !rep.Intact() {
		t.Fatalf("the exported ledger does not verify: %+v", rep.Findings)
	}
	if rep.Records < int64(len(refundRequests(t))) || rep.Checkpoints == 0 {
		t.Errorf("verified %d records and %d checkpoints; want every example and a checkpoint", rep.Records, rep.Checkpoints)
	}
	// And the store itself agrees.
	storeRep, err := verify.Verify(context.Background(), l.st, verify.VerifyOptions{Keys: l.ring, Rules: verify.NewRules(pinned.NewPacks(l.st)), Hashes: l.st, Revocations: l.st})
	if err != nil || !storeRep.Intact() {
		t.Fatalf("the store does not verify: %v %+v", err, storeRep)
	}
	if storeRep.Records != rep.Records || storeRep.Checkpoints != rep.Checkpoints {
		t.Errorf("the bundle verified %d records and %d checkpoints; the store %d and %d", rep.Records, rep.Checkpoints, storeRep.Records, storeRep.Checkpoints)
	}
}

// TestTamper changes an exported bundle one way per case and checks that
// verification reports exactly the kinds of finding the change causes.
// Where a change to the records also changes the tree, the checkpoints
// expose it too (root_mismatch); the cases marked reseal re-sign the
// checkpoints over the changed tree with the real key (an insider, or a
// change made before the checkpoint), which isolates the record finding.
func TestTamper(t *testing.T) {
	l := newRefundLedger(t)
	base := readArchive(t, l.bundle)
	const tenant = "acme"
	n := len(base.lines(tenant))
	if n < 6 {
		t.Fatalf("the refund ledger has %d records; the cases need 6", n)
	}
	legit, err := l.ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	intruderRing := seededRing(t, "intruder", 0x66, exampleClock.Add(-time.Hour))
	intruder, err := intruderRing.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	cpName := base.checkpointNames(tenant)[len(base.checkpointNames(tenant))-1]
	cpText := noteText(t, base.files[cpName])
	origin, cpSize, cpRoot, err := ledger.ParseCheckpointText(cpText)
	if err != nil {
		t.Fatal(err)
	}
	otherRoot := cpRoot
	otherRoot[0] ^= 1

	cases := []struct {
		name   string
		tamper func(a *archive)
		reseal bool
		want   []string
	}{
		{"one byte of a record", func(a *archive) {
			lines := a.lines(tenant)
			i := bytes.Index(lines[4], []byte(`"record_id":"`)) + len(`"record_id":"`) + 3
			lines[4][i] ^= 0x01 // an id character, still JSON
			a.setLines(tenant, lines)
		}, false, []string{verify.FindingHashMismatch, verify.FindingRootMismatch, verify.FindingUncovered}},
		{"one byte of a record, checkpoints re-signed", func(a *archive) {
			lines := a.lines(tenant)
			i := bytes.Index(lines[4], []byte(`"record_id":"`)) + len(`"record_id":"`) + 3
			lines[4][i] ^= 0x01
			a.setLines(tenant, lines)
		}, true, []string{verify.FindingHashMismatch}},
		{"the last record deleted", func(a *archive) {
			lines := a.lines(tenant)
			a.setLines(tenant, lines[:len(lines)-1])
		}, false, []string{verify.FindingMissingRecord, verify.FindingUncovered}},
		{"a middle record deleted", func(a *archive) {
			lines := a.lines(tenant)
			a.setLines(tenant, slices.Delete(lines, 2, 3))
		}, false, []string{verify.FindingMissingRecord, verify.FindingUncovered}},
		// Records 3 and 4 swapped: seq 4 arrives where 3 is due (a gap),
		// then seq 3 after 4 (a break), then 5 after 3 (a gap).
		{"two records swapped", func(a *archive) {
			lines := a.lines(tenant)
			lines[2], lines[3] = lines[3], lines[2]
			a.setLines(tenant, lines)
		}, false, []string{verify.FindingChainBreak, verify.FindingMissingRecord, verify.FindingRootMismatch, verify.FindingUncovered}},
		{"two records swapped, checkpoints re-signed", func(a *archive) {
			lines := a.lines(tenant)
			lines[2], lines[3] = lines[3], lines[2]
			a.setLines(tenant, lines)
		}, true, []string{verify.FindingChainBreak, verify.FindingMissingRecord}},
		{"a record's signature replaced with another record's", func(a *archive) {
			lines := a.lines(tenant)
			from, to := audit(t, lines[5]).Signature, audit(t, lines[4]).Signature
			lines[4] = bytes.Replace(lines[4], []byte(`"signature":"`+to+`"`), []byte(`"signature":"`+from+`"`), 1)
			a.setLines(tenant, lines)
		}, true, []string{verify.FindingBadSignature}},
		{"a record re-signed by a key not in keys.json", func(a *archive) {
			lines := a.lines(tenant)
			lines[4] = resign(t, lines[4], intruder)
			a.setLines(tenant, lines)
		}, true, []string{verify.FindingUnknownKey}},
		{"the key's window shortened in keys.json", func(a *archive) {
			var keys []keyring.Key
			if err := json.Unmarshal(a.files[bundle.KeysFile], &keys); err != nil {
				t.Fatal(err)
			}
			until := keys[0].ValidFrom
			keys[0].ValidUntil = &until // every record is signed at ValidFrom
			a.files[bundle.KeysFile], _ = json.Marshal(keys)
		}, false, []string{verify.FindingKeyOutsideWindow}},
		{"a record re-signed by a listed key outside its window", func(a *archive) {
			later := seededRing(t, "later", 0x77, exampleClock.Add(time.Hour))
			var keys []keyring.Key
			json.Unmarshal(a.files[bundle.KeysFile], &keys)
			a.files[bundle.KeysFile], _ = json.Marshal(append(keys, later.Keys()...))
			s, err := later.Signer(exampleClock.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			lines := a.lines(tenant)
			lines[4] = resign(t, lines[4], s)
			a.setLines(tenant, lines)
		}, true, []string{verify.FindingKeyOutsideWindow}},
		{"a second checkpoint of the same size with another root", func(a *archive) {
			a.set(strings.TrimSuffix(cpName, ".note")+".2.note", signNote(t, legit, origin, cpSize, otherRoot))
		}, false, []string{verify.FindingInconsistentCheckpoint}},
		{"a checkpoint whose root is not the records' root", func(a *archive) {
			a.files[cpName] = signNote(t, legit, origin, cpSize, otherRoot)
		}, false, []string{verify.FindingRootMismatch, verify.FindingUncovered}},
		{"a checkpoint signed by an unknown key", func(a *archive) {
			a.files[cpName] = signNote(t, intruder, origin, cpSize, cpRoot)
		}, false, []string{verify.FindingBadCheckpoint, verify.FindingUncovered}},
		{"a checkpoint's size renamed", func(a *archive) {
			data := a.files[cpName]
			delete(a.files, cpName)
			a.names = slices.DeleteFunc(a.names, func(n string) bool { return n == cpName })
			a.set(strings.Replace(cpName, "/checkpoints/", "/checkpoints/1", 1), data)
		}, false, []string{verify.FindingBadCheckpoint, verify.FindingUncovered}},
		// Nothing signed anchors the records: a bundle stripped of its
		// checkpoints fails, though every record and link is intact.
		{"every checkpoint file removed", func(a *archive) {
			for _, name := range a.checkpointNames(tenant) {
				a.remove(name)
			}
		}, false, []string{verify.FindingUncovered}},
		// Records cut off the end with bundle.json edited to match: the
		// chain is whole, and only the missing checkpoint shows it (a cut
		// at an earlier checkpoint's size would look like an older export).
		{"the last records cut off, bundle.json's head edited to match, their checkpoints removed", func(a *archive) {
			lines := a.lines(tenant)
			keep := len(lines) - 2
			for _, name := range a.checkpointNames(tenant) {
				switch size := checkpointSize(t, name); {
				case size == int64(keep):
					t.Fatalf("a checkpoint covers exactly the %d records kept; the case needs a cut between checkpoints", keep)
				case size > int64(keep):
					a.remove(name)
				}
			}
			a.setLines(tenant, lines[:keep])
			var last struct {
				Audit struct {
					RecordHash string `json:"record_hash"`
				} `json:"audit"`
			}
			if err := json.Unmarshal(lines[keep-1], &last); err != nil {
				t.Fatal(err)
			}
			var meta map[string]any
			if err := json.Unmarshal(a.files[bundle.MetaFile], &meta); err != nil {
				t.Fatal(err)
			}
			for _, x := range meta["tenants"].([]any) {
				if tm := x.(map[string]any); tm["tenant_id"] == tenant {
					tm["records"], tm["head"] = keep, last.Audit.RecordHash
				}
			}
			a.files[bundle.MetaFile], _ = json.Marshal(meta)
		}, false, []string{verify.FindingUncovered}},
		{"a pinned pack file changed", func(a *archive) {
			for _, name := range a.names {
				if strings.HasPrefix(name, "blobs/") && bytes.Contains(a.files[name], []byte("when:")) {
					a.files[name] = append(a.files[name], '\n')
					return
				}
			}
			t.Fatal("no policy file among the blobs")
		}, false, []string{verify.FindingRuleViolation}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base.clone()
			c.tamper(a)
			if c.reseal {
				a.reseal(t, tenant, legit)
			}
			b, err := bundle.Open(bytes.NewReader(a.bytes(t)), int64(len(a.bytes(t))))
			if err != nil {
				t.Fatalf("the tampered bundle does not open: %v", err)
			}
			rep := verifyBundle(t, b)
			t.Logf("%d findings", len(rep.Findings))
			if got := kinds(rep); !slices.Equal(got, c.want) {
				t.Errorf("findings %v, want kinds %v:", got, c.want)
				for _, f := range rep.Findings {
					t.Logf("  %s seq %d cp %d: %s", f.Kind, f.Seq, f.TreeSize, f.Detail)
				}
			}
		})
	}
}

// TestUntamperedRewriteVerifies guards the tamper harness: rewriting the
// archive without changing anything keeps it intact.
func TestUntamperedRewriteVerifies(t *testing.T) {
	l := newRefundLedger(t)
	a := readArchive(t, l.bundle)
	legit, _ := l.ring.Signer(exampleClock)
	a.reseal(t, "acme", legit)
	if rep := verifyBundle(t, openBytes(t, a.bytes(t))); !rep.Intact() {
		t.Fatalf("a rewritten, re-sealed bundle does not verify: %+v", rep.Findings)
	}
}

const fixture = "testdata/tampered-signature.tar.gz"

// fixtureKinds are what the checked-in tampered bundle must keep failing
// with: record 2 carries record 1's signature, so its signature does not
// verify and the checkpoint's root no longer matches the records.
var fixtureKinds = []string{verify.FindingBadSignature, verify.FindingRootMismatch, verify.FindingUncovered}

// TestTamperedFixture checks the small tampered bundle in testdata (two
// refund examples, a deterministic key); -update regenerates it.
func TestTamperedFixture(t *testing.T) {
	if *update {
		ring := seededRing(t, "writ-fixture", 0x42, exampleClock)
		reqs := []string{filepath.Join(refundPack, "requests", "refund-allow.json"), filepath.Join(refundPack, "requests", "refund-high-value-human-review.json")}
		st := buildRefundLedger(t, ring, newSeededReader(7), reqs)
		a := readArchive(t, export(t, st, ring.Keys()))
		lines := a.lines("acme")
		from, to := audit(t, lines[0]).Signature, audit(t, lines[1]).Signature
		lines[1] = bytes.Replace(lines[1], []byte(`"signature":"`+to+`"`), []byte(`"signature":"`+from+`"`), 1)
		a.setLines("acme", lines)
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(a.bytes(t))
		zw.Close()
		if err := os.WriteFile(fixture, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bundle.OpenFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep := verifyBundle(t, b)
	if got := kinds(rep); !slices.Equal(got, fixtureKinds) {
		t.Errorf("%s: findings %v, want %v: %+v", fixture, got, fixtureKinds, rep.Findings)
	}
	if rep.Records != 2 || rep.Checkpoints != 1 {
		t.Errorf("%s: %d records and %d checkpoints, want 2 and 1", fixture, rep.Records, rep.Checkpoints)
	}
}

// TestOpenFileGzip checks that a gzip-compressed bundle opens like the
// plain one, and that a truncated or corrupt one is an error.
func TestOpenFileGzip(t *testing.T) {
	l := newRefundLedger(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "b.tar")
	os.WriteFile(plain, l.bundle, 0o644)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(l.bundle)
	zw.Close()
	gz := filepath.Join(dir, "b.tar.gz")
	os.WriteFile(gz, buf.Bytes(), 0o644)
	for _, p := range []string{plain, gz} {
		b, err := bundle.OpenFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if rep := verifyBundle(t, b); !rep.Intact() {
			t.Errorf("%s: %+v", p, rep.Findings)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}
	bad := filepath.Join(dir, "bad.tar.gz")
	os.WriteFile(bad, buf.Bytes()[:buf.Len()/2], 0o644)
	if _, err := bundle.OpenFile(bad); err == nil {
		t.Error("a truncated gzip bundle opened")
	}
	if _, err := bundle.OpenFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file opened")
	}
}

// TestMalformed checks that a malformed bundle is a clear error.
func TestMalformed(t *testing.T) {
	l := newRefundLedger(t)
	base := readArchive(t, l.bundle)
	drop := func(name string) func(a *archive) {
		return func(a *archive) {
			delete(a.files, name)
			a.names = slices.DeleteFunc(a.names, func(n string) bool { return n == name })
		}
	}
	editMeta := func(f func(m map[string]any)) func(a *archive) {
		return func(a *archive) {
			var m map[string]any
			if err := json.Unmarshal(a.files[bundle.MetaFile], &m); err != nil {
				t.Fatal(err)
			}
			f(m)
			a.files[bundle.MetaFile], _ = json.Marshal(m)
		}
	}
	cases := []struct {
		name   string
		tamper func(a *archive)
		want   string
	}{
		{"no bundle.json", drop(bundle.MetaFile), "no bundle.json"},
		{"no keys.json", drop(bundle.KeysFile), "no keys.json"},
		{"no records", drop(recordsPath("acme")), "has no tenants/acme/records.jsonl"},
		{"an unexpected entry", func(a *archive) { a.set("README", []byte("hi")) }, "unexpected entry"},
		{"an unexpected tenant file", func(a *archive) { a.set("tenants/acme/notes.txt", nil) }, "unexpected entry"},
		{"a path escaping the layout", func(a *archive) { a.set("tenants/../etc/passwd", nil) }, "tenant id"},
		{"an unlisted tenant", func(a *archive) { a.set(recordsPath("globex"), nil) }, "not listed"},
		{"a bad blob name", func(a *archive) { a.set("blobs/ABC", nil) }, "lowercase hex"},
		{"a bad checkpoint name", func(a *archive) { a.set("tenants/acme/checkpoints/007.note", nil) }, "checkpoint is named"},
		{"a second checkpoint without a first", func(a *archive) { a.set("tenants/acme/checkpoints/5.2.note", nil) }, "without"},
		{"records not ending with a line feed", func(a *archive) {
			a.files[recordsPath("acme")] = bytes.TrimSuffix(a.files[recordsPath("acme")], []byte("\n"))
		}, "does not end with a line feed"},
		{"a line too short to be a record", func(a *archive) {
			a.files[recordsPath("acme")] = append(a.files[recordsPath("acme")], "{}\n"...)
		}, "a sealed record has"},
		{"an unknown member in bundle.json", editMeta(func(m map[string]any) { m["extra"] = 1 }), "unknown"},
		{"another format version", editMeta(func(m map[string]any) { m["version"] = 2 }), "format version 2"},
		{"another format", editMeta(func(m map[string]any) { m["format"] = "zip" }), "format"},
		{"no created_at", editMeta(func(m map[string]any) { delete(m, "created_at") }), "created_at"},
		{"an empty ledger name", editMeta(func(m map[string]any) { m["ledger_name"] = "" }), "ledger name"},
		{"a bad head", editMeta(func(m map[string]any) { m["tenants"].([]any)[0].(map[string]any)["head"] = "x" }), "head"},
		{"duplicate names in bundle.json", func(a *archive) {
			a.files[bundle.MetaFile] = bytes.Replace(a.files[bundle.MetaFile], []byte(`"format"`), []byte(`"version":1,"format"`), 1)
		}, "duplicate"},
		{"trailing data in bundle.json", func(a *archive) { a.files[bundle.MetaFile] = append(a.files[bundle.MetaFile], "{}"...) }, "bundle.json"},
		{"a bad key in keys.json", func(a *archive) {
			a.files[bundle.KeysFile] = bytes.Replace(a.files[bundle.KeysFile], []byte(`"id": "`), []byte(`"id": "x`), 1)
		}, "keys.json"},
		{"keys.json not an array", func(a *archive) { a.files[bundle.KeysFile] = []byte(`{}`) }, "keys.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base.clone()
			c.tamper(a)
			data := a.bytes(t)
			_, err := bundle.Open(bytes.NewReader(data), int64(len(data)))
			if err == nil {
				t.Fatal("the malformed bundle opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
	// A duplicate entry, a symlink, not a tar at all, empty, truncated.
	dup := base.clone()
	dup.names = append(dup.names, bundle.KeysFile)
	var link bytes.Buffer
	tw := tar.NewWriter(&link)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: bundle.MetaFile, Linkname: "/etc/passwd"})
	tw.Close()
	for name, data := range map[string][]byte{
		"a duplicate entry": dup.bytes(t),
		"a symlink":         link.Bytes(),
		"not a tar":         []byte("this is not a bundle"),
		"empty":             nil,
		"truncated":         l.bundle[:len(l.bundle)/2],
	} {
		if _, err := bundle.Open(bytes.NewReader(data), int64(len(data))); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// TestCheckpointNote checks the checkpoints a bundle carries open with
// note.Open under the keys it carries.
func TestCheckpointNote(t *testing.T) {
	l := newRefundLedger(t)
	b := openBytes(t, l.bundle)
	var vs []note.Verifier
	for _, k := range b.Keys() {
		v, err := note.NewVerifier(k.VerifierKey)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	cps, _ := b.Checkpoints(context.Background(), "acme")
	for _, cp := range cps {
		n, err := note.Open(cp.Note, note.VerifierList(vs...))
		if err != nil {
			t.Fatal(err)
		}
		if want := ledger.CheckpointText("writ/acme", cp.Size, cp.Root); n.Text != want {
			t.Errorf("note text %q, want %q", n.Text, want)
		}
	}
}

// TestPagingTamperedLargeBundle checks that verification reads every line
// of a tampered bundle longer than one verification page exactly once,
// and ends, even when records' seqs no longer match their lines.
func TestPagingTamperedLargeBundle(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 2100 // verify.Verify pages by 2048
	for i := 0; i < n; {
		var entries []*ledger.Entry
		for j := 0; j < 300 && i < n; j, i = j+1, i+1 {
			entries = append(entries, ledgertest.NewEntry(ledgertest.NewRecord("acme", i)))
		}
		if err := st.Append(ctx, entries, ledger.Seal); err != nil {
			t.Fatal(err)
		}
	}
	base := readArchive(t, export(t, st, nil))
	forgeSeq := func(line []byte, from, to int) []byte {
		old := []byte(`"seq":` + strconv.Itoa(from) + `}`)
		if !bytes.Contains(line, old) {
			t.Fatalf("no %s in the record", old)
		}
		return bytes.Replace(line, old, []byte(`"seq":`+strconv.Itoa(to)+`}`), 1)
	}
	cases := []struct {
		name    string
		tamper  func(lines [][]byte) [][]byte
		records int64
	}{
		{"intact", func(l [][]byte) [][]byte { return l }, n},
		{"a line deleted before the page boundary", func(l [][]byte) [][]byte { return slices.Delete(l, 99, 100) }, n - 1},
		{"seqs forged to go back at every page end", func(l [][]byte) [][]byte {
			l[2047] = forgeSeq(l[2047], 2048, 1)
			l[2048] = forgeSeq(l[2048], 2049, 1)
			return l
		}, n},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base.clone()
			a.setLines("acme", c.tamper(a.lines("acme")))
			b := openBytes(t, a.bytes(t))
			done := make(chan *verify.Report, 1)
			go func() {
				rep, err := verify.Verify(ctx, b, verify.VerifyOptions{Revocations: b})
				if err != nil {
					t.Error(err)
				}
				done <- rep
			}()
			select {
			case rep := <-done:
				if rep != nil && rep.Records != c.records {
					t.Errorf("verification read %d records, want %d (every line once)", rep.Records, c.records)
				}
				if c.name == "intact" && (rep == nil || !rep.Intact()) {
					t.Errorf("the intact large bundle does not verify: %+v", rep)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("verification of the tampered bundle does not end")
			}
		})
	}
}

// TestExportSignsHeadCheckpoint: a ledger whose head no checkpoint
// covers exports, with a signer, a bundle whose every record a signed
// checkpoint covers (and the checkpoint is stored); without one, the
// bundle's records are uncovered, a finding of verify-bundle.
func TestExportSignsHeadCheckpoint(t *testing.T) {
	ctx := context.Background()
	ring := seededRing(t, "writ-test", 7, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var es []*ledger.Entry
	for i := 1; i <= 3; i++ {
		es = append(es, ledgertest.NewEntry(ledgertest.NewRecord("acme", i)))
	}
	if err := st.Append(ctx, es, ledger.NewSeal(keySource(ring))); err != nil {
		t.Fatal(err)
	}
	check := func(opts bundle.Options) *verify.Report {
		t.Helper()
		var buf bytes.Buffer
		opts.Keys, opts.CreatedAt = ring.Keys(), exampleClock
		if _, err := bundle.ExportWith(ctx, st, &buf, opts); err != nil {
			t.Fatal(err)
		}
		b := openBytes(t, buf.Bytes())
		vo, err := b.VerifyOptions()
		if err != nil {
			t.Fatal(err)
		}
		vo.Rules = nil // the fixture pins no stored pack
		rep, err := verify.Verify(ctx, b, vo)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := check(bundle.Options{}); !slices.Equal(kinds(rep), []string{verify.FindingUncovered}) || rep.Uncovered != 3 {
		t.Errorf("bundle without a signer: findings %+v, uncovered %d; want uncovered_records of 3", rep.Findings, rep.Uncovered)
	}
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	if rep := check(bundle.Options{Signer: signer}); !rep.Intact() || rep.Checkpoints != 1 || rep.Uncovered != 0 {
		t.Errorf("bundle with a signer: findings %+v, %d checkpoints, uncovered %d; want intact, 1, 0", rep.Findings, rep.Checkpoints, rep.Uncovered)
	}
	if _, err := st.CheckpointAt(ctx, "acme", 3); err != nil {
		t.Errorf("the export's checkpoint is not stored: %v", err)
	}
	// Exporting again signs nothing new: the stored checkpoint is reused.
	if rep := check(bundle.Options{Signer: signer}); !rep.Intact() || rep.Checkpoints != 1 {
		t.Errorf("second export: findings %+v, %d checkpoints", rep.Findings, rep.Checkpoints)
	}
}
