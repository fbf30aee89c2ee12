package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pinned"
)

// BenchmarkInclusionProof proves records of a large existing ledger (its
// data directory in WRIT_BENCH_DATA, built with `writ ledger generate`),
// straight from the stored tree hashes.
func BenchmarkInclusionProof(b *testing.B) {
	dir := os.Getenv("WRIT_BENCH_DATA")
	if dir == "" {
		b.Skip("WRIT_BENCH_DATA names no ledger to prove against")
	}
	s, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tenants, err := s.Tenants(ctx)
	if err != nil || len(tenants) == 0 {
		b.Fatalf("Tenants = %v, %v", tenants, err)
	}
	head, err := s.Head(ctx, tenants[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(head.Seq), "records")
	var seq int64 = 1
	for b.Loop() {
		if _, err := ledger.ProveInclusion(ctx, s, tenants[0], seq, head.Seq); err != nil {
			b.Fatal(err)
		}
		seq = seq*7919%head.Seq + 1
	}
}

// BenchmarkVerify verifies a large existing ledger (its data directory in
// WRIT_BENCH_DATA, built with `writ ledger generate`, keys in DATA/keys),
// as `writ ledger verify` does: hash-only, with signatures but no rules,
// and in full (signatures and rules). It reports records verified per
// second.
func BenchmarkVerify(b *testing.B) {
	dir := os.Getenv("WRIT_BENCH_DATA")
	if dir == "" {
		b.Skip("WRIT_BENCH_DATA names no ledger to verify")
	}
	s, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ring, err := keyring.Open(filepath.Join(dir, "keys"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts verify.VerifyOptions
	}{
		{"hash-only", verify.VerifyOptions{Hashes: s, Revocations: s}},
		{"signatures", verify.VerifyOptions{Keys: ring, Hashes: s, Revocations: s}},
		{"full", verify.VerifyOptions{Keys: ring, Rules: verify.NewRules(pinned.NewPacks(s)), Hashes: s, Revocations: s}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var records int64
			for b.Loop() {
				rep, err := verify.Verify(b.Context(), s, bc.opts)
				if err != nil || !rep.Intact() {
					b.Fatalf("Verify = %+v, %v; want an intact ledger", rep, err)
				}
				records += rep.Records
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
