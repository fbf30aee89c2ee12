package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/telemetry"
)

// The gateway decodes five things it does not control: the stream an
// agent writes to its stdio session (stdio_fuzz_test.go), its
// configuration file, the requestState a 2026-07-28 client echoes, a
// tools/call's arguments and _meta as they land, and the tool definitions
// an upstream lists. Each is fuzzed here (corpora in testdata/fuzz).

// docConfigs are the configuration examples of docs/mcp.md: its YAML
// blocks that name upstreams.
func docConfigs(f *testing.F) [][]byte {
	b, err := os.ReadFile(filepath.Join("..", "docs", "mcp.md"))
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
		if y, _, _ := strings.Cut(block, "```"); strings.Contains(y, "upstreams:") {
			out = append(out, []byte(y))
		}
	}
	if len(out) == 0 {
		f.Fatal("docs/mcp.md has no configuration example")
	}
	return out
}

// configDoc is c written back as a configuration file's document: the
// fields that are set, so that it passes the schema again.
func configDoc(c *gateway.Config) map[string]any {
	doc := map[string]any{"unlisted": string(c.Unlisted)}
	for k, v := range map[string]string{"tenant": c.Tenant, "user": c.User} {
		if v != "" {
			doc[k] = v
		}
	}
	if a := c.Actor; a != nil {
		actor := map[string]any{"id": a.ID}
		for k, v := range map[string]string{"type": a.Type, "workload_identity": a.WorkloadIdentity, "delegated_user_id": a.DelegatedUserID} {
			if v != "" {
				actor[k] = v
			}
		}
		doc["actor"] = actor
	}
	var ups []any
	for _, u := range c.Upstreams {
		up := map[string]any{"name": u.Name}
		if u.Prefix != "" {
			up["prefix"] = u.Prefix
		}
		if s := u.Stdio; s != nil {
			stdio := map[string]any{"command": s.Command}
			if len(s.Args) > 0 {
				stdio["args"] = s.Args
			}
			if len(s.Env) > 0 {
				stdio["env"] = s.Env
			}
			if s.InheritEnv {
				stdio["inherit_env"] = true
			}
			up["stdio"] = stdio
		}
		if h := u.HTTP; h != nil {
			http := map[string]any{"url": h.URL}
			if len(h.Headers) > 0 {
				http["headers"] = h.Headers
			}
			up["http"] = http
		}
		ups = append(ups, up)
	}
	doc["upstreams"] = ups
	return doc
}

// FuzzParseConfig feeds ParseConfig any file. It never panics. A file it
// refuses is an EINVALID *writ.Error, and every problem names the file
// and its line (only a file the YAML parser cannot read may have a
// problem without a line). A file it accepts is a configuration the
// gateway can start from (unlisted hide or refuse, at least one upstream,
// names unique, each upstream stdio or http), and written back as YAML it
// parses to the same configuration.
func FuzzParseConfig(f *testing.F) {
	for _, y := range docConfigs(f) {
		f.Add(y)
	}
	f.Add([]byte("tenant: acme\nactor: {id: e2e-agent}\nupstreams:\n  - name: files\n    prefix: fs.\n    stdio:\n      command: node\n      args: [\"/srv/server-filesystem/dist/index.js\", \"/srv/root\"]\n"))
	f.Add([]byte("upstreams:\n  - {name: a, stdio: {command: x}}\n  - {name: a, stdio: {command: y}}\n"))
	f.Add([]byte("upstreams:\n  - {name: a, http: {url: 'ftp://h'}}\n"))
	f.Add([]byte("tenant: !!str 2026\nunlisted: refuse\nupstreams:\n  - name: t\n    http:\n      url: https://tickets.internal.example/mcp\n      headers: {X-Api-Key: k}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "gw.yaml"
		c, err := gateway.ParseConfig(path, data)
		if err != nil {
			var we *writ.Error
			if c != nil || !errors.As(err, &we) || we.Code != writ.EINVALID || len(we.Details) == 0 {
				t.Fatalf("ParseConfig = %+v, %v; want nil and an EINVALID error with its problems", c, err)
			}
			var doc yaml.Node
			readable := yaml.Unmarshal(data, &doc) == nil && len(doc.Content) > 0
			for _, d := range we.Details {
				if d.File != path || (d.Line < 1 && readable) {
					t.Fatalf("problem %q is not located at %s:line", d.String(), path)
				}
			}
			return
		}
		if c.Unlisted != gateway.UnlistedHide && c.Unlisted != gateway.UnlistedRefuse || len(c.Upstreams) == 0 {
			t.Fatalf("accepted configuration has unlisted %q and %d upstreams", c.Unlisted, len(c.Upstreams))
		}
		names := map[string]bool{}
		for _, u := range c.Upstreams {
			if names[u.Name] || (u.Stdio == nil) == (u.HTTP == nil) {
				t.Fatalf("accepted upstream %+v: a name used twice, or not exactly one of stdio and http", u)
			}
			names[u.Name] = true
		}
		doc := configDoc(c)
		again, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := gateway.ParseConfig(path, again)
		if err != nil {
			t.Fatalf("accepted configuration written back as\n%s\nis refused: %v", again, err)
		}
		if doc2 := configDoc(c2); !reflect.DeepEqual(doc2, doc) {
			t.Fatalf("accepted configuration %+v, written back as\n%s\nparses to %+v", doc, again, doc2)
		}
	})
}

// stateCall is the call of the requestStates FuzzOpenState seals.
func stateCall() *writ.CheckRequest {
	return &writ.CheckRequest{TenantID: tenant, Tool: "fs.delete_file", Actor: writ.Actor{Type: writ.ActorAgent, ID: "mcp-agent"}, Arguments: map[string]any{"path": "/allowed/old.txt"}}
}

// FuzzOpenState attacks the requestState of an input-required result,
// which the client echoes. openState never panics. A state the client
// made up is refused; so is a state the gateway sealed with any edit
// (bytes cut or inserted anywhere), one presented with another call (the
// tenant, the actor's type or id, the tool or the arguments changed), and
// one more than 15 minutes old. Only the state exactly as sealed, with
// its own call, opens, once, to the approval and decision it was sealed
// with.
func FuzzOpenState(f *testing.F) {
	var now atomic.Int64
	start := time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	// The smallest gateway: no upstream, and a writ it never asks.
	gw, err := newGateway(context.Background(), gateway.Options{Config: &gateway.Config{Tenant: tenant}, Writ: unreachable{}, Now: clock})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(gw.Close)
	f.Add("", uint16(0), uint8(0), "", uint8(0), "", []byte(nil))
	f.Add("approve-please", uint16(3), uint8(1), "A", uint8(0), "acme2", []byte(nil))
	f.Add("e30.e30", uint16(60), uint8(2), ".", uint8(1), "HUMAN", []byte(nil))
	f.Add("", uint16(200), uint8(0), "x", uint8(2), "other-agent", []byte(nil))
	f.Add("", uint16(9), uint8(4), "", uint8(3), "fs.write_file", []byte(nil))
	f.Add("", uint16(0), uint8(0), "", uint8(4), "", []byte(`{"path":"/allowed/other.txt"}`))
	f.Add("", uint16(0), uint8(0), "", uint8(4), "", []byte(`{"path":"/allowed/old.txt"}`))
	f.Fuzz(func(t *testing.T, madeUp string, at uint16, cut uint8, insert string, field uint8, value string, args []byte) {
		now.Store(start.UnixNano())
		call := stateCall()
		sealed, err := gw.SealState(call, "apr_1", "dec_1")
		if err != nil {
			t.Fatal(err)
		}
		if madeUp != sealed {
			if _, _, err := gw.OpenState(call, madeUp); err == nil {
				t.Fatalf("a made-up state %q opened", madeUp)
			}
		}
		i := int(at) % (len(sealed) + 1)
		edited := sealed[:i] + insert + sealed[min(i+int(cut), len(sealed)):]
		if edited != sealed {
			if _, _, err := gw.OpenState(call, edited); err == nil {
				t.Fatalf("state %q, edited to %q, opened", sealed, edited)
			}
		}
		other := stateCall()
		switch field % 5 {
		case 0:
			other.TenantID = value
		case 1:
			other.Actor.Type = value
		case 2:
			other.Actor.ID = value
		case 3:
			other.Tool = value
		case 4:
			other.Arguments = nil
			json.Unmarshal(args, &other.Arguments)
		}
		d1, _ := record.CanonicalDigest(call.Arguments)
		d2, _ := record.CanonicalDigest(other.Arguments)
		same := other.TenantID == call.TenantID && other.Actor == call.Actor && other.Tool == call.Tool && d1 == d2
		if !same {
			if _, _, err := gw.OpenState(other, sealed); err == nil {
				t.Fatalf("a state sealed for %+v opened for %+v", call, other)
			}
		}
		old, err := gw.SealState(call, "apr_1", "dec_1")
		if err != nil {
			t.Fatal(err)
		}
		now.Store(start.Add(15*time.Minute + time.Second).UnixNano())
		if _, _, err := gw.OpenState(call, old); err == nil {
			t.Fatal("a state opened 15 minutes and a second after it was sealed")
		}
		now.Store(start.Add(15 * time.Minute).UnixNano())
		if a, d, err := gw.OpenState(call, sealed); err != nil || a != "apr_1" || d != "dec_1" {
			t.Fatalf("the state as sealed, with its call, 15 minutes on = %q, %q, %v; want apr_1, dec_1", a, d, err)
		}
		if _, _, err := gw.OpenState(call, sealed); err == nil {
			t.Fatal("a state opened twice")
		}
	})
}

// FuzzCallCheckRequest feeds the params of a tools/call, as they land,
// to what the gateway makes of them before it decides: the check request
// and the arguments to forward. It never panics. The _meta sent upstream
// has none of writ's keys (io.github.writhq/) nor the protocol's own,
// and every other key as the agent sent it. A call is either refused,
// with a reason and no request, or becomes a whole check request: the
// session's tenant and actor, the tool and its definition digest, the
// call id, the arguments, the workflow and approval of _meta; one the
// HTTP API decodes to the same request (a remote writ decides the same
// check) and whose arguments have an RFC 8785 digest. The arguments
// checked are those forwarded: the forwarded bytes decode, under a parser
// that refuses duplicate member names and invalid UTF-8, to exactly the
// checked arguments.
func FuzzCallCheckRequest(f *testing.F) {
	pk, err := pack.Load(packDir())
	if err != nil {
		f.Fatal(err)
	}
	// The files server, whose tools have the SDK's strict input schemas,
	// and the asker, whose tools take any object.
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedRefuse, Upstreams: []gateway.Upstream{{Name: "files", Prefix: "fs."}, {Name: "asker", Prefix: "ask."}}}
	connect := func(ctx context.Context, u gateway.Upstream) (mcp.Transport, error) {
		if u.Name == "asker" {
			return asker{}.connect(ctx, u)
		}
		return (&files{}).connect(ctx, u)
	}
	gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: unreachable{}, Tools: pk.Tools, Transport: connect})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(gw.Close)
	digests := map[string]string{}
	for _, tl := range gw.Tools() {
		digests[tl.Name] = tl.Digest
	}
	for _, s := range []string{
		`{"name":"fs.read_file","arguments":{"path":"/allowed/a"}}`,
		`{"name":"fs.write_file","arguments":{"path":"/allowed/a","content":"hi"},"_meta":{"io.github.writhq/run_id":"run_1","io.github.writhq/step_id":"visual_check","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1,"example.com/key":{"a":1}}}`,
		`{"name":"fs.delete_file","arguments":{"path":"/allowed/old.txt"},"_meta":{"io.github.writhq/approval_id":"apr_1","dev.mcp/x":true}}`,
		`{"name":"ask.confirm","arguments":{"a":[1,2.5,"x",null,true,{"b":{}}],"\u00e9":-0},"_meta":{"io.github.writhq/workflow_id":"wf","io.github.writhq/node_id":7}}`,
		`{"name":"ask.summarize"}`,
		`{"name":"ask.summarize","arguments":null,"_meta":null}`,
		`{"name":"fs.secret","arguments":{"path":"/x"}}`,
		`{"name":"fs.write_file","arguments":{"path":42}}`,
		`{"name":"ask.confirm","arguments":[1]}`,
		`{"name":"nope","arguments":{}}`,
		`{"name":"ask.summarize","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00","tracestate":"rojo=00f067aa0ba902b7"}}`,
		`{"name":"ask.summarize","arguments":{},"_meta":{"traceparent":"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}`,
		`{"name":"ask.summarize","arguments":{},"_meta":{"traceparent":"01-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01-extra"}}`,
		`{"name":"ask.summarize","arguments":{},"_meta":{"traceparent":7}}`,
	} {
		f.Add([]byte(s))
	}
	// A traceparent in _meta is read as the server reads it with tracing
	// on: W3C Trace Context.
	prevProp := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	f.Cleanup(func() { otel.SetTextMapPropagator(prevProp) })
	const callID = "mcp_000000000000000000000001"
	f.Fuzz(func(t *testing.T, params []byte) {
		var p mcp.CallToolParamsRaw
		if json.Unmarshal(params, &p) != nil {
			return // not a tools/call the SDK would hand over
		}
		meta := map[string]any(p.Meta)
		up := gateway.UpstreamMeta(p.Meta)
		for k, v := range up {
			if strings.HasPrefix(k, "io.github.writhq/") || strings.HasPrefix(k, "io.modelcontextprotocol/") || gateway.ReservedMeta(k) {
				t.Fatalf("_meta key %q is forwarded upstream", k)
			}
			if !reflect.DeepEqual(v, meta[k]) {
				t.Fatalf("_meta key %q is forwarded as %v, not as sent (%v)", k, v, meta[k])
			}
		}
		for k := range meta {
			if _, ok := up[k]; !ok && !strings.HasPrefix(k, "io.github.writhq/") && !gateway.ReservedMeta(k) {
				t.Fatalf("_meta key %q is not forwarded upstream", k)
			}
		}

		gateway.DecodeForSchema(p.Arguments)
		creq, raw, err := gw.CheckRequest(p.Name, &mcp.CallToolRequest{Params: &p}, callID)
		if err != nil {
			if creq != nil || raw != nil || err.Error() == "" {
				t.Fatalf("refused (%v), yet with a request %+v or arguments %s", err, creq, raw)
			}
			return
		}
		want := &writ.CheckRequest{TenantID: tenant, Tool: p.Name, Arguments: creq.Arguments, ToolCallID: callID, ToolDefinitionDigest: digests[p.Name],
			Actor: writ.Actor{Type: writ.ActorAgent, ID: "mcp-agent"}, ApprovalMode: creq.ApprovalMode}
		str := func(k string) string { s, _ := meta[k].(string); return s }
		if w := (writ.WorkflowRef{WorkflowID: str(gateway.MetaWorkflowID), NodeID: str(gateway.MetaNodeID), RunID: str(gateway.MetaRunID), StepID: str(gateway.MetaStepID)}); w != (writ.WorkflowRef{}) {
			want.Workflow = &w
		}
		if id := str(gateway.MetaApprovalID); id != "" {
			want.ApprovalIDs = []string{id}
		}
		if creq.Arguments == nil || want.ToolDefinitionDigest == "" || !reflect.DeepEqual(creq, want) {
			t.Fatalf("check request = %+v, want %+v", creq, want)
		}
		// The trace id a traceparent carries becomes the check's (as
		// Gateway.call sets it once the call's span starts under it): it
		// must be the one the traceparent names, and the HTTP API must
		// take it below.
		if sc := trace.SpanContextFromContext(telemetry.ContextFromMeta(context.Background(), meta)); sc.IsValid() {
			tp, _ := meta["traceparent"].(string)
			if id := sc.TraceID().String(); len(tp) < 35 || tp[3:35] != id {
				t.Fatalf("trace id %s read from the traceparent %q", id, tp)
			}
			creq.TraceID = sc.TraceID().String()
		}
		body, err := json.Marshal(creq)
		if err != nil {
			t.Fatal(err)
		}
		back, err := httpapi.DecodeCheckRequest(body)
		if err != nil {
			t.Fatalf("the HTTP API refuses the check request %s: %v", body, err)
		}
		if again, err := json.Marshal(back); err != nil || !bytes.Equal(again, body) {
			t.Fatalf("the check request %s decodes over HTTP to %s (%v)", body, again, err)
		}
		if _, err := record.CanonicalDigest(creq.Arguments); err != nil {
			t.Fatalf("the arguments have no RFC 8785 digest: %v", err)
		}
		var fwd map[string]any
		if err := jsonv2.Unmarshal(raw, &fwd); err != nil {
			t.Fatalf("the forwarded arguments %q are not plain JSON (%v); checked as %v", raw, err, creq.Arguments)
		}
		if !reflect.DeepEqual(fwd, creq.Arguments) {
			t.Fatalf("forwarded arguments %s are %v; checked as %v", raw, fwd, creq.Arguments)
		}
		if gateway.DecodeForSchema(raw) == nil {
			t.Fatalf("the forwarded arguments %s were not what the input schema validated", raw)
		}
	})
}

// listedTools are the tool definitions the test upstreams list, as JSON.
func listedTools(f *testing.F) [][]byte {
	ctx := context.Background()
	var out [][]byte
	for _, connect := range []func(context.Context, gateway.Upstream) (mcp.Transport, error){(&files{}).connect, asker{}.connect} {
		ct, err := connect(ctx, gateway.Upstream{})
		if err != nil {
			f.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			f.Fatal(err)
		}
		res, err := cs.ListTools(ctx, nil)
		cs.Close()
		if err != nil {
			f.Fatal(err)
		}
		for _, tl := range res.Tools {
			b, err := json.Marshal(tl)
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// respaced writes the JSON value v with every object's members in
// another order (sorted, turned by turn, reversed when turn is odd),
// whitespace between every token, and strings escaped as encoding/json
// escapes them.
func respaced(buf *bytes.Buffer, v any, turn uint64) {
	space := []string{" ", "\n", "\t", "\r\n  ", ""}[turn%5]
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		})
		if n := len(keys); n > 0 {
			r := int(turn % uint64(n))
			keys = append(keys[r:], keys[:r]...)
		}
		if turn%2 == 1 {
			slices.Reverse(keys)
		}
		buf.WriteString("{" + space)
		for i, k := range keys {
			if i > 0 {
				buf.WriteString(space + "," + space)
			}
			name, _ := json.Marshal(k)
			buf.Write(name)
			buf.WriteString(space + ":" + space)
			respaced(buf, v[k], turn/2+uint64(i))
		}
		buf.WriteString(space + "}")
	case []any:
		buf.WriteString("[" + space)
		for i, e := range v {
			if i > 0 {
				buf.WriteString("," + space)
			}
			respaced(buf, e, turn+uint64(i))
		}
		buf.WriteString(space + "]")
	default:
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
}

var digestForm = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// FuzzDefinitionDigest feeds DefinitionDigest tool definitions as an
// upstream lists them: any JSON object with unique member names, decoded
// into an mcp.Tool. It never panics, and every definition has a digest
// ("sha256:" and 64 lowercase hex digits). The digest is RFC 8785's: the
// same definition with its objects' members in another order, other
// whitespace and other string escapes has the same digest. It changes
// when the name, the description, the inputSchema or any of the five
// annotations changes, and not when what it does not cover (title,
// icons, outputSchema, _meta) does.
func FuzzDefinitionDigest(f *testing.F) {
	for _, b := range listedTools(f) {
		f.Add(b, uint64(0))
	}
	f.Add([]byte(`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1e21}}},"annotations":{"title":"T","readOnlyHint":false,"destructiveHint":false,"openWorldHint":true,"idempotentHint":true}}`), uint64(3))
	f.Add([]byte(`{"name":"\u00e9\u2028<>&","inputSchema":null,"title":"x","icons":[{"src":"https://example.com/i.png"}],"outputSchema":{"type":"object"},"_meta":{"k":1}}`), uint64(7))
	f.Add([]byte(`{"name":"t","inputSchema":[1,"2",{"b":[],"a":{}}]}`), uint64(1))
	decode := func(b []byte) (*mcp.Tool, error) {
		var tl mcp.Tool
		return &tl, jsonv2.Unmarshal(b, &tl)
	}
	f.Fuzz(func(t *testing.T, def []byte, turn uint64) {
		tl, err := decode(def)
		if err != nil {
			return
		}
		d, err := gateway.DefinitionDigest(tl)
		if err != nil || !digestForm.MatchString(d) {
			t.Fatalf("DefinitionDigest(%s) = %q, %v", def, d, err)
		}
		var v any
		if err := jsonv2.Unmarshal(def, &v); err != nil {
			t.Fatalf("a definition that decodes as a tool does not decode as JSON: %v", err)
		}
		var buf bytes.Buffer
		respaced(&buf, v, turn)
		re, err := decode(buf.Bytes())
		if err != nil {
			t.Fatalf("%s, written as %q, no longer decodes: %v", def, buf.Bytes(), err)
		}
		if d2, err := gateway.DefinitionDigest(re); err != nil || d2 != d {
			t.Fatalf("%s has digest %s; written as %q, %s (%v)", def, d, buf.Bytes(), d2, err)
		}
		flip := func(b *bool) *bool {
			if b == nil {
				return new(true)
			}
			if !*b {
				return nil
			}
			return new(false)
		}
		annotations := func(tl *mcp.Tool) *mcp.ToolAnnotations {
			if tl.Annotations == nil {
				tl.Annotations = &mcp.ToolAnnotations{}
			}
			return tl.Annotations
		}
		for _, c := range []struct {
			what   string
			change func(*mcp.Tool)
			covers bool
		}{
			{"name", func(tl *mcp.Tool) { tl.Name += "x" }, true},
			{"description", func(tl *mcp.Tool) { tl.Description += "x" }, true},
			{"inputSchema", func(tl *mcp.Tool) { tl.InputSchema = map[string]any{"x": tl.InputSchema} }, true},
			{"annotations.title", func(tl *mcp.Tool) { annotations(tl).Title += "x" }, true},
			{"annotations.readOnlyHint", func(tl *mcp.Tool) { a := annotations(tl); a.ReadOnlyHint = !a.ReadOnlyHint }, true},
			{"annotations.idempotentHint", func(tl *mcp.Tool) { a := annotations(tl); a.IdempotentHint = !a.IdempotentHint }, true},
			{"annotations.destructiveHint", func(tl *mcp.Tool) { a := annotations(tl); a.DestructiveHint = flip(a.DestructiveHint) }, true},
			{"annotations.openWorldHint", func(tl *mcp.Tool) { a := annotations(tl); a.OpenWorldHint = flip(a.OpenWorldHint) }, true},
			{"annotations, made explicit", func(tl *mcp.Tool) { annotations(tl) }, false},
			{"title", func(tl *mcp.Tool) { tl.Title += "x" }, false},
			{"icons", func(tl *mcp.Tool) { tl.Icons = append(tl.Icons, mcp.Icon{Source: "https://example.com/x.png"}) }, false},
			{"outputSchema", func(tl *mcp.Tool) { tl.OutputSchema = map[string]any{"x": tl.OutputSchema} }, false},
			{"_meta", func(tl *mcp.Tool) { tl.Meta = mcp.Meta{"x": fmt.Sprint(tl.Meta)} }, false},
		} {
			tl, _ := decode(def)
			c.change(tl)
			d2, err := gateway.DefinitionDigest(tl)
			if err != nil || (d2 != d) != c.covers {
				t.Fatalf("%s changed: digest %s, was %s (%v); want it changed: %v", c.what, d2, d, err, c.covers)
			}
		}
	})
}
