package httpapi_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/replay"
)

// refundPackWithPassMark copies the refund example pack into a temporary
// directory with a scorecard pass mark added to its spec, and compiles it.
func refundPackWithPassMark(t *testing.T, passMark string) *policy.Policy {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "examples", "refund"))); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "specs", "refund-execute.yaml")
	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, append(data, []byte("scorecard_pass: "+passMark+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pack.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestScorecardFailedQueryable: a spec's scorecard pass mark marks the
// records whose scorecard fails it (scorecard_failed), and
// GET /v1/records?scorecard=failed finds them and no other, on both
// stores; the records replay equal on their pinned pack, and a what-if
// under another pass mark is a changed policy.
func TestScorecardFailedQueryable(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			st := openTestStore(t, store)
			pol := refundPackWithPassMark(t, "{policy: 1, safety: 1, utility: 0.9}")
			clock := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
			eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32), Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close() })
			srv := validated(t, httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Ledger: eng})))
			t.Cleanup(srv.Close)
			c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(srv.Client()))

			checks := []struct {
				name      string
				scorecard map[string]float64
				failed    []string // the record's scorecard_failed
			}{
				{"below the mark", map[string]float64{"policy": 1, "utility": 0.5, "safety": 1}, []string{"utility"}},
				{"passes", map[string]float64{"policy": 1, "utility": 0.94, "latency": 0.1, "safety": 1}, nil},
				{"no scorecard", nil, nil},
				{"leaves a dimension out", map[string]float64{"policy": 1, "utility": 0.95}, []string{"safety"}},
				{"at the mark", map[string]float64{"policy": 1, "utility": 0.9, "safety": 1}, nil},
			}
			var wantFailed, ids []string
			for i, tc := range checks {
				req := readCheckRequest(t, filepath.Join("..", "examples", "refund", "requests", "refund-allow.json"))
				req.IdempotencyKey = "ik_scorecard_" + string(rune('a'+i))
				req.Scorecard = tc.scorecard
				// A customer each, so the refund velocity rule (3 a
				// day per customer) does not decide.
				for j, sub := range req.SubjectIDs {
					if strings.HasPrefix(sub, "customer:") {
						req.SubjectIDs[j] = sub + "_" + string(rune('a'+i))
					}
				}
				resp, err := c.Check(ctx, req)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				id := resp.Metadata.RecordID
				ids = append(ids, id)
				if tc.failed != nil {
					wantFailed = append(wantFailed, id)
				}
				got, err := c.Record(ctx, "acme", id)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.Record.ScorecardFailed, tc.failed) {
					t.Errorf("%s: scorecard_failed = %q, want %q", tc.name, got.Record.ScorecardFailed, tc.failed)
				}
				if sealed := strings.Contains(string(got.Raw), `"scorecard_failed"`); sealed != (tc.failed != nil) {
					t.Errorf("%s: the sealed record has scorecard_failed: %v, want %v", tc.name, sealed, tc.failed != nil)
				}
			}

			page, err := c.Records(ctx, writ.RecordQuery{TenantID: "acme", Scorecard: writ.ScorecardFailedQuery})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range page.Records {
				got = append(got, r.Record.RecordID)
			}
			if !slices.Equal(got, wantFailed) {
				t.Errorf("Records(scorecard=failed) = %v, want %v (of %v)", got, wantFailed, ids)
			}
			if _, err := c.Records(ctx, writ.RecordQuery{TenantID: "acme", Scorecard: "passed"}); writ.ErrorCode(err) != writ.EINVALID {
				t.Errorf("Records(scorecard=passed) = %v, want %s", err, writ.EINVALID)
			}

			// The records keep the rules of their pinned pack, pass mark
			// included.
			rep, err := verify.Verify(ctx, st, verify.VerifyOptions{Rules: verify.NewRules(pinned.NewPacks(st)), Hashes: st, Revocations: st.(verify.RevocationSource)})
			if err != nil || !rep.Intact() || rep.Records < int64(len(checks)) {
				t.Errorf("verify.Verify = %+v, %v; want intact", rep, err)
			}
			// Replayed on their pinned pack, the records are equal.
			sum, err := replay.New(st, replay.Options{}).Tenant(ctx, "acme", func(*replay.Result) error { return nil })
			if err != nil || sum.Equal != sum.Records || sum.Records < int64(len(checks)) {
				t.Errorf("replay: %+v, %v; want every record equal", sum, err)
			}
			// Under a lower pass mark the failing check passes: a
			// changed policy at scorecard_failed.
			lower := refundPackWithPassMark(t, "{policy: 1, safety: 1, utility: 0.4}")
			res, err := replay.New(st, replay.Options{Pack: lower}).Record(ctx, "acme", ids[0])
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, d := range res.Differences {
				if d.Path == "scorecard_failed" {
					found = true
					if d.Class != replay.ClassPolicy {
						t.Errorf("what-if under a lower pass mark: scorecard_failed is %s, want %s", d.Class, replay.ClassPolicy)
					}
				}
			}
			if !found || !slices.Contains(res.Classes, replay.ClassPolicy) {
				t.Errorf("what-if under a lower pass mark = %+v, want a changed_policy difference at scorecard_failed", res)
			}
		})
	}
}
