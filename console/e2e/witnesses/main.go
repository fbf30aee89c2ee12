// Command witnesses runs real transparency-log witnesses (the
// transparency-dev witness, through witness/witnesstest) for a writ data
// directory, so that the console's browser tests can show a tenant's
// witnesses. It makes the data directory's signing key if it has none
// (the witnesses must know the log's key before writ serve starts),
// builds and starts n witnesses that witness the tenant's log, writes the
// --witnesses file for writ serve, prints "ready" and runs until its
// standard input closes or it is sent SIGTERM or SIGINT; then it stops
// the witnesses and removes their state.
//
//	witnesses -data DIR -tenant T -out FILE [-n N] [-ledger-name NAME]
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/witness/witnesstest"
)

func main() {
	r := &runner{}
	err := r.run(os.Args[1:])
	r.cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "witnesses:", err)
		os.Exit(1)
	}
}

// runner is the testing.TB witnesstest needs, outside a test: a fatal
// error stops the run (after the cleanups), and cleanups run at exit.
type runner struct {
	testing.TB // nil: only the methods below are called
	cleanups   []func()
	failed     bool
}

type fatal struct{ msg string }

func (r *runner) Helper()                         {}
func (r *runner) Failed() bool                    { return r.failed }
func (r *runner) Cleanup(f func())                { r.cleanups = append(r.cleanups, f) }
func (r *runner) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (r *runner) Fatal(args ...any)               { r.failed = true; panic(fatal{fmt.Sprint(args...)}) }
func (r *runner) Fatalf(format string, args ...any) {
	r.failed = true
	panic(fatal{fmt.Sprintf(format, args...)})
}

func (r *runner) TempDir() string {
	dir, err := os.MkdirTemp("", "writ-e2e-witness-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (r *runner) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func (r *runner) run(args []string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(fatal)
			if !ok {
				panic(p)
			}
			err = errors.New(f.msg)
		}
	}()
	fs := flag.NewFlagSet("witnesses", flag.ContinueOnError)
	data := fs.String("data", "", "writ data directory (its keys/ ring signs the checkpoints)")
	tenant := fs.String("tenant", "", "the tenant whose log the witnesses witness")
	out := fs.String("out", "", "the --witnesses file to write for writ serve")
	n := fs.Int("n", 1, "how many witnesses")
	ledgerName := fs.String("ledger-name", "writ", "the ledger name, as writ serve --ledger-name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || *tenant == "" || *out == "" || *n < 1 {
		return errors.New("usage: witnesses -data DIR -tenant T -out FILE [-n N]")
	}
	ring, err := keyring.Open(filepath.Join(*data, "keys"))
	if err != nil {
		return err
	}
	keys := ring.Keys()
	if len(keys) == 0 {
		k, err := ring.Generate(rand.Reader, time.Now().Add(-time.Minute), "")
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	var logs []witnesstest.Log
	for _, k := range keys {
		logs = append(logs, witnesstest.Log{Origin: *ledgerName + "/" + *tenant, Key: k.VerifierKey})
	}
	bin := witnesstest.Build(r, r.TempDir())
	var cfg struct {
		Witnesses []map[string]string `json:"witnesses"`
	}
	for i := range *n {
		w := witnesstest.Start(r, bin, fmt.Sprintf("w%d.example/witness", i+1), logs)
		cfg.Witnesses = append(cfg.Witnesses, map[string]string{"url": w.URL, "key": w.KeyText})
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	fmt.Println("ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() { io.Copy(io.Discard, bufio.NewReader(os.Stdin)); close(eof) }()
	select {
	case <-stop:
	case <-eof:
	}
	return nil
}
