package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/delegation"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/sqlite"
)

// TestLedgerVerifyEvidenceIssuers runs writ ledger verify over a store
// holding an issuer-signed evidence item: with --evidence-issuers naming
// the issuer's key, its JWS is verified and the ledger is intact; with
// another key of the same kid it is bad_evidence_signature (exit 3);
// without the flag, a notice says the signature was not checked.
func TestLedgerVerifyEvidenceIssuers(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	skey, _, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{3}, 64)), "writ-e2e")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keyring.FromEnv(skey, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pack.Load("../../examples/refund")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	// jwksOf returns the IDV issuer's key made from seed, private and as
	// a public JWK Set.
	jwksOf := func(seed byte) (jwk.Key, jwk.Set) {
		priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
		sk, err := jwk.Import(priv)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := jwk.Import(priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []jwk.Key{sk, pk} {
			k.Set(jwk.KeyIDKey, "idv-1")
			k.Set(jwk.AlgorithmKey, jwa.EdDSA())
		}
		set := jwk.NewSet()
		set.AddKey(pk)
		return sk, set
	}
	sk, set := jwksOf(0x51)
	st, err := sqlite.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: []byte("writ-e2e-binding-key-0123456789abcdef"),
		Keys:   func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) },
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.DiscardHandler), EvidenceIssuers: delegation.EvidenceIssuers{"acme": {{Issuer: "idv.acme.example", Keys: set}}}})
	if err != nil {
		t.Fatal(err)
	}
	item := writ.EvidenceItem{TenantID: "acme", Kind: "identity_verification", ID: "idv_9", SubjectIDs: []string{"customer:cus_77"},
		Attributes: map[string]any{"method": "document"}, ObservedAt: now.Add(-time.Minute), Issuer: "idv.acme.example"}
	canon, err := record.Canonical(&item)
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	hdr.Set(jws.KeyIDKey, "idv-1")
	tok, err := jws.Sign(canon, jws.WithKey(jwa.EdDSA(), sk, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.AddEvidence(ctx, &writ.AddEvidenceRequest{TenantID: "acme", JWS: string(tok)}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// issuers writes an issuers file naming set as the IDV issuer's keys.
	issuers := func(name string, set jwk.Set) string {
		jwks, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".jwks.json"), jwks, 0o644); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+".json")
		conf := `{"tenants": {"acme": [{"issuer": "idv.acme.example", "jwks_file": "` + name + `.jwks.json"}]}}`
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	_, other := jwksOf(0x52)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout
	}{
		{"the issuer's key", []string{"--evidence-issuers", issuers("idv", set)}, exitOK, "intact"},
		{"another key of the kid", []string{"--evidence-issuers", issuers("other", other)}, exitFindings, "bad_evidence_signature\t"},
		{"no issuer keys", nil, exitOK, "notice: unchecked_evidence_signatures"},
	} {
		var out, errOut bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
			if k == "WRIT_SIGNING_KEY" {
				return skey
			}
			return ""
		}}
		err := m.Run(ctx, append([]string{"ledger", "verify", "--data", data}, tc.args...))
		printError(&errOut, err)
		if code := exitCode(err); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("ledger verify with %s: exit %d, want %d saying %q: %s%s", tc.name, code, tc.code, tc.want, out.String(), errOut.String())
		}
	}
}
