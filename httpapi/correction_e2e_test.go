package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/postgres"
	"github.com/writhq/writ/sqlite"
)

// TestCorrectionSupersededBy: a check that names an earlier record in
// supersedes (a correction) shows in that record's superseded_by, over
// HTTP (GET /v1/records/{id}/links and the decision's story), on both
// stores; the correction's own superseded_by is empty.
func TestCorrectionSupersededBy(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			st := openTestStore(t, store)
			p, err := pack.Load(filepath.Join("..", "examples", "refund"))
			if err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Compile(p)
			if err != nil {
				t.Fatal(err)
			}
			clock := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
			eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32), Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close() })
			srv := validated(t, httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Ledger: eng, Lifecycle: eng, Annotations: eng})))
			t.Cleanup(srv.Close)
			c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(srv.Client()))

			req := readCheckRequest(t, filepath.Join("..", "examples", "refund", "requests", "refund-allow.json"))
			first, err := c.Check(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			fix := readCheckRequest(t, filepath.Join("..", "examples", "refund", "requests", "refund-allow.json"))
			fix.IdempotencyKey = "ik_correction_1"
			fix.Supersedes = first.Metadata.RecordID
			second, err := c.Check(ctx, fix)
			if err != nil {
				t.Fatal(err)
			}
			if second.Metadata.RecordID == first.Metadata.RecordID {
				t.Fatalf("the correction answered with the first record %s", first.Metadata.RecordID)
			}

			for _, tc := range []struct {
				id   string
				want []string
			}{
				{first.Metadata.RecordID, []string{second.Metadata.RecordID}},
				{second.Metadata.RecordID, []string{}},
			} {
				links, err := c.Links(ctx, "acme", tc.id)
				if err != nil || !slices.Equal(links.SupersededBy, tc.want) || links.Retracted {
					t.Errorf("Links(%s) = %+v, %v; want superseded_by %v, not retracted", tc.id, links, err, tc.want)
				}
			}
			story, err := c.Decision(ctx, "acme", first.DecisionID)
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, r := range story.Records {
				if r.RecordID == first.Metadata.RecordID {
					found = true
					if !slices.Equal(r.SupersededBy, []string{second.Metadata.RecordID}) {
						t.Errorf("the first check in its decision's story: superseded_by %v, want [%s]", r.SupersededBy, second.Metadata.RecordID)
					}
				}
			}
			if !found {
				t.Errorf("Decision(%s) does not list its record %s", first.DecisionID, first.Metadata.RecordID)
			}
			got, err := c.Record(ctx, "acme", second.Metadata.RecordID)
			if err != nil || got.Record.Supersedes != first.Metadata.RecordID {
				t.Errorf("Record(correction) supersedes %q (%v), want %s", got.Record.Supersedes, err, first.Metadata.RecordID)
			}
		})
	}
}

func readCheckRequest(t *testing.T, path string) *writ.CheckRequest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var req writ.CheckRequest
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// openTestStore opens a fresh SQLite store, or a PostgreSQL store in a
// schema of its own when WRIT_TEST_POSTGRES names a database (else the
// test is skipped); it is closed when the test ends.
func openTestStore(t *testing.T, kind string) ledger.Store {
	t.Helper()
	if kind == "sqlite" {
		st, err := sqlite.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	dsn := os.Getenv("WRIT_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WRIT_TEST_POSTGRES is not set")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := pgx.Identifier{"writ_httpapi_test_" + hex.EncodeToString(b[:])}
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
	exec(t.Context(), `CREATE SCHEMA `+schema.Sanitize())
	t.Cleanup(func() { exec(context.Background(), `DROP SCHEMA `+schema.Sanitize()+` CASCADE`) })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema[0])
	u.RawQuery = q.Encode()
	st, err := postgres.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
