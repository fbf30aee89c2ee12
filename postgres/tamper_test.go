package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
)

// tamperer edits a store's tables directly with their append-only
// triggers bypassed (session_replication_role = replica), as a database
// superuser could.
type tamperer struct{ dsn string }

func (tm tamperer) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	ctx := t.Context()
	c, err := pgx.Connect(ctx, tm.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("%s changed %d rows, want 1", q, tag.RowsAffected())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func (tm tamperer) SetReceipt(t *testing.T, tenant, recordID string, receipt []byte) {
	tm.exec(t, `UPDATE records SET receipt = $1 WHERE tenant_id = $2 AND record_id = $3`, receipt, tenant, recordID)
}

func (tm tamperer) SetBlob(t *testing.T, hash string, data []byte) {
	tm.exec(t, `UPDATE blobs SET data = $1 WHERE hash = $2`, data, hash)
}

func (tm tamperer) SetEnvelope(t *testing.T, tenant string, seq int64, hash string, data []byte) {
	tm.exec(t, `UPDATE envelopes SET hash = $1, data = $2 WHERE tenant_id = $3 AND seq = $4`, hash, data, tenant, seq)
}

func (tm tamperer) SetRunEventData(t *testing.T, tenant, runID string, seq int64, data []byte) {
	tm.exec(t, `UPDATE run_events SET data = $1 WHERE tenant_id = $2 AND run_id = $3 AND seq = $4`, data, tenant, runID, seq)
}

func (tm tamperer) DeleteRunEvent(t *testing.T, tenant, runID string, seq int64) {
	tm.exec(t, `DELETE FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq = $3`, tenant, runID, seq)
}

func (tm tamperer) SetApprovalEventReason(t *testing.T, tenant, approvalID string, seq int64, reason string) {
	tm.exec(t, `UPDATE approval_events SET reason = $1 WHERE tenant_id = $2 AND approval_id = $3 AND seq = $4`, reason, tenant, approvalID, seq)
}

func (tm tamperer) SetApprovalRequest(t *testing.T, tenant, approvalID string, doc []byte) {
	tm.exec(t, `UPDATE approval_requests SET request = $1 WHERE tenant_id = $2 AND approval_id = $3`, doc, tenant, approvalID)
}

func (tm tamperer) SetShadowOutcome(t *testing.T, tenant, recordID, outcome string) {
	tm.exec(t, `UPDATE shadow_decisions SET outcome = $1 WHERE tenant_id = $2 AND record_id = $3`, outcome, tenant, recordID)
}

func (tm tamperer) SetApprovalColumn(t *testing.T, tenant, approvalID, column string, value any) {
	tm.exec(t, `UPDATE approval_requests SET `+column+` = $1 WHERE tenant_id = $2 AND approval_id = $3`, value, tenant, approvalID)
}

// TestTamper: an edit to a receipt, a blob, a run event or an approval
// request or event, made behind writ's back, is a named finding, and a
// tampered receipt fails the check before it is answered again.
func TestTamper(t *testing.T) {
	testDSN(t)
	t.Parallel()
	ledgertest.RunTamper(t, func(t *testing.T) (ledger.Store, ledgertest.Tamperer) {
		dsn := testSchema(t)
		return openStore(t, dsn), tamperer{dsn}
	})
}

func (tm tamperer) SetAPIKeyColumn(t *testing.T, keyID, column string, value any) {
	tm.exec(t, `UPDATE api_keys SET `+column+` = $1 WHERE key_id = $2`, value, keyID)
}

func (tm tamperer) DeleteAPIKeySignature(t *testing.T, keyID string) {
	tm.exec(t, `DELETE FROM api_key_signatures WHERE key_id = $1`, keyID)
}

func (tm tamperer) SetRevocationColumn(t *testing.T, keyID, column string, value any) {
	tm.exec(t, `UPDATE api_key_revocations SET `+column+` = $1 WHERE key_id = $2`, value, keyID)
}

func (tm tamperer) DeleteRevocation(t *testing.T, keyID string) {
	tm.exec(t, `DELETE FROM api_key_revocations WHERE key_id = $1`, keyID)
}

func (tm tamperer) InsertRevocation(t *testing.T, keyID string, revokedNS, headSeq int64) {
	tm.exec(t, `INSERT INTO api_key_revocations (key_id, revoked_ns, head_seq) VALUES ($1, $2, $3)`, keyID, revokedNS, headSeq)
}

func (tm tamperer) DeleteAPIKey(t *testing.T, keyID string) {
	tm.exec(t, `DELETE FROM api_keys WHERE key_id = $1`, keyID)
}

func (tm tamperer) SetClaimColumn(t *testing.T, table, tenantID, recordID, column string, value any) {
	tm.exec(t, `UPDATE `+table+` SET `+column+` = $1 WHERE tenant_id = $2 AND record_id = $3`, value, tenantID, recordID)
}

func (tm tamperer) DeleteClaim(t *testing.T, table, tenantID, recordID string) {
	tm.exec(t, `DELETE FROM `+table+` WHERE tenant_id = $1 AND record_id = $2`, tenantID, recordID)
}

// TestKeyTamper: an API key added, changed or stripped of its signature
// behind writ's back is a named finding and opens nothing.
func TestKeyTamper(t *testing.T) {
	testDSN(t)
	t.Parallel()
	ledgertest.RunKeyTamper(t, func(t *testing.T) (ledger.Store, ledgertest.KeyTamperer) {
		dsn := testSchema(t)
		return openStore(t, dsn), tamperer{dsn}
	})
}

// TestRevocationTamper: an API key revocation deleted, moved or forged
// behind writ's back no longer matches the checkpoints that commit to it.
func TestRevocationTamper(t *testing.T) {
	testDSN(t)
	t.Parallel()
	ledgertest.RunRevocationTamper(t, func(t *testing.T) (ledger.Store, ledgertest.RevocationTamperer) {
		dsn := testSchema(t)
		return openStore(t, dsn), tamperer{dsn}
	})
}
