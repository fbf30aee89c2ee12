package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/writhq/writ"
)

// TestAuthZENFailClosed: a receipt whose record was not committed never
// answers decision true. Alone it is a 503 problem; in a batch it is a
// denial carrying the error, and deny_on_first_deny stops at it.
func TestAuthZENFailClosed(t *testing.T) {
	rcpt := fullReceipt()
	rcpt.SafeToExecute = true // whatever the service says, no record means no
	svc := &fakeService{receipt: rcpt, err: writ.Errorf(writ.EUNAVAILABLE, "store down")}
	s, _ := newTestServer(svc, Config{})
	rec := serve(s, newRequest(http.MethodPost, "/access/v1/evaluation", azSampleAcme))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("evaluation = %d (Retry-After %q), want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	for _, tt := range []struct {
		semantic string
		want     int
	}{{"execute_all", 2}, {"deny_on_first_deny", 1}, {"permit_on_first_permit", 2}} {
		rec = serve(s, newRequest(http.MethodPost, "/access/v1/evaluations",
			`{"context":{"tenant_id":"acme"},"options":{"evaluations_semantic":"`+tt.semantic+`"},"evaluations":[`+azSample+`,`+azSample+`]}`))
		var got azBatchResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.semantic, rec.Code, rec.Body)
		}
		if len(got.Evaluations) != tt.want {
			t.Errorf("%s: %d evaluations, want %d", tt.semantic, len(got.Evaluations), tt.want)
		}
		for i, d := range got.Evaluations {
			if d.Decision || d.Context == nil || d.Context.Error == nil || d.Context.Error.Status != 503 || d.Context.Error.Code != writ.EUNAVAILABLE {
				t.Errorf("%s: evaluation %d = %+v, want a denial with a 503 unavailable error", tt.semantic, i, d)
			}
		}
	}
}
