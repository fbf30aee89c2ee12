package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/writhq/writ"
)

// The mixed load of `writ bench --mix`: what a deployment's clients do
// together, not checks alone. Every ten operations are five checks of the
// request; one approval (a check of the approval request, which opens an
// approval request, then its approval by another person; without an
// approval request, a sixth check); one execution report (a check of the
// request, then the report of its effect); and three reads: a page of
// records (no filter, a status, the last 30 s, in turn), the pending
// approvals and the records in flight. Each HTTP request is timed under
// its kind: check, approve, report, records, approvals, in_flight.
// Each check names subjects and a session of its own; each evidence item
// it cites is first put on file about those subjects, observed now (a
// POST /v1/evidence, timed as evidence), as an issuer would before the
// agent acts, so that a pack that accepts no claimed evidence decides
// on it. The items go with $WRIT_ISSUER_KEY (a key with the role
// issuer), or with no key and the issuer "writ-bench" against a server in
// development mode.

// mixKinds are the kinds of requests of a mixed load, in report order.
var mixKinds = []string{"evidence", "check", "approve", "report", "records", "approvals", "in_flight"}

// mixResult is the outcome of a mixed load.
type mixResult struct {
	Operations int                    `json:"operations"`
	Requests   int                    `json:"requests"`
	Errors     int                    `json:"errors"`
	Elapsed    time.Duration          `json:"elapsed_ns"`
	PerSecond  float64                `json:"operations_per_second"`
	P99        time.Duration          `json:"p99_ns"`
	Kinds      map[string]*mixLatency `json:"kinds"`
	Statuses   map[string]int         `json:"http_statuses"`
	FirstError string                 `json:"first_error,omitempty"`
	all        []time.Duration
}

// mixLatency summarizes the requests of one kind.
type mixLatency struct {
	Count     int             `json:"count"`
	P50       time.Duration   `json:"p50_ns"`
	P99       time.Duration   `json:"p99_ns"`
	Max       time.Duration   `json:"max_ns"`
	latencies []time.Duration `json:"-"`
}

// mixer sends the operations of a mixed load.
type mixer struct {
	client      *http.Client
	base, token string
	// issuerToken submits the evidence checks cite ("" in development
	// mode, where the item names its issuer).
	issuerToken     string
	runTag          string
	tenant          string
	check, approval *writ.CheckRequest
}

// benchMix drives the mixed load with conc clients for d after warmup,
// at most limiter's rate of operations, and prints the result.
func (m *Main) benchMix(ctx context.Context, mx *mixer, limiter *rate.Limiter, conc int, d, warmup time.Duration, asJSON bool) error {
	var seq atomic.Int64
	run := func(d time.Duration) *mixResult {
		deadline := time.Now().Add(d)
		res := &mixResult{Kinds: map[string]*mixLatency{}, Statuses: map[string]int{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for range conc {
			wg.Go(func() {
				local := &mixResult{Kinds: map[string]*mixLatency{}, Statuses: map[string]int{}}
				for time.Now().Before(deadline) && ctx.Err() == nil {
					if limiter.Wait(ctx) != nil {
						break
					}
					mx.operation(ctx, seq.Add(1), local)
					local.Operations++
				}
				mu.Lock()
				res.merge(local)
				mu.Unlock()
			})
		}
		wg.Wait()
		res.Elapsed = time.Since(start)
		return res
	}
	if warmup > 0 {
		run(warmup)
	}
	res := run(d)
	res.summarize()
	if asJSON {
		if err := m.printJSON(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(m.Stdout, "operations: %d in %s with %d clients (%.0f/s, %d requests, %d errors)\n",
			res.Operations, res.Elapsed.Round(time.Millisecond), conc, res.PerSecond, res.Requests, res.Errors)
		for _, k := range mixKinds {
			if l := res.Kinds[k]; l != nil {
				fmt.Fprintf(m.Stdout, "%-10s %7d  p50 %-10s p99 %-10s max %s\n", k, l.Count, l.P50, l.P99, l.Max)
			}
		}
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d requests failed (HTTP statuses %v; first: %s)", res.Errors, res.Statuses, res.FirstError)
	}
	return nil
}

// operation sends operation n of the cycle of ten: 0-3 and 9 checks, 4
// an approval, 5 an execution report, 6 a page of records (no filter, a
// status, the last 30 s, in turn), 7 the pending approvals, 8 the records
// in flight. Every kind comes up in the first ten operations.
func (mx *mixer) operation(ctx context.Context, n int64, res *mixResult) {
	t := url.QueryEscape(mx.tenant)
	switch n % 10 {
	case 4:
		if mx.approval == nil {
			mx.do(ctx, res, "check", http.MethodPost, "/v1/check", mx.checkBody(ctx, res, mx.check, n), nil)
			return
		}
		var rc receiptIDs
		if !mx.do(ctx, res, "check", http.MethodPost, "/v1/check", mx.checkBody(ctx, res, mx.approval, n), &rc) {
			return
		}
		if len(rc.Metadata.ApprovalIDs) == 0 {
			res.fail(0, "the approval request's check opened no approval request")
			return
		}
		body, _ := json.Marshal(map[string]string{"tenant_id": mx.tenant, "approver": "usr_bench_approver", "reason": "bench"})
		mx.do(ctx, res, "approve", http.MethodPost, "/v1/approvals/"+url.PathEscape(rc.Metadata.ApprovalIDs[0])+"/approve", body, nil)
	case 5:
		var rc receiptIDs
		if !mx.do(ctx, res, "check", http.MethodPost, "/v1/check", mx.checkBody(ctx, res, mx.check, n), &rc) {
			return
		}
		if !rc.SafeToExecute {
			// Nothing may run, so there is nothing to report.
			return
		}
		now := time.Now().UTC()
		body, _ := json.Marshal(map[string]string{"tenant_id": mx.tenant, "status": "succeeded",
			"tool_result_id": "tr_" + mx.runTag + "_" + strconv.FormatInt(n, 10),
			"started_at":     now.Add(-time.Millisecond).Format(time.RFC3339Nano), "ended_at": now.Format(time.RFC3339Nano)})
		mx.do(ctx, res, "report", http.MethodPost, "/v1/decisions/"+url.PathEscape(rc.DecisionID)+"/execution", body, nil)
	case 6:
		filters := []string{"", "&status=IN_FLIGHT", "&from=" + url.QueryEscape(time.Now().Add(-30*time.Second).UTC().Format(time.RFC3339Nano))}
		mx.do(ctx, res, "records", http.MethodGet, "/v1/records?limit=50&tenant_id="+t+filters[(n/10)%int64(len(filters))], nil, nil)
	case 7:
		mx.do(ctx, res, "approvals", http.MethodGet, "/v1/approvals?state=pending&limit=50&tenant_id="+t, nil, nil)
	case 8:
		mx.do(ctx, res, "in_flight", http.MethodGet, "/v1/decisions/in_flight?limit=50&tenant_id="+t, nil, nil)
	default:
		mx.do(ctx, res, "check", http.MethodPost, "/v1/check", mx.checkBody(ctx, res, mx.check, n), nil)
	}
}

// receiptIDs are the members of a receipt a mixed load follows up on.
type receiptIDs struct {
	DecisionID    string `json:"decision_id"`
	SafeToExecute bool   `json:"safe_to_execute"`
	Metadata      struct {
		ApprovalIDs []string `json:"approval_ids"`
	} `json:"metadata"`
}

// checkBody makes check n of req: benchBody's, with subjects and a
// session of its own (so a per-subject or per-session limit of the pack,
// such as the refund pack's refunds per customer and session budget, does
// not trip), citing evidence put on file for it (fileEvidence).
func (mx *mixer) checkBody(ctx context.Context, res *mixResult, req *writ.CheckRequest, n int64) []byte {
	r := *req
	tag := "_" + mx.runTag + "_" + strconv.FormatInt(n, 10)
	r.SubjectIDs = make([]string, len(req.SubjectIDs))
	for i, s := range req.SubjectIDs {
		r.SubjectIDs[i] = s + tag
	}
	if req.InputsRefs != nil && req.InputsRefs.Session != "" {
		refs := *req.InputsRefs
		refs.Session += tag
		r.InputsRefs = &refs
	}
	r.Evidence = slices.Clone(req.Evidence)
	for i := range r.Evidence {
		r.Evidence[i] = mx.fileEvidence(ctx, res, r.Evidence[i], r.SubjectIDs, tag)
	}
	body, err := benchBody(&r, mx.runTag, n)
	if err != nil {
		panic(err) // a request that decoded encodes again
	}
	return body
}

// fileEvidence puts an item like the cited ev on file about subjects,
// observed now, under ev's id with tag, and returns the citation of it
// (by id, without a hash or version, which the stored item settles). A
// failed submission counts as an error of kind evidence; the check then
// cites an item writ cannot resolve, and is decided so.
func (mx *mixer) fileEvidence(ctx context.Context, res *mixResult, ev writ.Evidence, subjects []string, tag string) writ.Evidence {
	now := time.Now().UTC()
	item := map[string]any{"tenant_id": mx.tenant, "kind": ev.Kind, "id": ev.ID + tag, "subject_ids": subjects, "observed_at": now.Format(time.RFC3339Nano)}
	if len(ev.Attributes) > 0 {
		item["attributes"] = ev.Attributes
	}
	if mx.issuerToken == "" {
		item["issuer"] = "writ-bench"
	}
	body, _ := json.Marshal(item)
	mx.doAs(ctx, res, mx.issuerToken, "evidence", http.MethodPost, "/v1/evidence", body, nil)
	return writ.Evidence{Kind: ev.Kind, ID: ev.ID + tag, TenantID: ev.TenantID, ObservedAt: &now}
}

// do sends one request of kind with the mixer's key and, if into is not
// nil, decodes the answer into it. It reports whether the answer was a
// success.
func (mx *mixer) do(ctx context.Context, res *mixResult, kind, method, path string, body []byte, into any) bool {
	return mx.doAs(ctx, res, mx.token, kind, method, path, body, into)
}

// doAs is do with the key token ("" for none).
func (mx *mixer) doAs(ctx context.Context, res *mixResult, token, kind, method, path string, body []byte, into any) bool {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, mx.base+path, rd)
	if err != nil {
		res.fail(0, err.Error())
		return false
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		hreq.Header.Set("Authorization", "Bearer "+token)
	}
	t0 := time.Now()
	resp, err := mx.client.Do(hreq)
	if err != nil {
		res.fail(0, err.Error())
		return false
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	lat := time.Since(t0)
	res.Requests++
	res.Statuses[strconv.Itoa(resp.StatusCode)]++
	if err != nil || resp.StatusCode/100 != 2 {
		res.fail(resp.StatusCode, fmt.Sprintf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(answer)))
		return false
	}
	if into != nil {
		if err := json.Unmarshal(answer, into); err != nil {
			res.fail(resp.StatusCode, err.Error())
			return false
		}
	}
	l := res.Kinds[kind]
	if l == nil {
		l = &mixLatency{}
		res.Kinds[kind] = l
	}
	l.latencies = append(l.latencies, lat)
	return true
}

func (r *mixResult) fail(status int, msg string) {
	r.Errors++
	if status == 0 {
		r.Statuses["none"]++
	}
	if r.FirstError == "" {
		r.FirstError = msg
	}
}

func (r *mixResult) merge(o *mixResult) {
	r.Operations += o.Operations
	r.Requests += o.Requests
	r.Errors += o.Errors
	if r.FirstError == "" {
		r.FirstError = o.FirstError
	}
	for k, v := range o.Statuses {
		r.Statuses[k] += v
	}
	for k, l := range o.Kinds {
		if r.Kinds[k] == nil {
			r.Kinds[k] = &mixLatency{}
		}
		r.Kinds[k].latencies = append(r.Kinds[k].latencies, l.latencies...)
	}
}

func (r *mixResult) summarize() {
	r.PerSecond = float64(r.Operations) / r.Elapsed.Seconds()
	pct := func(ls []time.Duration, p float64) time.Duration { return ls[int(p*float64(len(ls)-1))] }
	for _, l := range r.Kinds {
		slices.Sort(l.latencies)
		l.Count = len(l.latencies)
		if l.Count > 0 {
			l.P50, l.P99, l.Max = pct(l.latencies, 0.50), pct(l.latencies, 0.99), l.latencies[l.Count-1]
		}
		r.all = append(r.all, l.latencies...)
	}
	if len(r.all) > 0 {
		slices.Sort(r.all)
		r.P99 = pct(r.all, 0.99)
	}
}
