package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/ledger"
)

var _ auth.Store = (*Store)(nil)

// PutAPIKey stores a new API key; see auth.Store.
func (s *Store) PutAPIKey(ctx context.Context, k *auth.Key) (err error) {
	switch {
	case k == nil || k.ID == "" || k.TenantID == "" || k.SecretHash == "":
		return &writ.Error{Code: writ.EINVALID, Message: "an API key needs an id, a tenant and a secret hash"}
	case k.CreatedAt.Before(ledger.MinTime) || k.CreatedAt.After(ledger.MaxTime):
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("API key %s: creation time %s is out of range", k.ID, k.CreatedAt)}
	case k.ExpiresAt != nil && (!k.ExpiresAt.After(k.CreatedAt) || k.ExpiresAt.After(ledger.MaxTime)):
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("API key %s: expiry time %s is not after its creation time or is out of range", k.ID, k.ExpiresAt)}
	}
	if k.SignedBy != "" || len(k.Signature) > 0 {
		if err := ledger.CheckKeySignature(k); err != nil {
			return err
		}
	}
	roles, err := json.Marshal(k.Roles)
	if err != nil {
		return fmt.Errorf("sqlite: API key %s: %w", k.ID, err)
	}
	actorType, actsFor, err := ledger.KeyActorColumns(k)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, "put API key", func(tx *sql.Tx) error {
		// The transaction holds the write lock from BEGIN, so nothing comes
		// between the look and the insert.
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys WHERE key_id = ?)`, k.ID).Scan(&exists); err != nil {
			return fmt.Errorf("sqlite: put API key: %w", err)
		}
		if exists {
			return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("API key %s already exists", k.ID)}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO api_keys (key_id, tenant_id, subject, roles, secret_hash, created_ns, expires_ns, actor_type, acts_for) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.TenantID, k.Subject, string(roles), k.SecretHash, k.CreatedAt.UnixNano(), expiresNS(k), actorType, actsFor); err != nil {
			return fmt.Errorf("sqlite: put API key: %w", err)
		}
		if k.SignedBy == "" {
			return nil
		}
		return insertKeySignature(ctx, tx, k)
	})
}

// SignAPIKey stores the signature of a key stored without one; see
// auth.Store.
func (s *Store) SignAPIKey(ctx context.Context, k *auth.Key) error {
	if err := ledger.CheckKeySignature(k); err != nil {
		return err
	}
	return s.writeTx(ctx, "sign API key", func(tx *sql.Tx) error {
		var exists, signed bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys WHERE key_id = ?), EXISTS (SELECT 1 FROM api_key_signatures WHERE key_id = ?)`,
			k.ID, k.ID).Scan(&exists, &signed); err != nil {
			return fmt.Errorf("sqlite: sign API key: %w", err)
		}
		switch {
		case !exists:
			return &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("API key %q not found", k.ID)}
		case signed:
			return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("API key %s is signed already", k.ID)}
		}
		return insertKeySignature(ctx, tx, k)
	})
}

func insertKeySignature(ctx context.Context, tx *sql.Tx, k *auth.Key) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO api_key_signatures (key_id, signed_by, signed_ns, signature) VALUES (?, ?, ?, ?)`,
		k.ID, k.SignedBy, k.SignedAt.UnixNano(), k.Signature); err != nil {
		return fmt.Errorf("sqlite: store the signature of API key %s: %w", k.ID, err)
	}
	return nil
}

// keyColumns selects a key, its expiry, its revocation (and where it stands in the chain) and its signature, as scanKey reads them.
const keyColumns = `SELECT k.key_id, k.tenant_id, k.subject, k.roles, k.secret_hash, k.created_ns, k.expires_ns, k.actor_type, k.acts_for, r.revoked_ns, r.head_seq,
		s.signed_by, s.signed_ns, s.signature
	FROM api_keys k LEFT JOIN api_key_revocations r ON r.key_id = k.key_id LEFT JOIN api_key_signatures s ON s.key_id = k.key_id`

// APIKey returns an API key by id, revoked or not; see auth.Store.
func (s *Store) APIKey(ctx context.Context, id string) (*auth.Key, error) {
	rows, err := s.reads.apiKey.QueryContext(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read API key: %w", err)
	}
	keys, err := scanKeys(rows)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("API key %q not found", id)}
	}
	return keys[0], nil
}

// APIKeys lists the API keys of a tenant, or of every tenant for "",
// oldest first; see auth.Store.
func (s *Store) APIKeys(ctx context.Context, tenantID string) ([]*auth.Key, error) {
	var rows *sql.Rows
	var err error
	if tenantID == "" {
		rows, err = s.read.QueryContext(ctx, keyColumns+` ORDER BY k.created_ns, k.key_id`)
	} else {
		rows, err = s.read.QueryContext(ctx, keyColumns+` WHERE k.tenant_id = ? ORDER BY k.created_ns, k.key_id`, tenantID)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: list API keys: %w", err)
	}
	return scanKeys(rows)
}

func scanKeys(rows *sql.Rows) ([]*auth.Key, error) {
	defer rows.Close()
	keys := []*auth.Key{}
	for rows.Next() {
		var k auth.Key
		var roles string
		var created int64
		var expires, revoked, revokedAfter, signedNS sql.NullInt64
		var signedBy, actorType, actsFor sql.NullString
		if err := rows.Scan(&k.ID, &k.TenantID, &k.Subject, &roles, &k.SecretHash, &created, &expires, &actorType, &actsFor, &revoked, &revokedAfter, &signedBy, &signedNS, &k.Signature); err != nil {
			return nil, fmt.Errorf("sqlite: read API keys: %w", err)
		}
		if err := ledger.ScanKeyActor(&k, actorType.String, actsFor.String); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
		if err := json.Unmarshal([]byte(roles), &k.Roles); err != nil {
			return nil, fmt.Errorf("sqlite: API key %s: roles: %w", k.ID, err)
		}
		k.CreatedAt = time.Unix(0, created).UTC()
		if expires.Valid {
			at := time.Unix(0, expires.Int64).UTC()
			k.ExpiresAt = &at
		}
		if revoked.Valid {
			at := time.Unix(0, revoked.Int64).UTC()
			k.RevokedAt = &at
		}
		if revokedAfter.Valid {
			k.RevokedAfter = &revokedAfter.Int64
		}
		if signedBy.Valid {
			k.SignedBy, k.SignedAt = signedBy.String, time.Unix(0, signedNS.Int64).UTC()
		}
		keys = append(keys, &k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read API keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKey revokes an API key from at on; see auth.Store. The first
// revocation stays: revoking again changes nothing. The revocation is
// placed after the tenant's chain head: the write transaction holds the
// database's write lock, so no record is appended meanwhile.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) (err error) {
	if at.Before(ledger.MinTime) || at.After(ledger.MaxTime) {
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("revocation time %s is out of range", at)}
	}
	return s.writeTx(ctx, "revoke API key", func(tx *sql.Tx) error {
		var tenant string
		var head int64
		err := tx.QueryRowContext(ctx, `SELECT k.tenant_id, coalesce(h.seq, 0) FROM api_keys k LEFT JOIN heads h ON h.tenant_id = k.tenant_id WHERE k.key_id = ?`, id).
			Scan(&tenant, &head)
		if errors.Is(err, sql.ErrNoRows) {
			return &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("API key %q not found", id)}
		}
		if err != nil {
			return fmt.Errorf("sqlite: revoke API key: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO api_key_revocations (key_id, revoked_ns, head_seq) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, id, at.UnixNano(), head); err != nil {
			return fmt.Errorf("sqlite: revoke API key: %w", err)
		}
		return nil
	})
}

// expiresNS is k's expiry as stored: nanoseconds, or NULL for none.
func expiresNS(k *auth.Key) sql.NullInt64 {
	if k.ExpiresAt == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: k.ExpiresAt.UnixNano(), Valid: true}
}
