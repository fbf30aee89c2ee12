package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/readiness"
)

// The fault tests run the real server while its storage fails under it:
// the data disk fills up, the data disk stalls (a very slow fsync), the
// data directory turns read-only, PostgreSQL drops its connections. In
// each: no answer permits execution without a durable record (every 200
// names a record that is there afterwards), errors say what is wrong, and
// writ recovers by itself, without a restart, when the fault clears.

// faultLoad sends unique checks and remembers what was acknowledged.
type faultLoad struct {
	c      *httpapi.Client
	base   *writ.CheckRequest
	prefix string
	n      atomic.Int64

	mu       sync.Mutex
	acked    []*writ.Receipt
	ackedSeq []int64         // the n of each acknowledged check, for its retry
	failed   []*writ.Receipt // fail-closed receipts
	errs     []error         // other errors
}

func newFaultLoad(t *testing.T, url, prefix string) *faultLoad {
	return &faultLoad{c: httpapi.NewClient(url), base: readExample(t, "../../examples/wf-2302/requests/wf-2302-allow.json"), prefix: prefix}
}

// check sends one new check and reports whether it was acknowledged.
func (l *faultLoad) check(t *testing.T) bool {
	i := l.n.Add(1)
	req := *l.base
	req.IdempotencyKey = fmt.Sprintf("%s-%d", l.prefix, i)
	req.Arguments = map[string]any{"workflow_ref": "WF-2302", "seq": float64(i)}
	// A check that gets no answer at all is a failure, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := l.c.Check(ctx, &req)
	if ctx.Err() != nil {
		t.Errorf("check %s got no answer within 30 s", req.IdempotencyKey)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		if rc.Metadata.RecordID == "" || !rc.SafeToExecute {
			t.Errorf("a 200 receipt without a record or not allowing: %+v", rc.Metadata)
		}
		l.acked = append(l.acked, rc)
		l.ackedSeq = append(l.ackedSeq, i)
		return true
	case rc != nil:
		if rc.SafeToExecute || rc.Disposition.DownstreamAllowed || !rc.Metadata.FailClosed || rc.Metadata.RecordID != "" {
			t.Errorf("a fail-closed receipt that permits something: %+v", rc)
		}
		l.failed = append(l.failed, rc)
	default:
		l.errs = append(l.errs, err)
	}
	return false
}

// loop sends checks from n goroutines until the returned stop is called;
// stop waits for them and may be called more than once.
func (l *faultLoad) loop(t *testing.T, n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
					l.check(t)
				}
			}
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// recovered sends checks until one is acknowledged, for at most 30 s.
func (l *faultLoad) recovered(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if l.check(t) {
			return
		}
	}
	t.Fatalf("writ did not recover within 30 s of the fault clearing; last errors %v", l.lastErrors())
}

// readyz answers GET /readyz: its status, and the checks that failed.
func readyz(t *testing.T, url string) (int, []string) {
	t.Helper()
	// /readyz must answer even while the disk hangs.
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	var report httpapi.ReadyReport
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	var failed []string
	for _, c := range report.Checks {
		if !c.OK {
			failed = append(failed, c.Name+": "+c.Error)
		}
	}
	return resp.StatusCode, failed
}

// notReady checks that GET /readyz answers 503 and that the commits
// check failed, while the store cannot commit.
func notReady(t *testing.T, url string) {
	t.Helper()
	status, failed := readyz(t, url)
	t.Logf("GET /readyz during the fault: %d, failed checks %q", status, failed)
	if status != http.StatusServiceUnavailable || !slices.ContainsFunc(failed, func(f string) bool { return strings.HasPrefix(f, "commits: ") }) {
		t.Errorf("GET /readyz while the store cannot commit = %d, failed checks %q; want 503 and the commits check failed", status, failed)
	}
}

// readyAgain waits, sending no check, until GET /readyz answers 200: the
// server tells it can commit again by itself, without traffic.
func readyAgain(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, failed := readyz(t, url)
		if status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz = %d (%q) 30 s after the fault cleared, want 200", status, failed)
		}
	}
}

// acknowledged waits until n checks in all have been acknowledged, for
// at most 30 s, while the load runs.
func (l *faultLoad) acknowledged(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		got := len(l.acked)
		l.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d checks acknowledged after 30 s; last errors %v", got, n, l.lastErrors())
		}
	}
}

func (l *faultLoad) lastErrors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, rc := range l.failed[max(0, len(l.failed)-2):] {
		out = append(out, rc.Reasons[0].Message)
	}
	for _, err := range l.errs[max(0, len(l.errs)-2):] {
		out = append(out, err.Error())
	}
	return out
}

// nothingLost stops the server and checks that every acknowledged record
// is in the ledger, as acknowledged, and that the ledger verifies.
func (l *faultLoad) nothingLost(t *testing.T, srv *server, verifyArgs ...string) {
	t.Helper()
	c := l.c
	for _, rc := range l.acked {
		rec, err := c.Record(context.Background(), l.base.TenantID, rc.Metadata.RecordID)
		if err != nil || rec.Record.DecisionID != rc.DecisionID {
			t.Errorf("acknowledged record %s: %v", rc.Metadata.RecordID, err)
		}
	}
	srv.stop(t)
	out, err := exec.Command(writBinary, append([]string{"ledger", "verify"}, verifyArgs...)...).CombinedOutput()
	if err != nil {
		t.Errorf("writ ledger verify after the fault: %v\n%s", err, out)
	}
	t.Logf("%d acknowledged, %d failed closed, %d other errors; %s", len(l.acked), len(l.failed), len(l.errs), strings.TrimSpace(string(out)))
}

// tmpfs mounts a tmpfs of size at a fresh directory, or skips the test
// where mounting is not allowed. It is unmounted when the test ends.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func remount(t *testing.T, dir, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -o remount,%s %s: %v %s", opts, dir, err, out)
	}
}

// TestFaultDiskFull: the data disk fills up under load. Checks fail
// closed, the log says the disk is full, and once space is freed writ
// takes checks again without a restart; nothing acknowledged is lost.
func TestFaultDiskFull(t *testing.T) {
	mnt := tmpfs(t, "3m")
	data := filepath.Join(mnt, "data")
	srv := startServer(t, data, "../../examples/wf-2302")
	l := newFaultLoad(t, srv.url, "full")
	for i := 0; ; i++ {
		if i == 20000 {
			t.Fatal("20000 checks did not fill a 3 MiB disk")
		}
		if !l.check(t) && len(l.failed) >= 5 {
			break
		}
	}
	if len(l.errs) > 0 {
		t.Errorf("errors other than fail-closed receipts while the disk was full: %v", l.errs)
	}
	if log := srv.stderr.String(); !strings.Contains(log, "full") {
		t.Errorf("the server's log does not say the disk is full:\n%s", log)
	}
	notReady(t, srv.url)
	// Five seconds after the last failed commit, /readyz asks the store
	// with a test write, which the full disk refuses too.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, failed := readyz(t, srv.url)
		if status == http.StatusServiceUnavailable && slices.Contains(failed, "commits: "+readiness.ErrCannotCommit.Error()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz = %d %q 30 s after the disk filled, want 503 with the test write refused", status, failed)
		}
	}
	remount(t, mnt, "size=64m")
	readyAgain(t, srv.url)
	l.recovered(t)
	for range 20 {
		if !l.check(t) {
			t.Errorf("a check failed after the disk was freed: %v", l.lastErrors())
		}
	}
	l.nothingLost(t, srv, "--data", data)
}

// TestFaultPostgresDropsConnections: PostgreSQL terminates writ's
// connections again and again under load. Checks in flight fail closed,
// the pool reconnects by itself, and nothing acknowledged is lost.
func TestFaultPostgresDropsConnections(t *testing.T) {
	dsn := os.Getenv("WRIT_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WRIT_TEST_POSTGRES is not set")
	}
	store := isolatedSchema(t, dsn)
	data := t.TempDir()
	srv := startServerArgs(t, "--data", data, "--store", store, "--pack", "../../examples/wf-2302")
	l := newFaultLoad(t, srv.url, "pgdrop")
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	stopLoad := l.loop(t, 4)
	killed := 0
	for range 5 {
		l.recovered(t) // load is flowing before each cut
		// Only this server's connections: other tests share the database.
		ports := clientPorts(t, srv.cmd.Process.Pid)
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = 'writ' AND client_port = ANY($1)`, ports).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	l.recovered(t)
	stopLoad()
	if killed == 0 {
		t.Fatal("no connection of writ's was terminated")
	}
	t.Logf("%d connections terminated", killed)
	l.nothingLost(t, srv, "--data", data, "--store", store)
}

// clientPorts returns the local ports of the TCP connections process pid
// holds (read from /proc), so that a test can terminate exactly its
// PostgreSQL sessions.
func clientPorts(t *testing.T, pid int) []int32 {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot read the server's sockets: %v", err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var ports []int32
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			_, local, _ := strings.Cut(f[1], ":")
			var port int32
			if _, err := fmt.Sscanf(local, "%X", &port); err == nil {
				ports = append(ports, port)
			}
		}
	}
	return ports
}

// ext4Loop makes a small ext4 file system on a loop device and mounts it
// at a fresh directory, or skips the test where that is not allowed. It
// is unmounted when the test ends.
func ext4Loop(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", img).CombinedOutput(); err != nil {
		t.Skipf("cannot make an ext4 file system: %v %s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device (needs root and /dev/loop*): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// TestFaultStalledDisk: the data disk stalls under load (fsfreeze: every
// write and fsync blocks until the disk is thawed), as a disk with a very
// slow fsync does. No check is acknowledged on a commit that has not
// returned: while the disk is frozen, checks fail closed with
// commit_timeout once --commit-timeout (1 s here) has passed; once it is
// thawed, writ goes on without a restart, and nothing acknowledged is
// lost.
func TestFaultStalledDisk(t *testing.T) {
	mnt := ext4Loop(t, 64<<20)
	data := filepath.Join(mnt, "data")
	srv := startServerArgs(t, "--data", data, "--pack", "../../examples/wf-2302", "--commit-timeout", "1s")
	l := newFaultLoad(t, srv.url, "stall")
	l.recovered(t)

	// Thaw before anything else is cleaned up: a frozen file system left
	// behind would hang the unmount and every process that writes to it.
	var thawed atomic.Bool
	thaw := func() {
		if thawed.CompareAndSwap(false, true) {
			if out, err := exec.Command("fsfreeze", "--unfreeze", mnt).CombinedOutput(); err != nil {
				t.Errorf("fsfreeze --unfreeze: %v %s", err, out)
			}
		}
	}
	t.Cleanup(thaw)

	stopLoad := l.loop(t, 4)
	l.recovered(t) // load is flowing
	countTimedOut := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, rc := range l.failed {
			if rc.Reasons[0].Code == "commit_timeout" {
				n++
			}
		}
		return n
	}
	// Freezing syncs the file system, so the next write of every reader
	// to SQLite's shared memory blocks too: a freeze that finds no commit
	// under way holds the checks in their reads, before any commit, and
	// they are answered after the thaw. So freeze until one has caught a
	// commit (at most five times).
	for range 5 {
		if out, err := exec.Command("fsfreeze", "--freeze", mnt).CombinedOutput(); err != nil {
			stopLoad()
			thawed.Store(true)
			t.Skipf("cannot freeze the file system: %v %s", err, out)
		}
		time.Sleep(3 * time.Second)
		thaw()
		l.recovered(t)
		if countTimedOut() > 0 {
			break
		}
		thawed.Store(false)
	}
	stopLoad()
	timedOut := countTimedOut()
	if timedOut == 0 {
		t.Errorf("no check failed closed with commit_timeout while the disk was frozen (%d failed closed)", len(l.failed))
	}
	if len(l.errs) > 0 {
		t.Errorf("errors other than fail-closed receipts around the stall: %v", l.errs)
	}
	if log := srv.stderr.String(); !strings.Contains(log, "commit timeout") {
		t.Errorf("the server's log does not say commits timed out:\n%s", log)
	}
	t.Logf("%d checks failed closed with commit_timeout during the stall", timedOut)
	l.nothingLost(t, srv, "--data", data)
}

// TestFaultReadOnlyDisk: the data directory turns read-only under load
// from four clients for 3 s, then writable again. It is a FUSE
// passthrough whose switch makes every change answer EROFS
// (fusefault_test.go): the kernel cannot remount a busy file system
// read-only. While it is read-only, checks fail closed, none is
// acknowledged, and the log says the file system is read-only; once it
// is writable again, writ takes checks without a restart and goes on
// under the same load; nothing acknowledged is lost.
func TestFaultReadOnlyDisk(t *testing.T) {
	mnt, readOnly := readOnlySwitch(t)
	data := filepath.Join(mnt, "data")
	srv := startServerArgs(t, "--data", data, "--pack", "../../examples/wf-2302", "--commit-timeout", "1s")
	l := newFaultLoad(t, srv.url, "ro")
	l.recovered(t) // SQLite works on the mount at all
	stopLoad := l.loop(t, 4)
	defer func() { stopLoad() }()
	l.acknowledged(t, 100) // load is flowing

	counts := func() (acked, failed int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.acked), len(l.failed)
	}
	_, failedBefore := counts()
	readOnly.Store(true)
	// A check whose commit returned just before the switch may still be
	// answered after it: count only from a second in.
	time.Sleep(time.Second)
	ackedFrom, _ := counts()
	time.Sleep(2 * time.Second)
	ackedTo, failedTo := counts()
	notReady(t, srv.url)
	// Readiness comes back with no check sent: the load resumes after.
	stopLoad()
	readOnly.Store(false)
	readyAgain(t, srv.url)
	stopLoad = l.loop(t, 4)
	l.recovered(t)
	l.acknowledged(t, ackedTo+100) // and goes on
	stopLoad()

	if ackedTo != ackedFrom {
		t.Errorf("%d checks were acknowledged while the data directory was read-only", ackedTo-ackedFrom)
	}
	failedClosed := failedTo - failedBefore
	if failedClosed == 0 {
		t.Errorf("no check failed closed while the data directory was read-only")
	}
	if len(l.errs) > 0 {
		t.Errorf("errors other than fail-closed receipts around the fault: %v", l.errs)
	}
	if log := srv.stderr.String(); !strings.Contains(log, "read-only file system") {
		t.Errorf("the server's log does not say the data directory is on a read-only file system:\n%s", log)
	}
	t.Logf("%d checks failed closed while the data directory was read-only", failedClosed)
	l.nothingLost(t, srv, "--data", data)
}
