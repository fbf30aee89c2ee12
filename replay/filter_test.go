package replay_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// filteredRefundPack is the refund example whose velocity aggregate
// counts only refunds of at least 1000 INR that were allowed without a
// warning (a filter_expression over the counted check and its outcome).
func filteredRefundPack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pack.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("    filter: allowed\n"), []byte("    filter: allowed\n    filter_expression: \"args.amount_inr >= 1000.0 && outcome == 'allow'\"\n"), 1)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHistoryFilterExpression decides refunds of one customer on both
// stores: small refunds and refunds allowed with a warning are not
// counted, so the velocity rule denies only the fourth counted one; the
// value each check read is pinned, and every record replays equal.
func TestHistoryFilterExpression(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var h *harness
			if name == "sqlite" {
				h = newHarness(t, filteredRefundPack(t))
			} else {
				h = newHarnessOn(t, filteredRefundPack(t), openPostgres(t))
			}
			refundOf := func(amount float64, warn bool) *writ.CheckRequest {
				req := refund(t, "refund-allow")
				if warn {
					req = refund(t, "refund-allow-with-warning")
				}
				req.IdempotencyKey = ""
				req.Arguments["amount_inr"] = amount
				return req
			}
			steps := []struct {
				amount  float64
				warn    bool
				read    float64 // history.refunds_per_customer the check reads
				allowed bool
			}{
				{500, false, 0, true},  // too small to count
				{4200, true, 0, true},  // allowed with a warning: not counted
				{4200, false, 0, true}, // counted: 1
				{999, false, 1, true},
				{4200, false, 1, true}, // 2
				{4200, false, 2, true}, // 3
				{500, false, 3, false}, // the velocity rule denies any refund now
			}
			for i, s := range steps {
				rc := h.check(t, refundOf(s.amount, s.warn))
				h.clk.Add(time.Minute)
				st, err := h.eng.Record(t.Context(), "acme", rc.Metadata.RecordID)
				if err != nil {
					t.Fatal(err)
				}
				if rc.SafeToExecute != s.allowed {
					t.Errorf("step %d (%v INR): safe_to_execute = %v, want %v", i, s.amount, rc.SafeToExecute, s.allowed)
				}
				// The refund pack's tool_calls budget adds writ's tool-call
				// meter after the pack's aggregate (issue 31).
				hist := st.Record.History
				if len(hist) != 2 || hist[0].Name != "refunds_per_customer" || hist[0].Value != s.read || hist[1].Name != "writ.tool_calls" {
					t.Errorf("step %d (%v INR): pinned history = %+v, want refunds_per_customer = %v", i, s.amount, hist, s.read)
				}
			}
			if sum := replayTenant(t, h.store, "acme"); sum.Equal != int64(len(steps)+h.evidence) {
				t.Errorf("%d of %d records replayed equal", sum.Equal, len(steps)+h.evidence)
			}
		})
	}
}
