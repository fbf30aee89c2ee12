package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// The reads of approval requests. Each is one statement, so a request and
// its events come from one snapshot: a page filtered by state agrees with
// the events it shows. Requests are written only by Append.

// withEvents wraps a query of approval_requests (selecting pos, tenant_id,
// approval_id, request) into the rows sqlkit.ReadApprovals reads: each
// request joined with its events, in insertion order, then seq.
func withEvents(requests string) string {
	return `SELECT a.pos, a.request, coalesce(e.seq, 0), coalesce(e.kind, ''), coalesce(e.actor, ''), coalesce(e.reason, ''),
		coalesce(e.record_id, ''), coalesce(e.at_ns, 0)
		FROM (` + requests + `) a
		LEFT JOIN approval_events e ON e.tenant_id = a.tenant_id AND e.approval_id = a.approval_id
		ORDER BY a.pos, e.seq`
}

// undecided is the condition that request a has no decision event.
const undecided = `NOT EXISTS (SELECT 1 FROM approval_events d WHERE d.tenant_id = a.tenant_id AND d.approval_id = a.approval_id
	AND d.kind IN ('approved', 'denied', 'withdrawn'))`

// Approval returns one of the tenant's approval requests; see
// ledger.ApprovalStore.
func (s *Store) Approval(ctx context.Context, tenantID, approvalID string, now time.Time) (*writ.ApprovalRequest, error) {
	page, err := s.approvals(ctx, 1, now, withEvents(`SELECT pos, tenant_id, approval_id, request FROM approval_requests
		WHERE tenant_id = $1 AND approval_id = $2`), tenantID, approvalID)
	if err != nil {
		return nil, err
	}
	if len(page.Approvals) == 0 {
		return nil, sqlkit.ApprovalNotFound(approvalID)
	}
	return &page.Approvals[0], nil
}

// Approvals lists the tenant's approval requests matching q in insertion
// order; see ledger.ApprovalStore. Pages are cut by insertion position,
// so requests created while a client pages through appear on later pages.
func (s *Store) Approvals(ctx context.Context, q writ.ApprovalQuery, now time.Time) (*writ.ApprovalPage, error) {
	after, limit, err := sqlkit.ApprovalPageQuery(q)
	if err != nil {
		return nil, err
	}
	floor := int64(0)
	if q.State == writ.ApprovalPending {
		// Every request up to the floor is decided or expired.
		err := s.pool.QueryRow(ctx, approvalFloorQuery, q.TenantID, ledger.UnixNanos(now)).Scan(&floor)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("postgres: query approvals: %w", err)
		}
	}
	query, args := approvalsQuery(q, max(after, floor), limit, now)
	return s.approvals(ctx, limit, now, query, args...)
}

// approvalFloorQuery selects the tenant's highest approval floor set at or
// before a time (migration 0022): every request up to it is decided or
// expired then, and so at the time. The arguments are the tenant and the
// time (Unix nanoseconds).
const approvalFloorQuery = `SELECT pos FROM approval_floors WHERE tenant_id = $1 AND at_ns <= $2 ORDER BY pos DESC LIMIT 1`

// approvalsQuery builds the SQL of Approvals: q's filters, requests after
// position after, one more than limit, with their events.
func approvalsQuery(q writ.ApprovalQuery, after int64, limit int, now time.Time) (string, []any) {
	args := []any{}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var sb strings.Builder
	sb.WriteString(`SELECT a.pos, a.tenant_id, a.approval_id, a.request FROM approval_requests a
		WHERE a.tenant_id = ` + arg(q.TenantID) + ` AND a.pos > ` + arg(after))
	switch q.State {
	case writ.ApprovalPending:
		sb.WriteString(` AND a.expires_ns > ` + arg(ledger.UnixNanos(now)) + ` AND ` + undecided)
	case writ.ApprovalExpired:
		sb.WriteString(` AND a.expires_ns <= ` + arg(ledger.UnixNanos(now)) + ` AND ` + undecided)
	case writ.ApprovalApproved, writ.ApprovalDenied, writ.ApprovalWithdrawn:
		// The state names the kind of the decision event.
		sb.WriteString(` AND EXISTS (SELECT 1 FROM approval_events d WHERE d.tenant_id = a.tenant_id AND d.approval_id = a.approval_id
			AND d.kind = ` + arg(q.State) + `)`)
	}
	if q.GateID != "" {
		sb.WriteString(` AND a.gate_id = ` + arg(q.GateID))
	}
	if q.DecisionKey != "" {
		sb.WriteString(` AND a.decision_key = ` + arg(q.DecisionKey))
	}
	if !q.CreatedBefore.IsZero() {
		sb.WriteString(` AND a.created_ns < ` + arg(ledger.UnixNanos(q.CreatedBefore)))
	}
	// One request more than the page tells whether another page follows.
	sb.WriteString(` ORDER BY a.pos LIMIT ` + arg(limit+1))
	return withEvents(sb.String()), args
}

// OpenApproval returns the tenant's newest request at gateID with the
// binding digest that is pending at now, or nil; see ledger.ApprovalStore.
func (s *Store) OpenApproval(ctx context.Context, tenantID, gateID, bindingDigest string, now time.Time) (*writ.ApprovalRequest, error) {
	page, err := s.approvals(ctx, 1, now, withEvents(`SELECT a.pos, a.tenant_id, a.approval_id, a.request FROM approval_requests a
		WHERE a.tenant_id = $1 AND a.gate_id = $2 AND a.binding_digest = $3 AND a.expires_ns > $4 AND `+undecided+`
		ORDER BY a.created_ns DESC, a.pos DESC LIMIT 1`), tenantID, gateID, bindingDigest, ledger.UnixNanos(now))
	if err != nil {
		return nil, err
	}
	if len(page.Approvals) == 0 {
		return nil, nil
	}
	return &page.Approvals[0], nil
}

func (s *Store) approvals(ctx context.Context, limit int, now time.Time, query string, args ...any) (*writ.ApprovalPage, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: query approvals: %w", err)
	}
	defer rows.Close()
	page, err := sqlkit.ReadApprovals(rows, limit, now)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return page, nil
}

// DecidedApprovals returns those of ids that have a decision event.
func (s *Store) DecidedApprovals(ctx context.Context, tenantID string, ids []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT approval_id FROM approval_events
		WHERE tenant_id = $1 AND approval_id = ANY($2::text[]) AND kind IN ('approved', 'denied', 'withdrawn')`, tenantID, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: read decided approvals: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: read decided approvals: %w", err)
	}
	return out, nil
}
