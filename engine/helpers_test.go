package engine_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/packtest"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
)

// testBindingKey keys argument bindings in tests.
var testBindingKey = []byte("writ-test-binding-key-0123456789abcdef")

// exampleClock is the time the examples are written for.
var exampleClock = time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)

// seededReader is a deterministic, concurrency-safe random source, so
// that ids in golden files are stable.
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

type harness struct {
	eng   *engine.Engine
	store *sqlite.Store
	dir   string
	// onFile counts, per tenant, the records that put the pack's on-file
	// evidence in the store before the test began (see storeOnFile);
	// count leaves them out.
	onFile map[string]int64
}

// newHarness starts an engine on a fresh SQLite store with the pack in
// packDir, a fixed clock and a deterministic random source.
func newHarness(t testing.TB, packDir string, opts ...func(*engine.Config)) *harness {
	t.Helper()
	pol := compile(t, packDir)
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The pack's on-file evidence goes in first, through an engine of its
	// own on the plain store, so that a test's options (a failing or
	// stalling store, another clock) meet the test's checks only.
	seeder, err := engine.New(context.Background(), engine.Config{Policy: pol, Store: st, BindingKey: testBindingKey,
		Now: func() time.Time { return exampleClock }, Random: newSeededReader(2)})
	if err != nil {
		t.Fatal(err)
	}
	onFile := storeOnFile(t, seeder, packDir)
	seeder.Close()
	cfg := engine.Config{Policy: pol, Store: st, BindingKey: testBindingKey, Now: func() time.Time { return exampleClock }, Random: newSeededReader(1)}
	for _, o := range opts {
		o(&cfg)
	}
	eng, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	return &harness{eng: eng, store: st, dir: dir, onFile: onFile}
}

// storeOnFile puts the evidence the pack's tests keep on file (the
// top-level evidence_store of its tests/*.yaml) in eng's store, submitted
// by each item's issuer as writ test does, so that the example requests
// cite evidence writ resolves: a mutating spec's requirement accepts
// nothing else. It returns the records it sealed, per tenant.
func storeOnFile(t testing.TB, eng *engine.Engine, packDir string) map[string]int64 {
	t.Helper()
	p, err := pack.Load(packDir)
	if err != nil {
		t.Fatalf("pack.Load(%s): %v", packDir, err)
	}
	files, err := pack.LoadTests(packDir, p)
	if err != nil {
		// A test's own variant of a pack may break its tests: nothing on file.
		t.Logf("no evidence on file: pack.LoadTests(%s): %v", packDir, err)
		return nil
	}
	sealed := map[string]int64{}
	for _, f := range files {
		for _, te := range f.EvidenceStore {
			n, err := packtest.StoreEvidence(context.Background(), eng, "acme", te)
			if err != nil {
				t.Fatalf("evidence %s on file in %s: %v", te.ID, packDir, err)
			}
			tenant := cmp.Or(te.TenantID, "acme")
			sealed[tenant] += int64(n)
		}
	}
	return sealed
}

func compile(t testing.TB, dir string) *policy.Policy {
	t.Helper()
	p, err := pack.Load(dir)
	if err != nil {
		t.Fatalf("pack.Load(%s): %v", dir, err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatalf("policy.Compile(%s): %v", dir, err)
	}
	return pol
}

func readRequest(t testing.TB, path string) *writ.CheckRequest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req writ.CheckRequest
	if err := dec.Decode(&req); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &req
}

func example(parts ...string) string {
	return filepath.Join(append([]string{"..", "examples"}, parts...)...)
}

// count returns the number of records the tenant has.
func (h *harness) count(t testing.TB, tenant string) int64 {
	t.Helper()
	head, err := h.store.Head(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return head.Seq - h.onFile[tenant]
}

// verify checks every chain in the store.
func (h *harness) verify(t testing.TB) {
	t.Helper()
	findings, _, err := verify.VerifyChains(context.Background(), h.store)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Errorf("ledger finding: %+v", f)
	}
}
