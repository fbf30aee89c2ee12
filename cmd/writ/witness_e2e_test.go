package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/witness/witnesstest"
)

var (
	omniwitnessOnce sync.Once
	omniwitnessBin  string
)

// omniwitness builds the transparency-dev witness once per test binary,
// beside the writ binary TestMain built (and removes).
func omniwitness(t *testing.T) string {
	t.Helper()
	omniwitnessOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(writBinary), "omniwitness")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		omniwitnessBin = witnesstest.Build(t, dir)
	})
	if omniwitnessBin == "" {
		t.Fatal("the witness was not built (see the first test that needed it)")
	}
	return omniwitnessBin
}

// witnessedData makes a data directory whose signing key exists before
// the server starts, and starts n witnesses that know tenant acme's log
// under that key. It returns the witnesses, the --witnesses file and
// each witness's key file (for verify-bundle --witness).
func witnessedData(t *testing.T, data string, n int) ([]*witnesstest.Witness, string, []string) {
	t.Helper()
	ring, err := keyring.Open(filepath.Join(data, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := ring.Generate(rand.Reader, time.Now().Add(-time.Minute), "")
	if err != nil {
		t.Fatal(err)
	}
	bin := omniwitness(t)
	logs := []witnesstest.Log{{Origin: "writ/acme", Key: k.VerifierKey}}
	var ws []*witnesstest.Witness
	var cfg struct {
		Witnesses []map[string]string `json:"witnesses"`
	}
	var keyFiles []string
	dir := t.TempDir()
	for i := range n {
		w := witnesstest.Start(t, bin, fmt.Sprintf("w%d.example/witness", i+1), logs)
		ws = append(ws, w)
		cfg.Witnesses = append(cfg.Witnesses, map[string]string{"url": w.URL, "key": w.KeyText})
		kf := filepath.Join(dir, fmt.Sprintf("w%d.vkey", i+1))
		if err := os.WriteFile(kf, []byte(w.KeyText+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		keyFiles = append(keyFiles, kf)
	}
	data2, _ := json.Marshal(cfg)
	file := filepath.Join(dir, "witnesses.json")
	if err := os.WriteFile(file, data2, 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, file, keyFiles
}

// checkLoad sends n allowed-refund checks from conc clients at once,
// each with its own idempotency key.
func checkLoad(t *testing.T, url string, tag string, n, conc int) {
	t.Helper()
	base := readExample(t, "../../examples/refund/requests/refund-allow.json")
	c := httpapi.NewClient(url)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range conc {
		wg.Go(func() {
			for i := range next {
				req := *base
				req.IdempotencyKey = fmt.Sprintf("ik_%s_%d", tag, i)
				req.Evidence = append([]writ.Evidence(nil), base.Evidence...)
				for j := range req.Evidence {
					fresh := time.Now().Add(-10 * time.Minute)
					req.Evidence[j].ObservedAt = &fresh
				}
				if _, err := c.Check(context.Background(), &req); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Check: %v", err)
	}
}

var metricLine = regexp.MustCompile(`^(writ_witness_\w+)\{witness="([^"]+)"\} (\S+)$`)

// scrapeWitnessMetrics reads the server's writ_witness_* gauges and counters,
// by "name witness".
func scrapeWitnessMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := metricLine.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			out[m[1]+" "+m[2]] = v
		}
	}
	return out
}

// waitFor polls cond until it holds, failing the test if it does not
// within a generous bound (a hung witness or server, not a slow one).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// caughtUp: every witness has cosigned every tenant's newest checkpoint,
// and has cosigned at least once.
func caughtUp(t *testing.T, url string, ws []*witnesstest.Witness) func() bool {
	return func() bool {
		m := scrapeWitnessMetrics(t, url)
		for _, w := range ws {
			n := w.Key.Name()
			if m["writ_witness_behind_tenants "+n] != 0 || m["writ_witness_cosignatures_total "+n] == 0 {
				return false
			}
		}
		return true
	}
}

func runWrit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(writBinary, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestWitnessedLedgerEndToEnd: writ serve with two real witnesses (the
// transparency-dev witness on loopback); checks under load; the
// witnesses cosign each new checkpoint; an export through the cosigned
// checkpoints passes verify-bundle --witness. Then the ledger is cut at
// a checkpoint (the data directory restored from a copy taken then) and
// grows again, its checkpoints signed by the operator's own key: the
// witnesses refuse to cosign (a conflict: /readyz degraded, the conflict
// counter moves), and verify-bundle --witness fails, naming
// witness_quorum.
func TestWitnessedLedgerEndToEnd(t *testing.T) {
	data := t.TempDir()
	ws, witnessesFile, keyFiles := witnessedData(t, data, 2)
	args := []string{"--data", data, "--pack", "../../examples/refund", "--witnesses", witnessesFile,
		"--witness-poll", "100ms", "--checkpoint-every", "50", "--checkpoint-interval", "200ms"}

	// Phase 1: load, cosigned; then a copy of the data directory, cut at
	// the checkpoint the shutdown signs.
	srv := startServerArgs(t, args...)
	checkLoad(t, srv.url, "a", 120, 8)
	waitFor(t, "both witnesses to cosign the newest checkpoint", caughtUp(t, srv.url, ws))
	srv.stop(t)
	backup := t.TempDir()
	copyTree(t, data, backup)

	// Phase 2: more load; the witnesses cosign the grown log.
	srv = startServerArgs(t, args...)
	checkLoad(t, srv.url, "b", 200, 8)
	waitFor(t, "both witnesses to cosign the newest checkpoint", caughtUp(t, srv.url, ws))
	srv.stop(t)

	good := filepath.Join(t.TempDir(), "good.tar")
	out, code := runWrit(t, "ledger", "export", "--data", data, "--cosigned", "--out", good)
	if code != 0 || !strings.Contains(out, "witness cosignature") {
		t.Fatalf("writ ledger export --cosigned = exit %d:\n%s", code, out)
	}
	verify := append([]string{"ledger", "verify-bundle", "--trust-bundle-keys"}, witnessFlags(keyFiles)...)
	out, code = runWrit(t, append(verify, "--min-witnesses", "2", good)...)
	if code != 0 || !strings.Contains(out, "witnessed: each tenant's newest checkpoint carries valid cosignatures of at least 2") {
		t.Fatalf("verify-bundle --witness (intact, witnessed) = exit %d:\n%s", code, out)
	}
	// A witness the bundle was not cosigned by is not counted.
	_, _, strangerKeys := witnessedData(t, t.TempDir(), 1)
	out, code = runWrit(t, "ledger", "verify-bundle", "--witness", strangerKeys[0], good)
	if code != 3 || !strings.Contains(out, "witness_quorum") {
		t.Errorf("verify-bundle --witness (a witness that never cosigned) = exit %d, want 3 and witness_quorum:\n%s", code, out)
	}

	// Phase 3: the tail cut. The operator runs writ on the copy, which
	// ends at an earlier checkpoint; new checks grow another history.
	srv = startServerArgs(t, append([]string{"--data", backup}, args[2:]...)...)
	checkLoad(t, srv.url, "c", 60, 4)
	waitFor(t, "both witnesses to report the conflict", func() bool {
		m := scrapeWitnessMetrics(t, srv.url)
		return m["writ_witness_conflicts_total "+ws[0].Key.Name()] > 0 && m["writ_witness_conflicts_total "+ws[1].Key.Name()] > 0
	})
	resp, err := http.Get(srv.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready httpapi.ReadyReport
	json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ready.Status != "degraded" {
		t.Errorf("GET /readyz after a witness conflict = %d %q, want 200 degraded", resp.StatusCode, ready.Status)
	}
	var named bool
	for _, c := range ready.Checks {
		if c.Name == "witnesses" && !c.OK && c.Degraded && strings.Contains(c.Error, "tenant acme") {
			named = true
		}
	}
	if !named {
		t.Errorf("GET /readyz checks = %+v, want a degraded witnesses check naming tenant acme", ready.Checks)
	}
	if !strings.Contains(srv.stderr.String(), "WITNESS CONFLICT") {
		t.Errorf("the server's log does not report the witness conflict:\n%s", srv.stderr)
	}
	srv.stop(t)

	cut := filepath.Join(t.TempDir(), "cut.tar")
	if out, code := runWrit(t, "ledger", "export", "--data", backup, "--out", cut); code != 0 {
		t.Fatalf("writ ledger export (cut) = exit %d:\n%s", code, out)
	}
	// Without witnesses, the cut and re-grown ledger verifies: its own key
	// signed it all.
	if out, code := runWrit(t, "ledger", "verify-bundle", "--trust-bundle-keys", cut); code != 0 {
		t.Fatalf("verify-bundle (cut, no witnesses) = exit %d, want 0:\n%s", code, out)
	}
	out, code = runWrit(t, append(verify, cut)...)
	if code != 3 || !strings.Contains(out, "witness_quorum\ttenant acme") || !strings.Contains(out, "were never witnessed") {
		t.Fatalf("verify-bundle --witness (cut and re-grown) = exit %d, want 3 and witness_quorum naming acme:\n%s", code, out)
	}
}

func witnessFlags(keyFiles []string) []string {
	var out []string
	for _, f := range keyFiles {
		out = append(out, "--witness", f)
	}
	return out
}

// copyTree copies a directory tree, keeping each file's permissions (the
// key ring refuses keys others can read).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), info.Mode().Perm())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}
