package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// serverOnEachStore runs test once for each store a server can use, as
// subtests "sqlite" and "postgres": data is a fresh data directory and
// storeArgs the writ serve arguments that open the store (the data
// directory; or a schema of its own in WRIT_TEST_POSTGRES with a key ring
// generated in data/keys). Without WRIT_TEST_POSTGRES the postgres
// subtest is skipped.
func serverOnEachStore(t *testing.T, test func(t *testing.T, data string, storeArgs []string)) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			data := t.TempDir()
			storeArgs := []string{"--data", data}
			if store == "postgres" {
				dsn := os.Getenv("WRIT_TEST_POSTGRES")
				if dsn == "" {
					t.Skip("WRIT_TEST_POSTGRES is not set")
				}
				keys := filepath.Join(data, "keys")
				if out, err := exec.Command(writBinary, "ledger", "keys", "generate", "--keys", keys).CombinedOutput(); err != nil {
					t.Fatalf("keys generate: %v\n%s", err, out)
				}
				storeArgs = []string{"--store", isolatedSchema(t, dsn), "--keys", keys}
			}
			test(t, data, storeArgs)
		})
	}
}
