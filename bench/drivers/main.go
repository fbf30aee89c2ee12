// Command drivers compares the two pure-Go SQLite drivers on the shape of
// writ's append transaction: modernc.org/sqlite (transpiled C, what writ
// uses) and github.com/ncruces/go-sqlite3 (SQLite compiled to WASM, run by
// wazero). Both get WAL, synchronous=FULL, 4 KiB pages, an 8 MiB cache and
// BEGIN IMMEDIATE; each transaction appends 16 rows shaped like writ's
// (a 2.5 KB record, a 1 KB receipt, five indexes, one of them on a random
// trace id; a 680-byte content-addressed blob; two tree-hash rows) and
// commits. It prints, per driver and round (interleaved), the process CPU
// and the wall time a record.
//
// It is its own module so that the driver it compares against never
// becomes a dependency of writ:
//
//	cd bench/drivers && go run .
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"
	_ "modernc.org/sqlite"
)

const schema = `
CREATE TABLE records (tenant_id TEXT NOT NULL, seq INTEGER NOT NULL, record_id TEXT NOT NULL UNIQUE, decision_id TEXT NOT NULL,
 decision_key TEXT NOT NULL, status TEXT NOT NULL, trace_id TEXT NOT NULL, ts INTEGER NOT NULL, raw BLOB NOT NULL, receipt BLOB NOT NULL, PRIMARY KEY (tenant_id, seq));
CREATE INDEX records_decision_key ON records (tenant_id, decision_key, seq);
CREATE INDEX records_status ON records (tenant_id, status, seq);
CREATE INDEX records_trace_id ON records (tenant_id, trace_id, seq);
CREATE INDEX records_ts ON records (tenant_id, ts);
CREATE INDEX records_decision_id ON records (tenant_id, decision_id);
CREATE TABLE blobs (hash TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL, data BLOB NOT NULL);
CREATE TABLE tree_hashes (tenant_id TEXT NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (tenant_id, idx)) WITHOUT ROWID;
`

func open(driver, dir string) *sql.DB {
	p := filepath.Join(dir, "x.db")
	// Both drivers read the same DSN parameters.
	dsn := "file:" + p + "?_pragma=page_size(4096)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=cache_size(-8192)&_txlock=immediate"
	db, err := sql.Open(driver, dsn)
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		panic(err)
	}
	return db
}

func run(driver string, n int) (float64, time.Duration) {
	dir, _ := os.MkdirTemp("", "drv")
	defer os.RemoveAll(dir)
	db := open(driver, dir)
	defer db.Close()
	raw := make([]byte, 2460)
	rand.Read(raw)
	rc := make([]byte, 1050)
	env := make([]byte, 680)
	seq := 0
	var r0 syscall.Rusage
	syscall.Getrusage(0, &r0)
	start := time.Now()
	for b := 0; b < n; b++ {
		tx, err := db.Begin()
		if err != nil {
			panic(err)
		}
		ins, _ := tx.Prepare(`INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?,?)`)
		blob, _ := tx.Prepare(`INSERT INTO blobs VALUES (?,?,?)`)
		th, _ := tx.Prepare(`INSERT INTO tree_hashes VALUES (?,?,?)`)
		for i := 0; i < 16; i++ {
			seq++
			var tr [16]byte
			rand.Read(tr[:])
			rand.Read(env[:32])
			h := sha256.Sum256(env)
			if _, err := ins.Exec("acme", seq, fmt.Sprintf("dr_%012d", seq), fmt.Sprintf("dec_%012d", seq), "workflow.handoff_note.update", "DECIDED", hex.EncodeToString(tr[:]), time.Now().UnixNano(), raw, rc); err != nil {
				panic(err)
			}
			if _, err := blob.Exec("sha256:"+hex.EncodeToString(h[:]), "envelope", env); err != nil {
				panic(err)
			}
			if _, err := th.Exec("acme", seq*2, h[:]); err != nil {
				panic(err)
			}
			if _, err := th.Exec("acme", seq*2+1, h[:]); err != nil {
				panic(err)
			}
		}
		ins.Close()
		blob.Close()
		th.Close()
		if err := tx.Commit(); err != nil {
			panic(err)
		}
	}
	el := time.Since(start)
	var r1 syscall.Rusage
	syscall.Getrusage(0, &r1)
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	fmt.Printf("cpu %v a record  ", cpu/time.Duration(n*16))
	return float64(n*16) / el.Seconds(), el / time.Duration(n*16)
}

func main() {
	for round := 0; round < 4; round++ {
		for _, d := range []string{"sqlite", "sqlite3"} {
			rps, per := run(d, 400)
			fmt.Printf("%-8s round %d: %8.0f records/s, %v a record\n", d, round+1, rps, per)
		}
	}
}
