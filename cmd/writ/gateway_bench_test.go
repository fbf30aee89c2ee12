package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkStdioHop measures the latency writ gateway adds across real
// process boundaries: the same allowed call (write_file, a check and an
// execution report on the embedded SQLite store, each a durable commit)
// is made, interleaved, straight to a stdio tool server process and
// through a `writ gateway` process that starts its own copy of that
// server over stdio. Both clients speak MCP over pipes to the child
// processes, so the gateway's path has one stdio hop more, plus the
// check's commit. It reports the p50 and p99 of each and their
// difference (docs/mcp.md, "Overhead").
func BenchmarkStdioHop(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	cfg := "tenant: acme\nupstreams:\n  - name: files\n    prefix: fs.\n    stdio:\n      command: " + strconvQuote(self) + "\n      env: {" + upstreamEnv + ": \"1\"}\n"
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	connect := func(cmd *exec.Cmd) *mcp.ClientSession {
		cmd.Stderr = nil
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	up := exec.Command(self)
	up.Env = append(os.Environ(), upstreamEnv+"=1")
	direct := connect(up)
	gwArgs := []string{"gateway", "--config", config, "--pack", filepath.Join("..", "..", "gateway", "testdata", "pack"),
		"--data", filepath.Join(dir, "data"), "--log-level", "error"}
	if p := os.Getenv("WRIT_BENCH_GATEWAY_CPUPROFILE"); p != "" {
		// A CPU profile of the gateway process, written when it exits.
		gwArgs = append(gwArgs, "--cpuprofile", p)
	}
	bin := writBinary
	if p := os.Getenv("WRIT_BENCH_GATEWAY_BINARY"); p != "" {
		// Another build of writ as the gateway: to compare two builds
		// with one test binary, run after run.
		bin = p
	}
	gw := connect(exec.Command(bin, gwArgs...))
	args := map[string]any{"path": "/allowed/bench.txt", "content": "x"}
	call := func(cs *mcp.ClientSession, name string) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		d := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", name, err, res)
		}
		return d
	}
	for range 20 { // warm both paths: processes, caches, the store
		call(direct, "write_file")
		call(gw, "fs.write_file")
	}
	var dDirect, dGW []time.Duration
	loadStart := loadAverage()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			dDirect = append(dDirect, call(direct, "write_file"))
			dGW = append(dGW, call(gw, "fs.write_file"))
		} else {
			dGW = append(dGW, call(gw, "fs.write_file"))
			dDirect = append(dDirect, call(direct, "write_file"))
		}
	}
	b.StopTimer()
	// The machine's 1-minute load average when the measured calls began
	// and ended: a figure is comparable only with one measured as quiet.
	b.ReportMetric(loadStart, "load1-start")
	b.ReportMetric(loadAverage(), "load1-end")
	pct := func(ds []time.Duration, p int) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[(len(s)-1)*p/100]
	}
	d50, d99, g50, g99 := pct(dDirect, 50), pct(dDirect, 99), pct(dGW, 50), pct(dGW, 99)
	b.ReportMetric(float64(d50.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(d99.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(g50.Microseconds()), "gw-p50-µs")
	b.ReportMetric(float64(g99.Microseconds()), "gw-p99-µs")
	b.ReportMetric(float64((g50 - d50).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((g99 - d99).Microseconds()), "added-p99-µs")
}

// loadAverage is the 1-minute load average (/proc/loadavg), or -1 where
// there is none.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
