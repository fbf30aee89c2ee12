package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/ledger"
)

var _ auth.Store = (*Store)(nil)

// PutAPIKey stores a new API key; see auth.Store.
func (s *Store) PutAPIKey(ctx context.Context, k *auth.Key) error {
	switch {
	case k == nil || k.ID == "" || k.TenantID == "" || k.SecretHash == "":
		return &writ.Error{Code: writ.EINVALID, Message: "an API key needs an id, a tenant and a secret hash"}
	case k.CreatedAt.Before(ledger.MinTime) || k.CreatedAt.After(ledger.MaxTime):
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("API key %s: creation time %s is out of range", k.ID, k.CreatedAt)}
	case k.ExpiresAt != nil && (!k.ExpiresAt.After(k.CreatedAt) || k.ExpiresAt.After(ledger.MaxTime)):
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("API key %s: expiry time %s is not after its creation time or is out of range", k.ID, k.ExpiresAt)}
	}
	roles, err := json.Marshal(k.Roles)
	if err != nil {
		return fmt.Errorf("postgres: API key %s: %w", k.ID, err)
	}
	if k.SignedBy != "" || len(k.Signature) > 0 {
		if err := ledger.CheckKeySignature(k); err != nil {
			return err
		}
	}
	actorType, actsFor, err := ledger.KeyActorColumns(k)
	if err != nil {
		return err
	}
	// One statement: the key and, if it is signed, its signature.
	var inserted bool
	err = s.pool.QueryRow(ctx, `WITH k AS (
			INSERT INTO api_keys (key_id, tenant_id, subject, roles, secret_hash, created_ns, expires_ns, actor_type, acts_for) VALUES ($1, $2, $3, $4, $5, $6, $10, $11, $12)
			ON CONFLICT (key_id) DO NOTHING RETURNING key_id),
		s AS (INSERT INTO api_key_signatures (key_id, signed_by, signed_ns, signature)
			SELECT key_id, $7, $8, $9 FROM k WHERE $7::text <> '')
		SELECT EXISTS (SELECT 1 FROM k)`,
		k.ID, k.TenantID, k.Subject, string(roles), k.SecretHash, k.CreatedAt.UnixNano(), k.SignedBy, k.SignedAt.UnixNano(), k.Signature, expiresNS(k), actorType, actsFor).Scan(&inserted)
	if err != nil {
		return fmt.Errorf("postgres: put API key: %w", err)
	}
	if !inserted {
		return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("API key %s already exists", k.ID)}
	}
	return nil
}

// SignAPIKey stores the signature of a key stored without one; see
// auth.Store.
func (s *Store) SignAPIKey(ctx context.Context, k *auth.Key) error {
	if err := ledger.CheckKeySignature(k); err != nil {
		return err
	}
	var exists, signed bool
	err := s.pool.QueryRow(ctx, `WITH k AS (SELECT key_id FROM api_keys WHERE key_id = $1),
		s AS (INSERT INTO api_key_signatures (key_id, signed_by, signed_ns, signature) SELECT key_id, $2, $3, $4 FROM k
			ON CONFLICT (key_id) DO NOTHING RETURNING key_id)
		SELECT EXISTS (SELECT 1 FROM k), EXISTS (SELECT 1 FROM s)`, k.ID, k.SignedBy, k.SignedAt.UnixNano(), k.Signature).Scan(&exists, &signed)
	switch {
	case err != nil:
		return fmt.Errorf("postgres: sign API key: %w", err)
	case !exists:
		return &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("API key %q not found", k.ID)}
	case !signed:
		return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("API key %s is signed already", k.ID)}
	}
	return nil
}

// keyColumns selects a key, its expiry, its revocation (and where it stands in the chain) and its signature, as scanKeys reads them.
const keyColumns = `SELECT k.key_id, k.tenant_id, k.subject, k.roles, k.secret_hash, k.created_ns, k.expires_ns, k.actor_type, k.acts_for, r.revoked_ns, r.head_seq,
		s.signed_by, s.signed_ns, s.signature
	FROM api_keys k LEFT JOIN api_key_revocations r ON r.key_id = k.key_id LEFT JOIN api_key_signatures s ON s.key_id = k.key_id`

// APIKey returns an API key by id, revoked or not; see auth.Store.
func (s *Store) APIKey(ctx context.Context, id string) (*auth.Key, error) {
	rows, err := s.pool.Query(ctx, keyColumns+` WHERE k.key_id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("postgres: read API key: %w", err)
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
	var rows pgx.Rows
	var err error
	if tenantID == "" {
		rows, err = s.pool.Query(ctx, keyColumns+` ORDER BY k.created_ns, k.key_id`)
	} else {
		rows, err = s.pool.Query(ctx, keyColumns+` WHERE k.tenant_id = $1 ORDER BY k.created_ns, k.key_id`, tenantID)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: list API keys: %w", err)
	}
	return scanKeys(rows)
}

func scanKeys(rows pgx.Rows) ([]*auth.Key, error) {
	defer rows.Close()
	keys := []*auth.Key{}
	for rows.Next() {
		var k auth.Key
		var roles string
		var created int64
		var expires, revoked, signedNS *int64
		var signedBy, actorType, actsFor *string
		if err := rows.Scan(&k.ID, &k.TenantID, &k.Subject, &roles, &k.SecretHash, &created, &expires, &actorType, &actsFor, &revoked, &k.RevokedAfter, &signedBy, &signedNS, &k.Signature); err != nil {
			return nil, fmt.Errorf("postgres: read API keys: %w", err)
		}
		var at, af string
		if actorType != nil {
			at = *actorType
		}
		if actsFor != nil {
			af = *actsFor
		}
		if err := ledger.ScanKeyActor(&k, at, af); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if err := json.Unmarshal([]byte(roles), &k.Roles); err != nil {
			return nil, fmt.Errorf("postgres: API key %s: roles: %w", k.ID, err)
		}
		k.CreatedAt = time.Unix(0, created).UTC()
		if expires != nil {
			at := time.Unix(0, *expires).UTC()
			k.ExpiresAt = &at
		}
		if revoked != nil {
			at := time.Unix(0, *revoked).UTC()
			k.RevokedAt = &at
		}
		if signedBy != nil && signedNS != nil {
			k.SignedBy, k.SignedAt = *signedBy, time.Unix(0, *signedNS).UTC()
		}
		keys = append(keys, &k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read API keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKey revokes an API key from at on; see auth.Store. The first
// revocation stays: revoking again changes nothing. The revocation is
// placed after the tenant's chain head, read under a share lock on it:
// appends lock the head for update, so none commits a record between the
// read and the revocation's commit, and a checkpoint of a larger tree
// always sees the revocation.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	if at.Before(ledger.MinTime) || at.After(ledger.MaxTime) {
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("revocation time %s is out of range", at)}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var tenant string
		err := tx.QueryRow(ctx, `SELECT tenant_id FROM api_keys WHERE key_id = $1`, id).Scan(&tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("API key %q not found", id)}
		}
		if err != nil {
			return err
		}
		// A tenant with no record yet gets the head at seq 0 that its
		// first append would create, so that there is a row to lock.
		if _, err := tx.Exec(ctx, `INSERT INTO heads (tenant_id, seq, hash) VALUES ($1, 0, '') ON CONFLICT (tenant_id) DO NOTHING`, tenant); err != nil {
			return err
		}
		var head int64
		if err := tx.QueryRow(ctx, `SELECT seq FROM heads WHERE tenant_id = $1 FOR SHARE`, tenant).Scan(&head); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO api_key_revocations (key_id, revoked_ns, head_seq) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING`, id, at.UnixNano(), head)
		return err
	})
	var we *writ.Error
	if err != nil && !errors.As(err, &we) {
		return fmt.Errorf("postgres: revoke API key: %w", err)
	}
	return err
}

// expiresNS is k's expiry as stored: nanoseconds, or NULL for none.
func expiresNS(k *auth.Key) *int64 {
	if k.ExpiresAt == nil {
		return nil
	}
	ns := k.ExpiresAt.UnixNano()
	return &ns
}
