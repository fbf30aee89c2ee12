package ledger_test

import (
	"bytes"
	"maps"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/record"
)

// TestSealSetsTheStoredAudit: the audit block a SealFunc leaves on the
// record is the one in the bytes it returns, signed or not, and those
// bytes verify.
func TestSealSetsTheStoredAudit(t *testing.T) {
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), now, "test"); err != nil {
		t.Fatal(err)
	}
	keys := func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) }
	for _, tc := range []struct {
		name string
		seal ledger.SealFunc
	}{{"unsigned", ledger.Seal}, {"signed", ledger.NewSeal(keys)}} {
		for _, prev := range []ledger.Head{{}, {Seq: 41, Hash: "sha256:" + string(bytes.Repeat([]byte("ab"), 32))}} {
			rec := ledgertest.NewRecord("acme", 1)
			rec.Timestamp = now.Add(time.Hour)
			raw, err := tc.seal(prev, &ledger.Entry{Record: rec})
			if err != nil {
				t.Fatalf("%s seal after %+v: %v", tc.name, prev, err)
			}
			_, stored, err := record.SplitSeal(raw)
			if err != nil {
				t.Fatalf("%s: SplitSeal: %v", tc.name, err)
			}
			if rec.Audit != stored {
				t.Errorf("%s seal after seq %d: record's audit %+v, stored audit %+v", tc.name, prev.Seq, rec.Audit, stored)
			}
			if (rec.Audit.Signature != "") != (tc.name == "signed") || rec.Audit.Seq != prev.Seq+1 {
				t.Errorf("%s seal after seq %d: audit %+v", tc.name, prev.Seq, rec.Audit)
			}
			if prev.Seq == 0 && rec.Audit.PrevHash != writ.GenesisHash {
				t.Errorf("%s first seal: prev_hash %q, want the genesis hash", tc.name, rec.Audit.PrevHash)
			}
			if _, err := record.CheckHash(raw); err != nil {
				t.Errorf("%s: CheckHash: %v", tc.name, err)
			}
		}
	}
}

// TestSealBatchMatchesSealingInOrder: SealBatch, which computes the chain
// first and signs in parallel, gives byte for byte what sealing the
// entries one after the other gives, across interleaved tenants, and moves
// the heads to the last records; a SealFunc that does not follow the
// chain fails the batch.
func TestSealBatchMatchesSealingInOrder(t *testing.T) {
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), now, "test"); err != nil {
		t.Fatal(err)
	}
	keys := func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) }
	start := map[string]ledger.Head{"globex": {Seq: 41, Hash: "sha256:" + string(bytes.Repeat([]byte("ab"), 32))}}
	batch := func() []*ledger.Entry {
		var es []*ledger.Entry
		for n := 1; n <= 9; n++ {
			tenant := "acme"
			if n%3 == 0 {
				tenant = "globex"
			}
			rec := ledgertest.NewRecord(tenant, n)
			rec.Timestamp = now.Add(time.Hour)
			es = append(es, &ledger.Entry{Record: rec})
		}
		return es
	}
	for _, tc := range []struct {
		name string
		seal ledger.SealFunc
	}{{"unsigned", ledger.Seal}, {"signed", ledger.NewSeal(keys)}} {
		// In order, one at a time, skipping entry 4 (not in todo).
		want := batch()
		wantHeads := maps.Clone(start)
		wantRaws := make([][]byte, len(want))
		todo := []int{0, 1, 2, 3, 5, 6, 7, 8}
		for _, i := range todo {
			e := want[i]
			raw, err := tc.seal(wantHeads[e.Record.TenantID], e)
			if err != nil {
				t.Fatal(err)
			}
			wantRaws[i] = raw
			wantHeads[e.Record.TenantID] = ledger.Head{Seq: e.Record.Audit.Seq, Hash: e.Record.Audit.RecordHash}
		}

		got := batch()
		heads := maps.Clone(start)
		raws, err := ledger.SealBatch(tc.seal, heads, got, todo)
		if err != nil {
			t.Fatalf("%s: SealBatch: %v", tc.name, err)
		}
		for i := range got {
			if !bytes.Equal(raws[i], wantRaws[i]) {
				t.Errorf("%s: entry %d sealed as\n%s\nwant\n%s", tc.name, i, raws[i], wantRaws[i])
			}
			if got[i].Record.Audit != want[i].Record.Audit {
				t.Errorf("%s: entry %d audit %+v, want %+v", tc.name, i, got[i].Record.Audit, want[i].Record.Audit)
			}
		}
		if !maps.Equal(heads, wantHeads) {
			t.Errorf("%s: heads %v, want %v", tc.name, heads, wantHeads)
		}
	}

	// A seal that signs another chain position forks the chain.
	fork := func(prev ledger.Head, e *ledger.Entry) ([]byte, error) {
		return ledger.Seal(ledger.Head{Seq: prev.Seq, Hash: writ.GenesisHash + "0"}, e)
	}
	if _, err := ledger.SealBatch(fork, maps.Clone(start), batch(), []int{0, 1}); err == nil {
		t.Errorf("SealBatch with a SealFunc off the chain = nil error, want one")
	}
}
