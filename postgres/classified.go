package postgres

import (
	"context"
	"fmt"

	"github.com/writhq/writ/ledger"
)

var _ ledger.ClassifiedStore = (*Store)(nil)

// ClassifiedValues returns the tenant's stored classified values of refs;
// see ledger.ClassifiedStore.
func (s *Store) ClassifiedValues(ctx context.Context, tenantID string, refs []string) (map[string]ledger.ClassifiedValue, error) {
	out := make(map[string]ledger.ClassifiedValue, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT ref, rule_id, classification, salt, value, record_id FROM classified_values
		WHERE tenant_id = $1 AND ref = ANY($2::text[])`, tenantID, refs)
	if err != nil {
		return nil, fmt.Errorf("postgres: read classified values: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		v := ledger.ClassifiedValue{TenantID: tenantID}
		if err := rows.Scan(&v.Ref, &v.Rule, &v.Classification, &v.Salt, &v.Value, &v.RecordID); err != nil {
			return nil, fmt.Errorf("postgres: read classified values: %w", err)
		}
		out[v.Ref] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read classified values: %w", err)
	}
	return out, nil
}

// ClassifiedRefs returns the references of the tenant's stored values
// linked to a subject; see ledger.ClassifiedStore.
func (s *Store) ClassifiedRefs(ctx context.Context, tenantID, subjectID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT s.ref FROM classified_subjects s
		JOIN classified_values v ON v.tenant_id = s.tenant_id AND v.ref = s.ref
		WHERE s.tenant_id = $1 AND s.subject_id = $2 ORDER BY s.pos`, tenantID, subjectID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list classified values: %w", err)
	}
	defer rows.Close()
	var refs []string
	seen := map[string]bool{}
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			return nil, fmt.Errorf("postgres: list classified values: %w", err)
		}
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list classified values: %w", err)
	}
	return refs, nil
}
