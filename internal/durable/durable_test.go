package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recordSyncs replaces syncFile with one that records what is synced (a
// file by its base name, a directory as "dir:<path>") and fails when fail
// says so.
func recordSyncs(t *testing.T, fail func(name string) bool) *[]string {
	t.Helper()
	var synced []string
	old := syncFile
	syncFile = func(f *os.File) error {
		name := filepath.Base(f.Name())
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			name = "dir:" + f.Name()
		}
		if fail != nil && fail(name) {
			return errors.New("injected sync failure")
		}
		synced = append(synced, name)
		return old(f)
	}
	t.Cleanup(func() { syncFile = old })
	return &synced
}

func TestWriteFileSyncsFileThenDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("directories are not synced on Windows")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "binding.key")
	for _, tc := range []struct {
		name  string
		write func(string, []byte, fs.FileMode) error
	}{{"WriteFile", WriteFile}, {"Create", Create}} {
		os.Remove(path)
		synced := recordSyncs(t, nil)
		if err := tc.write(path, []byte("secret"), 0o600); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The content is synced under its temporary name, before it is
		// renamed into place; then the directory holding the new name.
		if len(*synced) != 2 || !strings.HasPrefix((*synced)[0], ".binding.key.tmp-") || (*synced)[1] != "dir:"+dir {
			t.Errorf("%s synced %q, want [.binding.key.tmp-* dir:%s]", tc.name, *synced, dir)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != "secret" {
			t.Errorf("%s: file holds %q, %v; want \"secret\"", tc.name, got, err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", tc.name, fi.Mode().Perm(), err)
		}
		assertNoTemporaries(t, dir)
	}
}

func TestCreateNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k")
	if err := Create(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Create(path, []byte("second"), 0o600)
	if !errors.Is(err, ErrExist) {
		t.Fatalf("Create over an existing file = %v, want ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "first" {
		t.Errorf("Create over an existing file changed it to %q", got)
	}
	assertNoTemporaries(t, dir)
}

func TestFailedSyncLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ring.json")
	recordSyncs(t, func(name string) bool { return strings.HasPrefix(name, ".ring.json.tmp-") })
	if err := WriteFile(path, []byte("{}"), 0o644); err == nil {
		t.Fatal("WriteFile with a failing sync succeeded")
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteFile with a failing sync left %s (%v)", path, err)
	}
	assertNoTemporaries(t, dir)
}

func TestMkdirAllSyncsParents(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("directories are not synced on Windows")
	}
	root := t.TempDir()
	synced := recordSyncs(t, nil)
	dir := filepath.Join(root, "a", "b")
	if err := MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	want := []string{"dir:" + root, "dir:" + filepath.Join(root, "a")}
	if strings.Join(*synced, ",") != strings.Join(want, ",") {
		t.Errorf("MkdirAll(%s) synced %q, want %q", dir, *synced, want)
	}
}

func assertNoTemporaries(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
