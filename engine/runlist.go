package engine

import (
	"context"
	"encoding/base64"
	"slices"
	"unicode/utf8"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// runScan is how many runs one page of Runs examines at most, per run it
// may return: a filter that matches few runs answers a short page with a
// cursor rather than reading the whole tenant in one request.
const runScan = 10

// Runs lists a tenant's runs; see writ.Workflows. A run's state is folded
// from its events, as Run folds it, so the status filter reads each run
// it examines.
func (e *Engine) Runs(ctx context.Context, q writ.RunQuery) (*writ.RunPage, error) {
	if q.TenantID == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "a run query needs a tenant", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	if q.Status != "" && !slices.Contains(writ.RunStatuses, q.Status) {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "unknown run status " + q.Status, Details: []writ.Detail{{Field: "status", Message: "must be one of active, completed, aborted, escalated"}}}
	}
	limit, err := ledger.PageSize(q.Limit)
	if err != nil {
		return nil, err
	}
	after, err := decodeRunCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	page := &writ.RunPage{Runs: []writ.RunSummary{}}
	for budget := limit * runScan; ; {
		n := min(budget, limit)
		// One id more than asked tells whether more runs follow.
		ids, err := e.store.RunIDs(ctx, q.TenantID, after, n+1)
		if err != nil {
			return nil, err
		}
		more := len(ids) > n
		ids = ids[:min(len(ids), n)]
		for i, id := range ids {
			st, err := e.loadRun(ctx, q.TenantID, id)
			if err != nil {
				return nil, err
			}
			after = id
			budget--
			if (q.WorkflowID == "" || st.Run.WorkflowID == q.WorkflowID) && (q.Status == "" || st.Run.Status == q.Status) {
				page.Runs = append(page.Runs, summary(st.Run))
				if len(page.Runs) == limit {
					more = more || i < len(ids)-1
					budget = 0
					break
				}
			}
		}
		if !more {
			return page, nil
		}
		if budget == 0 {
			page.NextCursor = encodeRunCursor(after)
			return page, nil
		}
	}
}

// summary is a run without its history.
func summary(r *writ.Run) writ.RunSummary {
	s := writ.RunSummary{TenantID: r.TenantID, RunID: r.RunID, WorkflowID: r.WorkflowID, WorkflowVersion: r.WorkflowVersion,
		Pack: r.Pack, PackHash: r.PackHash, Status: r.Status, CurrentStep: r.CurrentStep, StartedAt: r.StartedAt, LastEventAt: r.StartedAt}
	for _, ev := range r.History {
		if ev.Kind == ledger.StepAttempt {
			s.Attempts++
		}
		if ev.At.After(s.LastEventAt) {
			s.LastEventAt = ev.At
		}
	}
	return s
}

// A run cursor is the last run id a page examined, base64url-encoded
// behind a version byte.
const runCursorVersion = 'r'

func encodeRunCursor(after string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{runCursorVersion}, after...))
}

func decodeRunCursor(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != runCursorVersion || !utf8.Valid(b[1:]) {
		return "", &writ.Error{Code: writ.EINVALID, Message: "invalid cursor", Details: []writ.Detail{{Field: "cursor", Message: "not a cursor of a run list"}}}
	}
	return string(b[1:]), nil
}
