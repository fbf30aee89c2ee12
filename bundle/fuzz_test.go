package bundle_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"testing"

	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/ledger/verify"
)

// FuzzOpen feeds the bundle reader arbitrary bytes: it must return a
// bundle or an error, never panic or hang, and whatever it opens must
// serve its records, notes and blobs and verify without an error.
func FuzzOpen(f *testing.F) {
	if data, err := os.ReadFile(fixture); err == nil {
		if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
			if tarData, err := io.ReadAll(zr); err == nil {
				f.Add(tarData)
			}
		}
	}
	small := &archive{files: map[string][]byte{}}
	small.set(bundle.MetaFile, []byte(`{"format":"writ-ledger-bundle","version":1,"ledger_name":"writ","created_at":"2026-05-09T09:31:42Z","tenants":[{"tenant_id":"acme","records":2,"head":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}]}`))
	small.set(bundle.KeysFile, []byte(`[]`))
	line := `{"audit":{"prev_hash":"sha256:0000000000000000000000000000000000000000000000000000000000000000","record_hash":"sha256:0000000000000000000000000000000000000000000000000000000000000000","seq":1}}`
	small.set("tenants/acme/records.jsonl", []byte(line+"\n"+line+"\n"))
	small.set("tenants/acme/checkpoints/1.note", []byte("writ/acme\n1\nAAAA\n\n— k AAAA\n"))
	small.set("tenants/acme/checkpoints/1.2.note", []byte("x"))
	small.set("blobs/0000000000000000000000000000000000000000000000000000000000000000", []byte("y"))
	f.Add(small.bytes(f))
	f.Add([]byte{})
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := bundle.Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		ctx := context.Background()
		tenants, err := b.Tenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tenant := range tenants {
			if _, err := b.Chain(ctx, tenant, 0, 3); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Checkpoints(ctx, tenant); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Head(ctx, tenant); err != nil {
				t.Fatal(err)
			}
		}
		b.Blob(ctx, "sha256:0000000000000000000000000000000000000000000000000000000000000000")
		opts, err := b.VerifyOptions()
		if err != nil {
			t.Fatalf("an opened bundle's keys do not make a ring: %v", err)
		}
		opts.Rules = nil // pack compilation is tested elsewhere, and slow
		if _, err := verify.Verify(ctx, b, opts); err != nil {
			t.Fatalf("verifying an opened bundle failed: %v", err)
		}
	})
}
