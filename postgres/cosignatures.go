package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ/ledger"
)

var _ ledger.CosignatureStore = (*Store)(nil)

// PutCosignature stores a witness's cosignature; see
// ledger.CosignatureStore. Servers storing one of the same checkpoint
// and witness key at once are decided by the primary key: the first
// insert is kept.
func (s *Store) PutCosignature(ctx context.Context, c *ledger.Cosignature) error {
	if err := ledger.CheckCosignature(c); err != nil {
		return err
	}
	if s.closed.Load() {
		return ledger.ErrClosed
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO cosignatures (tenant_id, size, witness, key_hash, line, cosigned_ns, received_ns)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id, size, witness, key_hash) DO NOTHING`,
		c.TenantID, c.Size, c.Witness, int64(c.KeyHash), c.Line, c.CosignedAt.UnixNano(), c.ReceivedAt.UnixNano()); err != nil {
		return fmt.Errorf("postgres: store cosignature: %w", err)
	}
	return nil
}

const cosignatureColumns = `size, witness, key_hash, line, cosigned_ns, received_ns`

// Cosignatures lists a tenant's cosignatures by size, witness and key
// hash.
func (s *Store) Cosignatures(ctx context.Context, tenantID string) ([]*ledger.Cosignature, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+cosignatureColumns+` FROM cosignatures WHERE tenant_id = $1
		ORDER BY size, witness COLLATE "C", key_hash`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list cosignatures: %w", err)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list cosignatures: %w", err)
	}
	return out, nil
}

// LatestCosignature returns the cosignature of the tenant's largest
// checkpoint the witness key cosigned, or nil.
func (s *Store) LatestCosignature(ctx context.Context, tenantID, witness string, keyHash uint32) (*ledger.Cosignature, error) {
	c, err := scanCosignature(s.pool.QueryRow(ctx, `SELECT `+cosignatureColumns+` FROM cosignatures
		WHERE tenant_id = $1 AND witness = $2 AND key_hash = $3 ORDER BY size DESC LIMIT 1`, tenantID, witness, int64(keyHash)), tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return c, err
}

func scanCosignature(row pgx.Row, tenantID string) (*ledger.Cosignature, error) {
	c := &ledger.Cosignature{TenantID: tenantID}
	var keyHash, cosigned, received int64
	if err := row.Scan(&c.Size, &c.Witness, &keyHash, &c.Line, &cosigned, &received); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: read cosignature: %w", err)
	}
	c.KeyHash = uint32(keyHash)
	c.CosignedAt, c.ReceivedAt = time.Unix(0, cosigned).UTC(), time.Unix(0, received).UTC()
	return c, nil
}
