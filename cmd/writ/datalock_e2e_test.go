package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneWriterPerDataDir: writ gateway refuses to start on the data
// directory of a running writ serve, and writ serve on that of a running
// in-process gateway, each naming the process that holds it; once the
// holder stops, the other starts.
func TestOneWriterPerDataDir(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	pack := filepath.Join("..", "..", "gateway", "testdata", "pack")
	config := testUpstreamConfig(t)

	srv := startServer(t, data, pack)
	out, err := exec.Command(writBinary, "gateway", "--config", config, "--pack", pack, "--data", data).CombinedOutput()
	want := "is in use by another writ process (pid " + strconv.Itoa(srv.cmd.Process.Pid) + ": "
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || !strings.Contains(string(out), want) || !strings.Contains(string(out), " serve ") {
		t.Fatalf("writ gateway beside writ serve on one data directory: %v\n%s\nwant a refusal containing %q and the serve command", err, out, want)
	}
	// An offline command that signs a checkpoint is a writer too; one
	// that only reads is not.
	out, err = exec.Command(writBinary, "ledger", "checkpoint", "--data", data, "--tenant", "acme", "--issue").CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || !strings.Contains(string(out), want) {
		t.Fatalf("writ ledger checkpoint --issue beside writ serve: %v\n%s\nwant a refusal containing %q", err, out, want)
	}
	if out, err := exec.Command(writBinary, "records", "list", "--data", data, "--tenant", "acme").CombinedOutput(); err != nil {
		t.Fatalf("writ records list beside writ serve: %v\n%s; want readers allowed", err, out)
	}
	srv.stop(t)

	g := startGateway(t, nil, "--config", config, "--pack", pack, "--data", data, "--listen", "127.0.0.1:0")
	out, err = exec.Command(writBinary, "serve", "--addr", "127.0.0.1:0", "--data", data, "--pack", pack).CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || !strings.Contains(string(out), "is in use by another writ process (pid ") || !strings.Contains(string(out), " gateway ") {
		t.Fatalf("writ serve beside writ gateway on one data directory: %v\n%s\nwant a refusal naming the gateway", err, out)
	}
	g.stop()
	startServer(t, data, pack) // the lock went with the gateway
}

// TestDataDirLockReleasedOnClose: the lock is held per open store, so a
// second open in the same process is refused too, and a closed store
// leaves the directory free.
func TestDataDirLockReleasedOnClose(t *testing.T) {
	dir := t.TempDir()
	st, err := openStore(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(dir, ""); !errors.Is(err, errDataDirInUse) {
		t.Fatalf("second openStore(%s) = %v, want errDataDirInUse", dir, err)
	}
	reader, err := openExisting(dir, "")
	if err != nil {
		t.Fatalf("openExisting beside the writer = %v, want readers allowed", err)
	}
	reader.Close()
	st.Close()
	st, err = openStore(dir, "")
	if err != nil {
		t.Fatalf("openStore after Close = %v", err)
	}
	st.Close()
}
