package ledgertest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// cosig is a cosignature whose line is well formed for the store (its
// signature is not checked by stores).
func cosig(tenant string, size int64, witness string, keyHash uint32, tag string, at time.Time) *ledger.Cosignature {
	return &ledger.Cosignature{TenantID: tenant, Size: size, Witness: witness, KeyHash: keyHash,
		Line:       fmt.Appendf(nil, "— %s %s\n", witness, tag),
		CosignedAt: at, ReceivedAt: at.Add(time.Second)}
}

func testCosignatures(t *testing.T, st ledger.Store) {
	cs, ok := st.(ledger.CosignatureStore)
	if !ok {
		t.Fatalf("%T does not implement ledger.CosignatureStore", st)
	}
	ctx := t.Context()
	t0 := time.Date(2026, time.May, 9, 9, 0, 0, 0, time.UTC)
	for _, c := range []*ledger.Cosignature{
		cosig("acme", 20, "w.example/b", 7, "AAAA", t0.Add(2*time.Minute)),
		cosig("acme", 10, "w.example/b", 7, "BBBB", t0),
		cosig("acme", 10, "w.example/a", 9, "CCCC", t0),
		cosig("acme", 20, "w.example/a", 3, "DDDD", t0.Add(time.Minute)), // a second key of witness a
		cosig("globex", 30, "w.example/a", 9, "EEEE", t0),
	} {
		if err := cs.PutCosignature(ctx, c); err != nil {
			t.Fatalf("PutCosignature(%s %d %s) = %v", c.TenantID, c.Size, c.Witness, err)
		}
	}
	// Asked again, a witness signs with a new timestamp: the first stays.
	if err := cs.PutCosignature(ctx, cosig("acme", 10, "w.example/b", 7, "ZZZZ", t0.Add(time.Hour))); err != nil {
		t.Fatalf("PutCosignature(again) = %v", err)
	}

	got, err := cs.Cosignatures(ctx, "acme")
	if err != nil {
		t.Fatalf("Cosignatures(acme) = %v", err)
	}
	want := []string{"10 w.example/a 9 CCCC", "10 w.example/b 7 BBBB", "20 w.example/a 3 DDDD", "20 w.example/b 7 AAAA"}
	if len(got) != len(want) {
		t.Fatalf("Cosignatures(acme) = %d cosignatures, want %d", len(got), len(want))
	}
	for i, c := range got {
		line := fmt.Sprintf("%d %s %d %s", c.Size, c.Witness, c.KeyHash, bytes.TrimSpace(bytes.TrimPrefix(c.Line, []byte("— "+c.Witness+" "))))
		if line != want[i] {
			t.Errorf("Cosignatures(acme)[%d] = %q, want %q", i, line, want[i])
		}
		if c.TenantID != "acme" {
			t.Errorf("Cosignatures(acme)[%d].TenantID = %q", i, c.TenantID)
		}
	}
	if c := got[1]; !c.CosignedAt.Equal(t0) || !c.ReceivedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("Cosignatures(acme)[1] times = %v, %v; want %v, %v", c.CosignedAt, c.ReceivedAt, t0, t0.Add(time.Second))
	}

	for _, tc := range []struct {
		tenant, witness string
		keyHash         uint32
		want            int64 // 0: none
	}{
		{"acme", "w.example/b", 7, 20},
		{"acme", "w.example/a", 9, 10},
		{"acme", "w.example/a", 3, 20},
		{"acme", "w.example/c", 9, 0},
		{"globex", "w.example/a", 9, 30},
		{"globex", "w.example/b", 7, 0},
		{"initech", "w.example/a", 9, 0},
	} {
		c, err := cs.LatestCosignature(ctx, tc.tenant, tc.witness, tc.keyHash)
		if err != nil {
			t.Fatalf("LatestCosignature(%s, %s, %d) = %v", tc.tenant, tc.witness, tc.keyHash, err)
		}
		var size int64
		if c != nil {
			size = c.Size
		}
		if size != tc.want {
			t.Errorf("LatestCosignature(%s, %s, %d) = size %d, want %d", tc.tenant, tc.witness, tc.keyHash, size, tc.want)
		}
	}

	none, err := cs.Cosignatures(ctx, "initech")
	if err != nil || len(none) != 0 {
		t.Errorf("Cosignatures(initech) = %d, %v; want none", len(none), err)
	}

	for _, tc := range []struct {
		name string
		c    *ledger.Cosignature
	}{
		{"nil", nil},
		{"no tenant", cosig("", 1, "w.example/a", 9, "AAAA", t0)},
		{"size 0", cosig("acme", 0, "w.example/a", 9, "AAAA", t0)},
		{"no witness", &ledger.Cosignature{TenantID: "acme", Size: 1, Line: []byte("— x AAAA\n"), CosignedAt: t0, ReceivedAt: t0}},
		{"line of another witness", &ledger.Cosignature{TenantID: "acme", Size: 1, Witness: "w.example/a", Line: []byte("— w.example/b AAAA\n"), CosignedAt: t0, ReceivedAt: t0}},
		{"two lines", &ledger.Cosignature{TenantID: "acme", Size: 1, Witness: "w.example/a", Line: []byte("— w.example/a AAAA\n— w.example/a BBBB\n"), CosignedAt: t0, ReceivedAt: t0}},
		{"no line feed", &ledger.Cosignature{TenantID: "acme", Size: 1, Witness: "w.example/a", Line: []byte("— w.example/a AAAA"), CosignedAt: t0, ReceivedAt: t0}},
		{"no timestamp", &ledger.Cosignature{TenantID: "acme", Size: 1, Witness: "w.example/a", Line: []byte("— w.example/a AAAA\n"), ReceivedAt: t0}},
	} {
		wantCode(t, "PutCosignature("+tc.name+")", cs.PutCosignature(ctx, tc.c), writ.EINVALID)
	}
	after, err := cs.Cosignatures(ctx, "acme")
	if err != nil || len(after) != len(want) {
		t.Errorf("Cosignatures(acme) after refused puts = %d, %v; want %d", len(after), err, len(want))
	}
}
