package witness_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/sqlite"
	"github.com/writhq/writ/witness"
	"github.com/writhq/writ/witness/witnesstest"
)

var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "writ-witness-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// witnessBin builds the transparency-dev witness once per test binary.
func witnessBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		bt := &captureTB{TB: t}
		func() {
			defer func() { recover() }()
			binPath = witnesstest.Build(bt, binDir)
		}()
		binError = bt.msg
	})
	if binPath == "" {
		t.Fatalf("building the witness failed: %s", binError)
	}
	return binPath
}

// captureTB turns a Fatalf into a panic the builder recovers, so that
// one failed build is reported by every test that needs the witness.
type captureTB struct {
	testing.TB
	msg string
}

func (c *captureTB) Fatalf(format string, args ...any) {
	c.msg = strings.TrimSpace(strings.ReplaceAll(format, "%v", "")) + ": " + strings.TrimSpace(sprint(args...))
	panic(c.msg)
}

func (c *captureTB) Fatal(args ...any) { c.msg = sprint(args...); panic(c.msg) }

func sprint(args ...any) string {
	var b strings.Builder
	for _, a := range args {
		if e, ok := a.(error); ok {
			b.WriteString(e.Error())
		} else if s, ok := a.(string); ok {
			b.WriteString(s)
		} else if bs, ok := a.([]byte); ok {
			b.Write(bs)
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// logFixture is a SQLite ledger with a checkpoint signing key.
type logFixture struct {
	st     *sqlite.Store
	signer note.Signer
	vkey   string
}

func newLog(t *testing.T) *logFixture {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	k, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), t0, "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ring.Signer(t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &logFixture{st: st, signer: s, vkey: k.VerifierKey}
}

// append appends records n in [from, to) of tenant, then signs a
// checkpoint of the tenant's tree.
func (l *logFixture) append(t *testing.T, tenant string, from, to int) *ledger.Checkpoint {
	t.Helper()
	ctx := context.Background()
	for n := from; n < to; n++ {
		if err := l.st.Append(ctx, []*ledger.Entry{ledgertest.NewEntry(ledgertest.NewRecord(tenant, n))}, ledger.Seal); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := ledger.IssueCheckpoint(ctx, l.st, l.signer, "writ", tenant, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func newClient(t *testing.T, st witness.Store, ws ...*witnesstest.Witness) *witness.Client {
	t.Helper()
	var cfg []witness.Witness
	for _, w := range ws {
		cfg = append(cfg, witness.Witness{URL: w.URL, Key: w.Key})
	}
	c, err := witness.NewClient(witness.Config{Witnesses: cfg, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cosignedSizes lists the sizes of tenant's checkpoints a witness key
// cosigned, each cosignature checked against the stored checkpoint.
func cosignedSizes(t *testing.T, st *sqlite.Store, tenant string, k witness.Key) []int64 {
	t.Helper()
	ctx := context.Background()
	cos, err := st.Cosignatures(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, c := range cos {
		if c.Witness != k.Name() || c.KeyHash != k.Hash() {
			continue
		}
		cp, err := st.CheckpointAt(ctx, tenant, c.Size)
		if err != nil {
			t.Fatal(err)
		}
		at, err := witness.Verify(cp.Note, c.Line, k)
		if err != nil {
			t.Errorf("Verify(checkpoint %d, cosignature of %s) = %v", c.Size, k.Name(), err)
		}
		if !at.Equal(c.CosignedAt) {
			t.Errorf("cosignature %d of %s: stored time %v, the line says %v", c.Size, k.Name(), c.CosignedAt, at)
		}
		sizes = append(sizes, c.Size)
	}
	return sizes
}

func equalSizes(a []int64, b ...int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// hideCosignatures makes a store look as if it had no cosignatures, as a
// second writ server's view before its first submission, or a store
// restored from a backup older than the witness's state.
type hideCosignatures struct{ witness.Store }

func (hideCosignatures) LatestCosignature(context.Context, string, string, uint32) (*ledger.Cosignature, error) {
	return nil, nil
}

func TestClientWithRealWitness(t *testing.T) {
	ctx := context.Background()
	bin := witnessBin(t)
	l := newLog(t)
	logs := []witnesstest.Log{{Origin: "writ/acme", Key: l.vkey}}
	w1 := witnesstest.Start(t, bin, "w1.example/witness", logs)
	w2 := witnesstest.Start(t, bin, "w2.example/witness", logs)
	c := newClient(t, l.st, w1, w2)

	l.append(t, "acme", 1, 6)
	if err := c.SubmitAll(ctx); err != nil {
		t.Fatalf("SubmitAll (first checkpoint) = %v", err)
	}
	l.append(t, "acme", 6, 13)
	if err := c.SubmitAll(ctx); err != nil {
		t.Fatalf("SubmitAll (with a consistency proof from 5 to 12) = %v", err)
	}
	for _, w := range []*witnesstest.Witness{w1, w2} {
		if got := cosignedSizes(t, l.st, "acme", w.Key); !equalSizes(got, 5, 12) {
			t.Errorf("%s cosigned sizes %v, want [5 12]", w.Key.Name(), got)
		}
	}
	// Nothing new: nothing is submitted, and the status shows no lag.
	if err := c.SubmitAll(ctx); err != nil {
		t.Fatalf("SubmitAll (nothing new) = %v", err)
	}
	for _, s := range c.Status() {
		if s.Behind != 0 || s.LastError != "" || len(s.Conflicts) != 0 {
			t.Errorf("Status() = %+v, want nothing behind", s)
		}
	}

	// A client that does not know what the witness saw gets 409 and
	// submits again from the witness's size.
	l.append(t, "acme", 13, 20)
	fresh := newClient(t, hideCosignatures{l.st}, w1)
	if err := fresh.SubmitAll(ctx); err != nil {
		t.Fatalf("SubmitAll (after a 409) = %v", err)
	}
	if got := cosignedSizes(t, l.st, "acme", w1.Key); !equalSizes(got, 5, 12, 19) {
		t.Errorf("%s cosigned sizes %v, want [5 12 19]", w1.Key.Name(), got)
	}
}

func TestClientConflictWithRealWitness(t *testing.T) {
	ctx := context.Background()
	bin := witnessBin(t)
	l := newLog(t)
	w := witnesstest.Start(t, bin, "w1.example/witness", []witnesstest.Log{{Origin: "writ/acme", Key: l.vkey}})
	l.append(t, "acme", 1, 6)
	l.append(t, "acme", 6, 13)
	if err := newClient(t, l.st, w).SubmitAll(ctx); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		forgedTo int // the forged history's records after the cut at 5
	}{
		{"cut and re-grown shorter", 3},   // size 8 < 12: the witness's 409 says 12
		{"cut and re-grown longer", 10},   // size 15 > 12: no proof from 12 verifies
		{"cut and re-grown same size", 7}, // size 12, another root
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The operator's own key re-signs a history cut at the
			// checkpoint of size 5 and grown otherwise.
			forged := &logFixture{signer: l.signer, vkey: l.vkey}
			st, err := sqlite.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			forged.st = st
			forged.append(t, "acme", 1, 6)
			cp := forged.append(t, "acme", 1000, 1000+tc.forgedTo)
			var conflicts []string
			c, err := witness.NewClient(witness.Config{Witnesses: []witness.Witness{{URL: w.URL, Key: w.Key}}, Store: st,
				OnConflict: func(witness, tenant string, err error) { conflicts = append(conflicts, witness+" "+tenant) }})
			if err != nil {
				t.Fatal(err)
			}
			err = c.SubmitAll(ctx)
			if !errors.Is(err, witness.ErrConflict) {
				t.Fatalf("SubmitAll(forged checkpoint of size %d) = %v, want a witness conflict", cp.Size, err)
			}
			if got := cosignedSizes(t, st, "acme", w.Key); len(got) != 0 {
				t.Errorf("the witness cosigned the forged history at %v", got)
			}
			if len(conflicts) != 1 || conflicts[0] != "w1.example/witness acme" {
				t.Errorf("OnConflict calls = %q, want one for w1.example/witness acme", conflicts)
			}
			st0 := c.Status()[0]
			if len(st0.Conflicts) != 1 || st0.Behind != 1 {
				t.Errorf("Status() = %+v, want acme in conflict and behind", st0)
			}
		})
	}
}

// TestClientRefusalsWithRealWitness: a log the witness does not know,
// and a checkpoint signed by a key it does not trust for the origin. The
// spec's answers are 404 and 403 (TestClientAnswers); this version of
// the transparency-dev witness answers 500 to both. Either way nothing is
// cosigned, the error names the witness, and it is not a conflict.
func TestClientRefusalsWithRealWitness(t *testing.T) {
	ctx := context.Background()
	bin := witnessBin(t)
	l := newLog(t)
	w := witnesstest.Start(t, bin, "w1.example/witness", []witnesstest.Log{{Origin: "writ/acme", Key: differentKey(t)}})
	l.append(t, "acme", 1, 4)
	l.append(t, "globex", 1, 4)
	c := newClient(t, l.st, w)
	err := c.SubmitAll(ctx)
	if err == nil || !strings.Contains(err.Error(), "witness w1.example/witness answered") {
		t.Fatalf("SubmitAll = %v, want the witness's refusal", err)
	}
	if errors.Is(err, witness.ErrConflict) {
		t.Errorf("SubmitAll = %v, a refusal is not a conflict", err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if got := cosignedSizes(t, l.st, tenant, w.Key); len(got) != 0 {
			t.Errorf("%s: cosigned %v", tenant, got)
		}
	}
	if s := c.Status()[0]; s.Behind != 2 || s.LastError == "" {
		t.Errorf("Status() = %+v, want 2 tenants behind and the last error", s)
	}
}

// differentKey is a verifier key of another signer named like the log's.
func differentKey(t *testing.T) string {
	t.Helper()
	_, vkey, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{9}, 64)), "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}
