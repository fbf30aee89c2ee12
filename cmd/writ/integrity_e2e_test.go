package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
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
