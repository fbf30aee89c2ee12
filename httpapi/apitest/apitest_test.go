package apitest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/writhq/writ/httpapi/apitest"
)

// TestTransport checks that the validator passes what the document
// describes, fails what it does not, and leaves other paths alone.
func TestTransport(t *testing.T) {
	v, err := apitest.New()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, contentType, body string
		status                  int
		wantErr                 string
	}{
		{"/healthz", "application/json", `{"status":"ok","auth":"api_keys"}`, 200, ""},
		{"/healthz", "application/json", `{"status":"ok","auth":"maybe"}`, 200, "does not describe"},
		{"/healthz", "application/json", `{"status":"ok"}`, 200, "does not describe"},
		{"/healthz", "text/plain", `ok`, 200, "does not describe"},
		{"/v1/check", "application/json", `{}`, 418, "does not describe"},
		{"/not-writ", "text/plain", `anything`, 200, ""},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tt.contentType)
			w.WriteHeader(tt.status)
			w.Write([]byte(tt.body))
		}))
		c := &http.Client{Transport: v.Transport(http.DefaultTransport)}
		method := http.MethodGet
		if tt.path == "/v1/check" {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, srv.URL+tt.path, strings.NewReader(`{}`))
		resp, err := c.Do(req)
		srv.Close()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s %s: %v", tt.path, tt.body, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s %s: error %v, want one containing %q", tt.path, tt.body, err, tt.wantErr)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}
