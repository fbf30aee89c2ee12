package bundle_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/sqlite"
)

var update = flag.Bool("update", false, "regenerate testdata/ and the worked example in docs/ledger-format.md")

// exampleClock is the time the refund examples are written for.
var exampleClock = time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)

// bindingKey keys argument bindings in tests.
var bindingKey = []byte("writ-bundle-test-binding-key-0123456789")

const refundPack = "../examples/refund"

// seededReader is a deterministic, concurrency-safe random source.
type seededReader struct {
	mu sync.Mutex
	r  *rand.ChaCha8
}

func newSeededReader(seed byte) *seededReader {
	var s [32]byte
	s[0] = seed
	return &seededReader{r: rand.NewChaCha8(s)}
}

func (s *seededReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Read(p)
}

// seedKey returns the note signer key text of the Ed25519 key with the
// given seed and name.
func seedKey(t testing.TB, name string, seed []byte) string {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(seed)
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return "PRIVATE+KEY+" + keyring.KeyID(name, v.KeyHash()) + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, seed...))
}

// seededRing is a one-key ring whose key comes from a fixed seed.
func seededRing(t testing.TB, name string, seedByte byte, validFrom time.Time) *keyring.Ring {
	t.Helper()
	r, err := keyring.FromEnv(seedKey(t, name, bytes.Repeat([]byte{seedByte}, ed25519.SeedSize)), validFrom)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func keySource(r *keyring.Ring) ledger.KeySource {
	return func(at time.Time) (ledger.Signer, error) { return r.Signer(at) }
}

// refundRequests lists the refund example requests.
func refundRequests(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(refundPack, "requests", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example requests: %v", err)
	}
	slices.Sort(files)
	return files
}

// buildRefundLedger runs the given example requests through the real
// engine on a fresh SQLite store, signing with ring, and closes the
// engine (which issues the checkpoints). The store stays open.
func buildRefundLedger(t testing.TB, ring *keyring.Ring, random io.Reader, requests []string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	p, err := pack.Load(refundPack)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(ctx, engine.Config{
		Policy: pol, Store: st, BindingKey: bindingKey, Keys: keySource(ring), Random: random,
		Now:    func() time.Time { return exampleClock },
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range requests {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var req writ.CheckRequest
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := eng.Check(ctx, &req); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return st
}

// export writes st's bundle with a fixed creation time.
func export(t testing.TB, st ledger.Store, keys []keyring.Key) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := bundle.ExportWith(context.Background(), st, &buf, bundle.Options{Keys: keys, LedgerName: "writ", CreatedAt: exampleClock.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func openBytes(t testing.TB, data []byte) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verify checks a bundle as writ ledger verify-bundle does.
func verifyBundle(t testing.TB, b *bundle.Bundle) *verify.Report {
	t.Helper()
	opts, err := b.VerifyOptions()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Verify(context.Background(), b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// kinds returns the distinct finding kinds of a report, sorted.
func kinds(rep *verify.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.Kind)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// archive is a bundle's entries, for tampering.
type archive struct {
	names []string
	files map[string][]byte
}

func readArchive(t testing.TB, data []byte) *archive {
	t.Helper()
	a := &archive{files: map[string][]byte{}}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return a
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		a.names = append(a.names, hdr.Name)
		a.files[hdr.Name] = b
	}
}

func (a *archive) clone() *archive {
	c := &archive{names: slices.Clone(a.names), files: map[string][]byte{}}
	for k, v := range a.files {
		c.files[k] = bytes.Clone(v)
	}
	return c
}

// remove takes an entry out of the archive.
func (a *archive) remove(name string) {
	delete(a.files, name)
	a.names = slices.DeleteFunc(a.names, func(n string) bool { return n == name })
}

// checkpointSize is the tree size a checkpoint entry's name gives.
func checkpointSize(t testing.TB, name string) int64 {
	t.Helper()
	stem, _, _ := strings.Cut(strings.TrimSuffix(path.Base(name), ".note"), ".")
	n, err := strconv.ParseInt(stem, 10, 64)
	if err != nil {
		t.Fatalf("checkpoint entry %s: %v", name, err)
	}
	return n
}

func (a *archive) set(name string, data []byte) {
	if _, ok := a.files[name]; !ok {
		a.names = append(a.names, name)
	}
	a.files[name] = data
}

func (a *archive) bytes(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range a.names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Size: int64(len(a.files[n])), Mode: 0o644, ModTime: exampleClock}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(a.files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func recordsPath(tenant string) string { return "tenants/" + tenant + "/records.jsonl" }

// lines returns a tenant's records.
func (a *archive) lines(tenant string) [][]byte {
	data := a.files[recordsPath(tenant)]
	return bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

func (a *archive) setLines(tenant string, lines [][]byte) {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(bytes.TrimSuffix(l, []byte("\n")))
		buf.WriteByte('\n')
	}
	a.files[recordsPath(tenant)] = buf.Bytes()
}

// checkpointNames lists a tenant's checkpoint entries.
func (a *archive) checkpointNames(tenant string) []string {
	var out []string
	for _, n := range a.names {
		if strings.HasPrefix(n, "tenants/"+tenant+"/checkpoints/") {
			out = append(out, n)
		}
	}
	return out
}

// treeRoot is the RFC 6962 root of the first size records.
func treeRoot(t testing.TB, lines [][]byte, size int64) tlog.Hash {
	t.Helper()
	var hashes []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = hashes[x]
		}
		return out, nil
	})
	for i := int64(0); i < size; i++ {
		hs, err := tlog.StoredHashes(i, bytes.TrimSuffix(lines[i], []byte("\n")), r)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, hs...)
	}
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// signNote signs a checkpoint of origin, size and root.
func signNote(t testing.TB, s note.Signer, origin string, size int64, root tlog.Hash) []byte {
	t.Helper()
	msg, err := note.Sign(&note.Note{Text: ledger.CheckpointText(origin, size, root)}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// reseal re-signs every checkpoint of the tenant over the tree of the
// (tampered) records, with s: what an attacker holding the checkpoint key
// could do, and what isolates a record finding from the root mismatch it
// otherwise also causes.
func (a *archive) reseal(t testing.TB, tenant string, s note.Signer) {
	t.Helper()
	lines := a.lines(tenant)
	for _, name := range a.checkpointNames(tenant) {
		_, size, _, err := ledger.ParseCheckpointText(noteText(t, a.files[name]))
		if err != nil {
			t.Fatal(err)
		}
		a.files[name] = signNote(t, s, ledger.Origin("writ", tenant), size, treeRoot(t, lines, size))
	}
}

func noteText(t testing.TB, msg []byte) string {
	t.Helper()
	_, err := note.Open(msg, note.VerifierList())
	u, ok := err.(*note.UnverifiedNoteError)
	if !ok {
		t.Fatalf("not a signed note: %v", err)
	}
	return u.Note.Text
}

// resign replaces a sealed record's signature with one by s (a keyring
// signer), leaving the rest of its bytes as they are.
func resign(t testing.TB, raw []byte, s *keyring.Signer) []byte {
	t.Helper()
	_, audit, err := record.SplitSeal(raw)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.SignMessage(record.SignatureMessage(audit.RecordHash))
	if err != nil {
		t.Fatal(err)
	}
	old := `"signature":"` + audit.Signature + `","signed_by":"` + audit.SignedBy + `"`
	repl := `"signature":"` + base64.StdEncoding.EncodeToString(sig) + `","signed_by":"` + s.KeyID() + `"`
	if bytes.Count(raw, []byte(old)) != 1 {
		t.Fatalf("record's seal not found once: %s", old)
	}
	return bytes.Replace(raw, []byte(old), []byte(repl), 1)
}

func audit(t testing.TB, raw []byte) writ.Audit {
	t.Helper()
	_, a, err := record.SplitSeal(bytes.TrimSuffix(raw, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	return a
}
