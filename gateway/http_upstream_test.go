package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ/gateway"
)

// TestHTTPUpstream: an upstream reached over Streamable HTTP, with the
// configured headers on every request.
func TestHTTPUpstream(t *testing.T) {
	up := &files{}
	var withKey, without atomic.Int64
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.server(nil) }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == "upstream-secret" {
			withKey.Add(1)
		} else {
			without.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	eng, st, pol := newEngine(t, packDir())
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{
		{Name: "files", Prefix: "fs.", HTTP: &gateway.HTTPServer{URL: srv.URL, Headers: map[string]string{"X-Api-Key": "upstream-secret"}}},
	}}
	gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	f := &fixture{eng: eng, store: st, gw: gw, up: up}
	for _, proto := range protocols {
		res := call(t, f.client(t, proto), "fs.read_file", map[string]any{"path": "/allowed/h"})
		if res.IsError || text(res) != "contents of /allowed/h" {
			t.Errorf("%s: read over an HTTP upstream = %q", proto, text(res))
		}
	}
	if withKey.Load() == 0 || without.Load() != 0 {
		t.Errorf("upstream requests with the configured header: %d, without: %d", withKey.Load(), without.Load())
	}
	verifyLedger(t, f)
}
