package pack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// BlobReader returns content-addressed blobs: a store, or an export
// bundle, which keep a pinned pack's manifest under the pack's hash and
// each of its files under the file's hash.
type BlobReader interface {
	Blob(ctx context.Context, hash string) ([]byte, error)
}

// LoadPinned rebuilds the pack that hash pins from its stored manifest
// (Pack.Manifest: one "<hash>  <path>" line per file) and files, loads it
// as LoadFS does, and checks that it hashes to hash. A blob that is not
// stored, a malformed manifest line or a pack that hashes to something
// else is an error.
func LoadPinned(ctx context.Context, blobs BlobReader, hash string) (*Pack, error) {
	manifest, err := blobs.Blob(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("pack %s is not stored: %w", hash, err)
	}
	files := memFS{}
	sc := bufio.NewScanner(bytes.NewReader(manifest))
	for sc.Scan() {
		fileHash, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return nil, fmt.Errorf("pack %s: bad manifest line %q", hash, sc.Text())
		}
		data, err := blobs.Blob(ctx, fileHash)
		if err != nil {
			return nil, fmt.Errorf("pack %s: file %s is not stored: %w", hash, name, err)
		}
		files[name] = data
	}
	p, err := LoadFS(files, "pinned:"+hash)
	if err != nil {
		return nil, err
	}
	if p.Hash != hash {
		return nil, fmt.Errorf("pack rebuilt from its stored files hashes to %s, not %s", p.Hash, hash)
	}
	return p, nil
}

// memFS is a read-only file system of files held in memory, by slash
// path; directories are implied by the paths under them. It is what
// LoadPinned loads a pack from: the loader reads files, lists directories
// (fs.Glob) and stats paths.
type memFS map[string][]byte

var (
	_ fs.ReadFileFS = memFS(nil)
	_ fs.ReadDirFS  = memFS(nil)
	_ fs.StatFS     = memFS(nil)
)

func (m memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m[name]; ok {
		return &memFile{info: fileInfo{name: path.Base(name), size: int64(len(data))}, r: bytes.NewReader(data)}, nil
	}
	entries, err := m.ReadDir(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memDir{info: fileInfo{name: path.Base(name), dir: true}, entries: entries}, nil
}

func (m memFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	data, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(data), nil
}

func (m memFS) Stat(name string) (fs.FileInfo, error) {
	f, err := m.Open(name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return f.Stat()
}

// ReadDir lists the files and directories directly under name, sorted by
// name. A directory exists when some file is under it; "." always does.
func (m memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	if _, ok := m[name]; ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	prefix := name + "/"
	if name == "." {
		prefix = ""
	}
	seen := map[string]fs.DirEntry{}
	for p, data := range m {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if child, _, isDir := strings.Cut(rest, "/"); isDir {
			seen[child] = fs.FileInfoToDirEntry(fileInfo{name: child, dir: true})
		} else {
			seen[child] = fs.FileInfoToDirEntry(fileInfo{name: child, size: int64(len(data))})
		}
	}
	if len(seen) == 0 && name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := make([]fs.DirEntry, 0, len(seen))
	for _, e := range seen {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// fileInfo describes a memFS file or directory.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }

// memFile is an open memFS file.
type memFile struct {
	info fileInfo
	r    *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error)                   { return f.info, nil }
func (f *memFile) Read(b []byte) (int, error)                   { return f.r.Read(b) }
func (f *memFile) ReadAt(b []byte, off int64) (int, error)      { return f.r.ReadAt(b, off) }
func (f *memFile) Seek(offset int64, whence int) (int64, error) { return f.r.Seek(offset, whence) }
func (f *memFile) Close() error                                 { return nil }

// memDir is an open memFS directory.
type memDir struct {
	info    fileInfo
	entries []fs.DirEntry
	read    int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}
func (d *memDir) Close() error { return nil }

// ReadDir reads the directory's next n entries as fs.ReadDirFile says:
// with n > 0 at most n, and io.EOF at the end; otherwise all the rest.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.read:]
	if n <= 0 {
		d.read = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	rest = rest[:min(n, len(rest))]
	d.read += len(rest)
	return slices.Clone(rest), nil
}
