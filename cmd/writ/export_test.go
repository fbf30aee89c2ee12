package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// runLedgerCmd runs a writ command in-process and returns its output, as
// the writ binary prints it, and its exit code.
func runLedgerCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), args)
	printError(&errOut, err)
	return out.String(), errOut.String(), exitCode(err)
}

// TestExportVerifyBundle records every refund example with writ check,
// exports the ledger and verifies the bundle; a changed byte makes
// verify-bundle exit 3.
func TestExportVerifyBundle(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	reqs, _ := filepath.Glob("../../examples/refund/requests/*.json")
	if len(reqs) == 0 {
		t.Fatal("no example requests")
	}
	for _, r := range reqs {
		if _, stderr, code := runLedgerCmd(t, "check", "--request", r, "--data", data, "--now", "2026-05-09T09:31:42Z"); code != 0 {
			t.Fatalf("writ check %s: exit %d: %s", r, code, stderr)
		}
	}
	dir := t.TempDir()
	// The operator publishes its keys; the auditor verifies against them.
	trusted := filepath.Join(dir, "trusted-keys.json")
	if stdout, stderr, code := runLedgerCmd(t, "ledger", "keys", "publish", "--keys", filepath.Join(data, "keys"), "--out", trusted); code != exitOK {
		t.Fatalf("keys publish: exit %d: %s%s", code, stdout, stderr)
	}
	for _, name := range []string{"ledger.tar", "ledger.tar.gz"} {
		out := filepath.Join(dir, name)
		stdout, stderr, code := runLedgerCmd(t, "ledger", "export", "--data", data, "--out", out)
		if code != 0 || !strings.Contains(stdout, "exported ") {
			t.Fatalf("export %s: exit %d: %s%s", name, code, stdout, stderr)
		}
		stdout, stderr, code = runLedgerCmd(t, "ledger", "verify-bundle", "--trusted-keys", trusted, out)
		if code != exitOK || !strings.Contains(stdout, "ledger intact against the trusted keys") {
			t.Fatalf("verify-bundle --trusted-keys %s: exit %d: %s%s", name, code, stdout, stderr)
		}
		// Without trusted keys it says whose keys it trusted, and exits 4
		// unless told to accept them.
		stdout, stderr, code = runLedgerCmd(t, "ledger", "verify-bundle", out)
		if code != exitUntrusted || !strings.Contains(stdout, "against the bundle's own keys") || !strings.Contains(stderr, "--trusted-keys") {
			t.Fatalf("verify-bundle %s: exit %d, want %d: %s%s", name, code, exitUntrusted, stdout, stderr)
		}
		stdout, stderr, code = runLedgerCmd(t, "ledger", "verify-bundle", "--trust-bundle-keys", out)
		if code != exitOK || !strings.Contains(stdout, "against the bundle's own keys") {
			t.Fatalf("verify-bundle --trust-bundle-keys %s: exit %d: %s%s", name, code, stdout, stderr)
		}
	}

	// JSON output.
	bundlePath := filepath.Join(dir, "ledger.tar")
	stdout, _, code := runLedgerCmd(t, "ledger", "verify-bundle", "--json", "--trusted-keys", trusted, bundlePath)
	var rep struct {
		Intact    bool   `json:"intact"`
		Records   int64  `json:"records"`
		KeySource string `json:"key_source"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &rep) != nil || !rep.Intact || rep.Records < int64(len(reqs)) || rep.KeySource != "trusted_keys" {
		t.Fatalf("verify-bundle --json: exit %d: %s", code, stdout)
	}

	// A malformed trusted keys file is an error, never "intact".
	for name, content := range map[string]string{
		"empty":            "",
		"not json":         "hello",
		"unknown member":   strings.Replace(mustRead(t, trusted), `"format"`, `"extra": 1, "format"`, 1),
		"bad verifier key": strings.Replace(mustRead(t, trusted), `"verifier_key": "`, `"verifier_key": "x`, 1),
	} {
		bad := filepath.Join(dir, "bad-trusted.json")
		os.WriteFile(bad, []byte(content), 0o644)
		stdout, stderr, code := runLedgerCmd(t, "ledger", "verify-bundle", "--trusted-keys", bad, bundlePath)
		if code != exitError || strings.Contains(stdout, "intact") || !strings.Contains(stderr, "trusted") {
			t.Errorf("verify-bundle --trusted-keys <%s>: exit %d, want %d with a clear error: %s%s", name, code, exitError, stdout, stderr)
		}
	}

	// The export signed a checkpoint of each tenant's head: stripped of
	// its checkpoints, the bundle anchors nothing and fails, unless
	// --allow-uncovered.
	stripped := filepath.Join(dir, "stripped.tar")
	if n := stripCheckpoints(t, bundlePath, stripped); n == 0 {
		t.Fatal("the export holds no checkpoint")
	}
	stdout, _, code = runLedgerCmd(t, "ledger", "verify-bundle", "--trusted-keys", trusted, stripped)
	if code != exitFindings || !strings.Contains(stdout, "uncovered_records") || !strings.Contains(stdout, "no signed checkpoint covers") {
		t.Errorf("verify-bundle of a bundle without checkpoints: exit %d, want %d naming uncovered_records: %s", code, exitFindings, stdout)
	}
	stdout, _, code = runLedgerCmd(t, "ledger", "verify-bundle", "--allow-uncovered", "--trusted-keys", trusted, stripped)
	if code != exitOK || !strings.Contains(stdout, "notice: uncovered_records") || !strings.Contains(stdout, "ledger intact") {
		t.Errorf("verify-bundle --allow-uncovered: exit %d, want %d with a notice: %s", code, exitOK, stdout)
	}

	// One byte of a record changed: findings, exit 3.
	raw, err := os.ReadFile(bundlePath)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(raw, []byte(`"record_id":"dr_`))
	if i < 0 {
		t.Fatal("no record in the bundle")
	}
	raw[i+len(`"record_id":"dr_`)] ^= 0x01
	tampered := filepath.Join(dir, "tampered.tar")
	if err := os.WriteFile(tampered, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = runLedgerCmd(t, "ledger", "verify-bundle", "--trusted-keys", trusted, tampered)
	if code != exitFindings || !strings.Contains(stdout, "hash_mismatch") {
		t.Fatalf("verify-bundle of a tampered bundle: exit %d, want %d: %s", code, exitFindings, stdout)
	}

	// Not a bundle: an error, exit 1; bad use: exit 2.
	notBundle := filepath.Join(dir, "not.tar")
	os.WriteFile(notBundle, []byte("hello"), 0o644)
	if _, stderr, code := runLedgerCmd(t, "ledger", "verify-bundle", notBundle); code != exitError || !strings.Contains(stderr, "bundle") {
		t.Errorf("verify-bundle of a non-bundle: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"ledger", "export", "--data", data},
		{"ledger", "verify-bundle"},
		{"ledger", "verify-bundle", "a", "b"},
		{"ledger", "verify-bundle", "--trusted-keys", trusted, "--trust-bundle-keys", bundlePath},
	} {
		if _, _, code := runLedgerCmd(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if _, _, code := runLedgerCmd(t, "ledger", "export", "--data", filepath.Join(dir, "missing"), "--out", filepath.Join(dir, "x.tar")); code != exitError {
		t.Errorf("export of a missing data directory: exit %d, want %d", code, exitError)
	}
}

// stripCheckpoints copies the bundle at from to to without its checkpoint
// files and returns how many it left out.
func stripCheckpoints(t *testing.T, from, to string) int {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	tr, tw := tar.NewReader(in), tar.NewWriter(&out)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(h.Name, "/checkpoints/") {
			n++
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVerifyBundleTrustTamper runs writ ledger verify-bundle
// --trusted-keys over the trust tamper fixtures of issue 33 (built by
// bundle's TestTrustTamper -update): each exits 3 naming its class, and
// the untampered bundle is intact.
func TestVerifyBundleTrustTamper(t *testing.T) {
	const dir = "../../bundle/testdata/trusted"
	trusted := filepath.Join(dir, "trusted-keys.json")
	if stdout, stderr, code := runLedgerCmd(t, "ledger", "verify-bundle", "--trusted-keys", trusted, filepath.Join(dir, "intact.tar.gz")); code != exitOK {
		t.Fatalf("verify-bundle --trusted-keys intact.tar.gz: exit %d: %s%s", code, stdout, stderr)
	}
	for _, tc := range []struct{ fixture, kind string }{
		{"tenant-resealed-attacker-key", "untrusted_key"},
		{"overlapping-attacker-key", "key_window_overlap"},
		{"retired-key-reopened", "key_window_mismatch"},
		{"approval-not-granted", "approval_not_granted"},
		{"signature-padding-bits", "bad_signature"},
		{"revocations-line-dropped", "revocations_dropped"},
	} {
		stdout, stderr, code := runLedgerCmd(t, "ledger", "verify-bundle", "--trusted-keys", trusted, filepath.Join(dir, tc.fixture+".tar.gz"))
		if code != exitFindings || !strings.Contains(stdout, tc.kind+"\t") || strings.Contains(stdout, "intact") {
			t.Errorf("verify-bundle --trusted-keys %s: exit %d, want %d naming %s: %s%s", tc.fixture, code, exitFindings, tc.kind, stdout, stderr)
		}
	}
}

// TestVerifyBundleEvidenceIssuers runs writ ledger verify-bundle over
// the evidence fixture (bundle's TestEvidenceFixture) with and without
// --evidence-issuers: with the IDV issuer's key the signed item's JWS is
// verified and the bundle is intact; with another key of the same kid it
// is bad_evidence_signature; without the flag a notice says the
// signature was not checked.
func TestVerifyBundleEvidenceIssuers(t *testing.T) {
	const fixture = "../../bundle/testdata/evidence.tar.gz"
	dir := t.TempDir()
	// issuers writes an issuers file naming the IDV issuer of tenant acme
	// with the public key made from seed (0x51 is the fixture's).
	issuers := func(seed byte) string {
		priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
		pk, err := jwk.Import(priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		pk.Set(jwk.KeyIDKey, "idv-1")
		set := jwk.NewSet()
		set.AddKey(pk)
		jwks, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("idv-%x", seed)
		if err := os.WriteFile(filepath.Join(dir, name+".jwks.json"), jwks, 0o644); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+".issuers.json")
		conf := `{"tenants": {"acme": [{"issuer": "idv.acme.example", "jwks_file": "` + name + `.jwks.json"}]}}`
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout
	}{
		{"the issuer's key", []string{"--evidence-issuers", issuers(0x51)}, exitOK, "intact"},
		{"another key of the kid", []string{"--evidence-issuers", issuers(0x52)}, exitFindings, "bad_evidence_signature\t"},
		{"no issuer keys", nil, exitOK, "notice: unchecked_evidence_signatures"},
	} {
		args := append([]string{"ledger", "verify-bundle", "--trust-bundle-keys"}, tc.args...)
		stdout, stderr, code := runLedgerCmd(t, append(args, fixture)...)
		if code != tc.code || !strings.Contains(stdout, tc.want) {
			t.Errorf("verify-bundle with %s: exit %d, want %d saying %q: %s%s", tc.name, code, tc.code, tc.want, stdout, stderr)
		}
	}
	if _, stderr, code := runLedgerCmd(t, "ledger", "verify-bundle", "--trust-bundle-keys", "--evidence-issuers", filepath.Join(dir, "none.json"), fixture); code == exitOK || code == exitFindings {
		t.Errorf("verify-bundle --evidence-issuers with no such file: exit %d, want an error: %s", code, stderr)
	}
}
