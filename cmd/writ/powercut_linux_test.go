package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// ext4Shutdown is EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)), and
// shutdownNoLogFlush its EXT4_GOING_FLAGS_NOLOGFLUSH argument: the file
// system stops at once, neither data nor its journal flushed, which is
// what a power cut leaves on the disk.
const (
	ext4Shutdown       = 0x8004587d
	shutdownNoLogFlush = 2
)

// powerDisk is an ext4 file system in a file, loop-mounted, whose power
// can be cut: what was not synced before the cut is what a machine that
// lost its power would lose.
type powerDisk struct {
	t     testing.TB
	image string
	Dir   string
}

// newPowerDisk mounts a fresh ext4 file system, or skips the test when
// this machine cannot: it needs root, loop devices and mkfs.ext4.
func newPowerDisk(t testing.TB) *powerDisk {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the power-cut test needs root (it loop-mounts an ext4 file system)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("the power-cut test needs loop devices: /dev/loop-control is missing")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("the power-cut test needs mkfs.ext4 (e2fsprogs)")
	}
	tmp := t.TempDir()
	d := &powerDisk{t: t, image: filepath.Join(tmp, "disk.img"), Dir: filepath.Join(tmp, "mnt")}
	if err := os.Mkdir(d.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.image, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(d.image, 128<<20); err != nil {
		t.Fatal(err)
	}
	d.run("mkfs.ext4", "-q", "-F", d.image)
	d.mount()
	t.Cleanup(func() { exec.Command("umount", d.Dir).Run() })
	return d
}

func (d *powerDisk) run(name string, args ...string) {
	d.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		d.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func (d *powerDisk) mount() {
	d.t.Helper()
	// mount -o loop fails on a machine without free loop devices or
	// the right to use them: skip, saying so.
	if out, err := exec.Command("mount", "-o", "loop", d.image, d.Dir).CombinedOutput(); err != nil {
		d.t.Skipf("the power-cut test cannot loop-mount ext4 here: %v: %s", err, bytes.TrimSpace(out))
	}
}

// Cut shuts the file system down as a power cut would (nothing more is
// written), runs after (to stop the processes that hold files open on
// it), then unmounts it and mounts it again: the journal is replayed and
// what was durable before the cut is all there is.
func (d *powerDisk) Cut(after ...func()) {
	d.t.Helper()
	f, err := os.Open(d.Dir)
	if err != nil {
		d.t.Fatal(err)
	}
	arg := uint32(shutdownNoLogFlush)
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ext4Shutdown, uintptr(unsafe.Pointer(&arg)))
	f.Close()
	if errno != 0 {
		d.t.Fatalf("EXT4_IOC_SHUTDOWN: %v", errno)
	}
	for _, f := range after {
		f()
	}
	d.run("umount", d.Dir)
	d.mount()
}

// TestBindingKeySurvivesPowerCut is the binding-key case of issue 38: a
// key written on first start and not synced was lost (0 bytes) by a cut
// a few seconds later, and writ could not start again. The key must be
// durable before it is used.
func TestBindingKeySurvivesPowerCut(t *testing.T) {
	d := newPowerDisk(t)
	dataDir := filepath.Join(d.Dir, "writ-data")
	key, err := loadBindingKey(t.Context(), nil, dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	d.Cut()
	got, err := loadBindingKey(t.Context(), nil, dataDir, "")
	if err != nil {
		t.Fatalf("loadBindingKey after a power cut: %v", err)
	}
	if !bytes.Equal(got, key) {
		t.Fatalf("loadBindingKey after a power cut = a different key: the first was lost")
	}
}

// TestFaultPowerCut cuts the power of the data disk of a running `writ
// serve` (SQLite) at several moments: just after the first start, just
// after a signing-key rotation, and at a random moment under load. After
// each cut the disk is mounted again and writ must start on it; every
// check acknowledged before the cut must be in the ledger, the ledger
// must verify, and every acknowledged check retried with its idempotency
// key must be answered as before (the same decision), never with 409.
func TestFaultPowerCut(t *testing.T) {
	for _, moment := range []string{"first start", "key rotation", "under load"} {
		t.Run(moment, func(t *testing.T) {
			d := newPowerDisk(t)
			data := filepath.Join(d.Dir, "data")
			args := []string{"--data", data, "--pack", "../../examples/wf-2302"}
			srv := startServerArgs(t, args...)
			l := newFaultLoad(t, srv.url, "cut")
			switch moment {
			case "first start":
				for range 20 {
					l.check(t)
				}
			case "key rotation":
				for range 20 {
					l.check(t)
				}
				out, err := exec.Command(writBinary, "ledger", "keys", "rotate", "--keys", filepath.Join(data, "keys")).CombinedOutput()
				if err != nil {
					t.Fatalf("writ ledger keys rotate: %v\n%s", err, out)
				}
			case "under load":
				stop := l.loop(t, 4)
				l.acknowledged(t, 200)
				time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
				defer stop()
				d.Cut(func() { srv.kill(t); stop() })
			}
			if moment != "under load" {
				d.Cut(func() { srv.kill(t) })
			}
			if len(l.acked) == 0 {
				t.Fatalf("no check was acknowledged before the cut; errors %v", l.lastErrors())
			}

			srv = startServerArgs(t, args...)
			l.c = newFaultLoad(t, srv.url, "cut").c
			l.retriedAsBefore(t)
			l.nothingLost(t, srv, "--data", data)
		})
	}
}

// kill stops the server at once (SIGKILL), as a power cut does.
func (s *server) kill(t *testing.T) {
	t.Helper()
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// retriedAsBefore sends every acknowledged check again, with its
// idempotency key and arguments, and expects the same decision.
func (l *faultLoad) retriedAsBefore(t *testing.T) {
	t.Helper()
	for i, rc := range l.acked {
		seq := l.ackedSeq[i]
		req := *l.base
		req.IdempotencyKey = fmt.Sprintf("%s-%d", l.prefix, seq)
		req.Arguments = map[string]any{"workflow_ref": "WF-2302", "seq": float64(seq)}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		again, err := l.c.Check(ctx, &req)
		cancel()
		if err != nil {
			t.Errorf("retry of acknowledged check %s after the cut: %v", req.IdempotencyKey, err)
			continue
		}
		if again.DecisionID != rc.DecisionID {
			t.Errorf("retry of acknowledged check %s after the cut = decision %s, want %s", req.IdempotencyKey, again.DecisionID, rc.DecisionID)
		}
	}
	t.Logf("%d acknowledged checks retried after the cut", len(l.acked))
}
