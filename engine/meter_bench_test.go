package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkCheckMetered is BenchmarkCheckStorage's "durable" case on the
// refund pack, whose spec has a tool_calls budget: each allowed refund
// of a session reads and adds to the history the spec's checks read
// (with writ's tool-call meter, issue 31, one more read and one more
// contribution per check). Each caller makes its refunds one after the
// other, ten per session (an agent's session calls its tools in turn),
// a customer each, so that neither the budget nor the velocity rule
// fires. It reports the process's CPU time per check, with 32 callers.
//
// BenchmarkCheckUnmetered runs the same checks on the same pack with the
// tool_calls budget taken out, so that nothing is metered: the
// difference between the two, in one test binary, is what metering costs
// a check.
//
//	go test ./engine -run '^$' -bench 'Check(Un)?Metered' -benchtime 2000x
func BenchmarkCheckMetered(b *testing.B) {
	benchmarkRefunds(b, example("refund"))
}

func BenchmarkCheckUnmetered(b *testing.B) {
	dir := b.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		b.Fatal(err)
	}
	spec := filepath.Join(dir, "specs", "refund-execute.yaml")
	y, err := os.ReadFile(spec)
	if err != nil {
		b.Fatal(err)
	}
	out := strings.Replace(string(y), "  tool_calls: 20\n", "", 1)
	if out == string(y) {
		b.Fatal("the refund spec has no tool_calls budget to take out")
	}
	if err := os.WriteFile(spec, []byte(out), 0o600); err != nil {
		b.Fatal(err)
	}
	benchmarkRefunds(b, dir)
}

func benchmarkRefunds(b *testing.B, packDir string) {
	h := newHarness(b, packDir)
	base := refund(b, "acme", "cus", 0, exampleClock)
	// Each check refunds a customer of its own, whose identity
	// verification is on file before the clock starts: a refund accepts
	// only evidence writ resolves.
	customers := make([]string, b.N)
	for i := range customers {
		customers[i] = fmt.Sprintf("cus_%d", i+1)
	}
	verifyCustomers(b, h.eng, "acme", exampleClock, customers...)
	var seq, callers atomic.Int64
	b.SetParallelism(16)
	before := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		caller, i := callers.Add(1), 0
		for pb.Next() {
			n := seq.Add(1)
			i++
			req := *base
			req.Arguments = map[string]any{"order_id": fmt.Sprintf("ord_%d", n), "amount_inr": 4200.0, "currency": "INR"}
			req.Outputs = map[string]any{"order_id": fmt.Sprintf("ord_%d", n), "refund_amount_inr": 4200.0, "currency": "INR"}
			req.SubjectIDs = []string{fmt.Sprintf("customer:cus_%d", n), fmt.Sprintf("order:ord_%d", n)}
			req.Evidence = slices.Clone(base.Evidence)
			req.Evidence[0].ID = idvOf(fmt.Sprintf("cus_%d", n), exampleClock)
			in := *base.InputsRefs
			in.Session = fmt.Sprintf("sess_%d_%d", caller, i/10)
			req.InputsRefs = &in
			req.IdempotencyKey = fmt.Sprintf("ik_%d", n)
			req.Usage = nil
			rc, err := h.eng.Check(context.Background(), &req)
			if err != nil || !rc.SafeToExecute {
				b.Fatalf("check %d: %v %+v", n, err, rc)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/check")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
}
