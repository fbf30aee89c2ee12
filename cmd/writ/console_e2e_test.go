package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/writhq/writ/console"
)

// TestServeMountsTheConsole: writ serve serves the console at /console/
// beside the API, and the console reaches the API with its session. The
// browser tests in console/e2e go further.
func TestServeMountsTheConsole(t *testing.T) {
	s := startServer(t, t.TempDir(), "../../examples/refund")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	res, err := noRedirect.Get(s.url + "/console")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != console.Prefix {
		t.Errorf("GET /console = %d to %q, want 301 to %s", res.StatusCode, res.Header.Get("Location"), console.Prefix)
	}
	res, err = http.Get(s.url + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy {
		t.Fatalf("GET /console/ = %d with CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}

	// Development mode: sign in with a tenant and a name, then read
	// through the console's forwarder.
	res, err = http.Post(s.url+"/console/session", "application/json", strings.NewReader(`{"tenant_id":"acme","subject":"maria"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cookies := res.Cookies()
	if res.StatusCode != 200 || len(cookies) != 1 {
		t.Fatalf("sign-in = %d with cookies %v", res.StatusCode, cookies)
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/console/api/v1/ledger/keys?tenant_id=acme", nil)
	req.AddCookie(cookies[0])
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Keys []struct {
			ID          string `json:"id"`
			VerifierKey string `json:"verifier_key"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 200 || len(body.Keys) != 1 ||
		!strings.HasPrefix(body.Keys[0].VerifierKey, body.Keys[0].ID+"+") {
		t.Fatalf("keys through the console = %d %+v (%v), want the ring's one key", res.StatusCode, body, err)
	}
}
