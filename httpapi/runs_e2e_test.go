package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
)

// TestRunsEndToEnd drives the example pack examples/storybook through a
// real engine over HTTP with the Go client: the attempt files of the
// example, a browser call writ observes through a boundary check, and
// the errors of a run out of order, finished or of another tenant.
func TestRunsEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join("..", "examples", "storybook")
	// The clock runs from now; skip moves it past a retry's backoff.
	var ahead atomic.Int64
	skip := func(d time.Duration) { ahead.Add(int64(d)) }
	eng, _ := newEngine(t, dir, func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	p := eng.Pack()
	srv := validated(t, httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Ledger: eng, Workflows: eng})))
	t.Cleanup(srv.Close)
	c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(srv.Client()))
	var _ writ.Workflows = c

	run, err := c.StartRun(ctx, &writ.StartRunRequest{
		TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_button_142",
		Context: map[string]any{"component": "Button", "ticket": "UI-142"},
	})
	if err != nil {
		t.Fatalf("StartRun() error = %v", err)
	}
	if run.Status != writ.RunActive || run.CurrentStep != "implement" || run.Pack != p.ID() || len(run.History) != 1 {
		t.Fatalf("StartRun() = %+v; want an active run at step implement of pack %s", run, p.ID())
	}
	if _, err := c.StartRun(ctx, &writ.StartRunRequest{TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_button_142"}); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("StartRun() of an existing run id: error = %v, want code %s", err, writ.ECONFLICT)
	}

	actor := writ.Actor{Type: writ.ActorAgent, ID: "agt_frontend"}
	attempt := func(step, file string) (*writ.StepVerdict, error) {
		t.Helper()
		req := &writ.AttemptRequest{TenantID: "acme", RunID: run.RunID, StepID: step, Actor: actor, Result: map[string]any{}}
		if file != "" {
			b, err := os.ReadFile(filepath.Join(dir, "attempts", file))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, req); err != nil { // the files hold result and tool_calls
				t.Fatalf("%s: %v", file, err)
			}
		}
		return c.SubmitAttempt(ctx, req)
	}
	if _, err := attempt("visual_check", "visual-check-accepted.json"); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("SubmitAttempt() out of order: error = %v, want code %s", err, writ.ECONFLICT)
	}
	if v, err := attempt("implement", "implement.json"); err != nil || v.State != writ.VerdictAccepted || v.NextStep != "visual_check" {
		t.Fatalf("SubmitAttempt(implement) = %+v, %v; want accepted, next visual_check", v, err)
	}
	v, err := attempt("visual_check", "visual-check-missing-evidence.json")
	if err != nil || v.State != writ.VerdictRetry || len(v.Failed) != 3 || v.RetryPrompt == "" {
		t.Fatalf("SubmitAttempt(visual_check, missing evidence) = %+v, %v; want retry with 3 failed checks", v, err)
	}
	skip(time.Duration(v.RetryAfterMS) * time.Millisecond)

	// writ observes the browser call through a boundary check of the step.
	rcpt, err := c.Check(ctx, &writ.CheckRequest{
		TenantID: "acme", Tool: "open_simple_browser", Actor: actor,
		Arguments: map[string]any{"url": "http://localhost:6006/?path=/story/button--primary"},
		Workflow:  &writ.WorkflowRef{WorkflowID: "ui.component.change", RunID: run.RunID, StepID: "visual_check"},
	})
	if err != nil || !rcpt.SafeToExecute {
		t.Fatalf("Check(open_simple_browser) = %+v, %v; want allowed", rcpt, err)
	}
	if v, err := attempt("visual_check", "visual-check-accepted.json"); err != nil || v.State != writ.VerdictAccepted || v.NextStep != "done" || len(v.Failed) != 0 {
		t.Fatalf("SubmitAttempt(visual_check, accepted) = %+v, %v; want accepted, next done", v, err)
	}
	// Reaching the terminal step completes the run: it takes no more attempts.
	if _, err := attempt("done", ""); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("SubmitAttempt() at a completed run: error = %v, want code %s", err, writ.ECONFLICT)
	}

	got, err := c.Run(ctx, "acme", run.RunID)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	var kinds []string
	for _, ev := range got.History {
		kinds = append(kinds, ev.Kind)
	}
	want := []string{"run_started", "step_attempt", "step_attempt", "call_observed", "step_attempt"}
	if got.Status != writ.RunCompleted || got.CurrentStep != "" || !slices.Equal(kinds, want) {
		t.Errorf("Run() = status %s, step %q, history %q; want completed, no step, %q", got.Status, got.CurrentStep, kinds, want)
	}
	if _, err := c.Run(ctx, "globex", run.RunID); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Run() of an acme run as tenant globex: error = %v, want code %s", err, writ.ENOTFOUND)
	}
	if _, err := c.Run(ctx, "acme", "run_nope"); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Run() of an unknown run: error = %v, want code %s", err, writ.ENOTFOUND)
	}

	// The Location of a started run is the run.
	resp, err := srv.Client().Post(srv.URL+"/v1/runs", "application/json",
		bytes.NewReader([]byte(`{"tenant_id":"acme","workflow_id":"ui.component.change"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || loc == "" {
		t.Fatalf("POST /v1/runs = %d, Location %q; want 201 with a Location", resp.StatusCode, loc)
	}
	if resp, err = srv.Client().Get(srv.URL + loc); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s (the Location) = %v, %v; want 200", loc, resp, err)
	} else {
		resp.Body.Close()
	}

	// The list: the completed run and the one just started, by run id;
	// filters by state and workflow, a bad state refused, another tenant
	// sees none.
	list := func(q writ.RunQuery) []string {
		t.Helper()
		var ids []string
		for {
			page, err := c.Runs(ctx, q)
			if err != nil {
				t.Fatalf("Runs(%+v) error = %v", q, err)
			}
			for _, r := range page.Runs {
				ids = append(ids, r.RunID+":"+r.Status)
			}
			if page.NextCursor == "" {
				return ids
			}
			q.Cursor = page.NextCursor
		}
	}
	started := path.Base(strings.SplitN(loc, "?", 2)[0])
	all := []string{run.RunID + ":completed", started + ":active"}
	slices.Sort(all)
	for _, tt := range []struct {
		q    writ.RunQuery
		want []string
	}{
		{writ.RunQuery{TenantID: "acme"}, all},
		{writ.RunQuery{TenantID: "acme", Limit: 1}, all},
		{writ.RunQuery{TenantID: "acme", Status: writ.RunCompleted}, []string{run.RunID + ":completed"}},
		{writ.RunQuery{TenantID: "acme", Status: writ.RunActive, WorkflowID: "ui.component.change"}, []string{started + ":active"}},
		{writ.RunQuery{TenantID: "acme", WorkflowID: "other.workflow"}, nil},
		{writ.RunQuery{TenantID: "globex"}, nil},
	} {
		if got := list(tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("Runs(%+v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if _, err := c.Runs(ctx, writ.RunQuery{TenantID: "acme", Status: "paused"}); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("Runs(status paused) error = %v, want code %s", err, writ.EINVALID)
	}
	if _, err := c.Runs(ctx, writ.RunQuery{TenantID: "acme", Cursor: "bm9wZQ"}); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("Runs(a cursor writ did not issue) error = %v, want code %s", err, writ.EINVALID)
	}
}
