package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"sync"
	"syscall"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger/verify"
)

// crashloop proves that a crash loses nothing acknowledged: it runs
// cycles of concurrent checks against `writ serve`, kills the server with
// SIGKILL at a random moment, and before the next cycle checks that every
// check answered 200 has its record in the store and that `writ ledger
// verify` finds the ledger intact. The same data directory (and store)
// carries over from cycle to cycle, so each restart recovers from every
// crash before it.
func (m *Main) crashloop(ctx context.Context, args []string) error {
	fs := m.flags("crashloop", "--pack DIR [--data DIR] [--store URL] [--cycles N]")
	packDir := fs.String("pack", "", "pack directory to serve (required)")
	reqFile := fs.String("request", "", "check request to send, made unique per check (default: the pack's first requests/*allow*.json)")
	data := fs.String("data", "", "data directory carried over between cycles (default: a fresh temporary directory, removed at the end)")
	storeURL := fs.String("store", "", storeUsage)
	cycles := fs.Int("cycles", 20, "crash cycles to run")
	clients := fs.Int("clients", 4, "concurrent clients sending checks")
	killMin := fs.Duration("kill-min", 10*time.Millisecond, "earliest moment of the kill, after the cycle's first acknowledged check")
	killMax := fs.Duration("kill-max", 200*time.Millisecond, "latest moment of the kill, after the cycle's first acknowledged check")
	seed := fs.Uint64("seed", 0, "seed of the kill moments (default: from the clock); printed, to repeat a run")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *packDir == "" || fs.NArg() != 0 || *cycles < 1 || *clients < 1 || *killMin < 0 || *killMax < *killMin {
		return usagef("usage: writ crashloop --pack DIR [--request FILE] [--data DIR] [--store URL] [--cycles N] [--clients N] [--kill-min D] [--kill-max D] [--seed N] [--json]")
	}
	if *reqFile == "" {
		files, _ := filepath.Glob(filepath.Join(*packDir, "requests", "*allow*.json"))
		if len(files) == 0 {
			return usagef("crashloop: %s/requests has no *allow*.json; name a request with --request", *packDir)
		}
		slices.Sort(files)
		*reqFile = files[0]
	}
	raw, err := os.ReadFile(*reqFile)
	if err != nil {
		return err
	}
	var base writ.CheckRequest
	if err := json.Unmarshal(raw, &base); err != nil {
		return fmt.Errorf("%s: %w", *reqFile, err)
	}
	if *data == "" {
		dir, err := os.MkdirTemp("", "writ-crashloop-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*data = dir
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	l := &crashLoop{m: m, exe: exe, pack: *packDir, data: *data, store: *storeURL, base: &base, clients: *clients,
		rng: rand.New(rand.NewPCG(*seed, 0x77726974)), killMin: *killMin, killMax: *killMax,
		run: fmt.Sprintf("%x", *seed), lost: map[ack]bool{}, report: m.Stdout}
	if *asJSON {
		l.report = m.Stderr
	} else {
		fmt.Fprintf(m.Stdout, "crashloop: %d cycles, %d clients, kill %s–%s after the first acknowledged check, seed %d, data %s\n",
			*cycles, *clients, *killMin, *killMax, *seed, *data)
	}
	start := time.Now()
	sum := crashSummary{Seed: *seed}
	for i := 1; i <= *cycles; i++ {
		c, err := l.cycle(ctx, i)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		sum.Cycles++
		sum.Acknowledged += c.acked
		sum.Lost += c.lost
		sum.Records = c.records
		if !*asJSON {
			fmt.Fprintf(m.Stdout, "cycle %d: killed %s after the first acknowledgement; %d acknowledged, %d lost; %s\n",
				i, c.killedAfter.Round(time.Millisecond), c.acked, c.lost, c.verify)
		}
		if c.lost > 0 || !c.intact {
			sum.Failed = true
			break
		}
	}
	// Every acknowledgement of every cycle, once more at the end: none
	// was lost by a later crash either (a record a cycle found lost is
	// not counted again).
	lost, err := l.missing(ctx, l.all)
	if err != nil {
		return err
	}
	sum.Lost += lost
	sum.Failed = sum.Failed || lost > 0
	sum.Seconds = time.Since(start).Seconds()
	if *asJSON {
		if err := m.printJSON(sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(m.Stdout, "crashloop: %d cycles, %d acknowledged, %d lost, %d records in the ledger, %.1f s\n",
			sum.Cycles, sum.Acknowledged, sum.Lost, sum.Records, sum.Seconds)
	}
	if sum.Failed {
		return &findingsError{int(max(sum.Lost, 1))}
	}
	return nil
}

// crashSummary is what writ crashloop --json prints.
type crashSummary struct {
	Cycles       int     `json:"cycles"`
	Acknowledged int64   `json:"acknowledged"`
	Lost         int64   `json:"lost"`
	Records      int64   `json:"records"`
	Seconds      float64 `json:"seconds"`
	Seed         uint64  `json:"seed"`
	Failed       bool    `json:"failed"`
}

type crashLoop struct {
	m                *Main
	exe, pack, data  string
	store            string
	base             *writ.CheckRequest
	clients          int
	rng              *rand.Rand
	killMin, killMax time.Duration
	run              string
	all              []ack        // every acknowledgement so far
	lost             map[ack]bool // the acknowledgements found lost, each counted once
	report           io.Writer    // where LOST lines go: stdout, or stderr under --json
}

// ack is a check answered 200: its record must be in the ledger.
type ack struct {
	tenant, recordID, decisionID string
}

type cycleResult struct {
	acked, lost, records int64
	killedAfter          time.Duration
	intact               bool
	verify               string
}

// cycle runs one cycle: serve, load, kill, then check.
func (l *crashLoop) cycle(ctx context.Context, n int) (*cycleResult, error) {
	args := []string{"serve", "--addr", "127.0.0.1:0", "--data", l.data, "--pack", l.pack, "--log-level", "error"}
	if l.store != "" {
		args = append(args, "--store", l.store)
	}
	cmd := exec.Command(l.exe, args...)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	url := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if mm := listeningLine.FindStringSubmatch(sc.Text()); mm != nil {
			url = mm[1]
			break
		}
	}
	go io.Copy(io.Discard, out)
	if url == "" {
		return nil, fmt.Errorf("writ serve exited before listening")
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var (
		mu    sync.Mutex
		acks  []ack
		first = make(chan struct{})
		once  sync.Once
		wg    sync.WaitGroup
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: l.clients}}
	for w := range l.clients {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				key := fmt.Sprintf("crash-%s-%d-%d-%d", l.run, n, w, i)
				body, err := benchBody(l.base, key, 0)
				if err != nil {
					return
				}
				a, ok := l.post(loadCtx, client, url, body)
				if !ok {
					continue
				}
				mu.Lock()
				acks = append(acks, a)
				mu.Unlock()
				once.Do(func() { close(first) })
			}
		})
	}
	select {
	case <-first:
	case <-exited:
		stopLoad()
		wg.Wait()
		return nil, fmt.Errorf("writ serve exited under load")
	case <-time.After(30 * time.Second):
		stopLoad()
		wg.Wait()
		return nil, fmt.Errorf("no check was acknowledged within 30 s")
	}
	wait := l.killMin
	if l.killMax > l.killMin {
		wait += time.Duration(l.rng.Int64N(int64(l.killMax - l.killMin)))
	}
	time.Sleep(wait) // the random moment of the crash, not a wait for a condition
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	<-exited
	stopLoad()
	wg.Wait()

	res := &cycleResult{acked: int64(len(acks)), killedAfter: wait}
	l.all = append(l.all, acks...)
	if res.lost, err = l.missing(ctx, acks); err != nil {
		return nil, err
	}
	vargs := []string{"ledger", "verify", "--data", l.data, "--json"}
	if l.store != "" {
		vargs = append(vargs, "--store", l.store)
	}
	vout, verr := exec.Command(l.exe, vargs...).Output()
	var rep struct {
		Intact    bool  `json:"intact"`
		Records   int64 `json:"records"`
		Uncovered int64 `json:"uncovered"`
		Findings  []verify.Finding
	}
	if err := json.Unmarshal(vout, &rep); err != nil {
		return nil, fmt.Errorf("writ ledger verify: %v (%v): %s", err, verr, vout)
	}
	res.intact, res.records = rep.Intact && verr == nil, rep.Records
	if res.intact {
		res.verify = fmt.Sprintf("ledger intact: %d records (%d after the last checkpoint)", rep.Records, rep.Uncovered)
	} else {
		b, _ := json.Marshal(rep.Findings)
		res.verify = fmt.Sprintf("ledger NOT intact: %s", b)
	}
	return res, nil
}

// post sends one check and returns its acknowledgement: a 200 receipt
// naming its record. Anything else (a fail-closed 503, a connection cut
// by the crash) acknowledges nothing.
func (l *crashLoop) post(ctx context.Context, c *http.Client, url string, body []byte) (ack, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/check", bytes.NewReader(body))
	if err != nil {
		return ack{}, false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return ack{}, false
	}
	defer resp.Body.Close()
	var rc writ.Receipt
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&rc) != nil || rc.Metadata.RecordID == "" {
		return ack{}, false
	}
	return ack{tenant: l.base.TenantID, recordID: rc.Metadata.RecordID, decisionID: rc.DecisionID}, true
}

// missing opens the store (the server is down) and counts the
// acknowledgements whose record is not there, or is another decision's,
// among those not found lost before; it prints a LOST line for each.
func (l *crashLoop) missing(ctx context.Context, acks []ack) (int64, error) {
	if len(acks) == 0 {
		return 0, nil
	}
	st, err := openExisting(l.data, l.store)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var lost int64
	for _, a := range acks {
		if l.lost[a] {
			continue
		}
		sr, err := st.Record(ctx, a.tenant, a.recordID)
		switch {
		case writ.ErrorCode(err) == writ.ENOTFOUND:
			lost++
			l.lost[a] = true
			fmt.Fprintf(l.report, "LOST: record %s of decision %s was acknowledged and is not in the ledger\n", a.recordID, a.decisionID)
		case err != nil:
			return 0, err
		case sr.Record.DecisionID != a.decisionID:
			lost++
			l.lost[a] = true
			fmt.Fprintf(l.report, "LOST: record %s holds decision %s, acknowledged as %s\n", a.recordID, sr.Record.DecisionID, a.decisionID)
		}
	}
	return lost, nil
}
