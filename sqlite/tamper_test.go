package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
)

// tamperer edits a store's database file directly, its append-only
// triggers dropped, as someone with write access to the file would.
type tamperer struct{ path string }

func (tm tamperer) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", tm.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'trigger'`)
	if err != nil {
		t.Fatal(err)
	}
	var triggers []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		triggers = append(triggers, name)
	}
	rows.Close()
	for _, tr := range triggers {
		if _, err := db.Exec(`DROP TRIGGER ` + tr); err != nil {
			t.Fatalf("DROP TRIGGER %s: %v", tr, err)
		}
	}
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s changed %d rows, want 1", q, n)
	}
}

func (tm tamperer) SetReceipt(t *testing.T, tenant, recordID string, receipt []byte) {
	tm.exec(t, `UPDATE records SET receipt = ? WHERE tenant_id = ? AND record_id = ?`, receipt, tenant, recordID)
}

func (tm tamperer) SetBlob(t *testing.T, hash string, data []byte) {
	tm.exec(t, `UPDATE blobs SET data = ? WHERE hash = ?`, data, hash)
}

func (tm tamperer) SetEnvelope(t *testing.T, tenant string, seq int64, hash string, data []byte) {
	tm.exec(t, `UPDATE envelopes SET hash = ?, data = ? WHERE tenant_id = ? AND seq = ?`, hash, data, tenant, seq)
}

func (tm tamperer) SetRunEventData(t *testing.T, tenant, runID string, seq int64, data []byte) {
	tm.exec(t, `UPDATE run_events SET data = ? WHERE tenant_id = ? AND run_id = ? AND seq = ?`, data, tenant, runID, seq)
}

func (tm tamperer) DeleteRunEvent(t *testing.T, tenant, runID string, seq int64) {
	tm.exec(t, `DELETE FROM run_events WHERE tenant_id = ? AND run_id = ? AND seq = ?`, tenant, runID, seq)
}

func (tm tamperer) SetApprovalEventReason(t *testing.T, tenant, approvalID string, seq int64, reason string) {
	tm.exec(t, `UPDATE approval_events SET reason = ? WHERE tenant_id = ? AND approval_id = ? AND seq = ?`, reason, tenant, approvalID, seq)
}

func (tm tamperer) SetApprovalRequest(t *testing.T, tenant, approvalID string, doc []byte) {
	tm.exec(t, `UPDATE approval_requests SET request = ? WHERE tenant_id = ? AND approval_id = ?`, doc, tenant, approvalID)
}

func (tm tamperer) SetShadowOutcome(t *testing.T, tenant, recordID, outcome string) {
	tm.exec(t, `UPDATE shadow_decisions SET outcome = ? WHERE tenant_id = ? AND record_id = ?`, outcome, tenant, recordID)
}

func (tm tamperer) SetApprovalColumn(t *testing.T, tenant, approvalID, column string, value any) {
	tm.exec(t, `UPDATE approval_requests SET `+column+` = ? WHERE tenant_id = ? AND approval_id = ?`, value, tenant, approvalID)
}

// TestTamper: an edit to a receipt, a blob, a run event or an approval
// request or event, made behind writ's back, is a named finding, and a
// tampered receipt fails the check before it is answered again.
func TestTamper(t *testing.T) {
	ledgertest.RunTamper(t, func(t *testing.T) (ledger.Store, ledgertest.Tamperer) {
		dir := t.TempDir()
		return mustOpen(t, dir), tamperer{filepath.Join(dir, "writ.db")}
	})
}

func (tm tamperer) SetAPIKeyColumn(t *testing.T, keyID, column string, value any) {
	tm.exec(t, `UPDATE api_keys SET `+column+` = ? WHERE key_id = ?`, value, keyID)
}

func (tm tamperer) DeleteAPIKeySignature(t *testing.T, keyID string) {
	tm.exec(t, `DELETE FROM api_key_signatures WHERE key_id = ?`, keyID)
}

func (tm tamperer) SetRevocationColumn(t *testing.T, keyID, column string, value any) {
	tm.exec(t, `UPDATE api_key_revocations SET `+column+` = ? WHERE key_id = ?`, value, keyID)
}

func (tm tamperer) DeleteRevocation(t *testing.T, keyID string) {
	tm.exec(t, `DELETE FROM api_key_revocations WHERE key_id = ?`, keyID)
}

func (tm tamperer) InsertRevocation(t *testing.T, keyID string, revokedNS, headSeq int64) {
	tm.exec(t, `INSERT INTO api_key_revocations (key_id, revoked_ns, head_seq) VALUES (?, ?, ?)`, keyID, revokedNS, headSeq)
}

func (tm tamperer) DeleteAPIKey(t *testing.T, keyID string) {
	tm.exec(t, `DELETE FROM api_keys WHERE key_id = ?`, keyID)
}

func (tm tamperer) SetClaimColumn(t *testing.T, table, tenantID, recordID, column string, value any) {
	tm.exec(t, `UPDATE `+table+` SET `+column+` = ? WHERE tenant_id = ? AND record_id = ?`, value, tenantID, recordID)
}

func (tm tamperer) DeleteClaim(t *testing.T, table, tenantID, recordID string) {
	tm.exec(t, `DELETE FROM `+table+` WHERE tenant_id = ? AND record_id = ?`, tenantID, recordID)
}

// TestKeyTamper: an API key added, changed or stripped of its signature
// behind writ's back is a named finding and opens nothing.
func TestKeyTamper(t *testing.T) {
	ledgertest.RunKeyTamper(t, func(t *testing.T) (ledger.Store, ledgertest.KeyTamperer) {
		dir := t.TempDir()
		return mustOpen(t, dir), tamperer{filepath.Join(dir, "writ.db")}
	})
}

// TestRevocationTamper: an API key revocation deleted, moved or forged
// behind writ's back no longer matches the checkpoints that commit to it.
func TestRevocationTamper(t *testing.T) {
	ledgertest.RunRevocationTamper(t, func(t *testing.T) (ledger.Store, ledgertest.RevocationTamperer) {
		dir := t.TempDir()
		return mustOpen(t, dir), tamperer{filepath.Join(dir, "writ.db")}
	})
}
