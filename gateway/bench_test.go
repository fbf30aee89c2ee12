package gateway_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// BenchmarkToolCall measures what the gateway adds to one tools/call:
// each iteration makes the same allowed call twice, interleaved, once
// straight to an in-memory upstream and once through the gateway (check,
// durable record, forward, execution report, on the embedded SQLite
// store). It reports the p50 and p99 of both and their differences (the
// added latency), and calls/s through the gateway. The upstream's own
// time is in both, so the difference excludes it.
//
//	go test ./gateway -run '^$' -bench BenchmarkToolCall -benchtime 2000x -count 5
func BenchmarkToolCall(b *testing.B) {
	f := newFixture(b, packDir(), &files{}, "")
	through := f.client(b, protocols[1])
	ctx := context.Background()
	ct, err := (&files{}).connect(ctx, gateway.Upstream{})
	if err != nil {
		b.Fatal(err)
	}
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocols[1]})
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	gw := &mcp.CallToolParams{Name: "fs.read_file", Arguments: map[string]any{"path": "/allowed/a"}}
	up := &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/allowed/a"}}
	dGW := make([]time.Duration, 0, b.N)
	dUp := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if res, err := direct.CallTool(ctx, up); err != nil || res.IsError {
			b.Fatal(err)
		}
		t1 := time.Now()
		if res, err := through.CallTool(ctx, gw); err != nil || res.IsError {
			b.Fatal(err)
		}
		t2 := time.Now()
		dUp = append(dUp, t1.Sub(t0))
		dGW = append(dGW, t2.Sub(t1))
	}
	b.StopTimer()
	pGW50, pGW99 := percentile(dGW, 50), percentile(dGW, 99)
	pUp50, pUp99 := percentile(dUp, 50), percentile(dUp, 99)
	var total time.Duration
	for _, d := range dGW {
		total += d
	}
	b.ReportMetric(float64(pGW50.Microseconds()), "gw-p50-µs")
	b.ReportMetric(float64(pGW99.Microseconds()), "gw-p99-µs")
	b.ReportMetric(float64(pUp50.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(pUp99.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64((pGW50 - pUp50).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((pGW99 - pUp99).Microseconds()), "added-p99-µs")
	b.ReportMetric(float64(len(dGW))/total.Seconds(), "gw-calls/s")
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// BenchmarkCheckAndReport is writ's own part of a gateway call, without
// MCP: the check and the execution report, each durably committed, on the
// same engine and store as BenchmarkToolCall. The difference between the
// two is what the MCP layers add.
//
//	go test ./gateway -run '^$' -bench 'BenchmarkToolCall|BenchmarkCheckAndReport' -benchtime 2000x -count 5
func BenchmarkCheckAndReport(b *testing.B) {
	eng, _, _ := newEngine(b, packDir())
	ctx := context.Background()
	ds := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		rc, err := eng.Check(ctx, &writ.CheckRequest{TenantID: tenant, Tool: "fs.read_file", Arguments: map[string]any{"path": "/allowed/a"}, Actor: writ.Actor{Type: writ.ActorAgent, ID: "a"}})
		if err != nil || !rc.SafeToExecute {
			b.Fatal(err)
		}
		now := time.Now()
		if _, err := eng.ReportExecution(ctx, &writ.ExecutionReport{TenantID: tenant, DecisionID: rc.DecisionID, Status: writ.ExecutionSucceeded, StartedAt: &now, EndedAt: &now}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	b.ReportMetric(float64(percentile(ds, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(ds, 99).Microseconds()), "p99-µs")
}
