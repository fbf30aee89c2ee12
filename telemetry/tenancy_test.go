package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// TestTenantHandlerShowsOnlyItsTenant: a tenant's key reads its own
// tenant's series only (issue 38: any tenant's admin key read
// writ_approvals_pending{tenant="acme"}); the operator's handler and a
// server without keys see every tenant.
func TestTenantHandlerShowsOnlyItsTenant(t *testing.T) {
	now := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	m := NewMetrics(Gauges{
		Now: func() time.Time { return now },
		Tenants: func(context.Context) ([]TenantGauges, error) {
			return []TenantGauges{
				{TenantID: "acme", PendingApprovals: 3, CheckpointAt: now.Add(-time.Minute)},
				{TenantID: "globex", PendingApprovals: 5, CheckpointAt: now.Add(-time.Hour)},
			}, nil
		},
	})
	scrape := func(h http.Handler, p *writ.Principal) string {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if p != nil {
			req = req.WithContext(writ.WithPrincipal(req.Context(), p))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /metrics = %d: %s", rec.Code, body)
		}
		return string(body)
	}
	for _, tt := range []struct {
		name      string
		h         http.Handler
		p         *writ.Principal
		see, hide []string
	}{
		{"acme's admin key", m.TenantHandler(), &writ.Principal{TenantID: "acme", Roles: []writ.Role{writ.RoleAdmin}},
			[]string{`writ_approvals_pending{tenant="acme"} 3`, `writ_checkpoint_age_seconds{tenant="acme"} 60`, "go_goroutines"},
			[]string{"globex"}},
		{"globex's admin key", m.TenantHandler(), &writ.Principal{TenantID: "globex", Roles: []writ.Role{writ.RoleAdmin}},
			[]string{`writ_approvals_pending{tenant="globex"} 5`},
			[]string{"acme"}},
		{"no keys (development mode)", m.TenantHandler(), nil,
			[]string{`writ_approvals_pending{tenant="acme"} 3`, `writ_approvals_pending{tenant="globex"} 5`}, nil},
		{"the operator's listener", m.Handler(), nil,
			[]string{`writ_approvals_pending{tenant="acme"} 3`, `writ_approvals_pending{tenant="globex"} 5`}, nil},
	} {
		body := scrape(tt.h, tt.p)
		for _, s := range tt.see {
			if !strings.Contains(body, s) {
				t.Errorf("%s: /metrics lacks %s", tt.name, s)
			}
		}
		for _, s := range tt.hide {
			if strings.Contains(body, s) {
				t.Errorf("%s: /metrics names %q", tt.name, s)
			}
		}
	}
}
