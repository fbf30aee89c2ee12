package engine_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/writhq/writ/engine"
)

// refundPackVariant copies examples/refund to a temporary directory with
// its history section and velocity rule removed (aggregates 0), as it is
// (1), or with a second aggregate, a session token budget read by a
// second rule (2); edits are (old, new) pairs replaced in every file.
func refundPackVariant(b testing.TB, aggregates int, edits ...string) string {
	b.Helper()
	src, dst := example("refund"), b.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(data)
		switch {
		case rel == "pack.yaml" && aggregates == 0:
			s = s[:strings.Index(s, "# Refunds allowed per customer")]
		case rel == "pack.yaml" && aggregates == 2:
			s += "  - {name: session_tokens, aggregate: sum, field: usage.tokens, group_by: session, window: 24h}\n"
		case rel == filepath.Join("policies", "returns.yaml") && aggregates == 0:
			s = s[:strings.Index(s, "\n  - id: R_REFUND_VELOCITY")] + "\n"
		case rel == filepath.Join("policies", "returns.yaml") && aggregates == 2:
			s += "\n  - id: R_SESSION_TOKENS\n    when: history.session_tokens + usage.tokens > 1000000000.0\n    effect: deny\n    reason: {code: session_tokens, message: The session is over its token budget.}\n"
		}
		for i := 0; i+1 < len(edits); i += 2 {
			s = strings.ReplaceAll(s, edits[i], edits[i+1])
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, []byte(s), 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
	return dst
}

// BenchmarkCheckHistory measures durable checks of refunds on SQLite, as
// BenchmarkCheck does, under the refund pack with no history aggregate,
// one (the velocity rule) and two (plus a session token budget): each
// aggregate a check reads costs an indexed read before deciding and
// again inside the append transaction, and each it counts an insert.
// Every check is of a new customer and session, so all are allowed.
func BenchmarkCheckHistory(b *testing.B) {
	for _, n := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("aggregates=%d", n), func(b *testing.B) {
			clk := newClock(exampleClock)
			h := newHarness(b, refundPackVariant(b, n), func(c *engine.Config) { c.Now = clk.Now })
			base := refund(b, "acme", "x", 0, exampleClock)
			// Each customer's identity verification, on file before the
			// clock starts: a refund accepts only evidence writ resolves.
			customers := make([]string, b.N)
			for i := range customers {
				customers[i] = fmt.Sprintf("c_%d", i+1)
			}
			verifyCustomers(b, h.eng, "acme", exampleClock, customers...)
			var seq atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					req := *base
					req.IdempotencyKey = fmt.Sprintf("ik-%d", n)
					req.Arguments = map[string]any{"order_id": fmt.Sprintf("ord_%d", n), "amount_inr": 4200.0, "currency": "INR"}
					req.SubjectIDs = []string{fmt.Sprintf("customer:c_%d", n), "order:x"}
					req.Evidence = slices.Clone(base.Evidence)
					req.Evidence[0].ID = idvOf(fmt.Sprintf("c_%d", n), exampleClock)
					inputs := *base.InputsRefs
					inputs.Session = fmt.Sprintf("sess_%d", n)
					req.InputsRefs = &inputs
					rc, err := h.eng.Check(context.Background(), &req)
					if err != nil || !rc.SafeToExecute {
						b.Fatalf("check %d: %v %+v", n, err, rc.Reasons)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
		})
	}
}
