package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/writhq/writ/ledger"
)

var _ ledger.ClassifiedStore = (*Store)(nil)

// ClassifiedValues returns the tenant's stored classified values of refs;
// see ledger.ClassifiedStore.
func (s *Store) ClassifiedValues(ctx context.Context, tenantID string, refs []string) (map[string]ledger.ClassifiedValue, error) {
	out := make(map[string]ledger.ClassifiedValue, len(refs))
	for _, ref := range refs {
		if _, ok := out[ref]; ok {
			continue
		}
		v := ledger.ClassifiedValue{TenantID: tenantID}
		err := s.read.QueryRowContext(ctx, `SELECT ref, rule_id, classification, salt, value, record_id FROM classified_values
			WHERE tenant_id = ? AND ref = ?`, tenantID, ref).Scan(&v.Ref, &v.Rule, &v.Classification, &v.Salt, &v.Value, &v.RecordID)
		if isNoRows(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("sqlite: read classified value: %w", err)
		}
		out[ref] = v
	}
	return out, nil
}

// ClassifiedRefs returns the references of the tenant's stored values
// linked to a subject; see ledger.ClassifiedStore.
func (s *Store) ClassifiedRefs(ctx context.Context, tenantID, subjectID string) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT s.ref FROM classified_subjects s
		JOIN classified_values v ON v.tenant_id = s.tenant_id AND v.ref = s.ref
		WHERE s.tenant_id = ? AND s.subject_id = ? ORDER BY s.pos`, tenantID, subjectID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list classified values: %w", err)
	}
	defer rows.Close()
	var refs []string
	seen := map[string]bool{}
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			return nil, fmt.Errorf("sqlite: list classified values: %w", err)
		}
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list classified values: %w", err)
	}
	return refs, nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
