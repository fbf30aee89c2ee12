// Command tamper changes one sealed record in a stopped writ's SQLite
// database, as an attacker with write access to the database would: it
// drops the append-only trigger that refuses updates and rewrites the
// record's bytes. The console's browser tests use it to show that the
// record then fails verification in the browser. Never run it on a
// ledger you care about.
//
//	tamper [-envelope] DB RECORD_ID OLD NEW
//
// replaces the first occurrence of OLD in the record's stored bytes (with
// -envelope, in the request envelope stored with the record) with NEW,
// and fails unless exactly that row changed.
package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"

	_ "modernc.org/sqlite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tamper:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	envelope := len(args) > 0 && args[0] == "-envelope"
	if envelope {
		args = args[1:]
	}
	if len(args) != 4 {
		return fmt.Errorf("usage: tamper [-envelope] DB RECORD_ID OLD NEW")
	}
	dbPath, recordID, old, repl := args[0], args[1], []byte(args[2]), []byte(args[3])
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	if envelope {
		return tamperEnvelope(db, recordID, old, repl)
	}
	var raw []byte
	if err := db.QueryRow(`SELECT raw FROM records WHERE record_id = ?`, recordID).Scan(&raw); err != nil {
		return fmt.Errorf("read record %s: %w", recordID, err)
	}
	if !bytes.Contains(raw, old) {
		return fmt.Errorf("record %s does not contain %q", recordID, old)
	}
	changed := bytes.Replace(raw, old, repl, 1)
	if _, err := db.Exec(`DROP TRIGGER IF EXISTS records_no_update`); err != nil {
		return err
	}
	res, err := db.Exec(`UPDATE records SET raw = ? WHERE record_id = ?`, changed, recordID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("updated %d rows (%v), want 1", n, err)
	}
	return nil
}

// tamperEnvelope rewrites the request envelope stored with a record: what
// an approver reviews, and what an attacker would change to have
// something else approved.
func tamperEnvelope(db *sql.DB, recordID string, old, repl []byte) error {
	var tenant string
	var seq int64
	if err := db.QueryRow(`SELECT tenant_id, seq FROM records WHERE record_id = ?`, recordID).Scan(&tenant, &seq); err != nil {
		return fmt.Errorf("read record %s: %w", recordID, err)
	}
	var data []byte
	if err := db.QueryRow(`SELECT data FROM envelopes WHERE tenant_id = ? AND seq = ?`, tenant, seq).Scan(&data); err != nil {
		return fmt.Errorf("read the envelope of record %s: %w", recordID, err)
	}
	if !bytes.Contains(data, old) {
		return fmt.Errorf("the envelope of record %s does not contain %q", recordID, old)
	}
	if _, err := db.Exec(`DROP TRIGGER IF EXISTS envelopes_no_update`); err != nil {
		return err
	}
	res, err := db.Exec(`UPDATE envelopes SET data = ? WHERE tenant_id = ? AND seq = ?`, bytes.Replace(data, old, repl, 1), tenant, seq)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("updated %d envelopes (%v), want 1", n, err)
	}
	return nil
}
