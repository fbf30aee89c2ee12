package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/writhq/writ/sqlite"
)

// TestWitnessFigures measures what witnesses cost (docs/operations.md,
// Witnesses): checks per second of `writ bench` against a server with two
// transparency-dev witnesses configured and against one with none, side
// by side, in interleaved rounds (the order alternating), and then the
// cosignature lag (checkpoint signed to cosignature stored) over every
// cosignature of the witnessed server, p50 and p99. It runs only when
// asked, since it takes minutes:
//
//	WRIT_WITNESS_FIGURES=1 go test ./cmd/writ -run TestWitnessFigures -count=1 -v
//
// WRIT_WITNESS_ROUNDS (default 3) and WRIT_WITNESS_DURATION (default 10s)
// set the rounds and each bench's duration.
func TestWitnessFigures(t *testing.T) {
	if os.Getenv("WRIT_WITNESS_FIGURES") == "" {
		t.Skip("set WRIT_WITNESS_FIGURES=1 to measure")
	}
	rounds, dur := 3, "10s"
	if v, err := strconv.Atoi(os.Getenv("WRIT_WITNESS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v := os.Getenv("WRIT_WITNESS_DURATION"); v != "" {
		dur = v
	}
	plainData, witnessedData_ := t.TempDir(), t.TempDir()
	ws, witnessesFile, _ := witnessedData(t, witnessedData_, 2)
	common := []string{"--pack", "../../examples/refund", "--log-level", "error"}
	plain := startServerArgs(t, append([]string{"--data", plainData}, common...)...)
	witnessed := startServerArgs(t, append([]string{"--data", witnessedData_, "--witnesses", witnessesFile}, common...)...)

	bench := func(url string) float64 {
		out, code := runWrit(t, "bench", "--addr", url, "--request", "../../examples/refund/requests/refund-allow.json",
			"--duration", dur, "--concurrency", "32", "--json")
		if code != 0 {
			t.Fatalf("writ bench --addr %s = exit %d:\n%s", url, code, out)
		}
		var r struct {
			PerSecond float64 `json:"checks_per_second"`
			Errors    int     `json:"errors"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Errors != 0 {
			t.Fatalf("writ bench --json: %v, %d errors:\n%s", err, r.Errors, out)
		}
		return r.PerSecond
	}
	var none, two []float64
	for r := range rounds {
		if r%2 == 0 {
			none = append(none, bench(plain.url))
			two = append(two, bench(witnessed.url))
		} else {
			two = append(two, bench(witnessed.url))
			none = append(none, bench(plain.url))
		}
		t.Logf("round %d: no witness %.0f checks/s, two witnesses %.0f checks/s", r+1, none[r], two[r])
	}
	// Let the witnesses catch up with the last checkpoint, then read the
	// lags from the store.
	waitFor(t, "the witnesses to cosign the newest checkpoint", caughtUp(t, witnessed.url, ws))
	witnessed.stop(t)
	plain.stop(t)
	st, err := sqlite.Open(witnessedData_)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	var lags []time.Duration
	tenants, err := st.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range tenants {
		cps, err := st.Checkpoints(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		issued := map[int64]time.Time{}
		for _, cp := range cps {
			issued[cp.Size] = cp.IssuedAt
		}
		cos, err := st.Cosignatures(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cos {
			lags = append(lags, c.ReceivedAt.Sub(issued[c.Size]))
		}
	}
	if len(lags) == 0 {
		t.Fatal("no cosignature was stored")
	}
	slices.Sort(lags)
	pct := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	median := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	fmt.Printf("checks/s (writ bench --concurrency 32 --duration %s, %d interleaved rounds, median): no witness %.0f, two witnesses %.0f\n",
		dur, rounds, median(none), median(two))
	fmt.Printf("cosignature lag over %d cosignatures (checkpoint signed to cosignature stored): p50 %v, p99 %v\n",
		len(lags), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond))
}
