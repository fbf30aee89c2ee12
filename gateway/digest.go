package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ/record"
)

// DefinitionDigest is the digest of an upstream tool's definition that a
// tool manifest pins (definition_digest): "sha256:" and the lowercase hex
// SHA-256 of the RFC 8785 canonical JSON of the object
//
//	{"name": N, "description": D, "inputSchema": S, "annotations": A}
//
// where N is the tool's name as the upstream lists it (without the
// gateway's prefix), D its description ("" when absent), S its
// inputSchema exactly as listed, and A an object with exactly the five
// members "title" (string, "" when absent), "readOnlyHint" and
// "idempotentHint" (booleans, false when absent), "destructiveHint" and
// "openWorldHint" (booleans, null when absent). Title, icons, output
// schema and _meta are not covered: they do not change what a call does.
// docs/mcp.md gives the same definition.
func DefinitionDigest(t *mcp.Tool) (string, error) {
	a := map[string]any{"title": "", "readOnlyHint": false, "idempotentHint": false, "destructiveHint": nil, "openWorldHint": nil}
	if an := t.Annotations; an != nil {
		a["title"], a["readOnlyHint"], a["idempotentHint"] = an.Title, an.ReadOnlyHint, an.IdempotentHint
		if an.DestructiveHint != nil {
			a["destructiveHint"] = *an.DestructiveHint
		}
		if an.OpenWorldHint != nil {
			a["openWorldHint"] = *an.OpenWorldHint
		}
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return "", fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	def := map[string]any{"name": t.Name, "description": t.Description, "inputSchema": json.RawMessage(schema), "annotations": a}
	return record.CanonicalDigest(def)
}
