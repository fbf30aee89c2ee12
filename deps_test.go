package writ_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLayering keeps the architecture honest: the pure packages never
// reach for I/O adapters, and adapters do not import each other.
func TestLayering(t *testing.T) {
	const mod = "github.com/writhq/writ"
	forbidden := map[string][]string{
		// Pure: decisions are a function of their inputs and a clock.
		mod:                 {"database/sql", "net/http", "os/exec", mod + "/", "go.opentelemetry.io/", "github.com/prometheus/"},
		mod + "/pack":       {"database/sql", "net/http", "testing/fstest", mod + "/policy", mod + "/engine", mod + "/ledger"},
		mod + "/policy":     {"database/sql", "net/http", mod + "/engine", mod + "/ledger", mod + "/record", "go.opentelemetry.io/", "github.com/prometheus/", mod + "/telemetry"},
		mod + "/record":     {"database/sql", "net/http", mod + "/engine", mod + "/ledger", "go.opentelemetry.io/", "github.com/prometheus/", mod + "/telemetry"},
		mod + "/acceptance": {"database/sql", "net/http", mod + "/engine", mod + "/ledger", mod + "/sqlite", mod + "/httpapi", "go.opentelemetry.io/", "github.com/prometheus/", mod + "/telemetry"},
		mod + "/workflow":   {"database/sql", "net/http", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi", "go.opentelemetry.io/", "github.com/prometheus/", mod + "/telemetry"}, // pure: replay rebuilds a verdict without an engine
		mod + "/lint":       {"database/sql", "net/http", mod + "/engine", mod + "/ledger", mod + "/sqlite", mod + "/httpapi"},
		mod + "/ledger":     {"database/sql", "net/http", "testing/fstest", mod + "/engine", mod + "/sqlite", mod + "/httpapi", mod + "/ledger/verify", mod + "/keyring", mod + "/internal/sqlkit"},
		// Verification reads a store or a bundle through the interfaces it
		// declares: it is no engine, server or store.
		mod + "/ledger/verify": {"database/sql", "net/http", "testing/fstest", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi", mod + "/replay", mod + "/bundle", mod + "/pinned"},
		// The packs records pin, rebuilt from their blobs and compiled:
		// read through pack.BlobReader, from no store or log of its own.
		mod + "/pinned":     {"database/sql", "net/http", "testing/fstest", mod + "/ledger", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi"},
		mod + "/keyring":    {"database/sql", "net/http", mod + "/ledger", mod + "/engine", mod + "/sqlite", mod + "/httpapi"},
		mod + "/engine":     {"database/sql", "net/http", mod + "/sqlite", mod + "/httpapi"},
		mod + "/auth":       {"database/sql", "net/http", mod + "/ledger", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi"},
		mod + "/replay":     {"database/sql", "net/http", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi"},
		mod + "/delegation": {"database/sql", mod + "/ledger", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi"},
		mod + "/readiness":  {"database/sql", mod + "/engine", mod + "/sqlite", mod + "/postgres"},
		mod + "/webhook":    {"database/sql", mod + "/ledger", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi"},
		// Telemetry wraps the engine's interfaces; it is no adapter of a
		// store or of HTTP routes. (database/sql comes in with
		// client_golang's collectors package, unused.)
		mod + "/telemetry": {mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi"},
		// What the SQL stores share reads rows the stores hand it: no
		// driver, engine or server.
		mod + "/internal/sqlkit": {"net/http", mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi", "github.com/jackc/", "modernc.org/"},
		// Adapters stay apart.
		mod + "/sqlite":  {"net/http", mod + "/httpapi", mod + "/engine"},
		mod + "/httpapi": {"database/sql", mod + "/sqlite", mod + "/engine", mod + "/replay", mod + "/postgres", "github.com/pb33f/"},
		// The OpenAPI validator is for tests (httpapi/apitest), never
		// in the serving binary.
		mod + "/cmd/writ":        {"github.com/pb33f/", mod + "/telemetry/otlptest"},
		mod + "/httpapi/apitest": {"database/sql", mod + "/engine", mod + "/sqlite", mod + "/postgres"},
		mod + "/postgres":        {"net/http", mod + "/httpapi", mod + "/engine", mod + "/sqlite"},

		// The MCP gateway is an adapter over writ's interfaces: the
		// engine or the HTTP client is handed to it, never imported.
		mod + "/gateway": {mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/httpapi", mod + "/console"},
		// Its remote Writ decides calls on a writ server over HTTP: a
		// client, with no engine or store of its own.
		mod + "/gateway/remote": {mod + "/engine", mod + "/sqlite", mod + "/postgres", mod + "/console"},

		// packtest runs tests in-process on a temporary SQLite ledger: no
		// server, no network, no PostgreSQL.
		mod + "/packtest": {"net/http", mod + "/httpapi", mod + "/postgres"},
		mod + "/packdiff": {"database/sql", "net/http", mod + "/engine", mod + "/ledger", mod + "/sqlite", mod + "/httpapi"},
		// The console is a client of the HTTP API: no engine, no store.
		mod + "/console": {"database/sql", mod + "/engine", mod + "/ledger", mod + "/sqlite", mod + "/postgres", mod + "/replay", mod + "/httpapi"},
	}
	// What a package imports itself, whatever its imports bring along:
	// the log takes compiled packs from its callers (record compiles
	// them), it does not load or compile them.
	direct := map[string][]string{
		mod + "/ledger": {mod + "/pack", mod + "/policy"},
	}
	for pkg, bad := range direct {
		out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if slices.Contains(bad, imp) {
				t.Errorf("%s imports %s, which its layer forbids", pkg, imp)
			}
		}
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", "-json=ImportPath", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p struct{ ImportPath string }
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				hit := p.ImportPath == b
				if strings.HasSuffix(b, "/") {
					hit = strings.HasPrefix(p.ImportPath, b) && p.ImportPath != pkg
				}
				if hit {
					t.Errorf("%s depends on %s, which its layer forbids", pkg, p.ImportPath)
				}
			}
		}
	}
}
