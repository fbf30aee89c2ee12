package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

type countingProber struct {
	calls int
	err   error
}

func (p *countingProber) ProbeWrite(context.Context, time.Time) error {
	p.calls++
	return p.err
}

// TestCommitHealth: the commits check of /readyz passes while commits
// succeed, fails for commitQuiet after one failed, and then asks the
// store's write probe, at most once a second.
func TestCommitHealth(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name      string
		failedAgo time.Duration // 0: the last commit succeeded
		probeErr  error
		want      error
		calls     int // probe calls after three checks
	}{
		{name: "commits succeed", want: nil, calls: 0},
		{name: "a commit just failed", failedAgo: time.Second, want: errCommitFailed, calls: 0},
		{name: "failed a while ago, the probe fails", failedAgo: time.Minute, probeErr: errors.New("disk full"), want: errCannotCommit, calls: 1},
		{name: "failed a while ago, the probe commits", failedAgo: time.Minute, want: nil, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &countingProber{err: tc.probeErr}
			c := &commitHealth{probe: p, log: quiet, lastFailure: func() (time.Time, bool) {
				return time.Now().Add(-tc.failedAgo), tc.failedAgo != 0
			}}
			for range 3 {
				if err := c.check(context.Background()); !errors.Is(err, tc.want) {
					t.Fatalf("check() = %v, want %v", err, tc.want)
				}
			}
			if p.calls != tc.calls {
				t.Errorf("three checks probed the store %d times, want %d", p.calls, tc.calls)
			}
		})
	}
}
