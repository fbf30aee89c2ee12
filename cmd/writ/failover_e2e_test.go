package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCluster is a private PostgreSQL server on a loopback port, run as the
// postgres system user from the installed binaries.
type pgCluster struct {
	bin, dir string
	port     int
	cred     *syscall.Credential
}

// pgBinaries finds the PostgreSQL server binaries and the user to run
// them as, or skips the test.
func pgBinaries(t *testing.T) (string, *syscall.Credential) {
	t.Helper()
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Skipf("no PostgreSQL server binaries (pg_config): %v", err)
	}
	bin := strings.TrimSpace(string(out))
	for _, b := range []string{"initdb", "pg_ctl", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Skipf("no %s in %s", b, bin)
		}
	}
	if os.Getuid() != 0 {
		t.Skip("needs root, to run PostgreSQL as the postgres user")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return bin, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// run runs a PostgreSQL binary as the postgres user.
func (c *pgCluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = filepath.Dir(c.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func (c *pgCluster) appendConf(t *testing.T, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(c.dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

func (c *pgCluster) pgctl(t *testing.T, args ...string) {
	t.Helper()
	c.run(t, "pg_ctl", append([]string{"-D", c.dir, "-l", c.dir + ".log", "-w", "-t", "60"}, args...)...)
}

func (c *pgCluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// TestPostgresRestartAndFailover runs writ on a primary with a
// synchronous standby, both private servers on loopback ports, through a
// multi-host connection string. Under load, the primary is restarted
// (immediate shutdown, so a crash), then killed for good and the standby
// promoted. writ carries on by itself each time; every acknowledged
// record is on the new primary and the ledger there verifies.
func TestPostgresRestartAndFailover(t *testing.T) {
	bin, cred := pgBinaries(t)
	base, err := os.MkdirTemp("", "writ-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chown(base, int(cred.Uid), int(cred.Gid)); err != nil {
		t.Fatal(err)
	}
	primary := &pgCluster{bin: bin, dir: filepath.Join(base, "primary"), port: freePort(t), cred: cred}
	standby := &pgCluster{bin: bin, dir: filepath.Join(base, "standby"), port: freePort(t), cred: cred}
	primary.run(t, "initdb", "-D", primary.dir, "-U", "postgres", "--auth=trust", "--no-sync")
	primary.appendConf(t,
		fmt.Sprintf("port = %d", primary.port), "listen_addresses = '127.0.0.1'", fmt.Sprintf("unix_socket_directories = '%s'", base),
		"wal_level = replica", "max_wal_senders = 4", "synchronous_standby_names = 'standby1'", "fsync = on")
	primary.pgctl(t, "start")
	stopped := map[*pgCluster]bool{}
	t.Cleanup(func() {
		for _, c := range []*pgCluster{standby, primary} {
			if !stopped[c] {
				c.run(t, "pg_ctl", "-D", c.dir, "-m", "immediate", "stop")
			}
		}
	})
	standby.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres", "-D", standby.dir, "-R", "-X", "stream")
	// Promoted, the standby has no standby of its own to wait for: it
	// must not inherit the primary's synchronous_standby_names (its
	// commits would wait forever).
	standby.appendConf(t, fmt.Sprintf("port = %d", standby.port), "synchronous_standby_names = ''",
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=standby1'", primary.port))
	standby.pgctl(t, "start")
	waitSync(t, primary)

	store := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", primary.port, standby.port)
	data := t.TempDir()
	srv := startServerArgs(t, "--data", data, "--store", store, "--pack", "../../examples/wf-2302")
	l := newFaultLoad(t, srv.url, "failover")
	stopLoad := l.loop(t, 4)
	defer stopLoad()
	l.recovered(t)
	// 1. The primary crashes and restarts under load.
	primary.pgctl(t, "-m", "immediate", "restart")
	l.recovered(t)
	waitSync(t, primary)
	for range 50 {
		l.recovered(t)
	}
	// 2. The primary dies for good; the standby is promoted.
	primary.run(t, "pg_ctl", "-D", primary.dir, "-m", "immediate", "stop")
	stopped[primary] = true
	standby.pgctl(t, "promote")
	l.recovered(t)
	for range 50 {
		l.recovered(t)
	}
	stopLoad()
	l.nothingLost(t, srv, "--data", data, "--store", standby.dsn())
}

// waitSync waits until the primary has a synchronous standby streaming.
func waitSync(t *testing.T, primary *pgCluster) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := pgx.Connect(ctx, primary.dsn())
		if err != nil {
			continue
		}
		var n int
		err = c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE application_name = 'standby1' AND sync_state = 'sync' AND state = 'streaming'`).Scan(&n)
		c.Close(ctx)
		if err == nil && n == 1 {
			return
		}
	}
	t.Fatal("the standby did not become a streaming synchronous standby within 60 s")
}
