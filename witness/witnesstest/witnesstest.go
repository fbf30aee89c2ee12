// Package witnesstest starts a real transparency-log witness, the
// transparency-dev witness (github.com/transparency-dev/witness, its
// omniwitness command), on loopback for writ's tests.
//
// The witness is built from the module proxy by `go build` in
// witness/testdata/omniwitness, a module of its own, so that it and its
// dependencies never enter writ's module graph or binary. It keeps its
// state in a SQLite file in the test's temporary directory.
package witnesstest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ/witness"
)

// Log is a log the witness is told to witness: its checkpoint origin and
// the verifier key of its checkpoint signatures.
type Log struct {
	Origin string
	Key    string
}

// Witness is a running witness.
type Witness struct {
	// URL is its submission prefix.
	URL string
	// Key is its cosignature/v1 verifier key.
	Key witness.Key
	// KeyText is Key's text, as a witness's operator publishes it.
	KeyText string
	stderr  *bytes.Buffer
}

// moduleDir is witness/testdata/omniwitness, the witness's build module.
func moduleDir(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("witnesstest: cannot find its own source")
	}
	return filepath.Join(filepath.Dir(file), "..", "testdata", "omniwitness")
}

// Build builds the witness into dir and returns the binary's path. It
// fails the test if the go command is missing or the build fails.
func Build(t testing.TB, dir string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("witnesstest: the go command is needed to build the witness: %v", err)
	}
	bin := filepath.Join(dir, "omniwitness")
	cmd := exec.Command(goCmd, "build", "-o", bin, "github.com/transparency-dev/witness/cmd/omniwitness")
	cmd.Dir = moduleDir(t)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("witnesstest: go build the witness: %v\n%s", err, out)
	}
	return bin
}

// Start starts the witness binary bin on a loopback port, named name,
// witnessing logs, with a new key and an empty SQLite database, and
// stops it when the test ends.
func Start(t testing.TB, bin, name string, logs []Log) *Witness {
	t.Helper()
	dir := t.TempDir()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	cosigKey, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := witness.ParseKey(cosigKey)
	if err != nil {
		t.Fatalf("witnesstest: the witness's key: %v", err)
	}
	keyFile := filepath.Join(dir, "witness.key")
	if err := os.WriteFile(keyFile, []byte(skey), 0o600); err != nil {
		t.Fatal(err)
	}
	var y strings.Builder
	y.WriteString("Logs:\n")
	for _, l := range logs {
		fmt.Fprintf(&y, "  - Origin: %q\n    PublicKey: %q\n    URL: \"https://example.invalid/\"\n", l.Origin, l.Key)
	}
	logsFile := filepath.Join(dir, "logs.yaml")
	if err := os.WriteFile(logsFile, []byte(y.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	w := &Witness{URL: "http://" + addr, Key: key, KeyText: cosigKey, stderr: &bytes.Buffer{}}
	cmd := exec.Command(bin,
		"--listen", addr,
		"--metrics_listen", "",
		"--db_file", filepath.Join(dir, "witness.db"),
		"--private_key_path", keyFile,
		"--additional_logs", logsFile,
		"--logtostderr")
	cmd.Stdout, cmd.Stderr = w.stderr, w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("witnesstest: start the witness: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("witness %s output:\n%s", name, w.stderr)
		}
	})
	// Wait until it answers HTTP (or exits).
	for deadline := time.Now().Add(2 * time.Minute); ; {
		resp, err := http.Get(w.URL + "/add-checkpoint")
		if err == nil {
			resp.Body.Close()
			return w
		}
		select {
		case <-exited:
			t.Fatalf("witnesstest: the witness exited: %v\n%s", waitErr, w.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("witnesstest: the witness did not answer on %s: %v\n%s", addr, err, w.stderr)
		}
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
