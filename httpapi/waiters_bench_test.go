package httpapi_test

import (
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
	"github.com/writhq/writ/httpapi"
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
	now := func() time.Time { return time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC) }
	eng, _ := newEngine(b, filepath.Join("..", "examples", "refund"), now)
	srv := httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Approvals: eng, Lifecycle: eng, Now: now}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
	c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(&http.Client{Transport: tr}))

	observed := now().Add(-20 * time.Minute)
	idv := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example", Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	for range b.N {
		reqs := make([]*writ.CheckRequest, n)
		blocked := make([]*writ.Receipt, n)
		var err error
		for i := range reqs {
			req := readRefund(b, "refund-high-value-human-review.json")
			req.IdempotencyKey = ""
			req.Arguments["amount_inr"] = 15000.0 + float64(i) // one approval each
			// one customer each: the velocity rule allows 3 refunds a day
			req.SubjectIDs = []string{"customer:cus_" + strconv.Itoa(i), "order:ord_881"}
			// and a session each: the refund's tool_calls budget counts a
			// session's checks, and a thousand in one would exceed it
			refs := *req.InputsRefs
			refs.Session = "sess_w_" + strconv.Itoa(i)
			req.InputsRefs = &refs
			// and that customer's identity verification, on file (a refund
			// accepts only evidence writ resolves)
			id := "idv_w_" + strconv.Itoa(i)
			if _, err := eng.AddEvidence(idv, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: id,
				SubjectIDs: []string{req.SubjectIDs[0]}, ObservedAt: &observed}); err != nil && writ.ErrorCode(err) != writ.ECONFLICT {
				b.Fatal(err)
			}
			for j := range req.Evidence {
				if req.Evidence[j].Kind == "identity_verification" {
					req.Evidence[j].ID, req.Evidence[j].Version = id, ""
				}
			}
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
