package httpapi_test

import (
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/writhq/writ/httpapi/apitest"
)

var (
	apiOnce      sync.Once
	apiValidator *apitest.Validator
	apiErr       error
)

// validated makes every response srv.Client() receives be validated
// against openapi.yaml (see package apitest): an answer the document
// does not describe fails the request, and so the test. The end-to-end
// tests call it on the real server they start.
func validated(t *testing.T, srv *httptest.Server) *httptest.Server {
	t.Helper()
	apiOnce.Do(func() { apiValidator, apiErr = apitest.New() })
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	c := srv.Client()
	c.Transport = apiValidator.Transport(c.Transport)
	before := apiValidator.Checked.Load()
	t.Cleanup(func() {
		if apiValidator.Checked.Load() == before {
			t.Errorf("no response of %s was validated against openapi.yaml", srv.URL)
		}
	})
	return srv
}
