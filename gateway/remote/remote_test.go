package remote

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/writhq/writ/httpapi"
)

// whoami is a server's GET /v1/whoami as the gateway reads it: the
// identity of the bearer token presented, counting how often each token
// asked. Keys maps a token to its subject; a token not in it is refused.
type whoami struct {
	mu    sync.Mutex
	keys  map[string]string
	asked map[string]int
	auth  string
}

func (w *whoami) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/whoami" {
		http.NotFound(rw, r)
		return
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	w.mu.Lock()
	w.asked[token]++
	subject, ok := w.keys[token]
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	if w.auth == httpapi.AuthDisabled {
		json.NewEncoder(rw).Encode(httpapi.Identity{Auth: httpapi.AuthDisabled})
		return
	}
	if !ok {
		rw.Header().Set("Content-Type", "application/problem+json")
		rw.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(rw).Encode(map[string]any{"type": "about:blank", "title": "unauthorized", "status": 401, "code": "EUNAUTHORIZED", "detail": "unknown API key"})
		return
	}
	json.NewEncoder(rw).Encode(httpapi.Identity{Auth: httpapi.AuthAPIKeys, TenantID: "acme", KeyID: "key_" + subject, Subject: subject, ActorType: "AGENT"})
}

func TestAuthenticate(t *testing.T) {
	srv := &whoami{keys: map[string]string{"tok_a": "agt_a", "tok_b": "agt_b"}, asked: map[string]int{}, auth: httpapi.AuthAPIKeys}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	r := New(ts.URL+"/", httpapi.NewClient(ts.URL))
	if r.Base() != ts.URL {
		t.Fatalf("Base() = %q, want %q without the trailing slash", r.Base(), ts.URL)
	}
	ctx := context.Background()
	for _, tok := range []string{"tok_a", "tok_a", "tok_b", "tok_a"} {
		p, err := r.Authenticate(ctx, tok)
		if err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
		if want := srv.keys[tok]; p.Subject != want || p.TenantID != "acme" || p.KeyID != "key_"+want || p.ActorType != "AGENT" {
			t.Fatalf("%s: principal %+v, want subject %s of acme", tok, p, want)
		}
	}
	// Each key's identity is asked once and then cached; each key is
	// presented as itself.
	if srv.asked["tok_a"] != 1 || srv.asked["tok_b"] != 1 {
		t.Fatalf("whoami asked %v, want once per key", srv.asked)
	}
	if r.clientFor("tok_a") != r.clientFor("tok_a") || r.clientFor("tok_a") == r.clientFor("tok_b") {
		t.Fatal("one client per key")
	}
	if r.clientFor("") != r.Own() {
		t.Fatal("no token is the gateway's own key")
	}
	// An unknown key is refused, and not cached as anyone.
	if p, err := r.Authenticate(ctx, "tok_forged"); err == nil {
		t.Fatalf("a forged token authenticated as %+v", p)
	}
	if _, ok := r.who["tok_forged"]; ok {
		t.Fatal("a refused token was cached")
	}
}

// A server in development mode authenticates no one, so the gateway
// must not take its answer for an identity.
func TestAuthenticateDevelopmentMode(t *testing.T) {
	srv := &whoami{keys: map[string]string{}, asked: map[string]int{}, auth: httpapi.AuthDisabled}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	r := New(ts.URL, httpapi.NewClient(ts.URL))
	if p, err := r.Authenticate(context.Background(), "tok_any"); err == nil || !strings.Contains(err.Error(), "development mode") {
		t.Fatalf("development mode: principal %+v, err %v; want refused", p, err)
	}
}
