package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writhq/writ/ledger"
)

// TestRedactURL: a store URL printed in an error keeps no password, in
// any of the forms PostgreSQL connection strings take.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://writ:s3cret@db:5432/ledger?sslmode=require", "postgres://writ:xxxxx@db:5432/ledger?sslmode=require"},
		{"postgres://writ@db/ledger?password=s3cret&sslmode=disable", "postgres://writ@db/ledger?password=xxxxx&sslmode=disable"},
		{"postgresql://db/ledger", "postgresql://db/ledger"},
		{"host=db user=writ password=s3cret dbname=ledger", "host=db user=writ password=xxxxx dbname=ledger"},
		{"host=db password = 's3 cr\\'et' dbname=ledger", "host=db password = xxxxx dbname=ledger"},
		{"host=db PASSWORD=s3cret", "host=db PASSWORD=xxxxx"},
		{"host=db sslkey=/k sslpassword=s3cret", "host=db sslkey=/k sslpassword=xxxxx"},
		{"postgres://db/ledger?sslpassword=s3cret", "postgres://db/ledger?sslpassword=xxxxx"},
		{"host=db user=writ", "host=db user=writ"},
		{"postgres://writ:s3cret@db:bad port/x", "(unparseable URL)"},
	} {
		got := redactURL(tc.in)
		if got != tc.want || strings.Contains(got, "s3") {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// tenantsStore is a store that reports tenants holding records; nothing
// else of it is used.
type tenantsStore struct {
	ledger.Store
	tenants []string
}

func (s tenantsStore) Tenants(context.Context) ([]string, error) { return s.tenants, nil }

// TestBindingKeyNeverReplacedByAccident: a missing binding key is made
// anew only for a ledger without records; an empty key file is refused
// with a message that says what happened and how to recover.
func TestBindingKeyNeverReplacedByAccident(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	_, err := loadBindingKey(ctx, tenantsStore{tenants: []string{"acme"}}, dir, "")
	if err == nil || !strings.Contains(err.Error(), "already holds records of 1 tenants") || !strings.Contains(err.Error(), "docs/security.md") {
		t.Fatalf("loadBindingKey(missing key, ledger with records) = %v, want a refusal that says how to recover", err)
	}
	if _, err := os.Stat(filepath.Join(dir, bindingKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused loadBindingKey created %s (%v)", bindingKeyFile, err)
	}

	key, err := loadBindingKey(ctx, tenantsStore{}, dir, "")
	if err != nil || len(key) != 32 {
		t.Fatalf("loadBindingKey(missing key, empty ledger) = %d bytes, %v; want a new 32-byte key", len(key), err)
	}
	again, err := loadBindingKey(ctx, tenantsStore{tenants: []string{"acme"}}, dir, "")
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("loadBindingKey(existing key) = %x, %v; want the key made before", again, err)
	}

	if err := os.WriteFile(filepath.Join(dir, bindingKeyFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadBindingKey(ctx, tenantsStore{}, dir, "")
	if err == nil || !strings.Contains(err.Error(), "holds 0 bytes") || !strings.Contains(err.Error(), "Restore the key from a backup") {
		t.Fatalf("loadBindingKey(empty key file) = %v, want a refusal that says how to recover", err)
	}
}
