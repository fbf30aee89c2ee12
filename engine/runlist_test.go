package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/writhq/writ"
)

// TestRuns lists runs by workflow and state, page by page, against what
// each run is; another tenant's runs never show.
func TestRuns(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("storybook"))
	start := func(tenant, id string) {
		t.Helper()
		if _, err := h.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: tenant, WorkflowID: "ui.component.change", RunID: id, Context: map[string]any{"component": "Button"}}); err != nil {
			t.Fatal(err)
		}
	}
	status := map[string]string{}
	var all []string
	// Started out of id order, so the list's order shows.
	for _, i := range []int{7, 3, 11, 0, 5, 9, 1, 12, 4, 8, 2, 10, 6} {
		id := fmt.Sprintf("run_%02d", i)
		start("acme", id)
		status[id] = writ.RunActive
		if i%4 == 0 {
			// Completed: implement accepted, the browser observed, the
			// visual check accepted.
			if v, err := h.eng.SubmitAttempt(ctx, attemptReq(id, "implement", map[string]any{"diff_summary": "x"})); err != nil || v.State != writ.VerdictAccepted {
				t.Fatalf("implement %s: %+v, %v", id, v, err)
			}
			observe(t, h, id, "visual_check")
			if v, err := h.eng.SubmitAttempt(ctx, attemptReq(id, "visual_check", goodResult, claimedBrowse)); err != nil || v.State != writ.VerdictAccepted {
				t.Fatalf("visual_check %s: %+v, %v", id, v, err)
			}
			status[id] = writ.RunCompleted
		}
	}
	start("globex", "run_03")
	start("globex", "run_99")
	for id := range status {
		all = append(all, id)
	}
	slices.Sort(all)

	tests := []struct {
		name string
		q    writ.RunQuery
		keep func(id string) bool
	}{
		{"all", writ.RunQuery{}, func(string) bool { return true }},
		{"workflow", writ.RunQuery{WorkflowID: "ui.component.change"}, func(string) bool { return true }},
		{"another workflow", writ.RunQuery{WorkflowID: "no.such.workflow"}, func(string) bool { return false }},
		{"active", writ.RunQuery{Status: writ.RunActive}, func(id string) bool { return status[id] == writ.RunActive }},
		{"completed", writ.RunQuery{Status: writ.RunCompleted}, func(id string) bool { return status[id] == writ.RunCompleted }},
		{"aborted", writ.RunQuery{Status: writ.RunAborted}, func(string) bool { return false }},
		{"workflow and state", writ.RunQuery{WorkflowID: "ui.component.change", Status: writ.RunCompleted}, func(id string) bool { return status[id] == writ.RunCompleted }},
	}
	for _, tc := range tests {
		var want []string
		for _, id := range all {
			if tc.keep(id) {
				want = append(want, id)
			}
		}
		for _, limit := range []int{0, 1000, 3, 1} {
			q := tc.q
			q.TenantID, q.Limit = "acme", limit
			var got []string
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatalf("%s, limit %d: the cursor does not advance", tc.name, limit)
				}
				page, err := h.eng.Runs(ctx, q)
				if err != nil {
					t.Fatalf("%s, limit %d: Runs = %v", tc.name, limit, err)
				}
				if limit > 0 && len(page.Runs) > limit {
					t.Errorf("%s, limit %d: a page of %d runs", tc.name, limit, len(page.Runs))
				}
				for _, r := range page.Runs {
					if r.TenantID != "acme" || r.WorkflowID != "ui.component.change" || r.Status != status[r.RunID] {
						t.Errorf("%s: run %+v, want acme's, status %s", tc.name, r, status[r.RunID])
					}
					if wantAttempts := map[string]int{writ.RunActive: 0, writ.RunCompleted: 2}[r.Status]; r.Attempts != wantAttempts {
						t.Errorf("%s: run %s has %d attempts, want %d", tc.name, r.RunID, r.Attempts, wantAttempts)
					}
					got = append(got, r.RunID)
				}
				if page.NextCursor == "" {
					break
				}
				q.Cursor = page.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, limit %d: runs %v, want %v", tc.name, limit, got, want)
			}
		}
	}

	for _, q := range []writ.RunQuery{
		{},
		{TenantID: "acme", Status: "paused"},
		{TenantID: "acme", Cursor: "not-a-cursor"},
		{TenantID: "acme", Limit: -1},
	} {
		if _, err := h.eng.Runs(ctx, q); writ.ErrorCode(err) != writ.EINVALID {
			t.Errorf("Runs(%+v) = %v, want EINVALID", q, err)
		}
	}
	if page, err := h.eng.Runs(ctx, writ.RunQuery{TenantID: "umbrella"}); err != nil || len(page.Runs) != 0 || page.NextCursor != "" {
		t.Errorf("Runs(umbrella) = %+v, %v; want no runs", page, err)
	}
}
