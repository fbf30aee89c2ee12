package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
)

// BenchmarkIdleWaiters holds 1,000 resumes open over HTTP, each waiting on
// its own approval, and reports what they cost while nothing happens: heap
// bytes per waiter (server and client side, both in this process) and
// the process's CPU time per second of waiting. Then it approves them all
// and reports how long until every waiter has its allow.
//
//	go test ./httpapi -run x -bench IdleWaiters -benchtime 1x
func BenchmarkIdleWaiters(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	st, err := sqlite.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	p, err := pack.Load(filepath.Join("..", "examples", "refund"))
	if err != nil {
		b.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		b.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC) }
	eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32), Now: now})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	defer eng.Close()
	srv := httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Approvals: eng, Lifecycle: eng, Now: now}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
	c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(&http.Client{Transport: tr}))

	for range b.N {
		reqs := make([]*writ.CheckRequest, n)
		blocked := make([]*writ.Receipt, n)
		for i := range reqs {
			req := readRefund(b, "refund-high-value-human-review.json")
			req.IdempotencyKey = ""
			req.Arguments["amount_inr"] = 15000.0 + float64(i) // one approval each
			// one customer each: the velocity rule allows 3 refunds a day
			req.SubjectIDs = []string{"customer:cus_" + strconv.Itoa(i), "order:ord_881"}
			reqs[i] = req
			if blocked[i], err = c.Check(ctx, req); err != nil || len(blocked[i].Metadata.ApprovalIDs) != 1 {
				b.Fatalf("Check(%d) = %+v, %v", i, blocked[i], err)
			}
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		allowed := make(chan bool, n)
		for i := range reqs {
			wg.Go(func() {
				rc, err := c.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: blocked[i].DecisionID, Request: reqs[i], Wait: 2 * time.Minute})
				allowed <- err == nil && rc.SafeToExecute
			})
		}
		deadline := time.Now().Add(time.Minute)
		for eng.Waiting() < n {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d resumes waiting", eng.Waiting(), n)
			}
			runtime.Gosched()
		}
		runtime.GC()
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		cpu0 := cpuTime()
		idle := 10 * time.Second
		<-time.After(idle) // the measurement is of idleness: nothing to wait for but time
		cpu := cpuTime() - cpu0
		b.ReportMetric(float64(during.HeapInuse-before.HeapInuse)/n, "heap-B/waiter")
		b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/waiter")
		b.ReportMetric(float64(cpu.Microseconds())/idle.Seconds(), "cpu-µs/s-idle")

		start := time.Now()
		for i := range blocked {
			if _, err := eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: blocked[i].Metadata.ApprovalIDs[0],
				Decision: writ.ApprovalApproved, Approver: "user_finance_lead_77", Reason: "checked"}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		close(allowed)
		for ok := range allowed {
			if !ok {
				b.Fatal("a waiter did not get its allow")
			}
		}
		b.ReportMetric(time.Since(start).Seconds(), "s-approve-and-resume-all")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func readRefund(tb testing.TB, name string) *writ.CheckRequest {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "refund", "requests", name))
	if err != nil {
		tb.Fatal(err)
	}
	var req writ.CheckRequest
	if err := json.Unmarshal(data, &req); err != nil {
		tb.Fatal(err)
	}
	return &req
}
