package gateway

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Config is the gateway's configuration file (docs/mcp.md, "The
// configuration file"), checked against schema/gateway.schema.json.
type Config struct {
	// Tenant and Actor are whom the checks of a stdio session (and of an
	// HTTP session in development mode) are made for. Over HTTP with API
	// keys, the key's tenant and subject are used instead.
	Tenant string       `yaml:"tenant"`
	Actor  *ActorConfig `yaml:"actor"`
	// User names the person at the agent's client in a stdio session.
	// When set, the gateway may ask them, through MCP elicitation, to
	// decide an approval at a gate that allows it (elicit: true); the
	// decision is recorded as theirs.
	User string `yaml:"user"`
	// Unlisted says what happens to an upstream tool the pack's tool
	// manifest does not name: hide (the default) or refuse.
	Unlisted  Unlisted   `yaml:"unlisted"`
	Upstreams []Upstream `yaml:"upstreams"`
}

// ActorConfig is the actor of the checks a stdio session makes.
type ActorConfig struct {
	Type             string `yaml:"type"`
	ID               string `yaml:"id"`
	WorkloadIdentity string `yaml:"workload_identity"`
	DelegatedUserID  string `yaml:"delegated_user_id"`
}

// Unlisted is the treatment of tools the tool manifest does not name.
type Unlisted string

// Treatments of unlisted tools.
const (
	// UnlistedHide leaves the tool out of tools/list; a call to it is an
	// unknown tool.
	UnlistedHide Unlisted = "hide"
	// UnlistedRefuse lists the tool; every call to it is refused.
	UnlistedRefuse Unlisted = "refuse"
)

// Upstream is one tool server: exactly one of Stdio and HTTP is set.
type Upstream struct {
	// Name names the upstream in logs and errors; unique.
	Name string `yaml:"name"`
	// Prefix is put before each of the upstream's tool names to make the
	// names the agent sees and the tool manifest names. Default: none.
	Prefix string        `yaml:"prefix"`
	Stdio  *StdioCommand `yaml:"stdio"`
	HTTP   *HTTPServer   `yaml:"http"`
	// CallTimeout bounds one forwarded call, from the moment it is sent
	// until the upstream answers, including any question the upstream
	// asks the user meanwhile. When it passes, the upstream is told to
	// cancel the call and the decision is reported failed (timeout).
	// Zero: DefaultCallTimeout.
	CallTimeout time.Duration `yaml:"call_timeout"`
	// ConnectTimeout bounds starting a session with the upstream: the
	// connection, MCP's handshake and the listing of its tools. Zero:
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
}

// The time limits an upstream has when its configuration sets none.
const (
	DefaultCallTimeout    = 10 * time.Minute
	DefaultConnectTimeout = time.Minute
)

func (u Upstream) callTimeout() time.Duration {
	if u.CallTimeout > 0 {
		return u.CallTimeout
	}
	return DefaultCallTimeout
}

func (u Upstream) connectTimeout() time.Duration {
	if u.ConnectTimeout > 0 {
		return u.ConnectTimeout
	}
	return DefaultConnectTimeout
}

// StdioCommand is a tool server the gateway starts and speaks to over
// its standard input and output.
type StdioCommand struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	// InheritEnv passes the gateway's own environment to the command
	// (Env is added to it). Default false: the command sees only PATH,
	// HOME and Env, so the gateway's secrets do not leak to tool servers.
	InheritEnv bool `yaml:"inherit_env"`
}

// HTTPServer is a tool server reached over Streamable HTTP.
type HTTPServer struct {
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
}

//go:embed schema/gateway.schema.json
var schemaJSON []byte

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	const url = "https://writ.invalid/schema/gateway.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
})

// LoadConfig reads and checks a configuration file. Every problem is
// reported with the file and line, in an EINVALID *writ.Error.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("gateway config: %v", err)}
	}
	return ParseConfig(path, data)
}

// ParseConfig checks and decodes the configuration file data; path names
// it in errors.
func ParseConfig(path string, data []byte) (*Config, error) {
	schema, err := compiled()
	if err != nil {
		return nil, fmt.Errorf("gateway config schema: %w", err)
	}
	var c Config
	if err := pack.DecodeYAML(path, data, schema, &c); err != nil {
		return nil, err
	}
	if c.Unlisted == "" {
		c.Unlisted = UnlistedHide
	}
	lines := nameLines(data, len(c.Upstreams))
	first := map[string]int{}
	var ds []writ.Detail
	for i, u := range c.Upstreams {
		if at, ok := first[u.Name]; ok {
			ds = append(ds, writ.Detail{File: path, Line: lines[i], Message: fmt.Sprintf("upstream %q is defined twice (first at line %d); upstream names are unique", u.Name, at)})
			continue
		}
		first[u.Name] = lines[i]
	}
	ds = append(ds, zeroTimeouts(path, data, lines)...)
	if len(ds) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: ds[0].String(), Details: ds}
	}
	return &c, nil
}

// nameLines returns the line of each of the n upstreams' name in the
// configuration file data, which ParseConfig decoded.
func nameLines(data []byte, n int) []int {
	lines := make([]int, n)
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return lines
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "upstreams" {
			continue
		}
		ups := root.Content[i+1].Content
		for j := 0; j < n && j < len(ups); j++ {
			for k := 0; k+1 < len(ups[j].Content); k += 2 {
				if ups[j].Content[k].Value == "name" {
					lines[j] = ups[j].Content[k].Line
				}
			}
		}
	}
	return lines
}

// zeroTimeouts reports each time limit the configuration file data sets
// to zero, which the schema's duration pattern lets through: a zero in
// Config means the default, so a zero written out is refused rather
// than read as "no limit" or as the default.
func zeroTimeouts(path string, data []byte, lines []int) []writ.Detail {
	var doc struct {
		Upstreams []struct {
			Name           string         `yaml:"name"`
			CallTimeout    *time.Duration `yaml:"call_timeout"`
			ConnectTimeout *time.Duration `yaml:"connect_timeout"`
		} `yaml:"upstreams"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	var ds []writ.Detail
	for i, u := range doc.Upstreams {
		for _, t := range []struct {
			field string
			d     *time.Duration
		}{{"call_timeout", u.CallTimeout}, {"connect_timeout", u.ConnectTimeout}} {
			if t.d != nil && *t.d <= 0 && i < len(lines) {
				ds = append(ds, writ.Detail{File: path, Line: lines[i], Message: fmt.Sprintf("upstream %q: %s must be longer than zero", u.Name, t.field)})
			}
		}
	}
	return ds
}
