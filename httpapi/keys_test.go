package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
)

// TestKeyRoutes drives the admin's API-key routes: a key created is
// signed, stored and answered with its token once; the list never shows
// a token and says each key's signature; a key of another tenant is not
// found; the presenting key cannot revoke itself; bad input writes
// nothing; each change is logged with who made it.
func TestKeyRoutes(t *testing.T) {
	fake := fullService()
	keys := newFakeKeys(fake)
	// The presenting key is in the store too.
	self := &auth.Key{ID: "key_admin", TenantID: "acme", Subject: "admin@acme.example", Roles: []writ.Role{writ.RoleAdmin}, SecretHash: "00", CreatedAt: testTime}
	if err := auth.Sign(self, testSigner{}, testTime); err != nil {
		t.Fatal(err)
	}
	keys.keys = append(keys.keys, self)
	s, log := newTestServer(fake, Config{Authenticate: testKeys.authenticate, APIKeys: keys.keyAdmin()})
	doRec := func(method, target, body string) (*http.Request, *httptest.ResponseRecorder) {
		req := newRequest(method, target, body)
		req.Header.Set("Authorization", "Bearer admin-key")
		return req, serve(s, req)
	}
	do := func(method, target, body string) (*http.Request, *http.Response, []byte) {
		req, rec := doRec(method, target, body)
		return req, rec.Result(), rec.Body.Bytes()
	}

	_, res, body := do("POST", "/v1/keys", `{"subject":"olga","roles":["auditor","approver"],"expires_at":"2099-01-01T00:00:00Z"}`)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/keys = %d: %s", res.StatusCode, body)
	}
	var created wireKey
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Token, auth.Prefix) || created.TenantID != "acme" || created.Subject != "olga" || created.Signature != "ok" ||
		!slices.Equal(created.Roles, []writ.Role{writ.RoleAuditor, writ.RoleApprover}) || created.ExpiresAt == nil {
		t.Errorf("POST /v1/keys = %s; want a signed key of acme for olga with its token", body)
	}
	if got := res.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("POST /v1/keys: Cache-Control = %q, want no-store", got)
	}
	stored, err := keys.APIKey(t.Context(), created.ID)
	if err != nil || auth.Verify(stored, testVerifier{}) != nil {
		t.Fatalf("the created key is not stored signed: %+v, %v", stored, err)
	}
	if !strings.Contains(log.String(), "API key created") || !strings.Contains(log.String(), "by=\"admin@acme.example (key key_admin)\"") {
		t.Errorf("the creation is not logged with its admin:\n%s", log)
	}

	// An orchestrator's key: its actor type and acts_for are stored,
	// signed and answered (docs/trust.md).
	_, res, body = do("POST", "/v1/keys", `{"subject":"orchestrator","roles":["agent"],"actor_type":"SERVICE","acts_for":["AGENT:agt_*"]}`)
	var orch wireKey
	if res.StatusCode != http.StatusCreated || json.Unmarshal(body, &orch) != nil || orch.ActorType != writ.ActorService || !slices.Equal(orch.ActsFor, []string{"AGENT:agt_*"}) {
		t.Fatalf("POST /v1/keys with actor_type and acts_for = %d: %s", res.StatusCode, body)
	}
	if stored, err := keys.APIKey(t.Context(), orch.ID); err != nil || stored.ActorType != writ.ActorService || auth.Verify(stored, testVerifier{}) != nil {
		t.Errorf("the orchestrator's key is not stored signed with its actor type: %+v, %v", stored, err)
	}
	if created.ActorType != writ.ActorAgent {
		t.Errorf("a key created without actor_type acts as %q, want AGENT", created.ActorType)
	}

	_, res, body = do("GET", "/v1/keys", "")
	if res.StatusCode != http.StatusOK || strings.Contains(string(body), created.Token) || strings.Contains(string(body), "secret") {
		t.Fatalf("GET /v1/keys = %d: %s; want the keys without tokens", res.StatusCode, body)
	}
	var list struct{ Keys []wireKey }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range list.Keys {
		ids = append(ids, k.ID)
	}
	if !slices.Equal(ids, []string{"key_maria", "key_admin", created.ID, orch.ID}) {
		t.Errorf("GET /v1/keys lists %v, want acme's keys [key_maria key_admin %s %s] and no other tenant's", ids, created.ID, orch.ID)
	}

	_, res, body = do("POST", "/v1/keys/key_maria/revoke", `{}`)
	var revoked wireKey
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &revoked) != nil || revoked.RevokedAt == nil {
		t.Errorf("POST /v1/keys/key_maria/revoke = %d: %s; want the key, revoked", res.StatusCode, body)
	}
	if !strings.Contains(log.String(), "API key revoked") {
		t.Errorf("the revocation is not logged:\n%s", log)
	}

	for _, tt := range []struct {
		name, method, target, body string
		status                     int
		code, field                string
	}{
		{"another tenant's key", "POST", "/v1/keys/key_globex_bob/revoke", `{}`, 404, writ.ENOTFOUND, ""},
		{"no such key", "POST", "/v1/keys/key_nope/revoke", `{}`, 404, writ.ENOTFOUND, ""},
		{"another tenant", "POST", "/v1/keys/key_globex_bob/revoke", `{"tenant_id":"globex"}`, 403, writ.EFORBIDDEN, ""},
		{"itself", "POST", "/v1/keys/key_admin/revoke", `{}`, 409, writ.ECONFLICT, ""},
		{"no roles", "POST", "/v1/keys", `{"subject":"olga","roles":[]}`, 400, writ.EINVALID, ""},
		{"an unknown role", "POST", "/v1/keys", `{"subject":"olga","roles":["root"]}`, 400, writ.EINVALID, ""},
		{"markup in the subject", "POST", "/v1/keys", `{"subject":"<b>olga</b>","roles":["auditor"]}`, 400, writ.EINVALID, ""},
		{"expired already", "POST", "/v1/keys", `{"subject":"olga","roles":["auditor"],"expires_at":"2001-01-01T00:00:00Z"}`, 400, writ.EINVALID, "expires_at"},
		{"an unknown actor type", "POST", "/v1/keys", `{"subject":"olga","roles":["agent"],"actor_type":"ROBOT"}`, 400, writ.EINVALID, ""},
		{"a malformed acts_for", "POST", "/v1/keys", `{"subject":"olga","roles":["agent"],"acts_for":["agt_*"]}`, 400, writ.EINVALID, ""},
		{"an unknown member", "POST", "/v1/keys", `{"subject":"olga","roles":["auditor"],"token":"writ_x"}`, 400, writ.EINVALID, ""},
		{"another tenant's list", "GET", "/v1/keys?tenant_id=globex", "", 403, writ.EFORBIDDEN, ""},
	} {
		before := len(keys.keys)
		req, rec := doRec(tt.method, tt.target, tt.body)
		p := readProblem(t, rec, req, tt.status, tt.code)
		if tt.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != tt.field) {
			t.Errorf("%s: problem %+v does not name %s", tt.name, p, tt.field)
		}
		if len(keys.keys) != before {
			t.Errorf("%s: a key was stored", tt.name)
		}
	}

	// A server without a key store answers 404.
	bare, _ := newTestServer(fake, Config{Authenticate: testKeys.authenticate})
	req := newRequest("GET", "/v1/keys", "")
	req.Header.Set("Authorization", "Bearer admin-key")
	readProblem(t, serve(bare, req), req, 404, writ.ENOTFOUND)
}

// TestPackRoute: GET /v1/pack describes the pack in force, its hash and
// every rule of every bundle; a server without a pack answers 404.
func TestPackRoute(t *testing.T) {
	s, _ := newTestServer(fullService(), Config{Authenticate: testKeys.authenticate, Pack: refundPack})
	req := newRequest("GET", "/v1/pack", "")
	req.Header.Set("Authorization", "Bearer auditor-key")
	rec := serve(s, req)
	var got wirePack
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
		t.Fatalf("GET /v1/pack = %d: %s", rec.Code, rec.Body)
	}
	if got.Pack != refundPack.ID() || got.Hash != refundPack.Hash || !strings.HasPrefix(got.Hash, "sha256:") {
		t.Errorf("GET /v1/pack names %s %s, want %s %s", got.Pack, got.Hash, refundPack.ID(), refundPack.Hash)
	}
	var rules, want int
	for _, b := range refundPack.Bundles {
		want += len(b.Rules)
	}
	for _, b := range got.Bundles {
		for _, r := range b.Rules {
			rules++
			if r.ID == "" || r.Effect == "" {
				t.Errorf("rule %+v of bundle %s has no id or effect", r, b.BundleID)
			}
		}
	}
	if rules != want || want == 0 {
		t.Errorf("GET /v1/pack lists %d rules, want the pack's %d", rules, want)
	}
	if !strings.Contains(rec.Body.String(), `"R_HIGH_VALUE_REQUIRES_APPROVAL"`) {
		t.Errorf("GET /v1/pack does not list the refund pack's approval rule: %s", rec.Body)
	}

	bare, _ := newTestServer(fullService(), Config{Authenticate: testKeys.authenticate})
	req = newRequest("GET", "/v1/pack", "")
	req.Header.Set("Authorization", "Bearer auditor-key")
	readProblem(t, serve(bare, req), req, 404, writ.ENOTFOUND)
	req = newRequest("GET", "/v1/pack?limit=1", "")
	req.Header.Set("Authorization", "Bearer auditor-key")
	readProblem(t, serve(s, req), req, 400, writ.EINVALID)
	req = newRequest("GET", "/v1/pack?tenant_id=globex", "")
	req.Header.Set("Authorization", "Bearer auditor-key")
	readProblem(t, serve(s, req), req, 403, writ.EFORBIDDEN)
}
