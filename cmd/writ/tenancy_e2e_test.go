package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/webhook"
)

// keyFor creates an API key with the CLI and returns its token and id.
// An agent key of another subject than the example packs' agents may act
// for them (--acts-for), since the tests send the examples' requests,
// which name them; its records say so (actor.acted_by).
func keyFor(t *testing.T, data, tenant, subject, roles string, flags ...string) (token, id string) {
	t.Helper()
	args := []string{"keys", "create", "--data", data, "--tenant", tenant, "--subject", subject, "--role", roles, "--json"}
	if strings.Contains(roles, "agent") && subject != "agt_support" && len(flags) == 0 {
		args = append(args, "--acts-for", "AGENT:agt_support,AGENT:agt_workflow_ops")
	}
	// stdout only: the first key create of a data directory says on
	// stderr that it generated the ring's first signing key.
	out, err := exec.Command(writBinary, append(args, flags...)...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("writ keys create: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("writ keys create: %v", err)
	}
	var k struct {
		ID    string `json:"key_id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out, &k); err != nil || k.Token == "" {
		t.Fatalf("writ keys create --json printed %s (%v)", out, err)
	}
	return k.Token, k.ID
}

func clientFor(url, token string) *httpapi.Client {
	return httpapi.NewClient(url, httpapi.WithHeader("Authorization", "Bearer "+token))
}

// observed is when the refund examples' evidence is said to be observed:
// recent, and the same for every check of a test run, so that a retry of
// the same check presents the same evidence.
var observed = time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)

// freshRefund reads a refund example with its evidence observed recently.
func freshRefund(t *testing.T, name string) *writ.CheckRequest {
	req := readExample(t, "../../examples/refund/requests/"+name+".json")
	for i := range req.Evidence {
		req.Evidence[i].ObservedAt = &observed
	}
	req.IdempotencyKey = ""
	return req
}

// tenantWorld is a server with API keys for two tenants and some data of
// the first.
type tenantWorld struct {
	srv    *server
	data   string
	tokens map[string]string // "tenant/role" → token
	ids    map[string]string // "tenant/role" → key id
	// acme's data, which globex must never reach.
	recordID, approvalID, runID string
}

func newTenantWorld(t *testing.T) *tenantWorld {
	t.Helper()
	w := &tenantWorld{data: t.TempDir(), tokens: map[string]string{}, ids: map[string]string{}}
	for _, tenant := range []string{"acme", "globex"} {
		for _, role := range []string{"agent", "approver", "auditor", "admin"} {
			subject := tenant + "_" + role
			switch {
			case tenant == "acme" && role == "approver":
				subject = "user_finance_lead_77"
			case role == "agent":
				// The agent the example requests name: the key's own
				// principal (docs/trust.md).
				subject = "agt_support"
			}
			w.tokens[tenant+"/"+role], w.ids[tenant+"/"+role] = keyFor(t, w.data, tenant, subject, role)
		}
	}
	idv, _ := keyFor(t, w.data, "acme", "idv.acme.example", "issuer")
	w.srv = startServer(t, w.data, "../../examples/refund")
	ctx := context.Background()
	fileIDV(t, clientFor(w.srv.url, idv), "acme", "")
	agent := clientFor(w.srv.url, w.tokens["acme/agent"])
	rc, err := agent.Check(ctx, freshRefund(t, "refund-high-value-human-review"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("high-value refund receipt names approvals %v, want one", rc.Metadata.ApprovalIDs)
	}
	w.recordID, w.approvalID = rc.Metadata.RecordID, rc.Metadata.ApprovalIDs[0]
	if _, err := clientFor(w.srv.url, w.tokens["acme/admin"]).IssueCheckpoint(ctx, ""); err != nil {
		t.Fatalf("issue a checkpoint for acme: %v", err)
	}
	return w
}

// call sends one request with token ("" for none) and returns the status
// and the body.
func (w *tenantWorld) call(t *testing.T, token, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, w.srv.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// problem keeps what a problem says, without the parts that name the
// request itself (instance, trace ids).
func problem(t *testing.T, body []byte) string {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("not a problem: %s", body)
	}
	delete(p, "instance")
	delete(p, "trace_id")
	// The id itself is named in the detail; replace it so that a foreign
	// id and a missing id compare equal.
	b, _ := json.Marshal(p)
	return string(b)
}

// TestRefundApprovalOverHTTP is the seed's refund example end to end over
// HTTP with API keys: a high-value refund gets a human_review receipt, a
// finance approver approves, and the agent's retry is allowed with the
// approval in its record.
func TestRefundApprovalOverHTTP(t *testing.T) {
	ctx := context.Background()
	w := newTenantWorld(t)
	agent := clientFor(w.srv.url, w.tokens["acme/agent"])
	approver := clientFor(w.srv.url, w.tokens["acme/approver"])
	auditor := clientFor(w.srv.url, w.tokens["acme/auditor"])

	page, err := approver.Approvals(ctx, writ.ApprovalQuery{State: writ.ApprovalPending})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Approvals) != 1 || page.Approvals[0].ApprovalID != w.approvalID || page.Approvals[0].RequestedBy.KeyID != w.ids["acme/agent"] {
		t.Fatalf("pending approvals = %+v, want %s asked by the agent's key", page.Approvals, w.approvalID)
	}
	// The requesting key's own holder may not approve: the agent's key
	// lacks the role, and approval by another approver works.
	if _, err := agent.DecideApproval(ctx, &writ.DecideApprovalRequest{ApprovalID: w.approvalID, Decision: writ.ApprovalApproved, Reason: "mine"}); writ.ErrorCode(err) != writ.EFORBIDDEN {
		t.Errorf("agent approving: %v, want forbidden", err)
	}
	a, err := approver.DecideApproval(ctx, &writ.DecideApprovalRequest{ApprovalID: w.approvalID, Decision: writ.ApprovalApproved, Reason: "order history checked"})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != writ.ApprovalApproved || a.Decision.Approver != "user_finance_lead_77" {
		t.Fatalf("approved request = %+v", a)
	}
	retry := freshRefund(t, "refund-high-value-human-review")
	retry.ApprovalIDs = []string{w.approvalID}
	rc, err := agent.Check(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if !rc.SafeToExecute || rc.Outcome != writ.OutcomeAllow {
		t.Fatalf("retry with the approval = %s safe=%v %+v", rc.Outcome, rc.SafeToExecute, rc.Reasons)
	}
	rec, err := auditor.Record(ctx, "", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Record.Approvals) != 1 {
		t.Fatalf("allowed record approvals = %+v", rec.Record.Approvals)
	}
	ap := rec.Record.Approvals[0]
	if ap.GateID != "GATE_FINANCE_APPROVAL" || ap.Approver != "user_finance_lead_77" || ap.ApprovalModeEffective != writ.ModeDestructive || ap.EvidenceSnapshotHash != rec.Record.Replay.EvidenceSnapshotHash || ap.DecidedAt.IsZero() {
		t.Errorf("record approval = %+v", ap)
	}
	// A second use is stale.
	again, err := agent.Check(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if again.SafeToExecute || !slices.ContainsFunc(again.Reasons, func(r writ.Reason) bool { return r.Code == "approval_stale" }) {
		t.Errorf("second use = safe %v, reasons %+v", again.SafeToExecute, again.Reasons)
	}
	w.srv.stop(t)
	out, err := exec.Command(writBinary, "ledger", "verify", "--data", w.data).CombinedOutput()
	if err != nil {
		t.Errorf("writ ledger verify after the approval flow: %v\n%s", err, out)
	}
}

// TestTenantIsolationOverHTTP calls every endpoint with another tenant's
// valid keys: nothing of acme's reaches globex, and a foreign id answers
// exactly like a missing one.
func TestTenantIsolationOverHTTP(t *testing.T) {
	w := newTenantWorld(t)
	// Ids that exist for acme, and ids that exist nowhere; each pair must
	// answer the same to globex.
	pairs := []struct {
		name             string
		method           string
		foreign, missing string
		body             string
		role             string
	}{
		{"record", "GET", "/v1/records/" + w.recordID, "/v1/records/dr_00000000000000000000000000", "", "auditor"},
		{"proof", "GET", "/v1/records/" + w.recordID + "/proof", "/v1/records/dr_00000000000000000000000000/proof", "", "auditor"},
		{"approval", "GET", "/v1/approvals/" + w.approvalID, "/v1/approvals/apr_00000000000000000000000000", "", "approver"},
		{"approve", "POST", "/v1/approvals/" + w.approvalID + "/approve", "/v1/approvals/apr_00000000000000000000000000/approve", `{"reason":"x"}`, "approver"},
		{"deny", "POST", "/v1/approvals/" + w.approvalID + "/deny", "/v1/approvals/apr_00000000000000000000000000/deny", `{"reason":"x"}`, "approver"},
	}
	for _, p := range pairs {
		t.Run("foreign id "+p.name, func(t *testing.T) {
			tok := w.tokens["globex/"+p.role]
			fs, fb := w.call(t, tok, p.method, p.foreign, p.body)
			ms, mb := w.call(t, tok, p.method, p.missing, p.body)
			if fs != http.StatusNotFound || ms != http.StatusNotFound {
				t.Fatalf("foreign %d %s, missing %d %s; want 404 for both", fs, fb, ms, mb)
			}
			id := func(path string) string {
				return strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, "/v1/records/"), "/v1/approvals/"), "/")[0]
			}
			if got, want := strings.ReplaceAll(problem(t, fb), id(p.foreign), "ID"), strings.ReplaceAll(problem(t, mb), id(p.missing), "ID"); got != want {
				t.Errorf("a foreign id answers differently from a missing one:\n foreign %s\n missing %s", got, want)
			}
		})
	}

	// Lists and the ledger seen with globex's keys hold nothing of acme's.
	for _, tt := range []struct {
		role, path string
	}{
		{"auditor", "/v1/records"},
		{"auditor", "/v1/records?subject_id=customer:cus_77"},
		{"auditor", "/v1/records?decision_key=support.refund.execute"},
		{"approver", "/v1/approvals?state=pending"},
		{"auditor", "/v1/approvals"},
		{"auditor", "/v1/ledger/checkpoint"},
		{"auditor", "/v1/ledger/consistency?from=1&to=1"},
	} {
		t.Run("globex reads "+tt.path, func(t *testing.T) {
			status, body := w.call(t, w.tokens["globex/"+tt.role], "GET", tt.path, "")
			if bytes.Contains(body, []byte(w.recordID)) || bytes.Contains(body, []byte(w.approvalID)) || bytes.Contains(body, []byte("cus_77")) || bytes.Contains(body, []byte(`"acme"`)) {
				t.Errorf("GET %s with globex's key leaks acme's data: %d %s", tt.path, status, body)
			}
			if status == http.StatusOK && strings.HasPrefix(tt.path, "/v1/ledger") {
				t.Errorf("GET %s with globex's key = 200 %s, want no ledger for a tenant without records", tt.path, body)
			}
		})
	}

	// Naming acme outright is refused.
	for _, tt := range []struct {
		role, method, path, body string
	}{
		{"auditor", "GET", "/v1/records?tenant_id=acme", ""},
		{"auditor", "GET", "/v1/records/" + w.recordID + "?tenant_id=acme", ""},
		{"approver", "GET", "/v1/approvals?tenant_id=acme", ""},
		{"auditor", "GET", "/v1/ledger/checkpoint?tenant_id=acme", ""},
		{"agent", "POST", "/v1/check", mustJSON(t, freshRefund(t, "refund-allow"))},
		{"approver", "POST", "/v1/approvals/" + w.approvalID + "/approve", `{"tenant_id":"acme","reason":"x"}`},
	} {
		t.Run("globex names acme "+tt.method+" "+tt.path, func(t *testing.T) {
			status, body := w.call(t, w.tokens["globex/"+tt.role], tt.method, tt.path, tt.body)
			// The problem's instance echoes the path asked for; the rest
			// must reveal nothing.
			if status != http.StatusForbidden || strings.Contains(problem(t, body), w.recordID) || strings.Contains(problem(t, body), "cus_77") {
				t.Errorf("%s %s = %d %s, want 403 revealing nothing", tt.method, tt.path, status, body)
			}
		})
	}

	// The approval globex tried to decide is still pending for acme.
	a, err := clientFor(w.srv.url, w.tokens["acme/approver"]).Approval(context.Background(), "", w.approvalID)
	if err != nil || a.State != writ.ApprovalPending {
		t.Errorf("acme's approval after globex's attempts = %+v, %v; want still pending", a, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRolesAndKeysOverHTTP: each role calling what it may not gets 403;
// a missing, malformed, revoked or expired key gets 401.
func TestRolesAndKeysOverHTTP(t *testing.T) {
	w := newTenantWorld(t)
	check := mustJSON(t, freshRefund(t, "refund-allow"))
	calls := []struct {
		method, path, body string
		allowed            []string
	}{
		{"POST", "/v1/check", check, []string{"agent"}},
		{"GET", "/v1/records", "", []string{"auditor"}},
		{"GET", "/v1/records/" + w.recordID, "", []string{"auditor"}},
		{"GET", "/v1/records/" + w.recordID + "/proof", "", []string{"auditor"}},
		{"GET", "/v1/ledger/checkpoint", "", []string{"auditor"}},
		{"POST", "/v1/ledger/checkpoint", "", []string{"admin"}},
		{"GET", "/v1/approvals", "", []string{"approver", "auditor"}},
		{"GET", "/v1/approvals/" + w.approvalID, "", []string{"approver", "auditor"}},
		{"POST", "/v1/approvals/apr_00000000000000000000000000/deny", `{"reason":"x"}`, []string{"approver"}},
	}
	for _, c := range calls {
		for _, role := range []string{"agent", "approver", "auditor", "admin"} {
			allowed := strings.Contains(strings.Join(c.allowed, ","), role)
			status, body := w.call(t, w.tokens["acme/"+role], c.method, c.path, c.body)
			switch {
			case allowed && (status == http.StatusUnauthorized || status == http.StatusForbidden):
				t.Errorf("%s %s as %s = %d %s, want it allowed", c.method, c.path, role, status, body)
			case !allowed && status != http.StatusForbidden:
				t.Errorf("%s %s as %s = %d %s, want 403", c.method, c.path, role, status, body)
			}
		}
		if status, body := w.call(t, "", c.method, c.path, c.body); status != http.StatusUnauthorized {
			t.Errorf("%s %s without a key = %d %s, want 401", c.method, c.path, status, body)
		}
		if status, _ := w.call(t, "writ_key_bogus_"+strings.Repeat("0", 64), c.method, c.path, c.body); status != http.StatusUnauthorized {
			t.Errorf("%s %s with an unknown key = %d, want 401", c.method, c.path, status)
		}
	}
	// Revoking a key takes effect at the running server's next request.
	tok := w.tokens["acme/auditor"]
	if status, _ := w.call(t, tok, "GET", "/v1/records", ""); status != http.StatusOK {
		t.Fatalf("auditor before revocation = %d", status)
	}
	if out, err := exec.Command(writBinary, "keys", "revoke", "--data", w.data, w.ids["acme/auditor"]).CombinedOutput(); err != nil {
		t.Fatalf("writ keys revoke: %v\n%s", err, out)
	}
	if status, body := w.call(t, tok, "GET", "/v1/records", ""); status != http.StatusUnauthorized {
		t.Errorf("revoked key = %d %s, want 401", status, body)
	}
	out, err := exec.Command(writBinary, "keys", "list", "--data", w.data, "--tenant", "acme").CombinedOutput()
	if err != nil || !strings.Contains(string(out), w.ids["acme/auditor"]) || strings.Contains(string(out), tok[len(tok)-64:]) {
		t.Errorf("writ keys list = %v\n%s\nwant the revoked key listed and no secret shown", err, out)
	}

	// A key that expires opens until its expiry, then gets 401.
	out, err = exec.Command(writBinary, "keys", "create", "--data", w.data, "--tenant", "acme", "--subject", "short_lived_auditor", "--role", "auditor", "--expires", "6s", "--json").Output()
	var short struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err != nil || json.Unmarshal(out, &short) != nil || short.Token == "" {
		t.Fatalf("writ keys create --expires 6s: %v\n%s", err, out)
	}
	if status, body := w.call(t, short.Token, "GET", "/v1/records", ""); status != http.StatusOK {
		t.Fatalf("a key before its expiry = %d %s, want 200", status, body)
	}
	time.Sleep(time.Until(short.ExpiresAt))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, body := w.call(t, short.Token, "GET", "/v1/records", "")
		if status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a key 10 s past its expiry = %d %s, want 401", status, body)
		}
	}
}

// TestServeRefusesUnauthenticatedNonLoopback: without API keys, writ
// serves only on loopback (development mode) and says so in /healthz.
func TestServeRefusesUnauthenticatedNonLoopback(t *testing.T) {
	data := t.TempDir()
	out, err := exec.Command(writBinary, "serve", "--addr", "0.0.0.0:0", "--data", data, "--pack", "../../examples/refund").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without authentication") {
		t.Fatalf("serve on 0.0.0.0 without keys: %v\n%s\nwant a refusal", err, out)
	}
	srv := startServer(t, data, "../../examples/refund")
	resp, err := http.Get(srv.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h["auth"] != "disabled" || !strings.Contains(strings.ToLower(h["warning"].(string)), "development") {
		t.Errorf("healthz in development mode = %v", h)
	}
	if !strings.Contains(srv.stderr.String(), "DEVELOPMENT MODE") {
		t.Errorf("serve printed no loud warning: %s", srv.stderr.String())
	}
}

// TestApprovalWebhookOverHTTP: a pack that names a webhook has each new
// approval request announced, signed with the secret from the
// environment; a receiver that fails first is retried.
func TestApprovalWebhookOverHTTP(t *testing.T) {
	const secret = "webhook-secret-for-tests-0123456789abcdef"
	type delivery struct {
		header, id string
		body       []byte
	}
	got := make(chan delivery, 8)
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			rw.WriteHeader(http.StatusServiceUnavailable) // the first delivery fails; writ retries it
			return
		}
		got <- delivery{r.Header.Get("Writ-Signature"), r.Header.Get("Writ-Delivery"), b}
	}))
	defer hook.Close()

	packDir := t.TempDir()
	if err := os.CopyFS(packDir, os.DirFS("../../examples/refund")); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(packDir, "pack.yaml")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, []byte("approvals:\n  webhook:\n    url: "+hook.URL+"/approvals\n    secret_env: WRIT_TEST_WEBHOOK_SECRET\n")...)
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	// Without the secret in the environment, the server refuses to start.
	out, err := exec.Command(writBinary, "serve", "--addr", "127.0.0.1:0", "--data", data, "--pack", packDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "WRIT_TEST_WEBHOOK_SECRET") {
		t.Fatalf("serve without the webhook secret: %v\n%s", err, out)
	}
	srv := startServerEnv(t, []string{"WRIT_TEST_WEBHOOK_SECRET=" + secret}, "--data", data, "--pack", packDir)
	fileIDV(t, httpapi.NewClient(srv.url), "acme", "idv.acme.example")
	rc, err := httpapi.NewClient(srv.url).Check(context.Background(), freshRefund(t, "refund-high-value-human-review"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		if err := webhook.Verify([]byte(secret), d.header, d.body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("the delivery's signature does not verify: %v", err)
		}
		var ev struct {
			Type       string               `json:"type"`
			DeliveryID string               `json:"delivery_id"`
			Approval   writ.ApprovalRequest `json:"approval"`
		}
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "approval.requested" || ev.Approval.ApprovalID != rc.Metadata.ApprovalIDs[0] || ev.DeliveryID != d.id || ev.Approval.GateID != "GATE_FINANCE_APPROVAL" {
			t.Errorf("delivery = %s", d.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no webhook delivery within 30s (%d attempts); server log: %s", calls.Load(), srv.stderr)
	}
	if n := calls.Load(); n < 2 {
		t.Errorf("webhook attempts = %d, want the failed first one retried", n)
	}
}

// TestApprovalsCommandLine drives writ approvals list, show, approve and
// deny against the real server, as the approver's key.
func TestApprovalsCommandLine(t *testing.T) {
	w := newTenantWorld(t)
	run := func(token string, args ...string) (string, error) {
		cmd := exec.Command(writBinary, append([]string{"approvals"}, args...)...)
		cmd.Env = append(os.Environ(), "WRIT_API_KEY="+token, "WRIT_SERVER="+w.srv.url)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	fin := w.tokens["acme/approver"]
	out, err := run(fin, "list")
	if err != nil || !strings.Contains(out, w.approvalID) || !strings.Contains(out, "GATE_FINANCE_APPROVAL") || !strings.Contains(out, "finance_approvers") {
		t.Fatalf("writ approvals list: %v\n%s", err, out)
	}
	if out, err := run(fin, "list", "--state", "approved"); err != nil || strings.Contains(out, w.approvalID) {
		t.Errorf("writ approvals list --state approved: %v\n%s\nwant the pending request left out", err, out)
	}
	out, err = run(fin, "show", w.approvalID)
	var a writ.ApprovalRequest
	if err != nil || json.Unmarshal([]byte(out), &a) != nil || a.ApprovalID != w.approvalID || a.Binding.DecisionKey != "support.refund.execute" {
		t.Fatalf("writ approvals show: %v\n%s", err, out)
	}
	if out, err := run(fin, "approve", w.approvalID); err == nil || !strings.Contains(out, "--reason") {
		t.Errorf("approve without --reason: %v\n%s; want a usage error", err, out)
	}
	if out, err := run(w.tokens["acme/agent"], "approve", "--reason", "mine", w.approvalID); err == nil || !strings.Contains(out, "approver") {
		t.Errorf("approve as the agent: %v\n%s; want refused for want of the approver role", err, out)
	}
	// As the README writes it: the flag after the id (the deny below puts it first).
	out, err = run(fin, "approve", w.approvalID, "--reason", "order history checked")
	if err != nil || !strings.Contains(out, w.approvalID+" approved by user_finance_lead_77") {
		t.Fatalf("writ approvals approve: %v\n%s", err, out)
	}
	if out, err := run(fin, "deny", "--reason", "changed my mind", w.approvalID); err == nil || !strings.Contains(out, "already approved") {
		t.Errorf("deny after approval: %v\n%s; want a conflict", err, out)
	}
}

// fileIDV puts on file, through c, the identity verification the refund
// examples cite (idv_771, about customer:cus_77, observed when freshRefund
// says): c is an issuer key's client (issuer ""), or any client of a
// server in development mode, which takes the issuer's name. A refund accepts no
// evidence that is only the caller's word (docs/trust.md), so every
// server that is to allow one has it on file first.
func fileIDV(t *testing.T, c *httpapi.Client, tenant, issuer string) {
	t.Helper()
	_, err := c.AddEvidence(context.Background(), &writ.AddEvidenceRequest{TenantID: tenant, Kind: "identity_verification", ID: "idv_771",
		SubjectIDs: []string{"customer:cus_77"}, Attributes: map[string]any{"method": "otp"}, ObservedAt: &observed, Issuer: issuer})
	if err != nil {
		t.Fatalf("put idv_771 on file: %v", err)
	}
}

// citeIDV puts on file, through c (as fileIDV), an identity verification
// about the customer req refunds (its first subject), and makes req cite
// it in place of idv_771: for tests whose refunds name customers of their
// own.
func citeIDV(t *testing.T, c *httpapi.Client, req *writ.CheckRequest, issuer string) {
	t.Helper()
	id := "idv_" + strings.TrimPrefix(req.SubjectIDs[0], "customer:")
	_, err := c.AddEvidence(context.Background(), &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: id,
		SubjectIDs: []string{req.SubjectIDs[0]}, Attributes: map[string]any{"method": "otp"}, ObservedAt: &observed, Issuer: issuer})
	if err != nil && writ.ErrorCode(err) != writ.ECONFLICT { // a customer refunded twice has it already
		t.Fatalf("put %s on file: %v", id, err)
	}
	for i := range req.Evidence {
		if req.Evidence[i].Kind == "identity_verification" {
			req.Evidence[i].ID = id
		}
	}
}
