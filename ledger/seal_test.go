package ledger_test

import (
	"bytes"
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
