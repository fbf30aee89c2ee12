package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
)

// testKeyring is a fake authenticator: it knows some tokens, refuses the
// others as auth.Authenticate does, and fails for "down-key" as a store
// that is down would.
type testKeyring map[string]*writ.Principal

// testKeys holds a key of tenant acme for each role ("<role>-key"), one
// with every role ("all-key"), and one of tenant globex with every role.
var testKeys = func() testKeyring {
	k := testKeyring{
		"all-key":    {TenantID: "acme", KeyID: "key_all", Subject: "ops@acme.example", Roles: slices.Clone(writ.Roles)},
		"globex-key": {TenantID: "globex", KeyID: "key_globex", Subject: "ops@globex.example", Roles: slices.Clone(writ.Roles)},
	}
	for _, r := range writ.Roles {
		k[string(r)+"-key"] = &writ.Principal{TenantID: "acme", KeyID: "key_" + string(r), Subject: string(r) + "@acme.example", Roles: []writ.Role{r}}
	}
	return k
}()

// errStoreDown is what the authenticator fails with for "down-key".
var errStoreDown = errors.New("database is locked: password=hunter2")

func (k testKeyring) authenticate(ctx context.Context, token string) (*writ.Principal, error) {
	switch token {
	case "down-key":
		return nil, errStoreDown
	case "":
		return nil, auth.ErrNoKey
	}
	p, ok := k[token]
	if !ok { // unknown, malformed or revoked: all the same to the caller
		return nil, auth.ErrInvalidKey
	}
	c := *p
	c.Roles = slices.Clone(p.Roles)
	return &c, nil
}

// routeSamples holds a valid request of each route, that names no tenant:
// with an API key, the key's is used. Every value fullService answers
// with matches them.
var routeSamples = map[string]struct{ target, body string }{
	"POST /v1/check":                           {"/v1/check", `{"tool":"payments.issue_refund"}`},
	"GET /v1/records/{id}":                     {"/v1/records/r1", ""},
	"GET /v1/records":                          {"/v1/records?limit=10", ""},
	"GET /v1/records/{id}/proof":               {"/v1/records/r1/proof?size=7", ""},
	"GET /v1/records/{id}/envelope":            {"/v1/records/r1/envelope", ""},
	"GET /v1/ledger/keys":                      {"/v1/ledger/keys", ""},
	"GET /v1/ledger/checkpoint":                {"/v1/ledger/checkpoint?size=7", ""},
	"POST /v1/ledger/checkpoint":               {"/v1/ledger/checkpoint", ""},
	"GET /v1/ledger/consistency":               {"/v1/ledger/consistency?from=3&to=7", ""},
	"GET /v1/ledger/witnesses":                 {"/v1/ledger/witnesses", ""},
	"GET /v1/records/{id}/replay":              {"/v1/records/r1/replay", ""},
	"GET /v1/replay":                           {"/v1/replay?trace_id=" + testTraceID, ""},
	"POST /v1/records/{id}/replay":             {"/v1/records/r1/replay", ""},
	"POST /v1/records/{id}/retract":            {"/v1/records/r1/retract", `{"reason":"wrong"}`},
	"POST /v1/records/{id}/feedback":           {"/v1/records/r1/feedback", `{"label":"correct"}`},
	"GET /v1/records/{id}/links":               {"/v1/records/r1/links", ""},
	"GET /v1/shadow/report":                    {"/v1/shadow/report?decision_key=support.refund.execute", ""},
	"GET /v1/stats/latency":                    {"/v1/stats/latency", ""},
	"POST /v1/runs":                            {"/v1/runs", `{"workflow_id":"ui.component.change"}`},
	"GET /v1/runs/{id}":                        {"/v1/runs/run_1", ""},
	"POST /v1/runs/{id}/steps/{step}/attempts": {"/v1/runs/run_1/steps/visual_check/attempts", `{"actor":{"type":"AGENT","id":"a"},"result":{}}`},
	"GET /v1/runs":                             {"/v1/runs?status=active", ""},
	"GET /v1/approvals":                        {"/v1/approvals?state=pending", ""},
	"GET /v1/approvals/{id}":                   {"/v1/approvals/apr_1", ""},
	"POST /v1/approvals/{id}/approve":          {"/v1/approvals/apr_1/approve", `{"reason":"Invoice checked."}`},
	"POST /v1/approvals/{id}/deny":             {"/v1/approvals/apr_1/deny", `{"reason":"The invoice does not match."}`},
	"POST /v1/approvals/{id}/withdraw":         {"/v1/approvals/apr_1/withdraw", `{"reason":"The customer cancelled."}`},
	"GET /v1/keys":                             {"/v1/keys", ""},
	"GET /v1/pack":                             {"/v1/pack", ""},
	"POST /v1/keys":                            {"/v1/keys", `{"subject":"maria","roles":["approver"]}`},
	"POST /v1/keys/{id}/revoke":                {"/v1/keys/key_maria/revoke", `{}`},
	"GET /healthz":                             {"/healthz", ""},
	"GET /v1/whoami":                           {"/v1/whoami", ""},
	"GET /v1/openapi.yaml":                     {"/v1/openapi.yaml", ""},
	"GET /v1/decisions/{id}":                   {"/v1/decisions/dec_1", ""},
	"GET /v1/decisions/in_flight":              {"/v1/decisions/in_flight?expired_by=now", ""},
	"GET /v1/params":                           {"/v1/params", ""},
	"PUT /v1/params":                           {"/v1/params", `{"values":{"limit":3},"reason":"r"}`},
	"POST /v1/erasures":                        {"/v1/erasures", `{"subject_id":"customer:c1","reason":"r"}`},
	"POST /v1/evidence":                        {"/v1/evidence", `{"kind":"identity_verification","observed_at":"2026-05-09T09:00:00Z"}`},
	"GET /v1/evidence/{id}":                    {"/v1/evidence/idv_1", ""},
	"POST /v1/evidence/{id}/revoke":            {"/v1/evidence/idv_1/revoke", `{"reason":"r"}`},
	"POST /v1/decisions/{id}/execution":        {"/v1/decisions/dec_1/execution", `{"status":"succeeded"}`},
	"POST /v1/decisions/{id}/resume":           {"/v1/decisions/dec_1/resume", `{"request":{"tool":"payments.issue_refund"}}`},
	"POST /access/v1/evaluation":               {"/access/v1/evaluation", azSample},
	"POST /access/v1/evaluations":              {"/access/v1/evaluations", `{"evaluations":[` + azSample + `]}`},
	"GET /.well-known/authzen-configuration":   {"/.well-known/authzen-configuration", ""},
	"GET /readyz":                              {"/readyz", ""},
	"GET /metrics":                             {"/metrics", ""},
}

// azSample is an AuthZEN evaluation that names no tenant.
const azSample = `{"subject":{"type":"agent","id":"a"},"action":{"name":"payments.issue_refund"},"resource":{"type":"order","id":"o1"}}`

// sample returns the sample request of rt, sent with key (none when "").
func sample(t *testing.T, rt route, key string) *http.Request {
	t.Helper()
	sm, ok := routeSamples[rt.method+" "+rt.path]
	if !ok {
		t.Fatalf("routeSamples has no request of %s %s; add one", rt.method, rt.path)
	}
	req := newRequest(rt.method, sm.target, sm.body)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// newAuthServer returns a server of fake, as every interface, that
// authenticates callers with testKeys.
func newAuthServer(fake *fakeService) (*Server, *testLog) {
	return newTestServer(fake, Config{Ledger: fake, Workflows: fake, Approvals: fake, Replays: fake, Shadows: fake, Lifecycle: fake, Params: fake, Annotations: fake, Erasures: fake, Evidence: fake, Authenticate: testKeys.authenticate,
		Envelopes: fake.Envelope, VerifierKeys: fake.VerifierKeys, Witnesses: fake.Witnesses, APIKeys: newFakeKeys(fake).keyAdmin(), Pack: refundPack})
}

// TestRolesPerRoute proves the route table on every route: a key holding
// one of the route's roles is served, with its principal and its tenant;
// a key of any other role is 403 and reaches nothing; no key, a bad key
// and a revoked key are 401; an authenticator that fails is 503.
func TestRolesPerRoute(t *testing.T) {
	s, _ := newAuthServer(fullService())
	for _, rt := range s.routes {
		name := rt.method + " " + rt.path
		t.Run(name, func(t *testing.T) {
			if rt.roles == nil {
				fake := fullService()
				s, _ := newAuthServer(fake)
				req := sample(t, rt, "")
				if rec := serve(s, req); rec.Code != http.StatusOK {
					t.Errorf("%s without a key = %d, want 200 (a public route); body %s", name, rec.Code, rec.Body)
				}
				return
			}
			for _, role := range writ.Roles {
				fake := fullService()
				s, _ := newAuthServer(fake)
				key := string(role) + "-key"
				req := sample(t, rt, key)
				rec := serve(s, req)
				if !slices.Contains(rt.roles, role) {
					p := readProblem(t, rec, req, http.StatusForbidden, writ.EFORBIDDEN)
					if !strings.Contains(p.Detail, rolesText(rt.roles)) {
						t.Errorf("%s as %s: detail %q does not name the roles it needs (%s)", name, role, p.Detail, rolesText(rt.roles))
					}
					if n := fake.calls(); n != 0 {
						t.Errorf("%s as %s: the service was called %d times, want 0", name, role, n)
					}
					continue
				}
				if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
					t.Errorf("%s as %s = %d, want success; body %s", name, role, rec.Code, rec.Body)
					continue
				}
				if name == "GET /metrics" || name == "GET /v1/pack" {
					continue // server-wide: reaches no service, names no tenant
				}
				if name == "GET /v1/whoami" {
					// Reaches no service: it answers with the key itself.
					want := testKeys[key]
					var id Identity
					if err := json.Unmarshal(rec.Body.Bytes(), &id); err != nil || id.Auth != AuthAPIKeys || id.KeyID != want.KeyID || id.TenantID != want.TenantID || id.Subject != want.Subject || !slices.Equal(id.Roles, want.Roles) {
						t.Errorf("%s as %s = %s (%v), want the key's %+v", name, role, rec.Body, err, want)
					}
					continue
				}
				want := testKeys[key]
				if got := fake.seen(); len(got) != 1 || got[0] == nil || got[0].KeyID != want.KeyID {
					t.Errorf("%s as %s: the service saw principals %+v, want the key's %+v", name, role, got, want)
				}
				if got := fake.tenantsSeen(); !slices.Equal(got, []string{"acme"}) {
					t.Errorf("%s as %s with no tenant named: the service was asked for tenants %q, want the key's [acme]", name, role, got)
				}
			}

			for _, tt := range []struct {
				name   string
				header []string // Authorization headers
				status int
				code   string
			}{
				{"no key", nil, 401, writ.EUNAUTHENTICATED},
				{"an unknown key", []string{"Bearer writ_key_nope"}, 401, writ.EUNAUTHENTICATED},
				{"a revoked key", []string{"Bearer revoked-key"}, 401, writ.EUNAUTHENTICATED},
				{"not a bearer", []string{"Basic YWdlbnQ6a2V5"}, 401, writ.EUNAUTHENTICATED},
				{"the store is down", []string{"Bearer down-key"}, 503, writ.EUNAVAILABLE},
			} {
				fake := fullService()
				s, log := newAuthServer(fake)
				req := sample(t, rt, "")
				for _, h := range tt.header {
					req.Header.Add("Authorization", h)
				}
				rec := serve(s, req)
				readProblem(t, rec, req, tt.status, tt.code)
				if got, want := rec.Header().Get("WWW-Authenticate"), map[bool]string{true: authChallenge}[tt.status == 401]; got != want {
					t.Errorf("%s with %s: WWW-Authenticate = %q, want %q", name, tt.name, got, want)
				}
				if n := fake.calls(); n != 0 {
					t.Errorf("%s with %s: the service was called %d times, want 0", name, tt.name, n)
				}
				if tt.status == 503 {
					if got := rec.Header().Get("Retry-After"); got != "1" {
						t.Errorf("%s with %s: Retry-After = %q, want 1", name, tt.name, got)
					}
					if strings.Contains(rec.Body.String(), "hunter2") {
						t.Errorf("%s with %s: the answer leaks the authenticator's error: %s", name, tt.name, rec.Body)
					}
					if !strings.Contains(log.String(), "hunter2") {
						t.Errorf("%s with %s: the authenticator's error was not logged:\n%s", name, tt.name, log)
					}
				}
			}
		})
	}
}

// azSampleAcme is azSample for tenant acme.
const azSampleAcme = `{"subject":{"type":"agent","id":"a"},"action":{"name":"payments.issue_refund"},"resource":{"type":"order","id":"o1"},"context":{"tenant_id":"acme"}}`

// TestDevelopmentModeNeedsNoKey: without an authenticator, no route asks
// for a key (one sent is ignored), every request names its tenant, and no
// call sees a principal.
func TestDevelopmentModeNeedsNoKey(t *testing.T) {
	samples := map[string]struct{ target, body string }{
		"POST /v1/check":                           {"/v1/check", `{"tenant_id":"acme"}`},
		"GET /v1/records/{id}":                     {"/v1/records/r1?tenant_id=acme", ""},
		"GET /v1/records":                          {"/v1/records?tenant_id=acme", ""},
		"GET /v1/records/{id}/proof":               {"/v1/records/r1/proof?tenant_id=acme&size=7", ""},
		"GET /v1/records/{id}/envelope":            {"/v1/records/r1/envelope?tenant_id=acme", ""},
		"GET /v1/ledger/keys":                      {"/v1/ledger/keys?tenant_id=acme", ""},
		"GET /v1/ledger/checkpoint":                {"/v1/ledger/checkpoint?tenant_id=acme&size=7", ""},
		"POST /v1/ledger/checkpoint":               {"/v1/ledger/checkpoint?tenant_id=acme", ""},
		"GET /v1/ledger/consistency":               {"/v1/ledger/consistency?tenant_id=acme&from=3&to=7", ""},
		"GET /v1/ledger/witnesses":                 {"/v1/ledger/witnesses?tenant_id=acme", ""},
		"GET /v1/records/{id}/replay":              {"/v1/records/r1/replay?tenant_id=acme", ""},
		"GET /v1/replay":                           {"/v1/replay?tenant_id=acme&trace_id=" + testTraceID, ""},
		"POST /v1/records/{id}/replay":             {"/v1/records/r1/replay?tenant_id=acme", ""},
		"POST /v1/records/{id}/retract":            {"/v1/records/r1/retract", `{"tenant_id":"acme","by":"maria","reason":"wrong"}`},
		"POST /v1/records/{id}/feedback":           {"/v1/records/r1/feedback", `{"tenant_id":"acme","author":"maria","label":"correct"}`},
		"GET /v1/records/{id}/links":               {"/v1/records/r1/links?tenant_id=acme", ""},
		"GET /v1/shadow/report":                    {"/v1/shadow/report?tenant_id=acme", ""},
		"GET /v1/stats/latency":                    {"/v1/stats/latency?tenant_id=acme", ""},
		"POST /v1/runs":                            {"/v1/runs", `{"tenant_id":"acme","workflow_id":"w"}`},
		"GET /v1/runs/{id}":                        {"/v1/runs/run_1?tenant_id=acme", ""},
		"POST /v1/runs/{id}/steps/{step}/attempts": {"/v1/runs/run_1/steps/visual_check/attempts?tenant_id=acme", `{"actor":{"type":"AGENT","id":"a"},"result":{}}`},
		"GET /v1/runs":                             {"/v1/runs?tenant_id=acme", ""},
		"GET /v1/approvals":                        {"/v1/approvals?tenant_id=acme", ""},
		"GET /v1/approvals/{id}":                   {"/v1/approvals/apr_1?tenant_id=acme", ""},
		"POST /v1/approvals/{id}/approve":          {"/v1/approvals/apr_1/approve", `{"tenant_id":"acme","approver":"maria","reason":"ok"}`},
		"POST /v1/approvals/{id}/deny":             {"/v1/approvals/apr_1/deny", `{"tenant_id":"acme","approver":"maria","reason":"no"}`},
		"POST /v1/approvals/{id}/withdraw":         {"/v1/approvals/apr_1/withdraw", `{"tenant_id":"acme"}`},
		"GET /v1/keys":                             {"/v1/keys?tenant_id=acme", ""},
		"GET /v1/pack":                             {"/v1/pack?tenant_id=acme", ""},
		"POST /v1/keys":                            {"/v1/keys", `{"tenant_id":"acme","subject":"maria","roles":["approver"]}`},
		"POST /v1/keys/{id}/revoke":                {"/v1/keys/key_maria/revoke", `{"tenant_id":"acme"}`},
		"GET /healthz":                             {"/healthz", ""},
		"GET /v1/whoami":                           {"/v1/whoami", ""},
		"GET /v1/openapi.yaml":                     {"/v1/openapi.yaml", ""},
		"GET /v1/decisions/{id}":                   {"/v1/decisions/dec_1?tenant_id=acme", ""},
		"GET /v1/decisions/in_flight":              {"/v1/decisions/in_flight?tenant_id=acme", ""},
		"GET /v1/params":                           {"/v1/params?tenant_id=acme", ""},
		"PUT /v1/params":                           {"/v1/params", `{"tenant_id":"acme","values":{},"by":"maria","reason":"r"}`},
		"POST /v1/erasures":                        {"/v1/erasures", `{"tenant_id":"acme","subject_id":"customer:c1","by":"maria","reason":"r"}`},
		"POST /v1/evidence":                        {"/v1/evidence", `{"tenant_id":"acme","kind":"identity_verification"}`},
		"GET /v1/evidence/{id}":                    {"/v1/evidence/idv_1?tenant_id=acme", ""},
		"POST /v1/evidence/{id}/revoke":            {"/v1/evidence/idv_1/revoke", `{"tenant_id":"acme","reason":"r"}`},
		"POST /v1/decisions/{id}/execution":        {"/v1/decisions/dec_1/execution", `{"tenant_id":"acme","status":"failed"}`},
		"POST /v1/decisions/{id}/resume":           {"/v1/decisions/dec_1/resume", `{"tenant_id":"acme","request":{"tool":"t"},"wait":"1s"}`},
		"POST /access/v1/evaluation":               {"/access/v1/evaluation", azSampleAcme},
		"POST /access/v1/evaluations":              {"/access/v1/evaluations", `{"context":{"tenant_id":"acme"},"evaluations":[` + azSample + `]}`},
		"GET /.well-known/authzen-configuration":   {"/.well-known/authzen-configuration", ""},
		"GET /readyz":                              {"/readyz", ""},
		"GET /metrics":                             {"/metrics", ""},
	}
	for _, rt := range routes {
		sm, ok := samples[rt.method+" "+rt.path]
		if !ok {
			t.Fatalf("no development mode sample of %s %s; add one", rt.method, rt.path)
		}
		fake := fullService()
		s, _ := newTestServer(fake, Config{Ledger: fake, Workflows: fake, Approvals: fake, Replays: fake, Shadows: fake, Lifecycle: fake, Params: fake, Annotations: fake, Erasures: fake, Evidence: fake, Envelopes: fake.Envelope, VerifierKeys: fake.VerifierKeys,
			Witnesses: fake.Witnesses, APIKeys: newFakeKeys(fake).keyAdmin(), Pack: refundPack})
		req := newRequest(rt.method, sm.target, sm.body)
		req.Header.Set("Authorization", "Bearer all-key")
		rec := serve(s, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
			t.Errorf("%s %s in development mode = %d, want success; body %s", rt.method, sm.target, rec.Code, rec.Body)
		}
		for _, p := range fake.seen() {
			if p != nil {
				t.Errorf("%s %s in development mode: the service saw the principal %+v, want none", rt.method, sm.target, p)
			}
		}
	}
}

func TestAuthorizationHeader(t *testing.T) {
	tests := []struct {
		headers []string
		status  int
		detail  string
	}{
		{[]string{"Bearer agent-key"}, 200, ""},
		{[]string{"bearer agent-key"}, 200, ""},
		{[]string{"BEARER   agent-key"}, 200, ""},
		{nil, 401, "needs an API key"},
		{[]string{""}, 401, "needs an API key"},
		{[]string{"Bearer"}, 401, "Bearer <API key>"},
		{[]string{"Bearer "}, 401, "Bearer <API key>"},
		{[]string{"agent-key"}, 401, "Bearer <API key>"},
		{[]string{"Token agent-key"}, 401, "Bearer <API key>"},
		{[]string{"Bearer agent-key extra"}, 401, "Bearer <API key>"},
		{[]string{"Bearer agent-key", "Bearer agent-key"}, 401, "one header"},
		{[]string{"Bearer nope"}, 401, "not valid"},
	}
	for _, tt := range tests {
		fake := fullService()
		s, _ := newAuthServer(fake)
		req := newRequest(http.MethodPost, "/v1/check", `{}`)
		for _, h := range tt.headers {
			req.Header.Add("Authorization", h)
		}
		rec := serve(s, req)
		if tt.status == 200 {
			if rec.Code != 200 {
				t.Errorf("POST /v1/check with Authorization %q = %d, want 200; body %s", tt.headers, rec.Code, rec.Body)
			}
			continue
		}
		p := readProblem(t, rec, req, tt.status, writ.EUNAUTHENTICATED)
		if !strings.Contains(p.Detail, tt.detail) {
			t.Errorf("POST /v1/check with Authorization %q: detail %q, want it to say %q", tt.headers, p.Detail, tt.detail)
		}
		if fake.calls() != 0 {
			t.Errorf("POST /v1/check with Authorization %q: the service was called", tt.headers)
		}
	}
}

// TestAuthenticatorContract: an authenticator that accepts a key must say
// whose; one that does not is a bug, answered 500, never a pass.
func TestAuthenticatorContract(t *testing.T) {
	for _, p := range []*writ.Principal{nil, {KeyID: "key_x", Roles: writ.Roles}} {
		fake := fullService()
		s, _ := newTestServer(fake, Config{Authenticate: func(context.Context, string) (*writ.Principal, error) { return p, nil }})
		req := newRequest(http.MethodPost, "/v1/check", `{}`)
		req.Header.Set("Authorization", "Bearer k")
		readProblem(t, serve(s, req), req, http.StatusInternalServerError, writ.EINTERNAL)
		if fake.calls() != 0 {
			t.Errorf("authenticator answering %+v: the service was called", p)
		}
	}
}

// TestTenantScoping: with an API key, a request acts for the key's tenant.
// Naming it is fine, leaving it out fills it in, and naming another is 403
// before anything is read.
func TestTenantScoping(t *testing.T) {
	const other = "this API key belongs to another tenant"
	tests := []struct {
		method, target, body string
		key                  string
		status               int
		tenant               string // the tenant the service must see, on success
	}{
		{"POST", "/v1/check", `{"tenant_id":"acme"}`, "agent-key", 200, "acme"},
		{"POST", "/v1/check", `{"tenant_id":""}`, "agent-key", 200, "acme"},
		{"POST", "/v1/check", `{}`, "agent-key", 200, "acme"},
		{"POST", "/v1/check", `{"tenant_id":"globex"}`, "agent-key", 403, ""},
		{"POST", "/v1/check", `{"tenant_id":"acme"}`, "globex-key", 403, ""},
		{"POST", "/v1/runs", `{"tenant_id":"globex","workflow_id":"w"}`, "agent-key", 403, ""},
		{"POST", "/v1/runs", `{"workflow_id":"w"}`, "agent-key", 201, "acme"},
		{"GET", "/v1/records?tenant_id=globex", "", "auditor-key", 403, ""},
		{"GET", "/v1/records?tenant_id=acme", "", "auditor-key", 200, "acme"},
		{"GET", "/v1/records?tenant_id=", "", "auditor-key", 200, "acme"},
		{"GET", "/v1/records?tenant_id=&tenant_id=globex", "", "auditor-key", 403, ""},
		{"GET", "/v1/records?tenant_id=globex&limit=nope&bogus=1", "", "auditor-key", 403, ""},
		{"GET", "/v1/records/r1?tenant_id=globex", "", "auditor-key", 403, ""},
		{"GET", "/v1/records/r1/proof?tenant_id=globex&size=7", "", "auditor-key", 403, ""},
		{"GET", "/v1/ledger/checkpoint?tenant_id=globex", "", "auditor-key", 403, ""},
		{"POST", "/v1/ledger/checkpoint?tenant_id=globex", "", "admin-key", 403, ""},
		{"POST", "/v1/ledger/checkpoint?tenant_id=acme", "", "admin-key", 200, "acme"},
		{"GET", "/v1/ledger/consistency?tenant_id=globex&from=3&to=7", "", "auditor-key", 403, ""},
		{"GET", "/v1/runs/run_1?tenant_id=globex", "", "auditor-key", 403, ""},
		{"POST", "/v1/runs/run_1/steps/visual_check/attempts?tenant_id=globex", `{"actor":{"type":"AGENT","id":"a"},"result":{}}`, "agent-key", 403, ""},
		{"POST", "/v1/runs/run_1/steps/visual_check/attempts?tenant_id=acme", `{"actor":{"type":"AGENT","id":"a"},"result":{}}`, "agent-key", 200, "acme"},
		{"GET", "/v1/approvals?tenant_id=globex", "", "approver-key", 403, ""},
		{"GET", "/v1/approvals?tenant_id=acme&state=pending", "", "approver-key", 200, "acme"},
		{"GET", "/v1/approvals/apr_1?tenant_id=globex", "", "auditor-key", 403, ""},
		{"POST", "/v1/approvals/apr_1/approve", `{"tenant_id":"globex","reason":"ok"}`, "approver-key", 403, ""},
		{"POST", "/v1/approvals/apr_1/deny", `{"tenant_id":"globex","reason":"no"}`, "approver-key", 403, ""},
		{"POST", "/v1/approvals/apr_1/deny", `{"tenant_id":"acme","reason":"no"}`, "approver-key", 200, "acme"},
		{"GET", "/v1/records/r1/replay?tenant_id=globex", "", "auditor-key", 403, ""},
		{"GET", "/v1/records/r1/replay?tenant_id=acme", "", "auditor-key", 200, "acme"},
		{"GET", "/v1/records/r1/replay", "", "auditor-key", 200, "acme"},
		{"GET", "/v1/replay?tenant_id=globex&trace_id=" + testTraceID, "", "auditor-key", 403, ""},
		{"GET", "/v1/replay?tenant_id=globex&trace_id=nope", "", "auditor-key", 403, ""},
		{"GET", "/v1/replay?tenant_id=&trace_id=" + testTraceID, "", "auditor-key", 200, "acme"},
		// A tenant's latencies are its own: another's is refused.
		{"GET", "/v1/stats/latency?tenant_id=globex", "", "auditor-key", 403, ""},
		{"GET", "/v1/stats/latency", "", "globex-key", 200, "globex"},
		{"GET", "/v1/stats/latency?tenant_id=acme", "", "auditor-key", 200, "acme"},
		// So are its witnesses' cosignatures and lags.
		{"GET", "/v1/ledger/witnesses?tenant_id=globex", "", "auditor-key", 403, ""},
		{"GET", "/v1/ledger/witnesses", "", "globex-key", 200, "globex"},
		{"GET", "/v1/ledger/witnesses?tenant_id=acme", "", "auditor-key", 200, "acme"},
		// What stays a 400 with a key: a repeated tenant, a query on a body route.
		{"GET", "/v1/records?tenant_id=acme&tenant_id=acme", "", "auditor-key", 400, ""},
		{"POST", "/v1/check?tenant_id=acme", `{}`, "agent-key", 400, ""},
	}
	for _, tt := range tests {
		fake := fullService()
		s, _ := newAuthServer(fake)
		req := newRequest(tt.method, tt.target, tt.body)
		req.Header.Set("Authorization", "Bearer "+tt.key)
		rec := serve(s, req)
		switch tt.status {
		case 403:
			p := readProblem(t, rec, req, http.StatusForbidden, writ.EFORBIDDEN)
			if p.Detail != other || p.Errors != nil {
				t.Errorf("%s %s %s as %s: detail %q errors %+v, want only %q", tt.method, tt.target, tt.body, tt.key, p.Detail, p.Errors, other)
			}
			if n := fake.calls(); n != 0 {
				t.Errorf("%s %s %s as %s: the service was called %d times, want 0", tt.method, tt.target, tt.body, tt.key, n)
			}
		case 400:
			readProblem(t, rec, req, http.StatusBadRequest, writ.EINVALID)
		default:
			if rec.Code != tt.status {
				t.Errorf("%s %s %s as %s = %d, want %d; body %s", tt.method, tt.target, tt.body, tt.key, rec.Code, tt.status, rec.Body)
			}
			if got := fake.tenantsSeen(); !slices.Equal(got, []string{tt.tenant}) {
				t.Errorf("%s %s %s as %s: the service was asked for tenants %q, want [%s]", tt.method, tt.target, tt.body, tt.key, got, tt.tenant)
			}
		}
	}
}

// TestForeignIDIsNotFound asks, with a key of globex, for ids that acme
// has, and for the same ids where no tenant has them: the answers must be
// the same, byte for byte, so that nothing tells a foreign id from a
// missing one.
func TestForeignIDIsNotFound(t *testing.T) {
	owned := map[string]string{"r1": "acme", "run_1": "acme", "apr_1": "acme", testTraceID: "acme"}
	requests := []struct{ method, target, body string }{
		{"GET", "/v1/records/r1", ""},
		{"GET", "/v1/records/r1/proof?size=7", ""},
		{"GET", "/v1/runs/run_1", ""},
		{"POST", "/v1/runs/run_1/steps/visual_check/attempts", `{"actor":{"type":"AGENT","id":"a"},"result":{}}`},
		{"GET", "/v1/approvals/apr_1", ""},
		{"POST", "/v1/approvals/apr_1/approve", `{"reason":"ok"}`},
		{"POST", "/v1/approvals/apr_1/deny", `{"reason":"no"}`},
		{"GET", "/v1/records/r1/replay", ""},
		{"GET", "/v1/replay?trace_id=" + testTraceID, ""},
	}
	answer := func(owners map[string]string, key string, method, target, body string) *httptest.ResponseRecorder {
		fake := fullService()
		fake.owners = owners
		s, _ := newAuthServer(fake)
		req := newRequest(method, target, body)
		req.Header.Set("Authorization", "Bearer "+key)
		return serve(s, req)
	}
	for _, r := range requests {
		own := answer(owned, "all-key", r.method, r.target, r.body)
		if own.Code != http.StatusOK {
			t.Errorf("%s %s by its own tenant = %d, want 200; body %s", r.method, r.target, own.Code, own.Body)
		}
		foreign := answer(owned, "globex-key", r.method, r.target, r.body)
		missing := answer(map[string]string{}, "globex-key", r.method, r.target, r.body)
		if foreign.Code != http.StatusNotFound {
			t.Errorf("%s %s by another tenant = %d, want 404; body %s", r.method, r.target, foreign.Code, foreign.Body)
		}
		if foreign.Code != missing.Code || foreign.Body.String() != missing.Body.String() {
			t.Errorf("%s %s: another tenant's id answers %d %s, a missing one %d %s; want them identical",
				r.method, r.target, foreign.Code, foreign.Body, missing.Code, missing.Body)
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control", "WWW-Authenticate", "Retry-After"} {
			if f, m := foreign.Header().Get(h), missing.Header().Get(h); f != m {
				t.Errorf("%s %s: %s is %q for another tenant's id, %q for a missing one", r.method, r.target, h, f, m)
			}
		}
	}
}

func TestHealthModes(t *testing.T) {
	report := func(context.Context) HealthReport {
		return HealthReport{Status: HealthOK, Store: "sqlite", Auth: "whatever", Warning: "from the health func"}
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"development mode", Config{}, `{"status":"ok","auth":"disabled","warning":"` + devModeWarning + `"}`},
		{"development mode, reported", Config{Health: report}, `{"status":"ok","store":"sqlite","auth":"disabled","warning":"` + devModeWarning + `"}`},
		{"API keys", Config{Authenticate: testKeys.authenticate}, `{"status":"ok","auth":"api_keys"}`},
		{"API keys, reported", Config{Authenticate: testKeys.authenticate, Health: report}, `{"status":"ok","store":"sqlite","auth":"api_keys"}`},
	}
	for _, tt := range tests {
		s, _ := newTestServer(&fakeService{}, tt.cfg)
		rec := serve(s, newRequest(http.MethodGet, "/healthz", ""))
		if rec.Code != http.StatusOK || rec.Body.String() != tt.want {
			t.Errorf("GET /healthz (%s) = %d %s, want 200 %s", tt.name, rec.Code, rec.Body, tt.want)
		}
	}
	if !strings.Contains(devModeWarning, "development mode") || !strings.Contains(devModeWarning, "authenticates no one") {
		t.Errorf("the development mode warning %q does not say what it is", devModeWarning)
	}
}

func TestProblemStatusesOfAuth(t *testing.T) {
	for _, tt := range []struct {
		code   string
		status int
	}{{writ.EUNAUTHENTICATED, 401}, {writ.EFORBIDDEN, 403}} {
		if got := statusOf(tt.code); got != tt.status {
			t.Errorf("statusOf(%s) = %d, want %d", tt.code, got, tt.status)
		}
		if got := codeOf(tt.status); got != tt.code {
			t.Errorf("codeOf(%d) = %s, want %s", tt.status, got, tt.code)
		}
	}
}
