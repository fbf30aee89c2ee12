package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
)

func (m *Main) check(ctx context.Context, args []string) error {
	fs := m.flags("check", "--request FILE [--pack DIR] [--data DIR] [--now RFC3339]")
	reqFile := fs.String("request", "", "check request (JSON); - reads standard input")
	packDir := fs.String("pack", "", "pack directory (default: the nearest directory above the request holding a pack.yaml)")
	data := fs.String("data", "", "data directory to record the decision in (default: a temporary ledger, discarded)")
	storeURL := fs.String("store", "", storeUsage)
	nowFlag := fs.String("now", "", "decide as of this time (RFC 3339) instead of the clock, e.g. to replay an example")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *reqFile == "" {
		return usagef("check needs --request FILE")
	}
	if *packDir == "" {
		if *reqFile == "-" {
			return usagef("check --request - needs --pack DIR")
		}
		dir, err := findPack(*reqFile)
		if err != nil {
			return err
		}
		*packDir = dir
	}
	clock := time.Now
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			return usagef("bad --now %q: want RFC 3339, like 2026-05-09T09:31:42Z", *nowFlag)
		}
		clock = func() time.Time { return t }
	}
	req, err := m.readRequest(*reqFile)
	if err != nil {
		return err
	}
	if *storeURL != "" && *data == "" {
		return usagef("check --store needs --data DIR holding the shared signing keys and binding key")
	}
	eng, done, err := m.localEngine(ctx, *packDir, *data, *storeURL, clock)
	if err != nil {
		return err
	}
	defer done()
	rc, err := eng.Check(ctx, req)
	if rc != nil {
		if perr := m.printJSON(rc); perr != nil {
			return perr
		}
	}
	return err
}

// localEngine opens an engine of the pack in packDir over the ledger in
// data (a temporary one, discarded, when data is ""), for the commands
// that decide or store without a server (check, evidence submit --data).
// done closes it.
func (m *Main) localEngine(ctx context.Context, packDir, data, storeURL string, clock func() time.Time) (_ *engine.Engine, _ func(), err error) {
	pol, err := loadPolicy(packDir)
	if err != nil {
		return nil, nil, err
	}
	var cleanup []func()
	done := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	dir := data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "writ-check-")
		if err != nil {
			return nil, nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(tmp) })
		dir = tmp
	}
	st, err := openStore(dir, storeURL)
	if err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { st.Close() })
	log, _ := m.logger("error")
	keys, _, err := m.openSigningKeys(defaultKeysDir(dir), clock(), log)
	if err != nil {
		return nil, nil, err
	}
	eng, err := openEngine(ctx, engine.Config{Policy: pol, Store: st, Now: clock, Logger: log, Keys: keys}, dir, "")
	if err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { eng.Close() })
	return eng, done, nil
}

// readRequest reads a check request and decodes it as the server would.
func (m *Main) readRequest(file string) (*writ.CheckRequest, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(m.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	req, err := httpapi.DecodeCheckRequest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return req, nil
}

func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
