package httpapi

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// TestShadowReportRoute: the query reaches the reports decoded, bad
// parameters are refused by name with nothing asked, and a report of
// another tenant is never sent.
func TestShadowReportRoute(t *testing.T) {
	fake := &fakeService{shadow: fullShadowReport()}
	s, _ := newTestServer(fake, Config{Shadows: fake})
	target := "/v1/shadow/report?tenant_id=acme&pack_hash=sha256:c0ffee&decision_key=support.refund.execute&from=2026-05-01T00:00:00Z&to=2026-05-02T00:00:00Z&examples=7"
	rec := serve(s, newRequest(http.MethodGet, target, ""))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"rules_fired":{"refunds@1.1.0:R_REFUND_REVIEW":2}`) {
		t.Fatalf("GET %s = %d %s", target, rec.Code, rec.Body)
	}
	want := writ.ShadowQuery{TenantID: "acme", PackHash: "sha256:c0ffee", DecisionKey: "support.refund.execute",
		From: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), Examples: 7}
	if got := fake.shadowQs; len(got) != 1 || !got[0].From.Equal(want.From) || !got[0].To.Equal(want.To) ||
		got[0].TenantID != want.TenantID || got[0].PackHash != want.PackHash || got[0].DecisionKey != want.DecisionKey || got[0].Examples != want.Examples {
		t.Errorf("GET %s: reports asked %+v, want %+v", target, got, want)
	}

	for _, tt := range []struct{ target, param string }{
		{"/v1/shadow/report", "tenant_id"},
		{"/v1/shadow/report?tenant_id=acme&examples=0", "examples"},
		{"/v1/shadow/report?tenant_id=acme&examples=101", "examples"},
		{"/v1/shadow/report?tenant_id=acme&from=yesterday", "from"},
		{"/v1/shadow/report?tenant_id=acme&from=2026-05-02T00:00:00Z&to=2026-05-01T00:00:00Z", "to"},
		{"/v1/shadow/report?tenant_id=acme&limit=5", "limit"},
	} {
		fake := &fakeService{shadow: fullShadowReport()}
		s, _ := newTestServer(fake, Config{Shadows: fake})
		req := newRequest(http.MethodGet, tt.target, "")
		p := readProblem(t, serve(s, req), req, http.StatusBadRequest, writ.EINVALID)
		if len(p.Errors) != 1 || p.Errors[0].Field != tt.param {
			t.Errorf("GET %s: problem %+v, want one naming %s", tt.target, p, tt.param)
		}
		if len(fake.shadowQs) != 0 {
			t.Errorf("GET %s: the reports were asked", tt.target)
		}
	}

	other := fullShadowReport()
	other.TenantID = "globex"
	fake = &fakeService{shadow: other}
	s, _ = newTestServer(fake, Config{Shadows: fake})
	req := newRequest(http.MethodGet, "/v1/shadow/report?tenant_id=acme", "")
	readProblem(t, serve(s, req), req, http.StatusInternalServerError, writ.EINTERNAL)

	s, _ = newTestServer(fake, Config{})
	req = newRequest(http.MethodGet, "/v1/shadow/report?tenant_id=acme", "")
	readProblem(t, serve(s, req), req, http.StatusNotFound, writ.ENOTFOUND)
}

// TestClientShadowReport: the client's query is the one the server
// decodes, and the report comes back whole.
func TestClientShadowReport(t *testing.T) {
	fake := &fakeService{shadow: fullShadowReport()}
	s, _ := newTestServer(fake, Config{Shadows: fake})
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(srv.URL)
	q := writ.ShadowQuery{TenantID: "acme", PackHash: "sha256:c0ffee", DecisionKey: "k",
		From: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), Examples: 4}
	rep, err := c.ShadowReport(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, fullShadowReport()) {
		t.Errorf("ShadowReport() = %+v, want %+v", rep, fullShadowReport())
	}
	if got := fake.shadowQs; len(got) != 1 || got[0].PackHash != q.PackHash || got[0].DecisionKey != q.DecisionKey || got[0].Examples != 4 ||
		!got[0].From.Equal(q.From) || !got[0].To.Equal(q.To) {
		t.Errorf("the server decoded %+v, want %+v", got, q)
	}
}
