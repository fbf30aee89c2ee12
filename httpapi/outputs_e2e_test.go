package httpapi_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// TestCheckOutputsSchemaFailsClosed: over HTTP, a check of a spec with an
// outputs_schema (the refund example's) that leaves its outputs out, or
// sends none, is refused as invalid like one whose outputs break the
// schema: leaving a field out never moves a decision from blocked to
// allowed (issue 31). The same request with its outputs is allowed. On
// both stores.
func TestCheckOutputsSchemaFailsClosed(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			st := openTestStore(t, store)
			p, err := pack.Load(filepath.Join("..", "examples", "refund"))
			if err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Compile(p)
			if err != nil {
				t.Fatal(err)
			}
			clock := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
			eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32), Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close() })
			putOnFile(t, eng, filepath.Join("..", "examples", "refund"))
			srv := validated(t, httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{Ledger: eng})))
			t.Cleanup(srv.Close)
			c := httpapi.NewClient(srv.URL, httpapi.WithHTTPClient(srv.Client()))
			allow := filepath.Join("..", "examples", "refund", "requests", "refund-allow.json")
			for i, tc := range []struct {
				name    string
				outputs map[string]any
				want    string // "" allowed, else what the refusal says
			}{
				{"outputs left out", nil, "missing properties 'refund_amount_inr', 'currency', 'order_id'"},
				{"no outputs", map[string]any{}, "missing properties 'refund_amount_inr', 'currency', 'order_id'"},
				{"outputs without a currency", map[string]any{"refund_amount_inr": 4200, "order_id": "ord_881"}, "missing property 'currency'"},
				{"the request's outputs", map[string]any{"refund_amount_inr": 4200, "currency": "INR", "order_id": "ord_881"}, ""},
			} {
				req := readCheckRequest(t, allow)
				req.Outputs = tc.outputs
				req.IdempotencyKey = req.IdempotencyKey + "_" + string(rune('a'+i))
				rc, err := c.Check(ctx, req)
				if tc.want == "" {
					if err != nil || rc.Outcome != writ.OutcomeAllow {
						t.Errorf("Check(%s) = %v, %v; want allowed", tc.name, rc, err)
					}
					continue
				}
				if writ.ErrorCode(err) != writ.EINVALID || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Check(%s) = %v, %v; want an invalid request saying %q", tc.name, rc, err, tc.want)
				}
			}
		})
	}
}
