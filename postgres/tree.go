package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadHashes returns a tenant's stored tree hashes at tlog storage indexes,
// in one query.
func (s *Store) ReadHashes(ctx context.Context, tenantID string, indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	found, err := readHashes(ctx, s.pool, tenantID, indexes)
	if err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := found[idx]
		if !ok {
			return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("tree hash %d of tenant %s is not stored", idx, tenantID)}
		}
		out[i] = h
	}
	return out, nil
}

// readHashes reads tree hashes by index; indexes not stored are absent
// from the map.
func readHashes(ctx context.Context, q querier, tenantID string, indexes []int64) (map[int64]tlog.Hash, error) {
	rows, err := q.Query(ctx, `SELECT idx, hash FROM tree_hashes WHERE tenant_id = $1 AND idx = ANY($2::bigint[])`, tenantID, indexes)
	if err != nil {
		return nil, fmt.Errorf("postgres: read tree hashes: %w", err)
	}
	defer rows.Close()
	return sqlkit.ReadHashRows(rows, tenantID)
}

// ScanHashes returns up to limit of a tenant's stored tree hashes from
// storage index from on, in index order, stopping at the first index not
// stored (so a gap shows as a short page).
func (s *Store) ScanHashes(ctx context.Context, tenantID string, from int64, limit int) ([]tlog.Hash, error) {
	rows, err := s.pool.Query(ctx, `SELECT idx, hash FROM tree_hashes WHERE tenant_id = $1 AND idx >= $2 ORDER BY idx LIMIT $3`, tenantID, from, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: scan tree hashes: %w", err)
	}
	defer rows.Close()
	out := make([]tlog.Hash, 0, min(limit, 1<<14))
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, fmt.Errorf("postgres: scan tree hashes: %w", err)
		}
		if idx != from+int64(len(out)) || len(b) != tlog.HashSize {
			break
		}
		out = append(out, tlog.Hash(b))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: scan tree hashes: %w", err)
	}
	return out, nil
}

// PutCheckpoint stores a signed checkpoint; see ledger.Store. Servers
// storing checkpoints of the same size at once are decided by the primary
// key: one insert wins, the others compare with it.
func (s *Store) PutCheckpoint(ctx context.Context, cp *ledger.Checkpoint) error {
	if cp == nil || cp.TenantID == "" || cp.Size < 1 || len(cp.Note) == 0 {
		return &writ.Error{Code: writ.EINVALID, Message: "a checkpoint needs a tenant, a positive size and a signed note"}
	}
	if s.closed.Load() {
		return ledger.ErrClosed
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO checkpoints (tenant_id, size, root, note, issued_ns) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant_id, size) DO NOTHING`, cp.TenantID, cp.Size, cp.Root[:], cp.Note, cp.IssuedAt.UnixNano())
	if err != nil {
		return fmt.Errorf("postgres: store checkpoint: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var root, note []byte
	err = s.pool.QueryRow(ctx, `SELECT root, note FROM checkpoints WHERE tenant_id = $1 AND size = $2`, cp.TenantID, cp.Size).Scan(&root, &note)
	if err != nil {
		return fmt.Errorf("postgres: read checkpoint: %w", err)
	}
	if bytes.Equal(root, cp.Root[:]) && bytes.Equal(note, cp.Note) {
		return nil
	}
	return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("tenant %s already has a different checkpoint of size %d", cp.TenantID, cp.Size)}
}

// Checkpoints lists a tenant's checkpoints by increasing size.
func (s *Store) Checkpoints(ctx context.Context, tenantID string) ([]*ledger.Checkpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT size, root, note, issued_ns FROM checkpoints WHERE tenant_id = $1 ORDER BY size`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list checkpoints: %w", err)
	}
	defer rows.Close()
	var out []*ledger.Checkpoint
	for rows.Next() {
		cp, err := scanCheckpoint(rows, tenantID)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list checkpoints: %w", err)
	}
	return out, nil
}

// LatestCheckpoint returns the tenant's largest checkpoint, or nil.
func (s *Store) LatestCheckpoint(ctx context.Context, tenantID string) (*ledger.Checkpoint, error) {
	cp, err := scanCheckpoint(s.pool.QueryRow(ctx, `SELECT size, root, note, issued_ns FROM checkpoints WHERE tenant_id = $1 ORDER BY size DESC LIMIT 1`, tenantID), tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return cp, err
}

// CheckpointAt returns the tenant's checkpoint of one size, or ENOTFOUND.
func (s *Store) CheckpointAt(ctx context.Context, tenantID string, size int64) (*ledger.Checkpoint, error) {
	cp, err := scanCheckpoint(s.pool.QueryRow(ctx, `SELECT size, root, note, issued_ns FROM checkpoints WHERE tenant_id = $1 AND size = $2`, tenantID, size), tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("no checkpoint of tree size %d", size)}
	}
	return cp, err
}

func scanCheckpoint(row pgx.Row, tenantID string) (*ledger.Checkpoint, error) {
	cp := &ledger.Checkpoint{TenantID: tenantID}
	var root []byte
	var issued int64
	if err := row.Scan(&cp.Size, &root, &cp.Note, &issued); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: read checkpoint: %w", err)
	}
	if len(root) != tlog.HashSize {
		return nil, fmt.Errorf("postgres: checkpoint %d of tenant %s has a %d-byte root", cp.Size, tenantID, len(root))
	}
	cp.Root = tlog.Hash(root)
	cp.IssuedAt = time.Unix(0, issued).UTC()
	return cp, nil
}
