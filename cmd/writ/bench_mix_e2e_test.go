package main

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/writhq/writ/httpapi"
)

// TestBenchMix runs `writ bench --mix` against a real server with the
// refund pack: every kind of request of the mixed load is sent and
// answered with success, and none fails.
func TestBenchMix(t *testing.T) {
	srv := startServer(t, t.TempDir(), "../../examples/refund")
	fileIDV(t, httpapi.NewClient(srv.url), "acme", "idv.acme.example")
	seen := map[string]int{}
	// Every kind comes up in the first ten operations of a run; a slow
	// machine gets more runs to send them.
	for run := 0; run < 5 && len(seen) < len(mixKinds); run++ {
		out, err := exec.Command(writBinary, "bench", "--mix", "--addr", srv.url,
			"--request", "../../examples/refund/requests/refund-allow.json",
			"--approval-request", "../../examples/refund/requests/refund-high-value-human-review.json",
			"--concurrency", "2", "--duration", "1s", "--warmup", "0", "--json").Output()
		if err != nil {
			t.Fatalf("writ bench --mix = %v\n%s", err, out)
		}
		var res struct {
			Errors int `json:"errors"`
			Kinds  map[string]struct {
				Count int   `json:"count"`
				P99   int64 `json:"p99_ns"`
			} `json:"kinds"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("writ bench --mix --json = %s: %v", out, err)
		}
		if res.Errors != 0 {
			t.Fatalf("writ bench --mix: %d errors: %s", res.Errors, out)
		}
		for k, l := range res.Kinds {
			if l.Count > 0 && l.P99 > 0 {
				seen[k] += l.Count
			}
		}
	}
	for _, k := range mixKinds {
		if seen[k] == 0 {
			t.Errorf("writ bench --mix sent no %s request that succeeded (sent %v)", k, seen)
		}
	}
}
