package ledger_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/sqlite"
)

func TestCheckpointerWaitsForEveryNewRecords(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{3}, 64)), t0, "cp"); err != nil {
		t.Fatal(err)
	}
	keys := func(at time.Time) (ledger.Signer, error) {
		s, err := ring.Signer(at)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	now := t0.Add(time.Hour)
	cp := ledger.NewCheckpointer(st, keys, "writ", ledger.CheckpointPolicy{Every: 5, Interval: time.Hour}, func() time.Time { return now }, nil)
	for seq := 1; seq <= 12; seq++ {
		e := ledgertest.NewEntry(ledgertest.NewRecord("acme", seq))
		if err := st.Append(ctx, []*ledger.Entry{e}, ledger.Seal); err != nil {
			t.Fatal(err)
		}
		cp.Observe([]*ledger.Entry{e})
		cp.IssueDue(ctx)
	}
	all, err := st.Checkpoints(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, c := range all {
		sizes = append(sizes, c.Size)
	}
	if len(sizes) != 2 || sizes[0] != 5 || sizes[1] != 10 {
		t.Errorf("with Every 5, 12 records were checkpointed at sizes %v, want [5 10]", sizes)
	}
	// The interval covers the rest.
	now = now.Add(2 * time.Hour)
	cp.IssueDue(ctx)
	if latest, _ := st.LatestCheckpoint(ctx, "acme"); latest == nil || latest.Size != 12 {
		t.Errorf("after the interval, the latest checkpoint = %+v, want size 12", latest)
	}
}

// TestCheckpointerCatchesUp: records a previous run left uncovered (it
// crashed before its checkpoint) are checkpointed by the next run's
// CatchUp; a covered tenant gets no new checkpoint.
func TestCheckpointerCatchesUp(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{3}, 64)), t0, "cp"); err != nil {
		t.Fatal(err)
	}
	keys := func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) }
	for _, tenant := range []string{"acme", "globex"} {
		for seq := 1; seq <= 3; seq++ {
			if err := st.Append(ctx, []*ledger.Entry{ledgertest.NewEntry(ledgertest.NewRecord(tenant, seq))}, ledger.Seal); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := func() time.Time { return t0.Add(time.Hour) }
	if _, err := ledger.NewCheckpointer(st, keys, "writ", ledger.CheckpointPolicy{}, now, nil).Issue(ctx, "globex"); err != nil {
		t.Fatal(err)
	}
	if err := ledger.NewCheckpointer(st, keys, "writ", ledger.CheckpointPolicy{}, now, nil).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		cps, err := st.Checkpoints(ctx, tenant)
		if err != nil || len(cps) != 1 || cps[0].Size != 3 {
			t.Errorf("%s: checkpoints after catch-up = %d (%v), want one of size 3", tenant, len(cps), err)
		}
	}
}

func TestCheckpointerTellsIssued(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ring, err := keyring.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{3}, 64)), t0, "cp"); err != nil {
		t.Fatal(err)
	}
	keys := func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) }
	var issued []int64
	policy := ledger.CheckpointPolicy{Every: 2, Interval: time.Hour, Issued: func(cp *ledger.Checkpoint) { issued = append(issued, cp.Size) }}
	cp := ledger.NewCheckpointer(st, keys, "writ", policy, func() time.Time { return t0.Add(time.Hour) }, nil)
	for seq := 1; seq <= 5; seq++ {
		e := ledgertest.NewEntry(ledgertest.NewRecord("acme", seq))
		if err := st.Append(ctx, []*ledger.Entry{e}, ledger.Seal); err != nil {
			t.Fatal(err)
		}
		cp.Observe([]*ledger.Entry{e})
		cp.IssueDue(ctx)
	}
	if len(issued) != 2 || issued[0] != 2 || issued[1] != 4 {
		t.Errorf("Issued was told of sizes %v, want [2 4]", issued)
	}
}
