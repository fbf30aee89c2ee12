package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/writhq/writ"
)

// bench drives POST /v1/check with concurrent clients and reports durable
// checks per second and latency percentiles. Without --addr it starts
// `writ serve` as a child process on a loopback port with a fresh data
// directory, so server and load generator share this machine but not a
// process. Every request gets its own idempotency key and a distinct
// argument, so each one is decided and recorded.
func (m *Main) bench(ctx context.Context, args []string) error {
	fs := m.flags("bench", "--request FILE [--addr URL | --pack DIR] [--concurrency N] [--duration D] [--rate R] [--mix [--approval-request FILE]]")
	addr := fs.String("addr", "", "base URL of a running writ server (default: start one)")
	reqFile := fs.String("request", "", "check request to send (JSON; required)")
	packDir := fs.String("pack", "", "pack for the started server (default: the request's pack)")
	conc := fs.Int("concurrency", 64, "concurrent clients")
	dur := fs.Duration("duration", 10*time.Second, "how long to send load (at most 5m)")
	warmup := fs.Duration("warmup", 2*time.Second, "load sent before measuring")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	perSec := fs.Float64("rate", 0, "send at most this many checks a second, all clients together (0: as fast as the clients go); with --mix, operations")
	mix := fs.Bool("mix", false, "send a mixed load: checks, approvals, execution reports and reads together (see docs/scale.md)")
	approvalFile := fs.String("approval-request", "", "with --mix: a check request that opens an approval request (default: none, no approvals)")
	tenant := fs.String("tenant", "", "with --mix: the tenant of the reads, approvals and reports (default: the request's)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *perSec < 0 {
		return usagef("--rate must not be negative")
	}
	limiter := rate.NewLimiter(rate.Inf, 1)
	if *perSec > 0 {
		limiter = rate.NewLimiter(rate.Limit(*perSec), 1)
	}
	if *reqFile == "" {
		return usagef("bench needs --request FILE")
	}
	if !*mix && (*approvalFile != "" || *tenant != "") {
		return usagef("--approval-request and --tenant go with --mix")
	}
	if *conc < 1 || *conc > 4096 {
		return usagef("--concurrency must be 1..4096")
	}
	if *dur <= 0 || *dur > 5*time.Minute {
		return usagef("--duration must be positive and at most 5m")
	}
	req, err := m.readRequest(*reqFile)
	if err != nil {
		return err
	}
	base := *addr
	if base == "" {
		if *packDir == "" {
			if *packDir, err = findPack(*reqFile); err != nil {
				return err
			}
		}
		url, stop, err := m.startServer(ctx, *packDir)
		if err != nil {
			return err
		}
		defer stop()
		base = url
	}

	// Keys are unique to this run, so a second run against the same
	// server measures new decisions, not idempotent replays.
	runTag := strconv.FormatInt(time.Now().UnixNano(), 36)
	// Against a server that authenticates, the checks go as this agent key.
	token := m.Getenv("WRIT_API_KEY")
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: *conc, MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc}, Timeout: 30 * time.Second}
	if *mix {
		mx := &mixer{client: client, base: base, token: token, issuerToken: m.Getenv("WRIT_ISSUER_KEY"), runTag: runTag, tenant: *tenant, check: req}
		if mx.tenant == "" {
			mx.tenant = req.TenantID
		}
		if *approvalFile != "" {
			if mx.approval, err = m.readRequest(*approvalFile); err != nil {
				return err
			}
		}
		return m.benchMix(ctx, mx, limiter, *conc, *dur, *warmup, *asJSON)
	}
	var seq atomic.Int64
	run := func(d time.Duration, record bool) benchResult {
		deadline := time.Now().Add(d)
		var mu sync.Mutex
		res := benchResult{Outcomes: map[string]int{}, Statuses: map[string]int{}}
		var wg sync.WaitGroup
		start := time.Now()
		for range *conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := benchResult{Outcomes: map[string]int{}, Statuses: map[string]int{}}
				for time.Now().Before(deadline) && ctx.Err() == nil {
					if limiter.Wait(ctx) != nil {
						break
					}
					n := seq.Add(1)
					body, err := benchBody(req, runTag, n)
					if err != nil {
						local.Errors++
						continue
					}
					t0 := time.Now()
					status, outcome, err := postCheck(ctx, client, base, token, body)
					lat := time.Since(t0)
					local.Statuses[strconv.Itoa(status)]++
					if err != nil || status != http.StatusOK {
						local.Errors++
						continue
					}
					local.Outcomes[outcome]++
					local.latencies = append(local.latencies, lat)
				}
				mu.Lock()
				res.merge(local)
				mu.Unlock()
			}()
		}
		wg.Wait()
		res.Elapsed = time.Since(start)
		return res
	}
	if *warmup > 0 {
		run(*warmup, false)
	}
	res := run(*dur, true)
	res.summarize(*conc)
	if *asJSON {
		return m.printJSON(res)
	}
	fmt.Fprintf(m.Stdout, "durable checks: %d in %s with %d clients (%d errors)\n", res.Checks, res.Elapsed.Round(time.Millisecond), *conc, res.Errors)
	fmt.Fprintf(m.Stdout, "throughput:     %.0f checks/s\n", res.PerSecond)
	fmt.Fprintf(m.Stdout, "latency:        p50 %s  p90 %s  p99 %s  max %s\n", res.P50, res.P90, res.P99, res.Max)
	fmt.Fprintf(m.Stdout, "outcomes:       %v\n", res.Outcomes)
	if res.Errors > 0 {
		return fmt.Errorf("%d checks failed (HTTP statuses %v)", res.Errors, res.Statuses)
	}
	return nil
}

type benchResult struct {
	Checks      int            `json:"checks"`
	Errors      int            `json:"errors"`
	Elapsed     time.Duration  `json:"elapsed_ns"`
	PerSecond   float64        `json:"checks_per_second"`
	P50         time.Duration  `json:"p50_ns"`
	P90         time.Duration  `json:"p90_ns"`
	P99         time.Duration  `json:"p99_ns"`
	Max         time.Duration  `json:"max_ns"`
	Concurrency int            `json:"concurrency"`
	Outcomes    map[string]int `json:"outcomes"`
	Statuses    map[string]int `json:"http_statuses"`
	latencies   []time.Duration
}

func (r *benchResult) merge(o benchResult) {
	r.Errors += o.Errors
	r.latencies = append(r.latencies, o.latencies...)
	for k, v := range o.Outcomes {
		r.Outcomes[k] += v
	}
	for k, v := range o.Statuses {
		r.Statuses[k] += v
	}
}

func (r *benchResult) summarize(conc int) {
	r.Concurrency = conc
	r.Checks = len(r.latencies)
	r.PerSecond = float64(r.Checks) / r.Elapsed.Seconds()
	if r.Checks == 0 {
		return
	}
	slices.Sort(r.latencies)
	pct := func(p float64) time.Duration { return r.latencies[int(p*float64(len(r.latencies)-1))] }
	r.P50, r.P90, r.P99, r.Max = pct(0.50), pct(0.90), pct(0.99), r.latencies[len(r.latencies)-1]
}

// benchBody makes request n distinct: its own idempotency key and one
// extra argument, so no answer is a repeat of an earlier one.
func benchBody(req *writ.CheckRequest, runTag string, n int64) ([]byte, error) {
	r := *req
	r.IdempotencyKey = "bench-" + runTag + "-" + strconv.FormatInt(n, 10)
	args := make(map[string]any, len(req.Arguments)+1)
	for k, v := range req.Arguments {
		args[k] = v
	}
	args["bench_seq"] = runTag + "-" + strconv.FormatInt(n, 10)
	r.Arguments = args
	return json.Marshal(&r)
}

// postCheck sends one check, as the API key token when it is set.
func postCheck(ctx context.Context, c *http.Client, base, token string, body []byte) (int, string, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/check", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if token != "" {
		hreq.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(hreq)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var rc struct {
		Outcome  string `json:"outcome"`
		Metadata struct {
			RecordID string `json:"record_id"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rc); err != nil {
		return resp.StatusCode, "", err
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode == http.StatusOK && rc.Metadata.RecordID == "" {
		return resp.StatusCode, "", fmt.Errorf("receipt without a record id")
	}
	return resp.StatusCode, rc.Outcome, nil
}

var listeningLine = regexp.MustCompile(`listening on (http://\S+)`)

// startServer runs `writ serve` on a free loopback port with a fresh data
// directory and returns its base URL and a function that stops it.
func (m *Main) startServer(ctx context.Context, packDir string) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "writ-bench-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "serve", "--addr", "127.0.0.1:0", "--data", dir, "--pack", packDir, "--log-level", "warn")
	cmd.Stderr = m.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if mm := listeningLine.FindStringSubmatch(sc.Text()); mm != nil {
			go io.Copy(io.Discard, out)
			return mm[1], stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("writ serve exited before listening")
}
