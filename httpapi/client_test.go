package httpapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// headerSpy records the headers of the requests it passes on.
type headerSpy struct {
	next http.Handler
	mu   sync.Mutex
	seen []http.Header
}

func (h *headerSpy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *headerSpy) last() http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[len(h.seen)-1]
}

// newTestClient serves fake, as the service, the ledger, the workflows,
// the approvals and the replays, over HTTP and returns a client of it.
func newTestClient(t *testing.T, fake *fakeService) (*Client, *headerSpy) {
	t.Helper()
	s, _ := newTestServer(fake, Config{Ledger: fake, Workflows: fake, Approvals: fake, Replays: fake})
	spy := &headerSpy{next: s}
	srv := httptest.NewServer(spy)
	t.Cleanup(srv.Close)
	return NewClient(srv.URL+"/", WithHTTPClient(srv.Client()), WithHeader("Authorization", "Bearer k1")), spy
}

func TestClientCheck(t *testing.T) {
	fake := &fakeService{receipt: fullReceipt()}
	c, spy := newTestClient(t, fake)
	req := fullCheckRequest()
	got, err := c.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("Check() error = %v", err)
	}
	if !reflect.DeepEqual(got, fake.receipt) {
		t.Errorf("Check() = %+v, want %+v", got, fake.receipt)
	}
	if !reflect.DeepEqual(fake.lastCheck(), req) {
		t.Errorf("Check(): service got %+v, want %+v", fake.lastCheck(), req)
	}
	h := spy.last()
	tp, ok := parseTraceparent(h.Values("traceparent"))
	if !ok || tp.TraceID != req.TraceID {
		t.Errorf("Check(): traceparent %q, want one carrying trace id %s", h.Values("traceparent"), req.TraceID)
	}
	if got := h.Get("Authorization"); got != "Bearer k1" {
		t.Errorf("Check(): Authorization = %q, want the WithHeader value", got)
	}

	req.TraceID = ""
	if _, err := c.Check(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if v := spy.last().Values("traceparent"); v != nil {
		t.Errorf("Check() without a trace id sent traceparent %q", v)
	}
}

func TestClientCheckFailClosed(t *testing.T) {
	rcpt := fullReceipt()
	rcpt.Metadata.FailClosed = true
	fake := &fakeService{receipt: rcpt, err: writ.Errorf(writ.EUNAVAILABLE, "disk full")}
	c, _ := newTestClient(t, fake)
	got, err := c.Check(context.Background(), &writ.CheckRequest{TenantID: "t"})
	if !reflect.DeepEqual(got, rcpt) {
		t.Errorf("Check() receipt = %+v, want the fail-closed receipt %+v", got, rcpt)
	}
	var werr *writ.Error
	if !errors.As(err, &werr) || werr.Code != writ.EUNAVAILABLE {
		t.Errorf("Check() error = %#v, want a *writ.Error with code %s", err, writ.EUNAVAILABLE)
	}
}

func TestClientErrors(t *testing.T) {
	details := []writ.Detail{{Field: "arguments.amount", Message: "must be positive"}, {File: "specs/a.yaml", Line: 3, Message: "x"}}
	tests := []struct {
		svcErr error
		want   *writ.Error
	}{
		{&writ.Error{Code: writ.EINVALID, Message: "bad", Details: details}, &writ.Error{Code: writ.EINVALID, Message: "bad", Details: details}},
		{&writ.Error{Code: writ.ENOTFOUND, Message: "no such record"}, &writ.Error{Code: writ.ENOTFOUND, Message: "no such record"}},
		{&writ.Error{Code: writ.ECONFLICT, Message: "key reused", Details: details}, &writ.Error{Code: writ.ECONFLICT, Message: "key reused", Details: details}},
		{&writ.Error{Code: writ.ETOOLARGE, Message: "too big"}, &writ.Error{Code: writ.ETOOLARGE, Message: "too big"}},
		{&writ.Error{Code: writ.EUNAVAILABLE, Message: "store down"}, &writ.Error{Code: writ.EUNAVAILABLE, Message: "store down"}},
		{&writ.Error{Code: writ.EFORBIDDEN, Message: "may not approve"}, &writ.Error{Code: writ.EFORBIDDEN, Message: "may not approve"}},
		{&writ.Error{Code: writ.EUNAUTHENTICATED, Message: "bad key"}, &writ.Error{Code: writ.EUNAUTHENTICATED, Message: "bad key"}},
		{errors.New("secret"), &writ.Error{Code: writ.EINTERNAL, Message: "internal error"}},
	}
	for _, tt := range tests {
		fake := &fakeService{err: tt.svcErr}
		c, _ := newTestClient(t, fake)
		calls := map[string]func() error{
			"Check": func() error {
				_, err := c.Check(context.Background(), &writ.CheckRequest{TenantID: "t"})
				return err
			},
			"Record": func() error {
				_, err := c.Record(context.Background(), "t", "r1")
				return err
			},
			"Records": func() error {
				_, err := c.Records(context.Background(), writ.RecordQuery{TenantID: "t"})
				return err
			},
			"Checkpoint": func() error {
				_, err := c.Checkpoint(context.Background(), "t", 7)
				return err
			},
			"IssueCheckpoint": func() error {
				_, err := c.IssueCheckpoint(context.Background(), "t")
				return err
			},
			"InclusionProof": func() error {
				_, err := c.InclusionProof(context.Background(), "t", "r1", 0)
				return err
			},
			"ConsistencyProof": func() error {
				_, err := c.ConsistencyProof(context.Background(), "t", 3, 7)
				return err
			},
			"StartRun": func() error {
				_, err := c.StartRun(context.Background(), &writ.StartRunRequest{TenantID: "t", WorkflowID: "w"})
				return err
			},
			"SubmitAttempt": func() error {
				_, err := c.SubmitAttempt(context.Background(), fullAttemptRequest())
				return err
			},
			"Run": func() error {
				_, err := c.Run(context.Background(), "t", "run_1")
				return err
			},
			"Approvals": func() error {
				_, err := c.Approvals(context.Background(), writ.ApprovalQuery{TenantID: "t"})
				return err
			},
			"Approval": func() error {
				_, err := c.Approval(context.Background(), "t", "apr_1")
				return err
			},
			"DecideApproval": func() error {
				_, err := c.DecideApproval(context.Background(), &writ.DecideApprovalRequest{TenantID: "t", ApprovalID: "apr_1", Decision: writ.ApprovalApproved, Approver: "a", Reason: "r"})
				return err
			},
		}
		for name, call := range calls {
			err := call()
			var got *writ.Error
			if !errors.As(err, &got) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s() with service error %v = %#v, want %#v", name, tt.svcErr, err, tt.want)
			}
			if writ.ErrorCode(err) != tt.want.Code {
				t.Errorf("writ.ErrorCode(%s() error) = %q, want %q", name, writ.ErrorCode(err), tt.want.Code)
			}
		}
	}
}

func TestClientValidationErrors(t *testing.T) {
	fake := &fakeService{}
	c, _ := newTestClient(t, fake)
	_, err := c.Check(context.Background(), &writ.CheckRequest{})
	want := &writ.Error{Code: writ.EINVALID, Message: "tenant_id is required", Details: []writ.Detail{{Field: "tenant_id", Message: "is required"}}}
	var got *writ.Error
	if !errors.As(err, &got) || !reflect.DeepEqual(got, want) {
		t.Errorf("Check(no tenant) error = %#v, want %#v", err, want)
	}
	_, err = c.Records(context.Background(), writ.RecordQuery{TenantID: "t", Limit: 5000})
	if !errors.As(err, &got) || got.Code != writ.EINVALID || len(got.Details) != 1 || got.Details[0].Field != "limit" {
		t.Errorf("Records(limit 5000) error = %#v, want EINVALID naming limit", err)
	}
	_, err = c.ConsistencyProof(context.Background(), "t", 5, 3)
	if !errors.As(err, &got) || got.Code != writ.EINVALID || len(got.Details) != 1 || got.Details[0].Field != "to" {
		t.Errorf("ConsistencyProof(5, 3) error = %#v, want EINVALID naming to", err)
	}
	_, err = c.ConsistencyProof(context.Background(), "t", 0, 3)
	if !errors.As(err, &got) || got.Code != writ.EINVALID || len(got.Details) != 1 || got.Details[0].Field != "from" {
		t.Errorf("ConsistencyProof(0, 3) error = %#v, want EINVALID naming from", err)
	}
	_, err = c.Checkpoint(context.Background(), "t", -1)
	if !errors.As(err, &got) || got.Code != writ.EINVALID || len(got.Details) != 1 || got.Details[0].Field != "size" {
		t.Errorf("Checkpoint(-1) error = %#v, want EINVALID naming size", err)
	}
	_, err = c.InclusionProof(context.Background(), "", "r1", 0)
	if !errors.As(err, &got) || got.Code != writ.EINVALID || len(got.Details) != 1 || got.Details[0].Field != "tenant_id" {
		t.Errorf("InclusionProof(no tenant) error = %#v, want EINVALID naming tenant_id", err)
	}
	_, err = c.IssueCheckpoint(context.Background(), "")
	if !errors.As(err, &got) || got.Code != writ.EINVALID || len(got.Details) != 1 || got.Details[0].Field != "tenant_id" {
		t.Errorf("IssueCheckpoint(no tenant) error = %#v, want EINVALID naming tenant_id", err)
	}
	if fake.calls() != 0 {
		t.Errorf("the service was called %d times for invalid input", fake.calls())
	}
}

func TestClientLedger(t *testing.T) {
	fake := fullLedger()
	c, spy := newTestClient(t, fake)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() (any, error)
		want any
		args ledgerCall
	}{
		{"Checkpoint latest", func() (any, error) { return c.Checkpoint(ctx, "acme & co", 0) }, fake.checkpoint,
			ledgerCall{method: "Checkpoint", tenantID: "acme & co"}},
		{"Checkpoint of size 7", func() (any, error) { return c.Checkpoint(ctx, "acme", 7) }, fake.checkpoint,
			ledgerCall{method: "Checkpoint", tenantID: "acme", sizes: [2]int64{7}}},
		{"IssueCheckpoint", func() (any, error) { return c.IssueCheckpoint(ctx, "acme/1") }, fake.checkpoint,
			ledgerCall{method: "IssueCheckpoint", tenantID: "acme/1"}},
		{"InclusionProof latest", func() (any, error) { return c.InclusionProof(ctx, "acme", "rec/1 x?", 0) }, fake.inclusion,
			ledgerCall{method: "InclusionProof", tenantID: "acme", recordID: "rec/1 x?"}},
		{"InclusionProof of size 7", func() (any, error) { return c.InclusionProof(ctx, "acme", "r1", 7) }, fake.inclusion,
			ledgerCall{method: "InclusionProof", tenantID: "acme", recordID: "r1", sizes: [2]int64{7}}},
		{"ConsistencyProof to the latest", func() (any, error) { return c.ConsistencyProof(ctx, "acme", 3, 0) }, fake.consistency,
			ledgerCall{method: "ConsistencyProof", tenantID: "acme", sizes: [2]int64{3, 0}}},
		{"ConsistencyProof from 3 to 7", func() (any, error) { return c.ConsistencyProof(ctx, "acme", 3, 7) }, fake.consistency,
			ledgerCall{method: "ConsistencyProof", tenantID: "acme", sizes: [2]int64{3, 7}}},
	}
	for i, tt := range tests {
		got, err := tt.call()
		if err != nil {
			t.Fatalf("%s() error = %v", tt.name, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s() = %+v, want %+v", tt.name, got, tt.want)
		}
		if calls := fake.ledgerArgs(); len(calls) != i+1 || !reflect.DeepEqual(calls[i], tt.args) {
			t.Errorf("%s(): ledger calls = %+v, want the last %+v", tt.name, calls, tt.args)
		}
		if got := spy.last().Get("Authorization"); got != "Bearer k1" {
			t.Errorf("%s(): Authorization = %q, want the WithHeader value", tt.name, got)
		}
	}
}

func TestClientLedgerNotServed(t *testing.T) {
	s, _ := newTestServer(&fakeService{}, Config{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(srv.URL)
	_, err := c.Checkpoint(context.Background(), "t", 0)
	want := &writ.Error{Code: writ.ENOTFOUND, Message: "this server has no ledger"}
	var got *writ.Error
	if !errors.As(err, &got) || !reflect.DeepEqual(got, want) {
		t.Errorf("Checkpoint() from a server without a ledger: error = %#v, want %#v", err, want)
	}
}

func TestClientRecord(t *testing.T) {
	stored := storedRecord(fullRecord())
	fake := &fakeService{record: stored}
	c, _ := newTestClient(t, fake)
	got, err := c.Record(context.Background(), "acme", "rec/1 x?")
	if err != nil {
		t.Fatalf("Record() error = %v", err)
	}
	if !bytes.Equal(got.Raw, stored.Raw) {
		t.Errorf("Record().Raw =\n%s\nwant byte for byte\n%s", got.Raw, stored.Raw)
	}
	if !reflect.DeepEqual(got.Record, stored.Record) {
		t.Errorf("Record().Record = %+v, want %+v", got.Record, stored.Record)
	}
	if want := [][2]string{{"acme", "rec/1 x?"}}; !reflect.DeepEqual(fake.recordArgs(), want) {
		t.Errorf("Record(): service got %q, want %q", fake.recordArgs(), want)
	}
}

func TestClientRecords(t *testing.T) {
	r1 := storedRecord(fullRecord())
	rec2 := fullRecord()
	rec2.RecordID, rec2.Audit.Seq = "dr_2", 8
	r2 := storedRecord(rec2)
	fake := &fakeService{page: &writ.RecordPage{Records: []writ.StoredRecord{*r1, *r2}, NextCursor: "next/8"}}
	c, _ := newTestClient(t, fake)
	q := writ.RecordQuery{
		TenantID: "acme & co", DecisionKey: "support.refund.execute", Status: writ.StatusEscalated,
		SubjectID: "customer:cus_77", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		ApprovalMode: writ.ModeDelegated, PolicyDecisionID: "pd:refunds@3:R_LIMIT:deny", Approver: "user:ops & lead",
		From: time.Date(2026, 5, 1, 0, 0, 0, 1, time.UTC), To: time.Date(2026, 5, 2, 3, 4, 5, 0, time.FixedZone("", 2*3600)),
		Limit: 1000, Cursor: "c+1/=",
	}
	page, err := c.Records(context.Background(), q)
	if err != nil {
		t.Fatalf("Records() error = %v", err)
	}
	got := fake.recordQueries()[0]
	if !got.From.Equal(q.From) || !got.To.Equal(q.To) {
		t.Errorf("Records(): service got from, to = %v, %v; want %v, %v", got.From, got.To, q.From, q.To)
	}
	want := q
	got.From, got.To, want.From, want.To = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("Records(): service got %+v, want %+v", got, want)
	}
	if page.NextCursor != "next/8" || len(page.Records) != 2 {
		t.Fatalf("Records() = %d records, cursor %q; want 2, %q", len(page.Records), page.NextCursor, "next/8")
	}
	for i, want := range []*writ.StoredRecord{r1, r2} {
		if !bytes.Equal(page.Records[i].Raw, want.Raw) || !reflect.DeepEqual(page.Records[i].Record, want.Record) {
			t.Errorf("Records().Records[%d] = %s, want %s", i, page.Records[i].Raw, want.Raw)
		}
	}

	// The zero query sends nothing but the parameters that are set.
	if _, err := c.Records(context.Background(), writ.RecordQuery{TenantID: "t"}); err != nil {
		t.Fatal(err)
	}
	if got, want := fake.recordQueries()[1], (writ.RecordQuery{TenantID: "t"}); got != want {
		t.Errorf("Records(%+v): service got %+v", want, got)
	}
}

func TestClientNonProblemErrors(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{http.StatusBadGateway, writ.EUNAVAILABLE},
		{http.StatusGatewayTimeout, writ.EUNAVAILABLE},
		{http.StatusServiceUnavailable, writ.EUNAVAILABLE},
		{http.StatusNotFound, writ.ENOTFOUND},
		{http.StatusUnauthorized, writ.EUNAUTHENTICATED},
		{http.StatusForbidden, writ.EFORBIDDEN},
		{http.StatusTeapot, writ.EINTERNAL},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "proxy says no", tt.status)
		}))
		c := NewClient(srv.URL)
		_, err := c.Check(context.Background(), &writ.CheckRequest{TenantID: "t"})
		if got := writ.ErrorCode(err); got != tt.want {
			t.Errorf("Check() against a plain %d = %v (code %q), want code %q", tt.status, err, got, tt.want)
		}
		srv.Close()
	}
}

func TestClientTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	c := NewClient(srv.URL)
	if _, err := c.Record(context.Background(), "t", "r"); err == nil {
		t.Errorf("Record() against a closed server: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, &writ.CheckRequest{TenantID: "t"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Check(canceled context) error = %v, want context.Canceled", err)
	}
}

func TestClientWorkflows(t *testing.T) {
	ctx := context.Background()
	fake := fullWorkflows()
	c, spy := newTestClient(t, fake)

	start := fullStartRunRequest()
	run, err := c.StartRun(ctx, start)
	if err != nil {
		t.Fatalf("StartRun() error = %v", err)
	}
	if !reflect.DeepEqual(run, fake.run) {
		t.Errorf("StartRun() = %+v, want %+v", run, fake.run)
	}
	if got := fake.startArgs(); len(got) != 1 || !reflect.DeepEqual(got[0], start) {
		t.Errorf("StartRun(): workflows got %+v, want %+v", got, start)
	}

	attempt := fullAttemptRequest()
	v, err := c.SubmitAttempt(ctx, attempt)
	if err != nil {
		t.Fatalf("SubmitAttempt() error = %v", err)
	}
	if !reflect.DeepEqual(v, fake.verdict) {
		t.Errorf("SubmitAttempt() = %+v, want %+v", v, fake.verdict)
	}
	if got := fake.attemptArgs(); len(got) != 1 || !reflect.DeepEqual(got[0], attempt) {
		t.Errorf("SubmitAttempt(): workflows got %+v, want %+v", got, attempt)
	}
	h := spy.last()
	if tp, ok := parseTraceparent(h.Values("traceparent")); !ok || tp.TraceID != attempt.TraceID {
		t.Errorf("SubmitAttempt(): traceparent %q, want one carrying trace id %s", h.Values("traceparent"), attempt.TraceID)
	}
	if got := h.Get("Authorization"); got != "Bearer k1" {
		t.Errorf("SubmitAttempt(): Authorization = %q, want the WithHeader value", got)
	}

	got, err := c.Run(ctx, "acme", "run_1")
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if !reflect.DeepEqual(got, fake.run) {
		t.Errorf("Run() = %+v, want %+v", got, fake.run)
	}
	if want := [][2]string{{"acme", "run_1"}}; !reflect.DeepEqual(fake.runArgs(), want) {
		t.Errorf("Run(): workflows got %q, want %q", fake.runArgs(), want)
	}
}

// TestClientWorkflowsEscaping checks that ids that are not URL-safe reach
// the workflows unchanged.
func TestClientWorkflowsEscaping(t *testing.T) {
	ctx := context.Background()
	const tenant, runID, stepID = "acme & co/1", "run/1 x?#", "visual check/%2F"
	fake := &fakeService{
		run:     &writ.Run{TenantID: tenant, RunID: runID, Status: writ.RunActive},
		verdict: &writ.StepVerdict{RunID: runID, StepID: stepID, State: writ.VerdictAccepted},
	}
	c, _ := newTestClient(t, fake)
	if _, err := c.StartRun(ctx, &writ.StartRunRequest{TenantID: tenant, WorkflowID: "w", RunID: runID}); err != nil {
		t.Fatalf("StartRun() error = %v", err)
	}
	if _, err := c.Run(ctx, tenant, runID); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	req := &writ.AttemptRequest{TenantID: tenant, RunID: runID, StepID: stepID, Actor: writ.Actor{Type: writ.ActorAgent, ID: "a"}, Result: map[string]any{}}
	if _, err := c.SubmitAttempt(ctx, req); err != nil {
		t.Fatalf("SubmitAttempt() error = %v", err)
	}
	if want := [][2]string{{tenant, runID}}; !reflect.DeepEqual(fake.runArgs(), want) {
		t.Errorf("Run(): workflows got %q, want %q", fake.runArgs(), want)
	}
	if got := fake.attemptArgs(); len(got) != 1 || !reflect.DeepEqual(got[0], req) {
		t.Errorf("SubmitAttempt(): workflows got %+v, want %+v", got, req)
	}
}

func TestClientWorkflowsNotServed(t *testing.T) {
	s, _ := newTestServer(&fakeService{}, Config{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(srv.URL)
	want := &writ.Error{Code: writ.ENOTFOUND, Message: "this server runs no workflows"}
	for name, call := range map[string]func() error{
		"StartRun": func() error {
			_, err := c.StartRun(context.Background(), &writ.StartRunRequest{TenantID: "t", WorkflowID: "w"})
			return err
		},
		"SubmitAttempt": func() error {
			_, err := c.SubmitAttempt(context.Background(), fullAttemptRequest())
			return err
		},
		"Run": func() error {
			_, err := c.Run(context.Background(), "t", "r")
			return err
		},
	} {
		var got *writ.Error
		if err := call(); !errors.As(err, &got) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s() from a server that runs no workflows: error = %#v, want %#v", name, err, want)
		}
	}
}

func TestClientWorkflowsValidationErrors(t *testing.T) {
	ctx := context.Background()
	fake := fullWorkflows()
	c, _ := newTestClient(t, fake)
	tests := []struct {
		name   string
		call   func() error
		fields []string
	}{
		{"StartRun(no tenant)", func() error {
			_, err := c.StartRun(ctx, &writ.StartRunRequest{WorkflowID: "w"})
			return err
		}, []string{"tenant_id"}},
		{"Run(no tenant)", func() error {
			_, err := c.Run(ctx, "", "run_1")
			return err
		}, []string{"tenant_id"}},
		{"Run(no run id)", func() error {
			_, err := c.Run(ctx, "acme", "")
			return err
		}, []string{"run_id"}},
		{"SubmitAttempt(nil)", func() error {
			_, err := c.SubmitAttempt(ctx, nil)
			return err
		}, nil},
		{"SubmitAttempt(no tenant)", func() error {
			req := fullAttemptRequest()
			req.TenantID = ""
			_, err := c.SubmitAttempt(ctx, req)
			return err
		}, []string{"tenant_id"}},
		{"SubmitAttempt(no run or step)", func() error {
			req := fullAttemptRequest()
			req.RunID, req.StepID = "", ""
			_, err := c.SubmitAttempt(ctx, req)
			return err
		}, []string{"run_id", "step_id"}},
		{"SubmitAttempt(no step)", func() error {
			req := fullAttemptRequest()
			req.StepID = ""
			_, err := c.SubmitAttempt(ctx, req)
			return err
		}, []string{"step_id"}},
	}
	for _, tt := range tests {
		err := tt.call()
		var got *writ.Error
		if !errors.As(err, &got) || got.Code != writ.EINVALID {
			t.Errorf("%s error = %#v, want EINVALID", tt.name, err)
			continue
		}
		var fields []string
		for _, d := range got.Details {
			fields = append(fields, d.Field)
		}
		if !reflect.DeepEqual(fields, tt.fields) {
			t.Errorf("%s error details name %q, want %q", tt.name, fields, tt.fields)
		}
	}
	if fake.calls() != 0 {
		t.Errorf("the workflows were called %d times for invalid input", fake.calls())
	}
}

func TestClientApprovals(t *testing.T) {
	ctx := context.Background()
	const tenant, id = "acme & co/1", "apr/1 x?#"
	approval := fullApproval()
	approval.TenantID, approval.ApprovalID = tenant, id
	fake := &fakeService{approval: approval, approvals: &writ.ApprovalPage{Approvals: []writ.ApprovalRequest{*approval}, NextCursor: "next/2"}}
	c, spy := newTestClient(t, fake)

	q := writ.ApprovalQuery{
		TenantID: tenant, State: writ.ApprovalPending, GateID: "escalation:R_FRAUD", DecisionKey: "support.refund.execute",
		CreatedBefore: time.Date(2026, 5, 9, 8, 0, 0, 1, time.FixedZone("", 2*3600)), Limit: 1000, Cursor: "c+1/=",
	}
	page, err := c.Approvals(ctx, q)
	if err != nil {
		t.Fatalf("Approvals() error = %v", err)
	}
	if !reflect.DeepEqual(page, fake.approvals) {
		t.Errorf("Approvals() = %+v, want %+v", page, fake.approvals)
	}
	got := fake.approvalQueries()[0]
	if !got.CreatedBefore.Equal(q.CreatedBefore) {
		t.Errorf("Approvals(): created before %v reached the server as %v", q.CreatedBefore, got.CreatedBefore)
	}
	want := q
	got.CreatedBefore, want.CreatedBefore = time.Time{}, time.Time{}
	if got != want {
		t.Errorf("Approvals(%+v): the server got %+v", want, got)
	}
	if _, err := c.Approvals(ctx, writ.ApprovalQuery{TenantID: tenant}); err != nil {
		t.Fatal(err)
	}
	if got, want := fake.approvalQueries()[1], (writ.ApprovalQuery{TenantID: tenant}); got != want {
		t.Errorf("Approvals(%+v): the server got %+v", want, got)
	}

	a, err := c.Approval(ctx, tenant, id)
	if err != nil {
		t.Fatalf("Approval() error = %v", err)
	}
	if !reflect.DeepEqual(a, approval) {
		t.Errorf("Approval() = %+v, want %+v", a, approval)
	}
	if got, want := fake.approvalArgs(), [][2]string{{tenant, id}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Approval(): the server got %q, want %q", got, want)
	}

	for _, decision := range []string{writ.ApprovalApproved, writ.ApprovalDenied} {
		req := &writ.DecideApprovalRequest{TenantID: tenant, ApprovalID: id, Decision: decision, Approver: "maria", Reason: "Invoice checked.", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
		a, err := c.DecideApproval(ctx, req)
		if err != nil {
			t.Fatalf("DecideApproval(%s) error = %v", decision, err)
		}
		if !reflect.DeepEqual(a, approval) {
			t.Errorf("DecideApproval(%s) = %+v, want %+v", decision, a, approval)
		}
		if got := fake.decisionArgs(); !reflect.DeepEqual(got[len(got)-1], req) {
			t.Errorf("DecideApproval(%s): the server got %+v, want %+v", decision, got[len(got)-1], req)
		}
		h := spy.last()
		if tp, ok := parseTraceparent(h.Values("traceparent")); !ok || tp.TraceID != req.TraceID {
			t.Errorf("DecideApproval(): traceparent %q, want one carrying trace id %s", h.Values("traceparent"), req.TraceID)
		}
	}
}

// TestClientAPIKey runs the client against a server that authenticates
// callers: the key goes as a bearer token, the key's tenant is used when
// the client names none, and refusals come back as writ's codes.
func TestClientAPIKey(t *testing.T) {
	ctx := context.Background()
	fake := fullService()
	s, _ := newAuthServer(fake)
	spy := &headerSpy{next: s}
	srv := httptest.NewServer(spy)
	defer srv.Close()
	client := func(opts ...ClientOption) *Client {
		return NewClient(srv.URL, append([]ClientOption{WithHTTPClient(srv.Client())}, opts...)...)
	}

	approver := client(WithAPIKey("approver-key"))
	if _, err := approver.Approvals(ctx, writ.ApprovalQuery{State: writ.ApprovalPending}); err != nil {
		t.Fatalf("Approvals() with an approver's key and no tenant: %v", err)
	}
	if got := spy.last().Values("Authorization"); !reflect.DeepEqual(got, []string{"Bearer approver-key"}) {
		t.Errorf("WithAPIKey: Authorization = %q, want [Bearer approver-key]", got)
	}
	if _, err := approver.Approval(ctx, "", "apr_1"); err != nil {
		t.Fatalf("Approval() with no tenant: %v", err)
	}
	if _, err := approver.DecideApproval(ctx, &writ.DecideApprovalRequest{ApprovalID: "apr_1", Decision: writ.ApprovalApproved, Reason: "ok"}); err != nil {
		t.Fatalf("DecideApproval() with no tenant and no approver: %v", err)
	}
	if got := fake.tenantsSeen(); !slices.Equal(got, []string{"acme", "acme", "acme"}) {
		t.Errorf("the server was asked for tenants %q, want the key's, acme, each time", got)
	}
	for i, p := range fake.seen() {
		if p == nil || p.KeyID != "key_approver" {
			t.Errorf("call %d saw principal %+v, want the approver key's", i, p)
		}
	}
	auditor := client(WithAPIKey("auditor-key"))
	if _, err := auditor.Record(ctx, "", "r1"); err != nil {
		t.Errorf("Record() with no tenant: %v", err)
	}
	if res, err := auditor.Replay(ctx, "", "r1"); err != nil || !reflect.DeepEqual(res, equalReplay()) {
		t.Errorf("Replay() with no tenant = %+v, %v; want %+v", res, err, equalReplay())
	}
	if results, err := auditor.ReplayTrace(ctx, "", testTraceID); err != nil || len(results) != 3 {
		t.Errorf("ReplayTrace() with no tenant = %+v, %v; want three results", results, err)
	}

	n := fake.calls()
	refusals := []struct {
		name string
		call func() error
		code string
		msg  string
	}{
		{"no key", func() error {
			_, err := client().Approvals(ctx, writ.ApprovalQuery{TenantID: "acme"})
			return err
		}, writ.EUNAUTHENTICATED, "needs an API key"},
		{"a revoked key", func() error {
			_, err := client(WithAPIKey("revoked-key")).Approval(ctx, "acme", "apr_1")
			return err
		}, writ.EUNAUTHENTICATED, "not valid"},
		{"an agent deciding", func() error {
			_, err := client(WithAPIKey("agent-key")).DecideApproval(ctx, &writ.DecideApprovalRequest{ApprovalID: "apr_1", Decision: writ.ApprovalApproved, Reason: "mine"})
			return err
		}, writ.EFORBIDDEN, "approver"},
		{"another tenant", func() error {
			_, err := approver.Approvals(ctx, writ.ApprovalQuery{TenantID: "globex"})
			return err
		}, writ.EFORBIDDEN, "this API key belongs to another tenant"},
		{"an agent replaying", func() error {
			_, err := client(WithAPIKey("agent-key")).Replay(ctx, "", "r1")
			return err
		}, writ.EFORBIDDEN, "auditor"},
		{"another tenant's trace", func() error {
			_, err := auditor.ReplayTrace(ctx, "globex", testTraceID)
			return err
		}, writ.EFORBIDDEN, "this API key belongs to another tenant"},
		{"the key store down", func() error {
			_, err := client(WithAPIKey("down-key")).Check(ctx, &writ.CheckRequest{})
			return err
		}, writ.EUNAVAILABLE, "retry later"},
	}
	for _, tt := range refusals {
		err := tt.call()
		if writ.ErrorCode(err) != tt.code || !strings.Contains(writ.ErrorMessage(err), tt.msg) {
			t.Errorf("%s: error = %v (code %s), want code %s saying %q", tt.name, err, writ.ErrorCode(err), tt.code, tt.msg)
		}
	}
	if fake.calls() != n {
		t.Errorf("refused calls reached the service %d times", fake.calls()-n)
	}
}

func TestClientApprovalsValidationErrors(t *testing.T) {
	ctx := context.Background()
	fake := fullApprovals()
	c, _ := newTestClient(t, fake)
	tests := []struct {
		name   string
		call   func() error
		fields []string
	}{
		{"DecideApproval(nil)", func() error {
			_, err := c.DecideApproval(ctx, nil)
			return err
		}, nil},
		{"DecideApproval(no id)", func() error {
			_, err := c.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "t", Decision: writ.ApprovalApproved, Approver: "a", Reason: "r"})
			return err
		}, []string{"approval_id"}},
		{"DecideApproval(no decision)", func() error {
			_, err := c.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "t", ApprovalID: "apr_1", Approver: "a", Reason: "r"})
			return err
		}, []string{"decision"}},
		{"DecideApproval(decision expired)", func() error {
			_, err := c.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "t", ApprovalID: "apr_1", Decision: writ.ApprovalExpired, Approver: "a", Reason: "r"})
			return err
		}, []string{"decision"}},
		{"DecideApproval(no reason)", func() error {
			_, err := c.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "t", ApprovalID: "apr_1", Decision: writ.ApprovalDenied, Approver: "a"})
			return err
		}, []string{"reason"}},
		{"DecideApproval(no tenant)", func() error {
			_, err := c.DecideApproval(ctx, &writ.DecideApprovalRequest{ApprovalID: "apr_1", Decision: writ.ApprovalDenied, Approver: "a", Reason: "r"})
			return err
		}, []string{"tenant_id"}},
		{"Approval(no id)", func() error {
			_, err := c.Approval(ctx, "t", "")
			return err
		}, []string{"approval_id"}},
		{"Approval(no tenant)", func() error {
			_, err := c.Approval(ctx, "", "apr_1")
			return err
		}, []string{"tenant_id"}},
		{"Approvals(limit 0 is the default, 5000 is not)", func() error {
			_, err := c.Approvals(ctx, writ.ApprovalQuery{TenantID: "t", Limit: 5000})
			return err
		}, []string{"limit"}},
		{"Approvals(state)", func() error {
			_, err := c.Approvals(ctx, writ.ApprovalQuery{TenantID: "t", State: "all"})
			return err
		}, []string{"state"}},
	}
	for _, tt := range tests {
		err := tt.call()
		var got *writ.Error
		if !errors.As(err, &got) || got.Code != writ.EINVALID {
			t.Errorf("%s error = %#v, want EINVALID", tt.name, err)
			continue
		}
		var fields []string
		for _, d := range got.Details {
			fields = append(fields, d.Field)
		}
		if !reflect.DeepEqual(fields, tt.fields) {
			t.Errorf("%s error details name %q, want %q", tt.name, fields, tt.fields)
		}
	}
	if fake.calls() != 0 {
		t.Errorf("the approvals were called %d times for invalid input", fake.calls())
	}
}

// TestClientReplays round-trips every replay status, and a trace, through
// the server: the client answers what the replays answered, values of
// differences included.
func TestClientReplays(t *testing.T) {
	ctx := context.Background()
	const tenant, id = "acme & co/1", "dr/1 x?#"
	nullish := diffReplay()
	nullish.Differences[1].Replayed = []byte(`null`)
	for _, res := range []*writ.ReplayResult{equalReplay(), diffReplay(), errorReplay(), nullish} {
		res.TenantID, res.RecordID = tenant, id
		fake := &fakeService{replay: res}
		c, _ := newTestClient(t, fake)
		got, err := c.Replay(ctx, tenant, id)
		if err != nil {
			t.Fatalf("Replay() of a %s replay: %v", res.Status, err)
		}
		if !reflect.DeepEqual(got, res) {
			t.Errorf("Replay() = %+v, want %+v", got, res)
		}
		if got, want := fake.replayArgs(), [][3]string{{"Replay", tenant, id}}; !reflect.DeepEqual(got, want) {
			t.Errorf("Replay(): the server got %q, want %q", got, want)
		}
	}

	fake := fullReplays()
	c, _ := newTestClient(t, fake)
	results, err := c.ReplayTrace(ctx, "acme", testTraceID)
	if err != nil {
		t.Fatalf("ReplayTrace() error = %v", err)
	}
	if !reflect.DeepEqual(results, fake.replays) {
		t.Errorf("ReplayTrace() = %+v, want %+v", results, fake.replays)
	}
	if got, want := fake.replayArgs(), [][3]string{{"ReplayTrace", "acme", testTraceID}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ReplayTrace(): the server got %q, want %q", got, want)
	}

	notFound := &fakeService{err: writ.Errorf(writ.ENOTFOUND, "record dr_1 not found")}
	c, _ = newTestClient(t, notFound)
	if _, err := c.Replay(ctx, "acme", "dr_1"); writ.ErrorCode(err) != writ.ENOTFOUND || writ.ErrorMessage(err) != "record dr_1 not found" {
		t.Errorf("Replay() of a missing record: error = %v, want the server's not_found", err)
	}
	if _, err := c.ReplayTrace(ctx, "acme", testTraceID); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("ReplayTrace() of an unknown trace: error = %v, want not_found", err)
	}
}

func TestClientReplaysValidationErrors(t *testing.T) {
	ctx := context.Background()
	fake := fullReplays()
	c, _ := newTestClient(t, fake)
	tests := []struct {
		name   string
		call   func() error
		fields []string
	}{
		{"Replay(no record id)", func() error {
			_, err := c.Replay(ctx, "acme", "")
			return err
		}, []string{"record_id"}},
		{"Replay(no tenant)", func() error {
			_, err := c.Replay(ctx, "", "r1")
			return err
		}, []string{"tenant_id"}},
		{"ReplayTrace(no trace id)", func() error {
			_, err := c.ReplayTrace(ctx, "acme", "")
			return err
		}, []string{"trace_id"}},
		{"ReplayTrace(not a trace id)", func() error {
			_, err := c.ReplayTrace(ctx, "acme", "trace-1")
			return err
		}, []string{"trace_id"}},
		{"ReplayTrace(nothing)", func() error {
			_, err := c.ReplayTrace(ctx, "", "")
			return err
		}, []string{"tenant_id", "trace_id"}},
	}
	for _, tt := range tests {
		err := tt.call()
		var got *writ.Error
		if !errors.As(err, &got) || got.Code != writ.EINVALID {
			t.Errorf("%s error = %#v, want EINVALID", tt.name, err)
			continue
		}
		var fields []string
		for _, d := range got.Details {
			fields = append(fields, d.Field)
		}
		if !reflect.DeepEqual(fields, tt.fields) {
			t.Errorf("%s error details name %q, want %q", tt.name, fields, tt.fields)
		}
	}
	if fake.calls() != 0 {
		t.Errorf("the replays were called %d times for invalid input", fake.calls())
	}
}

func TestClientReplaysNotServed(t *testing.T) {
	s, _ := newTestServer(fullReplays(), Config{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(srv.URL)
	want := &writ.Error{Code: writ.ENOTFOUND, Message: "this server replays no records"}
	_, err1 := c.Replay(context.Background(), "acme", "r1")
	_, err2 := c.ReplayTrace(context.Background(), "acme", testTraceID)
	for name, err := range map[string]error{"Replay": err1, "ReplayTrace": err2} {
		var got *writ.Error
		if !errors.As(err, &got) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s() from a server that replays nothing: error = %#v, want %#v", name, err, want)
		}
	}
}
