package witness_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/writhq/writ/witness"
	"github.com/writhq/writ/witness/witnesstest"
)

// TestReportWithRealWitness: Report says, step by step, the tenant's
// latest checkpoint and how far each witness's cosignatures lag behind
// it, with two real witnesses of which only the first is submitted to at
// first; another tenant's ledger shows nothing of it.
func TestReportWithRealWitness(t *testing.T) {
	ctx := context.Background()
	bin := witnessBin(t)
	l := newLog(t)
	logs := []witnesstest.Log{{Origin: "writ/acme", Key: l.vkey}}
	w1 := witnesstest.Start(t, bin, "w1.example/witness", logs)
	w2 := witnesstest.Start(t, bin, "w2.example/witness", logs)
	ws := []witness.Witness{{URL: w1.URL, Key: w1.Key}, {URL: w2.URL, Key: w2.Key}}
	only1 := newClient(t, l.st, w1)
	both := newClient(t, l.st, w1, w2)

	// lags renders a report as "checkpoint size; name cosigned/lag[s]"
	// per witness, "s" when the lag in time is given.
	lags := func(tenant string) string {
		t.Helper()
		r, err := witness.Report(ctx, l.st, tenant, ws)
		if err != nil {
			t.Fatalf("Report(%s) = %v", tenant, err)
		}
		if r.TenantID != tenant {
			t.Fatalf("Report(%s).TenantID = %q", tenant, r.TenantID)
		}
		s := "none"
		if r.Checkpoint != nil {
			s = fmt.Sprint(r.Checkpoint.TreeSize)
		}
		for i, w := range r.Witnesses {
			if w.Name != ws[i].Key.Name() || w.KeyID != fmt.Sprintf("%08x", ws[i].Key.Hash()) {
				t.Errorf("Report(%s).Witnesses[%d] = %s %s, want %s", tenant, i, w.Name, w.KeyID, ws[i].Key.Name())
			}
			s += fmt.Sprintf("; %s %d/%d", w.Name, w.CosignedSize, w.LagRecords)
			if w.LagSeconds != nil {
				if *w.LagSeconds < 0 || (w.LagRecords == 0 && *w.LagSeconds != 0) {
					t.Errorf("Report(%s): %s lags %d records and %v s", tenant, w.Name, w.LagRecords, *w.LagSeconds)
				}
				s += "s"
			}
			if (w.CosignedAt == nil) != (w.CosignedSize == 0) || (w.ReceivedAt == nil) != (w.CosignedSize == 0) {
				t.Errorf("Report(%s): %s cosigned %d at %v, received %v", tenant, w.Name, w.CosignedSize, w.CosignedAt, w.ReceivedAt)
			}
		}
		return s
	}
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"no record yet", func() {}, "none; w1.example/witness 0/0; w2.example/witness 0/0"},
		{"a checkpoint, not submitted", func() { l.append(t, "acme", 1, 6) }, "5; w1.example/witness 0/5; w2.example/witness 0/5"},
		{"the first witness cosigns it", func() { only1.SubmitAll(ctx) }, "5; w1.example/witness 5/0s; w2.example/witness 0/5"},
		{"a newer checkpoint", func() { l.append(t, "acme", 6, 13) }, "12; w1.example/witness 5/7s; w2.example/witness 0/12"},
		{"both cosign it", func() { both.SubmitAll(ctx) }, "12; w1.example/witness 12/0s; w2.example/witness 12/0s"},
	}
	for _, s := range steps {
		s.do()
		if got := lags("acme"); got != s.want {
			t.Errorf("after %s: Report(acme) = %q, want %q", s.name, got, s.want)
		}
	}
	if got, want := lags("globex"), "none; w1.example/witness 0/0; w2.example/witness 0/0"; got != want {
		t.Errorf("Report(globex) = %q, want %q", got, want)
	}
	r, err := witness.Report(ctx, l.st, "acme", nil)
	if err != nil || r.Checkpoint == nil || r.Checkpoint.TreeSize != 12 || r.Witnesses == nil || len(r.Witnesses) != 0 {
		t.Errorf("Report(acme, no witnesses) = %+v, %v; want the checkpoint of 12 and an empty list", r, err)
	}
	cr, err := both.Report(ctx, "acme")
	if err != nil || len(cr.Witnesses) != 2 || cr.Witnesses[1].CosignedSize != 12 || cr.Witnesses[0].Conflict {
		t.Errorf("Client.Report(acme) = %+v, %v", cr, err)
	}
}
