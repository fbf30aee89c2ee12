package witness_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/witness"
)

// quorumSource is a bundle's view for CheckQuorum: checkpoints and
// cosignature members by tenant and size.
type quorumSource struct {
	cps   map[string][]*ledger.Checkpoint
	lines map[string][]byte // "tenant size"
}

func (q quorumSource) Tenants(context.Context) ([]string, error) {
	var out []string
	for t := range q.cps {
		out = append(out, t)
	}
	return out, nil
}

func (q quorumSource) Checkpoints(_ context.Context, t string) ([]*ledger.Checkpoint, error) {
	return q.cps[t], nil
}

func (q quorumSource) CosignatureLines(_ context.Context, t string, size int64) ([]byte, error) {
	return q.lines[fmt.Sprintf("%s %d", t, size)], nil
}

// TestCheckQuorum: the findings of verify-bundle --witness, each case a
// bundle of acme's checkpoints of sizes 3 and 6 with some cosignatures.
func TestCheckQuorum(t *testing.T) {
	l := newLog(t)
	cp3 := l.append(t, "acme", 1, 4)
	cp6 := l.append(t, "acme", 4, 7)
	w1, w2, stranger := newCosigner(t, "w1.example/w"), newCosigner(t, "w2.example/w"), newCosigner(t, "w3.example/w")
	sign := func(c cosigner, cp *ledger.Checkpoint) []byte {
		return c.cosign(t, append([]byte("old 0\n\n"), cp.Note...))
	}
	tampered := func(line []byte) []byte {
		out := append([]byte(nil), line...)
		out[len(out)-4] ^= 1
		return out
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lines map[string][]byte
		min   int
		want  []string // "kind size", in order
	}{
		{"both witnesses on the newest", map[string][]byte{"acme 6": cat(sign(w1, cp6), sign(w2, cp6))}, 2, nil},
		{"one of two, one required", map[string][]byte{"acme 6": sign(w2, cp6)}, 1, nil},
		{"one of two, two required", map[string][]byte{"acme 6": sign(w2, cp6)}, 2, []string{"witness_quorum 6"}},
		{"a stranger's line is not counted", map[string][]byte{"acme 6": cat(sign(w1, cp6), sign(stranger, cp6))}, 2, []string{"witness_quorum 6"}},
		{"none at all", nil, 1, []string{"witness_quorum 6"}},
		// The tail cut: the log was cut after 3 and re-grown to 6 under
		// the operator's key; the witnesses cosigned only up to 3.
		{"cosigned only before a cut", map[string][]byte{"acme 3": cat(sign(w1, cp3), sign(w2, cp3))}, 1, []string{"witness_quorum 6"}},
		{"a cosignature of 3 moved onto 6", map[string][]byte{"acme 6": sign(w1, cp3)}, 1, []string{"bad_cosignature 6", "witness_quorum 6"}},
		{"a tampered line", map[string][]byte{"acme 6": cat(tampered(sign(w1, cp6)), sign(w2, cp6))}, 2, []string{"bad_cosignature 6", "witness_quorum 6"}},
		{"a tampered line on an older checkpoint", map[string][]byte{"acme 3": tampered(sign(w1, cp3)), "acme 6": cat(sign(w1, cp6), sign(w2, cp6))}, 2, []string{"bad_cosignature 3"}},
		{"not signature lines", map[string][]byte{"acme 6": []byte("cosigned, trust me\n")}, 1, []string{"bad_cosignature 6", "witness_quorum 6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := quorumSource{cps: map[string][]*ledger.Checkpoint{"acme": {cp3, cp6}}, lines: tc.lines}
			fs, err := witness.CheckQuorum(context.Background(), src, []witness.Key{w1.key, w2.key}, tc.min)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				got = append(got, fmt.Sprintf("%s %d", f.Kind, f.TreeSize))
				if f.TenantID != "acme" || f.Detail == "" {
					t.Errorf("finding %+v: want tenant acme and a detail", f)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("CheckQuorum(min %d) = %q, want %q", tc.min, got, tc.want)
			}
		})
	}
	if _, err := witness.CheckQuorum(context.Background(), quorumSource{}, []witness.Key{w1.key}, 2); err == nil {
		t.Error("CheckQuorum(2 of 1 keys) = nil error")
	}
}
