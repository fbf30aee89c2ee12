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

// TestWitnesses: GET /v1/ledger/witnesses answers the tenant's report as
// Config.Witnesses gives it, a tenant without checkpoint or witnesses as
// null and [] (never absent); a server that reports none is 404, a
// source that fails or answers another tenant is 500, and neither leaks
// what it had.
func TestWitnesses(t *testing.T) {
	fake := fullService()
	empty := func(_ context.Context, tenant string) (*writ.LedgerWitnesses, error) {
		return &writ.LedgerWitnesses{TenantID: tenant}, nil
	}
	tests := []struct {
		name      string
		witnesses func(context.Context, string) (*writ.LedgerWitnesses, error)
		status    int
		code      string
		want      string
	}{
		{"reported", fake.Witnesses, 200, "", ""},
		{"no checkpoint, no witness", empty, 200, "", `{"tenant_id":"acme","checkpoint":null,"witnesses":[]}`},
		{"not reported", nil, 404, writ.ENOTFOUND, ""},
		{"a failing source", func(context.Context, string) (*writ.LedgerWitnesses, error) { return nil, errors.New("boom") }, 500, writ.EINTERNAL, ""},
		{"no report", func(context.Context, string) (*writ.LedgerWitnesses, error) { return nil, nil }, 500, writ.EINTERNAL, ""},
		{"another tenant's", func(context.Context, string) (*writ.LedgerWitnesses, error) { return fullWitnesses("globex"), nil }, 500, writ.EINTERNAL, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(fake, Config{Witnesses: tt.witnesses, Logger: slog.New(slog.DiscardHandler)})
			req := newRequest(http.MethodGet, "/v1/ledger/witnesses?tenant_id=acme", "")
			rec := serve(s, req)
			if tt.status != 200 {
				readProblem(t, rec, req, tt.status, tt.code)
				return
			}
			if rec.Code != 200 {
				t.Fatalf("GET /v1/ledger/witnesses = %d %s, want 200", rec.Code, rec.Body)
			}
			if tt.want != "" {
				if got := rec.Body.String(); got != tt.want+"\n" && got != tt.want {
					t.Errorf("GET /v1/ledger/witnesses = %s, want %s", got, tt.want)
				}
				return
			}
			var got writ.LedgerWitnesses
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if want := fullWitnesses("acme"); !reflect.DeepEqual(&got, want) {
				t.Errorf("GET /v1/ledger/witnesses = %+v, want %+v", got, want)
			}
		})
	}
}
