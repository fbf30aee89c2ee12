package sqlite

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteRefusal: the cause explain adds to an I/O error names a
// read-only file system, from the kernel's own EROFS (a tmpfs remounted
// read-only, which has no file open), and nothing where the WAL can be
// opened for writing or does not exist.
func TestWriteRefusal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	wal := filepath.Join(dir, FileName+"-wal")
	if err := writeRefusal(wal); err != nil {
		t.Errorf("no WAL: %v", err)
	}
	if err := os.WriteFile(wal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeRefusal(wal); err != nil {
		t.Errorf("a writable WAL: %v", err)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -o remount,ro: %v %s", err, out)
	}
	err := writeRefusal(wal)
	if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "the data directory "+dir+" is on a read-only file system") {
		t.Errorf("a read-only file system: %v", err)
	}
	t.Log(err)
}
