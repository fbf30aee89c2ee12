package pack

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// blobMap is a BlobReader over a map.
type blobMap map[string][]byte

func (m blobMap) Blob(_ context.Context, hash string) ([]byte, error) {
	if b, ok := m[hash]; ok {
		return b, nil
	}
	return nil, errors.New("not stored")
}

func storedPack(t *testing.T, dir string) (*Pack, blobMap) {
	t.Helper()
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := blobMap{p.Hash: p.Manifest}
	for _, f := range p.Files {
		m[f.Hash] = f.Data
	}
	return p, m
}

// TestMemFS holds the file system LoadPinned loads from to io/fs's
// contract: files, implied directories, listings, stats.
func TestMemFS(t *testing.T) {
	m := memFS{
		"pack.yaml":             []byte("id: x\n"),
		"policies/a.yaml":       []byte("a"),
		"policies/deep/b.yaml":  []byte("bb"),
		"tests/cases/one.yaml":  []byte("one"),
		"workflows/w.yaml":      []byte(""),
		"policies/deep/c.yaml":  []byte("ccc"),
		"policies/z/last.yaml":  []byte("z"),
		"policies/deep/d/e.yml": []byte("e"),
	}
	if err := fstest.TestFS(m, "pack.yaml", "policies/a.yaml", "policies/deep/b.yaml", "policies/deep/d/e.yml", "tests/cases/one.yaml", "workflows/w.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestLoadPinned(t *testing.T) {
	want, stored := storedPack(t, "../examples/refund")
	var aFile File
	for _, f := range want.Files {
		if f.Path != ManifestFile {
			aFile = f
			break
		}
	}
	tests := []struct {
		name    string
		edit    func(m blobMap)
		wantErr string // "" = loads and hashes to the pinned hash
	}{
		{"every blob stored", func(blobMap) {}, ""},
		{"manifest not stored", func(m blobMap) { delete(m, want.Hash) }, "is not stored"},
		{"file not stored", func(m blobMap) { delete(m, aFile.Hash) }, "file " + aFile.Path + " is not stored"},
		{"bad manifest line", func(m blobMap) { m[want.Hash] = append([]byte("garbage\n"), want.Manifest...) }, "bad manifest line"},
		{"file changed under its hash", func(m blobMap) { m[aFile.Hash] = append([]byte("# changed\n"), aFile.Data...) }, "hashes to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := blobMap{}
			for k, v := range stored {
				m[k] = v
			}
			tt.edit(m)
			got, err := LoadPinned(context.Background(), m, want.Hash)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("LoadPinned(%s) = %v", want.Hash, err)
				}
				if got.Hash != want.Hash || len(got.Files) != len(want.Files) {
					t.Errorf("LoadPinned(%s) = pack %s with %d files, want %s with %d", want.Hash, got.Hash, len(got.Files), want.Hash, len(want.Files))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadPinned(%s) = %v, want an error containing %q", want.Hash, err, tt.wantErr)
			}
		})
	}
}
