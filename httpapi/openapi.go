package httpapi

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.yaml
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API, as served at
// GET /v1/openapi.yaml.
func OpenAPI() []byte {
	return bytes.Clone(openAPIDocument)
}
