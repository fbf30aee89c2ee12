package ledger_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/record"
)

// BenchmarkSeal measures sealing one presealed record: the chain link,
// record_hash and, signed, the Ed25519 signature; this is the work done
// inside the commit transaction.
func BenchmarkSeal(b *testing.B) {
	ring, err := keyring.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), now, "bench"); err != nil {
		b.Fatal(err)
	}
	keys := func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) }
	signer, err := keys(now)
	if err != nil {
		b.Fatal(err)
	}
	fixed := func(time.Time) (ledger.Signer, error) { return signer, nil }
	for _, tc := range []struct {
		name string
		seal ledger.SealFunc
	}{{"unsigned", ledger.Seal}, {"signed", ledger.NewSeal(fixed)}} {
		b.Run(tc.name, func(b *testing.B) {
			rec := ledgertest.NewRecord("acme", 1)
			rec.Timestamp = now.Add(time.Hour)
			pre, err := record.Preseal(rec)
			if err != nil {
				b.Fatal(err)
			}
			e := &ledger.Entry{Record: rec, Presealed: pre}
			b.SetBytes(int64(len(pre)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.seal(ledger.Head{Seq: 41, Hash: "sha256:" + string(bytes.Repeat([]byte("ab"), 32))}, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("preseal", func(b *testing.B) {
		rec := ledgertest.NewRecord("acme", 1)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := record.Preseal(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSealBatch measures sealing a signed batch of 16 records, the
// work the single writer does before its inserts: "sequential" seals one
// after the other (as the stores did), "SealBatch" computes the chain and
// signs in parallel. Reported per batch.
func BenchmarkSealBatch(b *testing.B) {
	ring, err := keyring.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), now, "bench"); err != nil {
		b.Fatal(err)
	}
	// One signer, as writ serve's key source keeps one per key.
	signer, err := ring.Signer(now)
	if err != nil {
		b.Fatal(err)
	}
	seal := ledger.NewSeal(func(time.Time) (ledger.Signer, error) { return signer, nil })
	entries := make([]*ledger.Entry, 16)
	todo := make([]int, len(entries))
	for i := range entries {
		rec := ledgertest.NewRecord("acme", i+1)
		rec.Timestamp = now.Add(time.Hour)
		pre, err := record.Preseal(rec)
		if err != nil {
			b.Fatal(err)
		}
		entries[i], todo[i] = &ledger.Entry{Record: rec, Presealed: pre}, i
	}
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			head := ledger.Head{}
			for _, e := range entries {
				if _, err := seal(head, e); err != nil {
					b.Fatal(err)
				}
				head = ledger.Head{Seq: e.Record.Audit.Seq, Hash: e.Record.Audit.RecordHash}
			}
		}
	})
	b.Run("SealBatch", func(b *testing.B) {
		for b.Loop() {
			if _, err := ledger.SealBatch(seal, map[string]ledger.Head{}, entries, todo); err != nil {
				b.Fatal(err)
			}
		}
	})
}
