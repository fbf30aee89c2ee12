package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// StartRun appends a run's first event; see ledger.Store.
func (s *Store) StartRun(ctx context.Context, ev *ledger.RunEvent) error {
	if ev == nil || ev.TenantID == "" || ev.RunID == "" || ev.Kind == "" {
		return &writ.Error{Code: writ.EINVALID, Message: "a run event needs a tenant, a run id and a kind"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ledger.ErrClosed
	}
	return s.writeTx(ctx, "run", func(tx *sql.Tx) error {
		st := s.stmts.bind(ctx, tx)
		defer st.close()
		var last int64
		if err := st.runSeq.QueryRowContext(ctx, ev.TenantID, ev.RunID).Scan(&last); err != nil {
			return fmt.Errorf("sqlite: run %s: %w", ev.RunID, err)
		}
		if last > 0 {
			return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("run %s already exists", ev.RunID)}
		}
		return st.appendRunEvent(ctx, ev)
	})
}

// RunEvents returns a run's events in seq order; see ledger.Store.
func (s *Store) RunEvents(ctx context.Context, tenantID, runID string) ([]ledger.RunEvent, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT seq, kind, step_id, record_id, at_ns, data FROM run_events WHERE tenant_id = ? AND run_id = ? ORDER BY seq`, tenantID, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run events: %w", err)
	}
	defer rows.Close()
	var out []ledger.RunEvent
	for rows.Next() {
		ev := ledger.RunEvent{TenantID: tenantID, RunID: runID}
		var at int64
		var data []byte
		if err := rows.Scan(&ev.Seq, &ev.Kind, &ev.StepID, &ev.RecordID, &at, &data); err != nil {
			return nil, fmt.Errorf("sqlite: run events: %w", err)
		}
		ev.At, ev.Data = time.Unix(0, at).UTC(), data
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("run %s not found", runID)}
	}
	return out, nil
}

// RunStart returns a run's first event; see ledger.Store. The key
// (tenant_id, run_id, seq) finds it.
func (s *Store) RunStart(ctx context.Context, tenantID, runID string) (*ledger.RunEvent, error) {
	ev := &ledger.RunEvent{TenantID: tenantID, RunID: runID}
	var at int64
	var data []byte
	err := s.read.QueryRowContext(ctx, `SELECT seq, kind, step_id, record_id, at_ns, data FROM run_events WHERE tenant_id = ? AND run_id = ? AND seq = 1`, tenantID, runID).
		Scan(&ev.Seq, &ev.Kind, &ev.StepID, &ev.RecordID, &at, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("run %s not found", runID)}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: run start: %w", err)
	}
	ev.At, ev.Data = time.Unix(0, at).UTC(), data
	return ev, nil
}

// RunIDs returns a tenant's run ids after a run id; see ledger.Store.
// Every run has its start event at seq 1, and the key (tenant_id, run_id,
// seq) serves the order.
func (s *Store) RunIDs(ctx context.Context, tenantID, after string, limit int) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT run_id FROM run_events WHERE tenant_id = ? AND run_id > ? AND seq = 1 ORDER BY run_id LIMIT ?`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: run ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: run ids: %w", err)
	}
	return ids, nil
}
