package replay_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/packtest"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/postgres"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/sqlite"
)

var testBindingKey = []byte("writ-test-binding-key-0123456789abcdef")

// exampleClock is the time the examples are written for.
var exampleClock = time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)

// clock is a test clock that tests move forward.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// seededReader is a deterministic, concurrency-safe random source.
type seededReader struct {
	mu sync.Mutex
	r  *rand.ChaCha8
}

func (s *seededReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Read(p)
}

type harness struct {
	eng   *engine.Engine
	store ledger.Store
	dir   string // the SQLite store's directory
	clk   *clock
	// evidence is the number of evidence records the harness sealed: the
	// pack's on-file evidence (newHarnessOn) and verify's items.
	evidence int
}

// newHarness starts an engine under the pack in packDir on a fresh
// SQLite store, with a test clock at exampleClock.
func newHarness(t testing.TB, packDir string) *harness {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessOn(t, packDir, st)
	h.dir = dir
	return h
}

// newHarnessOn starts an engine under the pack in packDir on st, which
// it closes when the test ends.
func newHarnessOn(t testing.TB, packDir string, st ledger.Store) *harness {
	t.Helper()
	h := &harness{store: st, clk: newClock(exampleClock)}
	var err error
	h.eng, err = engine.New(context.Background(), engine.Config{Policy: compile(t, packDir), Store: st, BindingKey: testBindingKey,
		Now: h.clk.Now, Random: &seededReader{r: rand.NewChaCha8([32]byte{7})}})
	if err != nil {
		t.Fatal(err)
	}
	// The evidence the pack's tests keep on file (their evidence_store),
	// submitted by each item's issuer as writ test does: the example
	// requests cite it, and a refund accepts only evidence writ resolves.
	if p, err := pack.Load(packDir); err == nil {
		if files, err := pack.LoadTests(packDir, p); err == nil {
			for _, f := range files {
				for _, te := range f.EvidenceStore {
					n, err := packtest.StoreEvidence(context.Background(), h.eng, "acme", te)
					if err != nil {
						t.Fatalf("evidence %s on file: %v", te.ID, err)
					}
					h.evidence += n
				}
			}
		}
	}
	t.Cleanup(func() {
		h.eng.Close()
		st.Close()
	})
	return h
}

// openPostgres opens a PostgreSQL store in a schema of its own, dropped
// when the test ends, or skips without WRIT_TEST_POSTGRES.
func openPostgres(t *testing.T) ledger.Store {
	t.Helper()
	dsn := os.Getenv("WRIT_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WRIT_TEST_POSTGRES is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	var b [6]byte
	crand.Read(b[:])
	schema := "writ_replay_test_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("WRIT_TEST_POSTGRES must be a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	st, err := postgres.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	return st
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

func example(parts ...string) string {
	return filepath.Join(append([]string{"..", "examples"}, parts...)...)
}

// readJSON decodes a JSON file strictly into v.
func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readRequest(t testing.TB, path string) *writ.CheckRequest {
	var req writ.CheckRequest
	readJSON(t, path, &req)
	return &req
}

func refund(t testing.TB, name string) *writ.CheckRequest {
	return readRequest(t, example("refund", "requests", name+".json"))
}

// verify has the IDV service submit an identity verification of each
// subject, observed a minute before the harness's clock, as item
// idv_<subject>: a refund accepts only evidence writ resolves.
func (h *harness) verify(t testing.TB, subjects ...string) {
	t.Helper()
	idv := writ.WithPrincipal(context.Background(), &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example",
		Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	observed := h.clk.Now().Add(-time.Minute)
	for _, s := range subjects {
		if _, err := h.eng.AddEvidence(idv, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: "idv_" + s,
			SubjectIDs: []string{s}, ObservedAt: &observed}); err != nil {
			t.Fatalf("verify %s: %v", s, err)
		}
		h.evidence++
	}
}

// check runs a check and returns its record id.
func (h *harness) check(t testing.TB, req *writ.CheckRequest) *writ.Receipt {
	t.Helper()
	rc, err := h.eng.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if rc.Metadata.RecordID == "" {
		t.Fatalf("Check answered no record: %+v", rc.Metadata)
	}
	return rc
}

// replayTenant replays every record of the tenant and fails the test for
// each that is not replay_equal. It returns the summary.
func replayTenant(t *testing.T, st replay.Store, tenant string) *replay.Summary {
	t.Helper()
	sum, err := replay.New(st, replay.Options{}).Tenant(context.Background(), tenant, func(r *replay.Result) error {
		if r.Status != replay.StatusEqual {
			b, _ := json.MarshalIndent(r, "", "  ")
			t.Errorf("replay of %s (%s) = %s, want replay_equal:\n%s", r.RecordID, r.DecisionKey, r.Status, b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Tenant(%s): %v", tenant, err)
	}
	return sum
}

// rawDB opens the store's database file as someone with access to the
// file could, dropping the triggers that would stop them.
func rawDB(t *testing.T, dir string, triggers ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, tr := range triggers {
		if _, err := db.Exec(`DROP TRIGGER ` + tr); err != nil {
			t.Fatalf("DROP TRIGGER %s: %v", tr, err)
		}
	}
	return db
}

// copyPack copies a pack directory to a temporary one, replacing old
// with new in the file at rel (relative to the pack).
func copyPack(t *testing.T, src, rel, old, new string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, r), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if filepath.ToSlash(r) == rel {
			if !strings.Contains(string(data), old) {
				t.Fatalf("%s does not contain %q", path, old)
			}
			data = []byte(strings.Replace(string(data), old, new, 1))
		}
		return os.WriteFile(filepath.Join(dst, r), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
