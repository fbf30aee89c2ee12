package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// ShadowDecisions lists the tenant's shadow decisions matching q in
// insertion order; see ledger.ShadowStore. Pages are cut by insertion
// position, so decisions appended while a client pages through appear on
// later pages. Decisions are written only by Append.
func (s *Store) ShadowDecisions(ctx context.Context, q ledger.ShadowQuery) (*ledger.ShadowPage, error) {
	after, limit, err := sqlkit.ShadowPageQuery(q)
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	args := []any{q.TenantID, after}
	sb.WriteString(`SELECT pos, tenant_id, record_id, decision_key, pack, pack_hash, at_ns, enforced_outcome, outcome, status, detail
		FROM shadow_decisions WHERE tenant_id = ? AND pos > ?`)
	if q.PackHash != "" {
		sb.WriteString(` AND pack_hash = ?`)
		args = append(args, q.PackHash)
	}
	if q.DecisionKey != "" {
		sb.WriteString(` AND decision_key = ?`)
		args = append(args, q.DecisionKey)
	}
	if !q.From.IsZero() {
		sb.WriteString(` AND at_ns >= ?`)
		args = append(args, ledger.UnixNanos(q.From))
	}
	if !q.To.IsZero() {
		sb.WriteString(` AND at_ns < ?`)
		args = append(args, ledger.UnixNanos(q.To))
	}
	// One decision more than the page tells whether another page follows.
	sb.WriteString(` ORDER BY pos LIMIT ?`)
	args = append(args, limit+1)
	rows, err := s.read.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query shadow decisions: %w", err)
	}
	defer rows.Close()
	page, err := sqlkit.ReadShadows(rows, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return page, nil
}
