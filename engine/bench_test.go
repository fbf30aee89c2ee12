package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkCheck measures durable checks through the engine on SQLite
// (synchronous=FULL, group commit), with parallel callers.
func BenchmarkCheck(b *testing.B) {
	h := newHarness(b, example("wf-2302"))
	base := readRequest(b, example("wf-2302", "requests", "wf-2302-allow.json"))
	var seq atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := *base
			n := seq.Add(1)
			req.IdempotencyKey = fmt.Sprintf("ik-%d", n)
			req.Arguments = map[string]any{"workflow_ref": "WF-2302", "seq": float64(n)}
			if _, err := h.eng.Check(context.Background(), &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
}
