package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// unreachable is a writ that cannot decide: a remote server that is down.
type unreachable struct{ gateway.Writ }

func (unreachable) Check(context.Context, *writ.CheckRequest) (*writ.Receipt, error) {
	return nil, writ.Errorf(writ.EUNAVAILABLE, "writ server at http://127.0.0.1:1 cannot be reached")
}

// failingCommit answers like the engine when its store cannot commit: a
// fail-closed receipt with EUNAVAILABLE.
type failingCommit struct{ gateway.Writ }

func (failingCommit) Check(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error) {
	rc := &writ.Receipt{DecisionID: "dec_failclosed", Outcome: writ.OutcomeReplanRequired, Reasons: []writ.Reason{{Code: "ledger_unavailable", Message: "The decision could not be recorded."}},
		Disposition: writ.Disposition{Mode: writ.ModeLocalReplan}, Metadata: writ.Metadata{FailClosed: true}}
	return rc, writ.Errorf(writ.EUNAVAILABLE, "the ledger could not commit")
}

// TestFailClosed: when writ cannot decide or record, nothing is
// forwarded, and the agent is told so.
func TestFailClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    func(gateway.Writ) gateway.Writ
		want string
	}{
		{"writ unreachable", func(w gateway.Writ) gateway.Writ { return unreachable{w} }, "writ could not decide this call"},
		{"record not committed", func(w gateway.Writ) gateway.Writ { return failingCommit{w} }, "failed closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &files{}
			eng, st, pol := newEngine(t, packDir())
			cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs."}}}
			gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: tc.w(eng), Tools: pol.Pack.Tools, Transport: up.connect})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(gw.Close)
			f := &fixture{eng: eng, store: st, gw: gw, up: up}
			res := call(t, f.client(t, protocols[1]), "fs.read_file", map[string]any{"path": "/allowed/a"})
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Errorf("call = %v %q, want isError saying %q", res.IsError, text(res), tc.want)
			}
			if n := up.calls.Load(); n != 0 {
				t.Errorf("the upstream received %d calls, want 0", n)
			}
		})
	}
}
