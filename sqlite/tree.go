package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// ReadHashes returns a tenant's stored tree hashes at tlog storage indexes.
// A proof asks for a few dozen hashes at once; they are read in one query
// (prepared once per count of indexes) rather than one query each.
func (s *Store) ReadHashes(ctx context.Context, tenantID string, indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	out := make([]tlog.Hash, len(indexes))
	var missing []int64
	for i, idx := range indexes {
		if h, ok := s.upper.get(tenantID, idx); ok {
			out[i] = h
		} else {
			missing = append(missing, idx)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	found, err := s.readHashes(ctx, tenantID, missing)
	if err != nil {
		return nil, err
	}
	for i, idx := range indexes {
		if h, ok := found[idx]; ok {
			out[i] = h
			s.upper.put(tenantID, idx, h)
		} else if _, cached := s.upper.get(tenantID, idx); !cached {
			return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("tree hash %d of tenant %s is not stored", idx, tenantID)}
		}
	}
	return out, nil
}

// maxHashRead is the most tree hashes one statement reads: a larger read
// goes in chunks, so every statement hashesStmt prepares is one of at most
// maxHashRead, each kept for the store's life. (A proof of a tree of 2^40
// records needs 80 hashes at most, so a chunk is rare.)
const maxHashRead = 64

// readHashes reads tree hashes from the database, by index.
func (s *Store) readHashes(ctx context.Context, tenantID string, indexes []int64) (map[int64]tlog.Hash, error) {
	found := make(map[int64]tlog.Hash, len(indexes))
	args := make([]any, 0, min(len(indexes), maxHashRead)+1)
	for chunk := range slices.Chunk(indexes, maxHashRead) {
		st, err := s.hashesStmt(len(chunk))
		if err != nil {
			return nil, err
		}
		args = append(args[:0], tenantID)
		for _, idx := range chunk {
			args = append(args, idx)
		}
		if err := s.readHashChunk(ctx, st, tenantID, args, found); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// readHashChunk runs one prepared read of tree hashes into found.
func (s *Store) readHashChunk(ctx context.Context, st *sql.Stmt, tenantID string, args []any, found map[int64]tlog.Hash) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("sqlite: read tree hashes: %w", err)
	}
	defer rows.Close()
	got, err := sqlkit.ReadHashRows(rows, tenantID)
	if err != nil {
		return err
	}
	maps.Copy(found, got)
	return nil
}

// upperCache keeps the tree hashes of the upper levels in memory. Stored
// tree hashes never change, so caching them is always correct; the upper
// levels are few (1/64 of the hashes from level 6 up) and every proof
// needs about as many of them as of the lower ones.
type upperCache struct {
	mu sync.Mutex
	m  map[upperKey]tlog.Hash
}

type upperKey struct {
	tenant string
	idx    int64
}

const (
	upperMinLevel = 6
	upperMax      = 1 << 20 // entries, ~60 MiB at most
)

func (c *upperCache) get(tenant string, idx int64) (tlog.Hash, bool) {
	if level, _ := tlog.SplitStoredHashIndex(idx); level < upperMinLevel {
		return tlog.Hash{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[upperKey{tenant, idx}]
	return h, ok
}

func (c *upperCache) put(tenant string, idx int64, h tlog.Hash) {
	if level, _ := tlog.SplitStoredHashIndex(idx); level < upperMinLevel {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= upperMax {
		c.m = make(map[upperKey]tlog.Hash)
	}
	c.m[upperKey{tenant, idx}] = h
}

// hashesStmt returns the prepared read of n tree hashes (1 ≤ n ≤
// maxHashRead), preparing it on first use.
func (s *Store) hashesStmt(n int) (*sql.Stmt, error) {
	s.hashMu.Lock()
	defer s.hashMu.Unlock()
	if st, ok := s.hashStmts[n]; ok {
		return st, nil
	}
	q := `SELECT idx, hash FROM tree_hashes WHERE tenant_id = ? AND idx IN (?` + strings.Repeat(",?", n-1) + `)`
	st, err := s.read.Prepare(q)
	if err != nil {
		return nil, fmt.Errorf("sqlite: prepare tree hash read: %w", err)
	}
	if s.hashStmts == nil {
		s.hashStmts = map[int]*sql.Stmt{}
	}
	s.hashStmts[n] = st
	return st, nil
}

// PutCheckpoint stores a signed checkpoint; see ledger.Store.
func (s *Store) PutCheckpoint(ctx context.Context, cp *ledger.Checkpoint) (err error) {
	if cp == nil || cp.TenantID == "" || cp.Size < 1 || len(cp.Note) == 0 {
		return &writ.Error{Code: writ.EINVALID, Message: "a checkpoint needs a tenant, a positive size and a signed note"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ledger.ErrClosed
	}
	defer s.explain(&err)
	var root, note []byte
	err = s.write.QueryRowContext(ctx, `SELECT root, note FROM checkpoints WHERE tenant_id = ? AND size = ?`, cp.TenantID, cp.Size).Scan(&root, &note)
	switch {
	case err == nil:
		if bytes.Equal(root, cp.Root[:]) && bytes.Equal(note, cp.Note) {
			return nil
		}
		return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("tenant %s already has a different checkpoint of size %d", cp.TenantID, cp.Size)}
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlite: read checkpoint: %w", err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO checkpoints (tenant_id, size, root, note, issued_ns) VALUES (?, ?, ?, ?, ?)`,
		cp.TenantID, cp.Size, cp.Root[:], cp.Note, cp.IssuedAt.UnixNano()); err != nil {
		return fmt.Errorf("sqlite: store checkpoint: %w", err)
	}
	return nil
}

// Checkpoints lists a tenant's checkpoints by increasing size.
func (s *Store) Checkpoints(ctx context.Context, tenantID string) ([]*ledger.Checkpoint, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT size, root, note, issued_ns FROM checkpoints WHERE tenant_id = ? ORDER BY size`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list checkpoints: %w", err)
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
	return out, rows.Err()
}

// LatestCheckpoint returns the tenant's largest checkpoint, or nil.
func (s *Store) LatestCheckpoint(ctx context.Context, tenantID string) (*ledger.Checkpoint, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT size, root, note, issued_ns FROM checkpoints WHERE tenant_id = ? ORDER BY size DESC LIMIT 1`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: latest checkpoint: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	return scanCheckpoint(rows, tenantID)
}

// CheckpointAt returns the tenant's checkpoint of one size, or ENOTFOUND.
func (s *Store) CheckpointAt(ctx context.Context, tenantID string, size int64) (*ledger.Checkpoint, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT size, root, note, issued_ns FROM checkpoints WHERE tenant_id = ? AND size = ?`, tenantID, size)
	if err != nil {
		return nil, fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("no checkpoint of tree size %d", size)}
	}
	return scanCheckpoint(rows, tenantID)
}

func scanCheckpoint(rows *sql.Rows, tenantID string) (*ledger.Checkpoint, error) {
	cp := &ledger.Checkpoint{TenantID: tenantID}
	var root []byte
	var issued int64
	if err := rows.Scan(&cp.Size, &root, &cp.Note, &issued); err != nil {
		return nil, fmt.Errorf("sqlite: read checkpoint: %w", err)
	}
	if len(root) != tlog.HashSize {
		return nil, fmt.Errorf("sqlite: checkpoint %d of tenant %s has a %d-byte root", cp.Size, tenantID, len(root))
	}
	copy(cp.Root[:], root)
	cp.IssuedAt = time.Unix(0, issued).UTC()
	return cp, nil
}

// ScanHashes returns up to limit of a tenant's stored tree hashes from
// storage index from on, in index order, stopping at the first index not
// stored (so a gap shows as a short page).
func (s *Store) ScanHashes(ctx context.Context, tenantID string, from int64, limit int) ([]tlog.Hash, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT idx, hash FROM tree_hashes WHERE tenant_id = ? AND idx >= ? ORDER BY idx LIMIT ?`, tenantID, from, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: scan tree hashes: %w", err)
	}
	defer rows.Close()
	out := make([]tlog.Hash, 0, min(limit, 1<<14))
	for rows.Next() {
		var idx int64
		var b sql.RawBytes // copied into out below
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, fmt.Errorf("sqlite: scan tree hashes: %w", err)
		}
		if idx != from+int64(len(out)) || len(b) != tlog.HashSize {
			break
		}
		var h tlog.Hash
		copy(h[:], b)
		out = append(out, h)
	}
	return out, rows.Err()
}
