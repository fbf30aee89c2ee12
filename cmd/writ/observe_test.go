package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
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
// succeed, fails while one has been under way for longer than the commit
// timeout and for commitQuiet after one failed, and then asks the store's
// write probe, at most once a second.
func TestCommitHealth(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name      string
		underWay  time.Duration // how long the commit under way has run; 0: none
		failedAgo time.Duration // 0: the last commit succeeded
		probeErr  error
		want      string // the start of the check's error; "": passes
		calls     int    // probe calls after three checks
	}{
		{name: "commits succeed"},
		{name: "a commit under way, not for long", underWay: 500 * time.Millisecond},
		{name: "a commit under way for longer than the timeout", underWay: 2 * time.Second, want: "a group commit has been under way for 2s, longer than 1s"},
		{name: "a commit just failed", failedAgo: time.Second, want: errCommitFailed.Error()},
		{name: "failed a while ago, the probe fails", failedAgo: time.Minute, probeErr: errors.New("disk full"), want: errCannotCommit.Error(), calls: 1},
		{name: "failed a while ago, the probe commits", failedAgo: time.Minute, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &countingProber{err: tc.probeErr}
			ago := func(d time.Duration) func() (time.Time, bool) {
				return func() (time.Time, bool) { return time.Now().Add(-d), d != 0 }
			}
			c := &commitHealth{underWay: ago(tc.underWay), stallAfter: time.Second, lastFailure: ago(tc.failedAgo), probe: p, log: quiet}
			for range 3 {
				err := c.check(context.Background())
				if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
					t.Fatalf("check() = %v, want %q", err, tc.want)
				}
			}
			if p.calls != tc.calls {
				t.Errorf("three checks probed the store %d times, want %d", p.calls, tc.calls)
			}
		})
	}
}

// TestBoundedCall: a call stuck past its deadline does not hold the
// caller, no second call starts while it is stuck, and calls run again
// once it has returned.
func TestBoundedCall(t *testing.T) {
	var b boundedCall
	release := make(chan struct{})
	err := b.do(context.Background(), 50*time.Millisecond, "the query", func(context.Context) error {
		<-release
		return nil
	})
	if err == nil || err.Error() != "the query did not return within 50ms" {
		t.Fatalf("do(stuck call) = %v, want it to give up after 50ms", err)
	}
	ran := false
	err = b.do(context.Background(), time.Second, "the query", func(context.Context) error { ran = true; return nil })
	if ran || err == nil || !strings.HasPrefix(err.Error(), "the query has not returned for ") {
		t.Fatalf("do(while stuck) = %v, ran %v; want it refused without running", err, ran)
	}
	close(release)
	<-b.done // the stuck call has returned
	want := errors.New("no such table")
	if err := b.do(context.Background(), time.Second, "the query", func(context.Context) error { return want }); !errors.Is(err, want) {
		t.Fatalf("do(after the stuck call returned) = %v, want the call's own error", err)
	}
}
