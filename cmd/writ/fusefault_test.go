package main

// A data directory that turns read-only under a running server, for
// TestFaultReadOnlyDisk. The kernel cannot do this to a file system that
// has files open for writing (mount -o remount,ro answers "busy"), and
// marking a loop device read-only under a mounted ext4 only logs a
// warning. So the data directory is a FUSE passthrough of a real
// directory, served from inside the test process, with a switch: while it
// is on, every operation that would change the file system answers EROFS,
// as a file system the kernel has remounted read-only does; reads go on.

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnlySwitch mounts a passthrough of a fresh directory at another
// fresh directory and returns the mount point and the switch that makes
// it read-only. It skips the test where FUSE cannot be mounted (no
// /dev/fuse, not root). When the test ends the switch is turned off and
// the file system unmounted.
func readOnlySwitch(t *testing.T) (dir string, readOnly *atomic.Bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a FUSE file system without fusermount needs root")
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		t.Skipf("cannot mount a FUSE file system: %v", err)
	} else {
		f.Close()
	}
	backing := filepath.Join(t.TempDir(), "backing")
	dir = filepath.Join(t.TempDir(), "mnt")
	for _, d := range []string{backing, dir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		t.Fatal(err)
	}
	readOnly = new(atomic.Bool)
	ro := &roNode{LoopbackNode: root.(*fs.LoopbackNode), on: readOnly}
	// The loopback computes paths from its root node: make it the wrapper.
	ro.RootData.RootNode = ro
	srv, err := fs.Mount(dir, ro, &fs.Options{MountOptions: fuse.MountOptions{
		// mount(2) directly: there is no fusermount here, and as root
		// none is needed.
		DirectMountStrict: true,
		FsName:            backing,
		Name:              "writ-rofault",
		// Nothing here reads or writes extended attributes; without
		// them the kernel does not ask for security.capability before
		// every write.
		DisableXAttrs: true,
		// go-fuse never asks for the kernel's writeback cache, so every
		// write(2) reaches Write below before it returns, and a write
		// refused here fails in the writer. Shared mmap (SQLite's -shm
		// file) still works: the files are not opened with direct I/O,
		// so the kernel keeps their pages in its cache and writes dirty
		// mapped pages back through Write.
	}})
	if err != nil {
		t.Skipf("cannot mount a FUSE file system: %v", err)
	}
	t.Cleanup(func() {
		readOnly.Store(false)
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir, readOnly
}

// roNode is a loopback node that refuses every change while on is set.
type roNode struct {
	*fs.LoopbackNode
	on *atomic.Bool
}

var (
	_ fs.NodeWrapChilder = (*roNode)(nil)
	_ fs.NodeOpener      = (*roNode)(nil)
	_ fs.NodeCreater     = (*roNode)(nil)
	_ fs.NodeSetattrer   = (*roNode)(nil)
)

// WrapChild makes every node below the root an roNode too.
func (n *roNode) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &roNode{LoopbackNode: ops.(*fs.LoopbackNode), on: n.on}
}

func (n *roNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.on.Load() && (flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_CREAT) != 0) {
		return nil, 0, syscall.EROFS
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return wrapFile(fh, n.on), fl, errno
}

func (n *roNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.on.Load() {
		return nil, nil, 0, syscall.EROFS
	}
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, wrapFile(fh, n.on), fl, errno
}

func (n *roNode) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.on.Load() {
		return nil, nil, 0, syscall.EROFS
	}
	in, fh, fl, errno := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	return in, wrapFile(fh, n.on), fl, errno
}

func (n *roNode) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.on.Load() {
		return nil, syscall.EROFS
	}
	return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

func (n *roNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.on.Load() {
		return nil, syscall.EROFS
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *roNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.on.Load() {
		return nil, syscall.EROFS
	}
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *roNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.on.Load() {
		return nil, syscall.EROFS
	}
	if t, ok := target.(*roNode); ok {
		target = t.LoopbackNode
	}
	return n.LoopbackNode.Link(ctx, target, name, out)
}

func (n *roNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.on.Load() {
		return syscall.EROFS
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *roNode) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.on.Load() {
		return syscall.EROFS
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *roNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if n.on.Load() {
		return syscall.EROFS
	}
	if p, ok := newParent.(*roNode); ok {
		newParent = p.LoopbackNode
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

// Setattr refuses every change of attributes: mode, owner, times and
// size (truncate).
func (n *roNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.on.Load() {
		return syscall.EROFS
	}
	if rf, ok := f.(*roFile); ok {
		f = rf.f
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

func (n *roNode) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	if n.on.Load() {
		return 0, syscall.EROFS
	}
	if f, ok := fhIn.(*roFile); ok {
		fhIn = f.f
	}
	if f, ok := fhOut.(*roFile); ok {
		fhOut = f.f
	}
	return n.LoopbackNode.CopyFileRange(ctx, fhIn, offIn, out, fhOut, offOut, length, flags)
}

// roFile is an open file of an roNode. It forwards reads and refuses
// writes, fsync and allocation while the switch is on. It deliberately
// does not offer the kernel a passthrough file descriptor (as
// fs.LoopbackFile does): with FUSE passthrough the kernel would write to
// the backing file itself and never ask Write. Nor does it take locks:
// the kernel keeps POSIX and OFD locks of a FUSE file itself when the
// file system does not ask for them, which is what SQLite needs.
type roFile struct {
	f  *fs.LoopbackFile
	on *atomic.Bool
}

var (
	_ fs.FileReader    = (*roFile)(nil)
	_ fs.FileWriter    = (*roFile)(nil)
	_ fs.FileFsyncer   = (*roFile)(nil)
	_ fs.FileFlusher   = (*roFile)(nil)
	_ fs.FileReleaser  = (*roFile)(nil)
	_ fs.FileGetattrer = (*roFile)(nil)
	_ fs.FileSetattrer = (*roFile)(nil)
	_ fs.FileLseeker   = (*roFile)(nil)
	_ fs.FileAllocater = (*roFile)(nil)
)

func wrapFile(fh fs.FileHandle, on *atomic.Bool) fs.FileHandle {
	if f, ok := fh.(*fs.LoopbackFile); ok {
		return &roFile{f: f, on: on}
	}
	return fh
}

func (f *roFile) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.f.Read(ctx, buf, off)
}

func (f *roFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if f.on.Load() {
		return 0, syscall.EROFS
	}
	return f.f.Write(ctx, data, off)
}

// Fsync fails as on a file system remounted read-only after an error:
// nothing written can be made durable.
func (f *roFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if f.on.Load() {
		return syscall.EROFS
	}
	return f.f.Fsync(ctx, flags)
}

// Flush (on close) has nothing to write: every write reached Write
// before it returned. It succeeds on a read-only file system too.
func (f *roFile) Flush(ctx context.Context) syscall.Errno { return f.f.Flush(ctx) }

func (f *roFile) Release(ctx context.Context) syscall.Errno { return f.f.Release(ctx) }

func (f *roFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.f.Getattr(ctx, out)
}

func (f *roFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if f.on.Load() {
		return syscall.EROFS
	}
	return f.f.Setattr(ctx, in, out)
}

func (f *roFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.f.Lseek(ctx, off, whence)
}

func (f *roFile) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if f.on.Load() {
		return syscall.EROFS
	}
	return f.f.Allocate(ctx, off, size, mode)
}
