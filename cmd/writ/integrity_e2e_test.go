package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
)

// TestTamperedReceiptIsNeverServed: a blocked check's stored receipt,
// edited behind writ's back (writ stopped, triggers dropped) to say the
// action is safe, is not answered to the unchanged retry: the retry fails
// closed. writ ledger verify names the edit.
func TestTamperedReceiptIsNeverServed(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	req := readExample(t, "../../examples/refund/requests/refund-exceeds-order-goal-fail.json")
	srv := startServer(t, data, "../../examples/refund")
	c := httpapi.NewClient(srv.url)
	first, err := c.Check(ctx, req)
	if err != nil || !first.MustNotRetrySameAction || first.SafeToExecute {
		t.Fatalf("first check = %+v, %v; want a blocked action", first, err)
	}
	again, err := c.Check(ctx, req)
	if err != nil || again.Metadata.Repeated == "" || again.Metadata.RecordID != first.Metadata.RecordID {
		t.Fatalf("unchanged retry before the edit = %+v, %v; want the first answer repeated", again, err)
	}
	srv.stop(t)

	db, err := sql.Open("sqlite", filepath.Join(data, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := db.QueryRow(`SELECT receipt FROM records WHERE record_id = ?`, first.Metadata.RecordID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var forged map[string]any
	if err := json.Unmarshal(raw, &forged); err != nil {
		t.Fatal(err)
	}
	forged["safe_to_execute"], forged["outcome"], forged["must_not_retry_same_action"] = true, "allow", false
	b, _ := json.Marshal(forged)
	for _, q := range []string{`DROP TRIGGER records_no_update`, `UPDATE records SET receipt = ? WHERE record_id = ?`} {
		if _, err := db.Exec(q, b, first.Metadata.RecordID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	srv = startServer(t, data, "../../examples/refund")
	c = httpapi.NewClient(srv.url)
	rc, err := c.Check(ctx, req)
	if writ.ErrorCode(err) != writ.EUNAVAILABLE || rc == nil || rc.SafeToExecute || !rc.Metadata.FailClosed ||
		len(rc.Reasons) == 0 || rc.Reasons[0].Code != "stored_receipt_mismatch" {
		t.Errorf("retry after the edit = %+v, %v; want a fail-closed receipt (stored_receipt_mismatch)", rc, err)
	}
	srv.stop(t)

	stdout, _, code := runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != exitFindings || !strings.Contains(stdout, "receipt_mismatch") || !strings.Contains(stdout, first.Metadata.RecordID) {
		t.Errorf("writ ledger verify after the edit: exit %d, want %d naming receipt_mismatch on %s\n%s", code, exitFindings, first.Metadata.RecordID, stdout)
	}
}

// TestTamperedAPIKeyOpensNothing: an API key's row changed behind writ's
// back (its roles widened, triggers dropped) while the server runs is
// refused at the next request, though the server had verified the key
// before; the server's log names the key; a key added by hand with a
// secret of one's own opens nothing; and writ ledger verify names both.
func TestTamperedAPIKeyOpensNothing(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	token, id := keyFor(t, data, "acme", "refund-agent", "agent")
	srv := startServer(t, data, "../../examples/refund")
	c := clientFor(srv.url, token)
	if _, err := c.Check(ctx, freshRefund(t, "refund-allow")); err != nil {
		t.Fatalf("check with the signed key = %v", err)
	}

	db, err := sql.Open("sqlite", filepath.Join(data, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	const forgedID = "key_mmmmmmmmmmmmmmmmmmmmmmmmmm"
	for _, q := range []string{
		`DROP TRIGGER api_keys_no_update`,
		`UPDATE api_keys SET roles = '["agent","admin"]' WHERE key_id = '` + id + `'`,
		// sha256(secret), a key of the attacker's own.
		`INSERT INTO api_keys (key_id, tenant_id, subject, roles, secret_hash, created_ns)
			SELECT '` + forgedID + `', 'acme', 'mallory', '["admin"]', '` + sha256Hex(secret) + `', created_ns FROM api_keys WHERE key_id = '` + id + `'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for name, tok := range map[string]string{"the widened key": token, "the added key": "writ_" + forgedID + "_" + secret} {
		_, err := clientFor(srv.url, tok).Check(ctx, freshRefund(t, "refund-allow"))
		if writ.ErrorCode(err) != writ.EUNAUTHENTICATED {
			t.Errorf("check with %s = %v, want 401 unauthenticated", name, err)
		}
	}
	srv.stop(t)
	for _, key := range []string{id, forgedID} {
		if log := srv.stderr.String(); !strings.Contains(log, "refused a request with an API key") || !strings.Contains(log, key) {
			t.Errorf("the server's log does not name the refused key %s:\n%s", key, log)
		}
	}

	stdout, _, code := runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != exitFindings || !strings.Contains(stdout, "api_key_mismatch\ttenant acme API key "+id) || !strings.Contains(stdout, "api_key_unsigned\ttenant acme API key "+forgedID) {
		t.Errorf("writ ledger verify after the edits: exit %d, want %d naming api_key_mismatch on %s and api_key_unsigned on %s\n%s", code, exitFindings, id, forgedID, stdout)
	}
	list, _, _ := runLedgerCmd(t, "keys", "list", "--data", data)
	if !regexp.MustCompile(id+`\s.*\sinvalid\n`).MatchString(list) || !regexp.MustCompile(forgedID+`\s.*\sunsigned\n`).MatchString(list) {
		t.Errorf("writ keys list does not mark the widened key invalid and the added one unsigned:\n%s", list)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestDeletedRevocationIsFound: a key revoked while the server runs is
// refused at the next request; the revocation waits, uncovered, for the
// tenant's next record, then a checkpoint commits to it. Deleted behind
// writ's back (writ stopped, triggers dropped), it reopens the key, and
// writ ledger verify names the checkpoint that says otherwise.
func TestDeletedRevocationIsFound(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	stolen, id := keyFor(t, data, "acme", "refund-agent", "agent")
	other, _ := keyFor(t, data, "acme", "refund-agent-2", "agent")
	srv := startServer(t, data, "../../examples/refund")
	if _, err := clientFor(srv.url, stolen).Check(ctx, freshRefund(t, "refund-allow")); err != nil {
		t.Fatalf("check before the revocation = %v", err)
	}
	if stdout, stderr, code := runLedgerCmd(t, "keys", "revoke", "--data", data, id); code != 0 {
		t.Fatalf("writ keys revoke: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := clientFor(srv.url, stolen).Check(ctx, freshRefund(t, "refund-allow")); writ.ErrorCode(err) != writ.EUNAUTHENTICATED {
		t.Fatalf("check with the revoked key = %v, want 401 unauthenticated", err)
	}
	srv.stop(t)
	stdout, _, code := runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != 0 || !strings.Contains(stdout, "notice: uncovered_revocations\ttenant acme: ") || !strings.Contains(stdout, id) {
		t.Errorf("writ ledger verify before acme's next record: exit %d, want 0 with an uncovered_revocations notice naming %s\n%s", code, id, stdout)
	}

	// The tenant's next record; the server's checkpoint on stopping covers it.
	srv = startServer(t, data, "../../examples/refund")
	if _, err := clientFor(srv.url, other).Check(ctx, freshRefund(t, "refund-allow")); err != nil {
		t.Fatalf("check with the other key = %v", err)
	}
	srv.stop(t)
	stdout, _, code = runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != 0 || strings.Contains(stdout, "uncovered_revocations") {
		t.Fatalf("writ ledger verify after acme's next record: exit %d, want 0 with no uncovered revocation\n%s", code, stdout)
	}

	db, err := sql.Open("sqlite", filepath.Join(data, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER api_key_revocations_no_delete`, `DELETE FROM api_key_revocations WHERE key_id = '` + id + `'`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	// Servers read the revocations as they are: the key opens again ...
	srv = startServer(t, data, "../../examples/refund")
	if _, err := clientFor(srv.url, stolen).Check(ctx, freshRefund(t, "refund-allow")); err != nil {
		t.Errorf("check with the key whose revocation was deleted = %v; want it to open (the store says it is not revoked)", err)
	}
	srv.stop(t)
	// ... and verification names every checkpoint since the revocation.
	stdout, _, code = runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != exitFindings || !regexp.MustCompile(`revocation_mismatch\ttenant acme checkpoint (\d+): of the API key revocations before record (\d+), the checkpoint commits to 1 revocation \(sha256:[0-9a-f]{64}\); the store holds none\n`).MatchString(stdout) {
		t.Errorf("writ ledger verify after the deletion: exit %d, want %d naming revocation_mismatch\n%s", code, exitFindings, stdout)
	}
}

// TestRedirectedIdempotencyKeyIsNeverServed: an idempotency key's row
// pointed behind writ's back at the record of another, allowed check
// would answer the blocked action's retry with that check's genuine
// receipt. The record does not bind the key, so the retry fails closed
// instead; writ ledger verify names the row.
func TestRedirectedIdempotencyKeyIsNeverServed(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, data, "../../examples/refund")
	c := httpapi.NewClient(srv.url)
	fileIDV(t, c, "acme", "idv.acme.example")
	blocked := freshRefund(t, "refund-exceeds-order-goal-fail")
	blocked.IdempotencyKey = "refund-o-1-second"
	allowed := freshRefund(t, "refund-allow")
	allowed.IdempotencyKey = "refund-o-1-first"
	first, err := c.Check(ctx, blocked)
	if err != nil || first.SafeToExecute {
		t.Fatalf("blocked check = %+v, %v; want a blocked action", first, err)
	}
	ok, err := c.Check(ctx, allowed)
	if err != nil || !ok.SafeToExecute {
		t.Fatalf("allowed check = %+v, %v; want it allowed", ok, err)
	}
	srv.stop(t)

	db, err := sql.Open("sqlite", filepath.Join(data, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER idempotency_no_update`,
		`UPDATE idempotency SET record_id = '` + ok.Metadata.RecordID + `' WHERE key = '` + blocked.IdempotencyKey + `'`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	srv = startServer(t, data, "../../examples/refund")
	rc, err := httpapi.NewClient(srv.url).Check(ctx, blocked)
	if writ.ErrorCode(err) != writ.EUNAVAILABLE || rc == nil || rc.SafeToExecute || !rc.Metadata.FailClosed ||
		len(rc.Reasons) == 0 || rc.Reasons[0].Code != "stored_receipt_mismatch" {
		t.Errorf("retry of the blocked check after the edit = %+v, %v; want a fail-closed receipt (stored_receipt_mismatch), never the allowed check's", rc, err)
	}
	srv.stop(t)

	stdout, _, code := runLedgerCmd(t, "ledger", "verify", "--data", data)
	if code != exitFindings || !strings.Contains(stdout, "claim_mismatch\ttenant ") || !strings.Contains(stdout, `record `+ok.Metadata.RecordID+`: the idempotency key "`+blocked.IdempotencyKey+`" hashes to sha256:`) ||
		!strings.Contains(stdout, `record `+first.Metadata.RecordID+` binds its idempotency claim (sha256:`) {
		t.Errorf("writ ledger verify after the edit: exit %d, want %d naming claim_mismatch on the key\n%s", code, exitFindings, stdout)
	}
}
