package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/writhq/writ/ledger"
)

var _ ledger.CosignatureStore = (*Store)(nil)

// PutCosignature stores a witness's cosignature; see
// ledger.CosignatureStore.
func (s *Store) PutCosignature(ctx context.Context, c *ledger.Cosignature) (err error) {
	if err := ledger.CheckCosignature(c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ledger.ErrClosed
	}
	defer s.explain(&err)
	if _, err := s.write.ExecContext(ctx, `INSERT INTO cosignatures (tenant_id, size, witness, key_hash, line, cosigned_ns, received_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, size, witness, key_hash) DO NOTHING`,
		c.TenantID, c.Size, c.Witness, int64(c.KeyHash), c.Line, c.CosignedAt.UnixNano(), c.ReceivedAt.UnixNano()); err != nil {
		return fmt.Errorf("sqlite: store cosignature: %w", err)
	}
	return nil
}

const cosignatureColumns = `size, witness, key_hash, line, cosigned_ns, received_ns`

// Cosignatures lists a tenant's cosignatures by size, witness and key
// hash.
func (s *Store) Cosignatures(ctx context.Context, tenantID string) ([]*ledger.Cosignature, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+cosignatureColumns+` FROM cosignatures WHERE tenant_id = ? ORDER BY size, witness, key_hash`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list cosignatures: %w", err)
	}
	defer rows.Close()
	var out []*ledger.Cosignature
	for rows.Next() {
		c, err := scanCosignature(rows, tenantID)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// LatestCosignature returns the cosignature of the tenant's largest
// checkpoint the witness key cosigned, or nil.
func (s *Store) LatestCosignature(ctx context.Context, tenantID, witness string, keyHash uint32) (*ledger.Cosignature, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+cosignatureColumns+` FROM cosignatures
		WHERE tenant_id = ? AND witness = ? AND key_hash = ? ORDER BY size DESC LIMIT 1`, tenantID, witness, int64(keyHash))
	if err != nil {
		return nil, fmt.Errorf("sqlite: latest cosignature: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	return scanCosignature(rows, tenantID)
}

func scanCosignature(rows *sql.Rows, tenantID string) (*ledger.Cosignature, error) {
	c := &ledger.Cosignature{TenantID: tenantID}
	var keyHash, cosigned, received int64
	if err := rows.Scan(&c.Size, &c.Witness, &keyHash, &c.Line, &cosigned, &received); err != nil {
		return nil, fmt.Errorf("sqlite: read cosignature: %w", err)
	}
	c.KeyHash = uint32(keyHash)
	c.CosignedAt, c.ReceivedAt = time.Unix(0, cosigned).UTC(), time.Unix(0, received).UTC()
	return c, nil
}
