package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"testing"

	"github.com/writhq/writ"
)

// TestLatencyStats: GET /v1/stats/latency answers the tenant's stats as
// Config.Latency gives them; a server that measures nothing is 404, a
// source that fails or answers another tenant is 500, and neither leaks
// what it had.
func TestLatencyStats(t *testing.T) {
	fake := fullService()
	tests := []struct {
		name    string
		latency func(context.Context, string) (*writ.LatencyStats, error)
		status  int
		code    string
	}{
		{"measured", fake.Latency, 200, ""},
		{"not measured", nil, 404, writ.ENOTFOUND},
		{"a failing source", func(context.Context, string) (*writ.LatencyStats, error) { return nil, errors.New("boom") }, 500, writ.EINTERNAL},
		{"no stats", func(context.Context, string) (*writ.LatencyStats, error) { return nil, nil }, 500, writ.EINTERNAL},
		{"another tenant's", func(context.Context, string) (*writ.LatencyStats, error) { return fullLatency("globex"), nil }, 500, writ.EINTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(fake, Config{Latency: tt.latency, Logger: slog.New(slog.DiscardHandler)})
			req := newRequest(http.MethodGet, "/v1/stats/latency?tenant_id=acme", "")
			rec := serve(s, req)
			if tt.status != 200 {
				readProblem(t, rec, req, tt.status, tt.code)
				return
			}
			if rec.Code != 200 {
				t.Fatalf("= %d %s, want 200", rec.Code, rec.Body)
			}
			var got writ.LatencyStats
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if want := fullLatency("acme"); !reflect.DeepEqual(&got, want) {
				t.Errorf("= %+v, want %+v", got, want)
			}
		})
	}
}
