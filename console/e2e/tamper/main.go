// Command tamper changes one sealed record in a stopped writ's SQLite
// database, as an attacker with write access to the database would: it
// drops the append-only trigger that refuses updates and rewrites the
// record's bytes. The console's browser tests use it to show that the
// record then fails verification in the browser. Never run it on a
// ledger you care about.
//
//	tamper DB RECORD_ID OLD NEW
//
// replaces the first occurrence of OLD in the record's stored bytes with
// NEW, and fails unless exactly that record changed.
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
	if len(args) != 4 {
		return fmt.Errorf("usage: tamper DB RECORD_ID OLD NEW")
	}
	dbPath, recordID, old, repl := args[0], args[1], []byte(args[2]), []byte(args[3])
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
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
