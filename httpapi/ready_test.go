package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReadyStatus: a failed check makes /readyz 503 "unavailable"; a
// failed check marked degraded (a witness conflict) makes it "degraded"
// and still 200, unless another check failed.
func TestReadyStatus(t *testing.T) {
	ok := ReadyCheck{Name: "store", OK: true}
	down := ReadyCheck{Name: "commits", Error: "x"}
	degraded := ReadyCheck{Name: "witnesses", Error: "conflict", Degraded: true}
	for _, tc := range []struct {
		name   string
		checks []ReadyCheck
		status int
		want   string
	}{
		{"all pass", []ReadyCheck{ok}, 200, "ok"},
		{"one fails", []ReadyCheck{ok, down}, 503, "unavailable"},
		{"degraded", []ReadyCheck{ok, degraded}, 200, "degraded"},
		{"degraded and one fails", []ReadyCheck{degraded, down}, 503, "unavailable"},
		{"one fails and degraded", []ReadyCheck{down, degraded}, 503, "unavailable"},
	} {
		s := NewServer(&fakeService{}, Config{Ready: func(context.Context) ReadyReport { return ReadyReport{Checks: tc.checks} }})
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var got ReadyReport
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rec.Code != tc.status || got.Status != tc.want {
			t.Errorf("%s: GET /readyz = %d %q, want %d %q", tc.name, rec.Code, got.Status, tc.status, tc.want)
		}
	}
}
