package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// StartRun appends a run's first event; see ledger.Store. It holds the
// run's advisory lock, as appends of the run's events do, so two servers
// starting the same run cannot both succeed.
func (s *Store) StartRun(ctx context.Context, ev *ledger.RunEvent) error {
	if ev == nil || ev.TenantID == "" || ev.RunID == "" || ev.Kind == "" {
		return &writ.Error{Code: writ.EINVALID, Message: "a run event needs a tenant, a run id and a kind"}
	}
	if s.closed.Load() {
		return ledger.ErrClosed
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, runLockClass, runLockName(ev.TenantID, ev.RunID)); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM run_events WHERE tenant_id = $1 AND run_id = $2)`, ev.TenantID, ev.RunID).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("run %s already exists", ev.RunID)}
		}
		data := ev.Data
		if data == nil {
			data = []byte("{}")
		}
		_, err := tx.Exec(ctx, `INSERT INTO run_events (tenant_id, run_id, seq, kind, step_id, record_id, at_ns, data) VALUES ($1, $2, 1, $3, $4, $5, $6, $7)`,
			ev.TenantID, ev.RunID, ev.Kind, ev.StepID, ev.RecordID, ev.At.UnixNano(), []byte(data))
		return err
	})
	if writ.ErrorCode(err) == writ.ECONFLICT {
		return err
	} else if err != nil {
		return fmt.Errorf("postgres: start run %s: %w", ev.RunID, err)
	}
	ev.Seq = 1
	return nil
}

// RunEvents returns a run's events in seq order; see ledger.Store.
func (s *Store) RunEvents(ctx context.Context, tenantID, runID string) ([]ledger.RunEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, kind, step_id, record_id, at_ns, data FROM run_events WHERE tenant_id = $1 AND run_id = $2 ORDER BY seq`, tenantID, runID)
	if err != nil {
		return nil, fmt.Errorf("postgres: run events: %w", err)
	}
	defer rows.Close()
	var out []ledger.RunEvent
	for rows.Next() {
		ev := ledger.RunEvent{TenantID: tenantID, RunID: runID}
		var at int64
		var data []byte
		if err := rows.Scan(&ev.Seq, &ev.Kind, &ev.StepID, &ev.RecordID, &at, &data); err != nil {
			return nil, fmt.Errorf("postgres: run events: %w", err)
		}
		ev.At, ev.Data = time.Unix(0, at).UTC(), data
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: run events: %w", err)
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
	err := s.pool.QueryRow(ctx, `SELECT seq, kind, step_id, record_id, at_ns, data FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq = 1`, tenantID, runID).
		Scan(&ev.Seq, &ev.Kind, &ev.StepID, &ev.RecordID, &at, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("run %s not found", runID)}
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: run start: %w", err)
	}
	ev.At, ev.Data = time.Unix(0, at).UTC(), data
	return ev, nil
}

// RunIDs returns a tenant's run ids after a run id; see ledger.Store.
// Every run has its start event at seq 1, and the key (tenant_id, run_id,
// seq) serves the order.
func (s *Store) RunIDs(ctx context.Context, tenantID, after string, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id FROM run_events WHERE tenant_id = $1 AND run_id > $2 AND seq = 1 ORDER BY run_id LIMIT $3`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: run ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("postgres: run ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: run ids: %w", err)
	}
	return ids, nil
}
