package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ/httpapi"
)

// parseServe returns the serveConfig that writ serve's flags make of
// args.
func parseServe(t *testing.T, args ...string) *serveConfig {
	t.Helper()
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serveFlags(fs, &c)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return &c
}

// TestServeConfigCheck: a config no server can run with is refused as
// bad usage before anything is opened.
func TestServeConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "": accepted
	}{
		{[]string{"--pack", "p"}, ""},
		{[]string{}, "serve needs --pack DIR"},
		{[]string{"--pack", "p", "--read-timeout", "0s"}, "serve: timeouts must be positive"},
		{[]string{"--pack", "p", "--max-conns", "-1"}, "serve: timeouts must be positive"},
		{[]string{"--pack", "p", "--commit-timeout", "-1s"}, "serve: timeouts must be positive"},
		{[]string{"--pack", "p", "--replay-sample", "1.5"}, "--replay-sample must be from 0 to 1"},
		{[]string{"--pack", "p", "--replay-sample", "0.1", "--replay-every", "0s"}, "--replay-sample must be from 0 to 1"},
		{[]string{"--pack", "p", "--metrics=false", "--metrics-addr", "127.0.0.1:0"}, "--metrics-addr needs the metrics on"},
	} {
		err := parseServe(t, tc.args...).check()
		var ue *usageError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("check(%q) = %v, want nil", tc.args, err)
		case tc.want != "" && (!errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("check(%q) = %v, want a usage error starting %q", tc.args, err, tc.want)
		}
	}
}

// TestNewServer: a server built from a config value listens, answers
// /healthz with the pack it pinned, serves GET /metrics on an address
// of its own, and Run returns nil once its context ends.
func TestNewServer(t *testing.T) {
	c := parseServe(t, "--pack", "../../examples/refund", "--data", t.TempDir(), "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--log-level", "warn")
	m := testServeMain()
	s, err := m.newServer(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()

	var health httpapi.HealthReport
	getJSON(t, "http://"+s.Addr().String()+"/healthz", &health)
	if health.Pack != s.pack.ID() || health.PackHash != s.pack.Hash || health.Store != "sqlite" {
		t.Errorf("GET /healthz = %+v, want pack %s %s on sqlite", health, s.pack.ID(), s.pack.Hash)
	}
	resp, err := http.Get("http://" + s.metricsLn.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "writ_") {
		t.Errorf("GET /metrics on --metrics-addr = %d, want 200 with writ's series", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run after its context ended = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestNewServerRefusesItsOwnPackInShadow: building stops at the first
// error, and what was opened before it is closed (the data directory's
// lock is free for the next server).
func TestNewServerRefusesItsOwnPackInShadow(t *testing.T) {
	data := t.TempDir()
	m := testServeMain()
	c := parseServe(t, "--pack", "../../examples/refund", "--shadow-pack", "../../examples/refund", "--data", data, "--addr", "127.0.0.1:0", "--log-level", "warn")
	_, err := m.newServer(context.Background(), c)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "the shadow pack is the enforced pack") {
		t.Fatalf("newServer(shadowing its own pack) = %v, want a usage error", err)
	}
	c.ShadowDir = ""
	s, err := m.newServer(context.Background(), c)
	if err != nil {
		t.Fatalf("newServer on the same data directory after a failed build: %v", err)
	}
	s.Close()
}

// testServeMain is a Main whose environment sets only GOGC, so that
// building a server leaves the test binary's collector alone.
func testServeMain() *Main {
	return &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
