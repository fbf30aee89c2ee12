package record_test

import (
	"encoding/json"
	"testing"

	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/record"
)

// BenchmarkCanonicalize measures RFC 8785 canonicalization of a realistic
// record's JSON (about 1.5 KB), alone.
func BenchmarkCanonicalize(b *testing.B) {
	raw, err := json.Marshal(ledgertest.NewRecord("acme", 1))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := record.Canonicalize(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonical adds the encoding of the record to JSON.
func BenchmarkCanonical(b *testing.B) {
	rec := ledgertest.NewRecord("acme", 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := record.Canonical(rec); err != nil {
			b.Fatal(err)
		}
	}
}
