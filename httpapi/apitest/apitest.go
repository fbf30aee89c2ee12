// Package apitest holds the HTTP API to its OpenAPI document in tests.
//
// Its Transport validates every response a test receives from a writ
// server against httpapi/openapi.yaml with an OpenAPI 3.1 validator
// (pb33f/libopenapi-validator), and fails the request when the answer
// is not what the document says. End-to-end tests install it as
// http.DefaultTransport, so every call they make is checked, through
// the client and raw alike. It is for tests only: nothing in writ's
// serving path imports it.
package apitest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/writhq/writ/httpapi"
)

// Validator checks responses against the OpenAPI document.
type Validator struct {
	mu sync.Mutex // the validator's caches are not documented as safe for concurrent use
	v  validator.Validator
	// paths matches the document's paths (OpenAPI path templates are
	// ServeMux patterns).
	paths *http.ServeMux
	// Checked counts the responses validated.
	Checked atomic.Int64
}

// New parses httpapi.OpenAPI() and returns a Validator of it. The document
// itself must be a valid OpenAPI document.
func New() (*Validator, error) {
	doc, err := libopenapi.NewDocument(httpapi.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("openapi.yaml declares OpenAPI %s, want 3.1", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapi.yaml: %w", errors.Join(errs...))
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %s", describe(verrs))
	}
	paths := http.NewServeMux()
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	for path := range model.Model.Paths.PathItems.KeysFromOldest() {
		paths.HandleFunc(path, http.NotFound)
	}
	return &Validator{v: v, paths: paths}, nil
}

// Transport returns a RoundTripper that sends requests with next and
// validates each response against the document before returning it. A
// response the document does not describe (an undocumented status or
// media type, or a body that does not match its schema) is returned as an
// error instead, so the test that made the request fails. Requests to
// paths the document does not name (for example a test's own webhook
// receiver) are not checked.
func (v *Validator) Transport(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		if err := v.Check(req, resp); err != nil {
			resp.Body.Close()
			return nil, err
		}
		return resp, nil
	})
}

// Check validates resp, the answer to req, against the document. It
// reads and restores resp.Body.
func (v *Validator) Check(req *http.Request, resp *http.Response) error {
	if !v.documents(req) {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return err
	}
	probe := *resp
	probe.Body = io.NopCloser(bytes.NewReader(body))
	// The validator reads only the method, URL and headers of the request.
	preq := req.Clone(req.Context())
	preq.Body = http.NoBody
	v.mu.Lock()
	ok, verrs := v.v.ValidateHttpResponse(preq, &probe)
	v.mu.Unlock()
	v.Checked.Add(1)
	if !ok {
		return fmt.Errorf("OpenAPI: %s %s answered %d %s, which openapi.yaml does not describe: %s\nbody: %.2000s",
			req.Method, req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), describe(verrs), body)
	}
	return nil
}

// documents reports whether the document names the request's path:
// those answers are the API's, and are checked.
func (v *Validator) documents(req *http.Request) bool {
	_, pattern := v.paths.Handler(&http.Request{Method: http.MethodGet, URL: req.URL, Host: req.Host})
	return pattern != ""
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// describe renders validation errors for a test failure.
func describe[E interface{ Error() string }](errs []E) string {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}
