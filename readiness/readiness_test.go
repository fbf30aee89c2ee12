package readiness

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

type countingProber struct {
	calls int
	err   error
}

func (p *countingProber) ProbeWrite(context.Context, time.Time) error {
	p.calls++
	return p.err
}

// TestCommits: the commits check of /readyz passes while commits
// succeed, fails while one has been under way for longer than the commit
// timeout and for CommitQuiet after one failed, and then asks the store's
// write probe, at most once a second.
func TestCommits(t *testing.T) {
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
		{name: "a commit just failed", failedAgo: time.Second, want: ErrCommitFailed.Error()},
		{name: "failed a while ago, the probe fails", failedAgo: time.Minute, probeErr: errors.New("disk full"), want: ErrCannotCommit.Error(), calls: 1},
		{name: "failed a while ago, the probe commits", failedAgo: time.Minute, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &countingProber{err: tc.probeErr}
			ago := func(d time.Duration) func() (time.Time, bool) {
				return func() (time.Time, bool) { return time.Now().Add(-d), d != 0 }
			}
			c := &Commits{UnderWay: ago(tc.underWay), StallAfter: time.Second, LastFailure: ago(tc.failedAgo), Probe: p, Log: quiet}
			for range 3 {
				err := c.Check(context.Background())
				if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
					t.Fatalf("Check() = %v, want %q", err, tc.want)
				}
			}
			if p.calls != tc.calls {
				t.Errorf("three checks probed the store %d times, want %d", p.calls, tc.calls)
			}
		})
	}
}

// TestBounded: a call stuck past its deadline does not hold the
// caller, no second call starts while it is stuck, and calls run again
// once it has returned.
func TestBounded(t *testing.T) {
	var b Bounded
	release := make(chan struct{})
	err := b.Do(context.Background(), 50*time.Millisecond, "the query", func(context.Context) error {
		<-release
		return nil
	})
	if err == nil || err.Error() != "the query did not return within 50ms" {
		t.Fatalf("Do(stuck call) = %v, want it to give up after 50ms", err)
	}
	ran := false
	err = b.Do(context.Background(), time.Second, "the query", func(context.Context) error { ran = true; return nil })
	if ran || err == nil || !strings.HasPrefix(err.Error(), "the query has not returned for ") {
		t.Fatalf("Do(while stuck) = %v, ran %v; want it refused without running", err, ran)
	}
	close(release)
	<-b.done // the stuck call has returned
	want := errors.New("no such table")
	if err := b.Do(context.Background(), time.Second, "the query", func(context.Context) error { return want }); !errors.Is(err, want) {
		t.Fatalf("Do(after the stuck call returned) = %v, want the call's own error", err)
	}
}

type failingTenants struct{ err error }

func (f failingTenants) Tenants(context.Context) ([]string, error) { return nil, f.err }

// TestReadinessKeepsStoreErrorsInTheLog: /readyz needs no key, so a
// failing store check says only that the query failed; the store's own
// error, here with a host and a user name, is in the server's log.
func TestReadinessKeepsStoreErrorsInTheLog(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	never := func() (time.Time, bool) { return time.Time{}, false }
	commits := &Commits{UnderWay: never, StallAfter: time.Second, LastFailure: never, Log: log}
	storeErr := errors.New(`failed to connect to user=writ_admin database=ledger: dial tcp 10.1.2.3:5432: connection refused`)
	keys := func(time.Time) (ledger.Signer, error) { return nil, nil }
	pol := &policy.Policy{Pack: &pack.Pack{Hash: "sha256:ab"}}

	report := Report(failingTenants{storeErr}, commits, keys, pol, log)(context.Background())
	var store httpapi.ReadyCheck
	for _, c := range report.Checks {
		if c.Name == "store" {
			store = c
		} else if !c.OK {
			t.Errorf("check %s failed: %s", c.Name, c.Error)
		}
	}
	if store.OK || store.Error != ErrStoreQuery.Error() {
		t.Errorf("store check = %+v, want it failed with %q", store, ErrStoreQuery)
	}
	if !strings.Contains(logged.String(), "10.1.2.3:5432") || !strings.Contains(logged.String(), "readiness: the store's query failed") {
		t.Errorf("the server's log lacks the store's error:\n%s", logged.String())
	}
}
