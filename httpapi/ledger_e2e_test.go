package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
)

// The end-to-end test lives in package httpapi_test: httpapi itself must
// not import the engine or a store (see TestLayering).

// ledgerName names the test ledger in checkpoint origins.
const ledgerName = "writ-e2e"

// TestLedgerEndToEnd serves a real engine (SQLite store, signing key
// ring) and proves its records over HTTP with the Go client, checking
// every proof with golang.org/x/mod/sumdb/tlog and every checkpoint note
// with the ring's public keys.
func TestLedgerEndToEnd(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC) // the examples' time
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Generate(rand.Reader, clock, ""); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := pack.Load(filepath.Join("..", "examples", "wf-2302"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Config{
		Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32),
		Now:        func() time.Time { return clock },
		LedgerName: ledgerName,
		Keys: func(at time.Time) (ledger.Signer, error) {
			s, err := ring.Signer(at)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return s, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	srv := validated(t, httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Ledger: eng})))
	t.Cleanup(srv.Close)
	c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(srv.Client()))
	var _ writ.Ledger = c

	if _, err := c.Checkpoint(ctx, "acme", 0); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Fatalf("Checkpoint() before any record: error = %v, want code %s", err, writ.ENOTFOUND)
	}

	// Five checks, one checkpoint: every record is proved against it.
	ids := runChecks(t, c, 0, 5)
	cp1, err := c.IssueCheckpoint(ctx, "acme")
	if err != nil {
		t.Fatalf("IssueCheckpoint() error = %v", err)
	}
	root1 := openCheckpoint(t, ring, cp1, 5)
	if again, err := c.Checkpoint(ctx, "acme", 5); err != nil || again.Note != cp1.Note || again.RootHash != cp1.RootHash || !again.IssuedAt.Equal(cp1.IssuedAt) {
		t.Errorf("Checkpoint(5) = %+v, %v; want the issued checkpoint %+v", again, err, cp1)
	}
	checkNoteForm(t, srv, cp1)
	for _, id := range ids {
		proveRecord(t, c, id, cp1.TreeSize, cp1, root1)
	}
	if _, err := c.InclusionProof(ctx, "globex", ids[0], 0); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("InclusionProof() of an acme record as tenant globex: error = %v, want code %s", err, writ.ENOTFOUND)
	}

	// Three more records: not covered until the next checkpoint.
	more := runChecks(t, c, 5, 3)
	if _, err := c.InclusionProof(ctx, "acme", more[0], 0); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("InclusionProof() of a record no checkpoint covers: error = %v, want code %s", err, writ.ENOTFOUND)
	}
	cp2, err := c.IssueCheckpoint(ctx, "acme")
	if err != nil {
		t.Fatalf("IssueCheckpoint() error = %v", err)
	}
	root2 := openCheckpoint(t, ring, cp2, 8)
	for _, id := range slices.Concat(ids[:1], more) {
		proveRecord(t, c, id, 0, cp2, root2) // against the latest
	}
	proveRecord(t, c, ids[2], cp1.TreeSize, cp1, root1) // the old checkpoint still proves

	// The tree at 5 is a prefix of the tree at 8.
	for _, to := range []int64{8, 0} {
		cons, err := c.ConsistencyProof(ctx, "acme", 5, to)
		if err != nil {
			t.Fatalf("ConsistencyProof(5, %d) error = %v", to, err)
		}
		if cons.OldSize != 5 || cons.NewSize != 8 || cons.Old.Note != cp1.Note || cons.New.Note != cp2.Note {
			t.Fatalf("ConsistencyProof(5, %d) = sizes %d to %d; want 5 to 8 with the issued checkpoints", to, cons.OldSize, cons.NewSize)
		}
		proof := decodeHashes(t, cons.Proof)
		if err := tlog.CheckTree(proof, 8, root2, 5, root1); err != nil {
			t.Errorf("ConsistencyProof(5, %d) does not verify: %v", to, err)
		}
		if err := tlog.CheckTree(proof, 8, root1, 5, root2); err == nil {
			t.Errorf("ConsistencyProof(5, %d) verifies with the roots swapped", to)
		}
	}
	if _, err := c.ConsistencyProof(ctx, "acme", 6, 8); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("ConsistencyProof(6, 8) with no checkpoint of size 6: error = %v, want code %s", err, writ.ENOTFOUND)
	}
}

// runChecks runs n checks of the WF-2302 example, each a new decision,
// and returns their record ids.
func runChecks(t *testing.T, c *httpapi.Client, first, n int) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "wf-2302", "requests", "wf-2302-allow.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := first; i < first+n; i++ {
		var req writ.CheckRequest
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatal(err)
		}
		req.IdempotencyKey = fmt.Sprintf("ik_e2e_%d", i)
		rcpt, err := c.Check(context.Background(), &req)
		if err != nil {
			t.Fatalf("Check(%d) error = %v", i, err)
		}
		if rcpt.Metadata.RecordID == "" || rcpt.Metadata.Repeated != "" {
			t.Fatalf("Check(%d) metadata = %+v, want a fresh record", i, rcpt.Metadata)
		}
		ids = append(ids, rcpt.Metadata.RecordID)
	}
	return ids
}

// openCheckpoint verifies the checkpoint's note with the ring's keys and
// checks that it says what the JSON says; it returns the root.
func openCheckpoint(t *testing.T, ring *keyring.Ring, cp *writ.Checkpoint, size int64) tlog.Hash {
	t.Helper()
	if cp.TenantID != "acme" || cp.TreeSize != size {
		t.Fatalf("checkpoint of tenant %q size %d, want acme %d", cp.TenantID, cp.TreeSize, size)
	}
	n, err := note.Open([]byte(cp.Note), ring.Verifiers())
	if err != nil {
		t.Fatalf("checkpoint of size %d: note does not verify: %v\n%s", size, err, cp.Note)
	}
	want := ledgerName + "/acme\n" + strconv.FormatInt(size, 10) + "\n" + cp.RootHash + "\n"
	if n.Text != want {
		t.Fatalf("checkpoint of size %d: note text %q, want %q", size, n.Text, want)
	}
	return decodeHashes(t, []string{cp.RootHash})[0]
}

// checkNoteForm gets the checkpoint as its note text, the form C2SP
// tools read.
func checkNoteForm(t *testing.T, srv *httptest.Server, cp *writ.Checkpoint) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/ledger/checkpoint?tenant_id=acme&size=%d", srv.URL, cp.TreeSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("GET %s (Accept: text/plain) = %d %s; body %s", req.URL, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if string(body) != cp.Note {
		t.Errorf("GET %s (Accept: text/plain) = %q, want the note %q", req.URL, body, cp.Note)
	}
	if got := resp.Header.Get("Cache-Control"); !strings.Contains(got, "immutable") {
		t.Errorf("GET %s: Cache-Control = %q, want immutable", req.URL, got)
	}
}

// proveRecord gets the record's inclusion proof against the checkpoint of
// size (0: the latest, which must be cp) and checks it against the
// record's bytes as served.
func proveRecord(t *testing.T, c *httpapi.Client, id string, size int64, cp *writ.Checkpoint, root tlog.Hash) {
	t.Helper()
	ctx := context.Background()
	rec, err := c.Record(ctx, "acme", id)
	if err != nil {
		t.Fatalf("Record(%s) error = %v", id, err)
	}
	ip, err := c.InclusionProof(ctx, "acme", id, size)
	if err != nil {
		t.Fatalf("InclusionProof(%s, %d) error = %v", id, size, err)
	}
	if ip.RecordID != id || ip.Seq != rec.Record.Audit.Seq || ip.TreeSize != cp.TreeSize || ip.Checkpoint.Note != cp.Note {
		t.Fatalf("InclusionProof(%s, %d) = record %s seq %d size %d; want %s seq %d against the checkpoint of size %d",
			id, size, ip.RecordID, ip.Seq, ip.TreeSize, id, rec.Record.Audit.Seq, cp.TreeSize)
	}
	leaf := tlog.RecordHash(rec.Raw)
	if got := base64.StdEncoding.EncodeToString(leaf[:]); ip.LeafHash != got {
		t.Errorf("InclusionProof(%s): leaf_hash %s, want %s, the hash of the record's bytes", id, ip.LeafHash, got)
	}
	proof := decodeHashes(t, ip.Proof)
	if err := tlog.CheckRecord(proof, cp.TreeSize, root, ip.Seq-1, leaf); err != nil {
		t.Errorf("InclusionProof(%s, %d) does not verify: %v", id, size, err)
	}
	tampered := bytes.Replace(rec.Raw, []byte(id), []byte(id+"x"), 1)
	if err := tlog.CheckRecord(proof, cp.TreeSize, root, ip.Seq-1, tlog.RecordHash(tampered)); err == nil {
		t.Errorf("InclusionProof(%s, %d) verifies altered record bytes", id, size)
	}
}

func decodeHashes(t *testing.T, b64 []string) []tlog.Hash {
	t.Helper()
	out := make([]tlog.Hash, len(b64))
	for i, s := range b64 {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			t.Fatalf("hash %q is not a base64 SHA-256 hash", s)
		}
		copy(out[i][:], b)
	}
	return out
}
