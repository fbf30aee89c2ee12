package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
)

// Version is the gateway's MCP implementation version.
const Version = "1"

// Keys of writ's entries in MCP _meta objects (docs/mcp.md, "_meta").
const (
	// MetaReceipt holds, in a result's _meta, the receipt of a blocked
	// call, or the CompactReceipt of an allowed one.
	MetaReceipt = "io.github.writhq/receipt"
	// MetaDecisionID and MetaRecordID, in an allowed call's result
	// _meta, name its decision and the record of its check.
	MetaDecisionID = "io.github.writhq/decision_id"
	MetaRecordID   = "io.github.writhq/record_id"
	// MetaWorkflowID, MetaNodeID, MetaRunID and MetaStepID, in a
	// tools/call request's _meta, place the call in a workflow run; a
	// call made for a run's step counts as observed by writ.
	MetaWorkflowID = "io.github.writhq/workflow_id"
	MetaNodeID     = "io.github.writhq/node_id"
	MetaRunID      = "io.github.writhq/run_id"
	MetaStepID     = "io.github.writhq/step_id"
	// MetaApprovalID, in a tools/call request's _meta, presents an
	// approval to redeem (the check's approval_ids), for an agent that
	// kept the approval id of a blocked result.
	MetaApprovalID = "io.github.writhq/approval_id"
	// metaPrefix marks writ's keys; they are not forwarded upstream.
	metaPrefix = "io.github.writhq/"
)

// Writ is what the gateway needs of writ: checks, execution reports and
// resumes of blocked decisions. The in-process engine and
// httpapi.Client both satisfy it.
type Writ interface {
	Check(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error)
	ReportExecution(ctx context.Context, r *writ.ExecutionReport) (*writ.ExecutionAck, error)
	Resume(ctx context.Context, r *writ.ResumeRequest) (*writ.Receipt, error)
}

// Options configure a Gateway.
type Options struct {
	Config *Config
	Writ   Writ
	// Tools is the pinned pack's tool manifest, by tool name: which
	// tools are listed (see Config.Unlisted).
	Tools map[string]*pack.Tool
	// Gates are the pinned pack's approval gates, by id: which allow
	// elicitation.
	Gates map[string]*pack.Gate
	// Redaction is the pinned pack's redaction rules: the arguments an
	// approval question shows are redacted by them, as in records.
	Redaction []*pack.RedactionRule
	Logger    *slog.Logger
	// Capture stores the evidence tools' results are (tools.yaml,
	// captures); when nil, Writ is used if it is a Capturer.
	Capture Capturer
	// Now reads the clock for execution reports (default time.Now).
	Now func() time.Time
	// Transport, when set, reaches an upstream instead of its
	// configuration (tests connect in-memory servers this way).
	Transport func(ctx context.Context, u Upstream) (mcp.Transport, error)
}

// Gateway is one MCP server in front of the configured upstreams.
type Gateway struct {
	opts   Options
	cfg    *Config
	log    *slog.Logger
	now    func() time.Time
	server *mcp.Server
	ups    []*upstream

	mu     sync.Mutex
	routes map[string]*route // by the name the agent sees
	// pinnedDefs are the definitions seen whose digest is their tool's
	// pin, by name: what the agent is shown of a pinned tool whose
	// upstream changed it since.
	pinnedDefs map[string]*mcp.Tool
	// pinnedFields and shownFields are the other fields (toolfields.go)
	// of the pinned definitions and of the definitions the agent is
	// shown, by name.
	pinnedFields, shownFields map[string]toolFields
	// waiting remembers blocked calls that wait on an approval, by
	// waitKey, so the same call again resumes the decision.
	waiting map[string]string

	// reports are the execution reports being recorded in the
	// background; reportSlots bounds them (see report).
	reports     sync.WaitGroup
	reportSlots chan struct{}
	// reportsMu orders report's Add with Flush's Wait: a report begun
	// while Flush waits waits for Flush, so Wait never races an Add.
	reportsMu sync.Mutex

	// stateKey signs the requestStates of input-required results;
	// spent holds the nonces of states answered, until they expire.
	stateKey []byte
	// instance names this gateway's MCP session with its client when
	// the transport has no session id (stdio: one client per process),
	// for the tool-call meter (sessionOf).
	instance string
	spent    map[string]int64

	redactor *record.Redactor

	// capturer stores captured evidence; captured remembers it per
	// session, to cite on the session's later calls (evidence.go).
	capturer Capturer
	captured captures
}

// route is one tool the agent sees, and where it goes.
type route struct {
	name     string // as the agent sees it (prefix + upstream name)
	up       *upstream
	def      *mcp.Tool  // the upstream's definition
	fields   toolFields // its other fields (toolfields.go)
	digest   string
	schema   *jsonschema.Schema
	badSchem error
	listed   *pack.Tool // nil when the tool manifest does not name it
	mode     writ.ApprovalMode
}

// New starts a gateway: it connects to every upstream and lists its
// tools. An upstream that cannot be reached is an error: a gateway
// starts complete or not at all.
func New(ctx context.Context, o Options) (*Gateway, error) {
	if o.Config == nil || o.Writ == nil {
		return nil, errors.New("gateway: Config and Writ are required")
	}
	g := &Gateway{opts: o, cfg: o.Config, log: o.Logger, now: o.Now, routes: map[string]*route{}, pinnedDefs: map[string]*mcp.Tool{}, pinnedFields: map[string]toolFields{}, shownFields: map[string]toolFields{}, waiting: map[string]string{}, reportSlots: make(chan struct{}, maxPendingReports), stateKey: make([]byte, 32), spent: map[string]int64{}}
	rand.Read(g.stateKey)
	g.instance = newCallID()[len("mcp_"):]
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now == nil {
		g.now = time.Now
	}
	g.redactor = record.NewRedactor(o.Redaction)
	g.capturer = o.Capture
	if g.capturer == nil {
		g.capturer, _ = o.Writ.(Capturer)
	}
	if g.capturer == nil {
		for _, t := range o.Tools {
			if t.Captures != nil {
				g.log.Warn("gateway: the pack marks a tool's result as evidence (captures), but this gateway cannot store evidence: nothing will be captured", "tool", t.Name, "kind", t.Captures.Kind)
			}
		}
	}
	if a := o.Config.Actor; o.Config.User != "" && a != nil && (o.Config.User == a.ID || o.Config.User == a.DelegatedUserID) {
		// writ refuses an approval by the one who asked for it, so every
		// answer of the user would be refused.
		g.log.Warn("the configuration's user is its actor (or the actor's delegated user): writ refuses an approval by whoever asked for it, so the user's answers to approval questions will be refused; name another user, or approve in the console, the API or the CLI",
			"user", o.Config.User, "actor", a.ID)
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "writ-gateway", Version: Version}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		Instructions: "Every tool call passes through writ, which may block it. A blocked call returns isError with the reason, the safe next steps and writ's receipt; do not retry it unchanged unless it says an approval is pending.",
	})
	g.server.AddReceivingMiddleware(g.toolFieldsMiddleware)
	for _, uc := range o.Config.Upstreams {
		u := &upstream{cfg: uc, changed: func(u *upstream) { g.relist(context.Background(), u) }}
		u.elicit, u.sample = g.relayElicit(u), g.relaySample(u)
		if o.Transport != nil {
			u.connect = func(ctx context.Context) (mcp.Transport, error) { return o.Transport(ctx, uc) }
		} else {
			u.connect = transport(uc)
		}
		g.ups = append(g.ups, u)
	}
	for _, u := range g.ups {
		if _, _, err := g.session(ctx, u); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// Server is the MCP server the agent connects to (over stdio or
// Streamable HTTP).
func (g *Gateway) Server() *mcp.Server { return g.server }

// Close waits for the execution reports under way (Flush), then ends
// every upstream session (and stops stdio upstreams).
func (g *Gateway) Close() {
	g.Flush()
	for _, u := range g.ups {
		u.close()
	}
}

// Tool is one upstream tool as the gateway sees it (writ gateway --list-tools).
type Tool struct {
	Name        string // as the agent sees it
	Upstream    string
	DecisionKey string // "" when the tool manifest does not name it
	Digest      string
	Pinned      string // the manifest's definition_digest, if any
	Annotations *mcp.ToolAnnotations
}

// Tools lists every upstream tool, listed or not, sorted by name.
func (g *Gateway) Tools() []Tool {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Tool
	for _, r := range g.routes {
		t := Tool{Name: r.name, Upstream: r.up.cfg.Name, Digest: r.digest, Annotations: r.def.Annotations}
		if r.listed != nil {
			t.DecisionKey, t.Pinned = r.listed.DecisionKey, r.listed.DefinitionDigest
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// session returns u's live session, listing its tools again when the
// session is new.
func (g *Gateway) session(ctx context.Context, u *upstream) (*mcp.ClientSession, bool, error) {
	cs, fresh, err := u.session(ctx)
	if err != nil {
		return nil, false, err
	}
	if fresh {
		lctx, cancel := context.WithTimeout(ctx, u.cfg.connectTimeout())
		defer cancel()
		if err := g.list(lctx, u, cs); err != nil {
			u.drop(cs)
			if lctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
				err = fmt.Errorf("%w: %s: its tools were not listed within %s (connect_timeout)", errUpstreamDown, u.cfg.Name, u.cfg.connectTimeout())
			}
			return nil, false, err
		}
	}
	return cs, fresh, nil
}

// relist lists u's tools again after it said they changed.
func (g *Gateway) relist(ctx context.Context, u *upstream) {
	u.mu.Lock()
	cs := u.cs
	u.mu.Unlock()
	if cs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, u.cfg.connectTimeout())
	defer cancel()
	if err := g.list(ctx, u, cs); err != nil {
		g.log.Warn("gateway: listing tools again failed; dropping the upstream session", "upstream", u.cfg.Name, "error", err)
		u.drop(cs)
	}
}

// list replaces u's routes with its current tools and advertises them.
func (g *Gateway) list(ctx context.Context, u *upstream, cs *mcp.ClientSession) error {
	tools, err := u.tools(ctx, cs)
	if err != nil {
		return err
	}
	fresh := map[string]*route{}
	for _, t := range tools {
		r, err := g.newRoute(u, t)
		if err != nil {
			return err
		}
		fresh[r.name] = r
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for name := range fresh {
		if old, ok := g.routes[name]; ok && old.up != u {
			return fmt.Errorf("tool %s of upstream %s clashes with upstream %s's; give one of them a prefix", name, u.cfg.Name, old.up.cfg.Name)
		}
	}
	var gone []string
	same := map[string]bool{} // listed again unchanged: not advertised again
	for name, r := range g.routes {
		if r.up == u {
			if nr, ok := fresh[name]; !ok {
				gone = append(gone, name)
			} else if sameDefinition(r.def, nr.def) && r.fields.equal(nr.fields) {
				same[name] = true
			}
			delete(g.routes, name)
		}
	}
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
		for _, name := range gone {
			delete(g.shownFields, name)
		}
	}
	// Every route first, then the advertisements: an agent told the
	// list changed finds every new definition in place.
	maps.Copy(g.routes, fresh)
	for _, name := range slices.Sorted(maps.Keys(fresh)) {
		r := fresh[name]
		if same[name] {
			// Advertising it again would tell every agent the list
			// changed (a pinned tool's upstream is listed before each
			// call).
			continue
		}
		if r.listed == nil && g.cfg.Unlisted != UnlistedRefuse {
			g.server.RemoveTools(name)
			continue
		}
		def, fields := r.def, r.fields
		if pin := r.pin(); pin != "" {
			if r.digest == pin {
				g.pinnedDefs[name], g.pinnedFields[name] = r.def, r.fields
			} else if r.listed.OnDefinitionChange == pack.ChangeHide {
				g.log.Warn("gateway: a pinned tool's definition changed; it is hidden from the agent, as its pack asks (on_definition_change: hide)", "tool", name, "upstream", u.cfg.Name, "pinned", pin, "observed", r.digest)
				g.server.RemoveTools(name)
				continue
			} else if def, fields = g.pinnedDefs[name], g.pinnedFields[name]; def == nil {
				// Changed before this process saw the pinned text: the
				// agent is shown nothing of it rather than the new text.
				g.log.Warn("gateway: a pinned tool's definition changed; it is hidden from the agent", "tool", name, "upstream", u.cfg.Name, "pinned", pin, "observed", r.digest)
				g.server.RemoveTools(name)
				continue
			} else {
				g.log.Warn("gateway: a pinned tool's definition changed; the agent is shown the pinned definition, and calls are refused", "tool", name, "upstream", u.cfg.Name, "pinned", pin, "observed", r.digest)
			}
		}
		adv := *def
		adv.Name = name
		if adv.InputSchema == nil {
			adv.InputSchema = map[string]any{"type": "object"}
		}
		g.shownFields[name] = fields
		if err := g.advertise(&adv); err != nil {
			// An untrusted upstream's odd definition costs its tool, not
			// the gateway.
			g.log.Warn("gateway: an upstream tool cannot be offered; it is left out", "tool", name, "upstream", u.cfg.Name, "error", err)
			g.server.RemoveTools(name)
		}
	}
	return nil
}

// advertise adds t to the tools the agent sees. The SDK panics on a
// definition it cannot serve (an input schema that is not an object, say):
// that is an error here.
func (g *Gateway) advertise(t *mcp.Tool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	g.server.AddTool(t, g.handler(t.Name))
	return nil
}

func (g *Gateway) newRoute(u *upstream, t *mcp.Tool) (*route, error) {
	d, err := DefinitionDigest(t)
	if err != nil {
		return nil, err
	}
	r := &route{name: u.cfg.Prefix + t.Name, up: u, def: t, fields: u.fields.of(t.Name), digest: d, listed: g.opts.Tools[u.cfg.Prefix+t.Name]}
	r.schema, r.badSchem = compileSchema(t.InputSchema)
	// Annotations are untrusted hints: they may ask for a riskier
	// approval mode, never a safer one (the spec's mode stays the floor,
	// and the tool's ceiling the limit).
	if a := t.Annotations; a != nil && !a.ReadOnlyHint {
		switch {
		case a.DestructiveHint != nil && *a.DestructiveHint:
			r.mode = writ.ModeDestructive
		case a.OpenWorldHint != nil && *a.OpenWorldHint:
			r.mode = writ.ModeNetwork
		}
	}
	return r, nil
}

// sameDefinition reports whether two listings of a tool are the same
// definition, every field included.
func sameDefinition(a, b *mcp.Tool) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && string(ja) == string(jb)
}

// pin is the definition digest the tool manifest pins r to, if any.
func (r *route) pin() string {
	if r.listed == nil {
		return ""
	}
	return r.listed.DefinitionDigest
}

// refresh makes sure a call of the tool name is checked against the
// upstream's live definition: a session that ended is started again (and
// its tools listed), and a pinned tool's upstream is asked for its tools
// again, so a definition changed without notifications/tools/list_changed
// is caught on the first call. It returns the tool's route as it now
// stands, or nil when the upstream no longer has the tool. When the
// upstream cannot be reached, the route is returned unchanged: the call is
// checked, and its forward fails (not_executed) as before.
func (g *Gateway) refresh(ctx context.Context, r *route) *route {
	cs, fresh, err := g.session(ctx, r.up)
	if err != nil {
		return r
	}
	if !fresh && r.pin() != "" {
		lctx, cancel := context.WithTimeout(ctx, r.up.cfg.connectTimeout())
		defer cancel()
		if err := g.list(lctx, r.up, cs); err != nil {
			g.log.Warn("gateway: listing a pinned tool's upstream before a call failed", "tool", r.name, "upstream", r.up.cfg.Name, "error", err)
			return r
		}
	}
	return g.route(r.name)
}

func compileSchema(s any) (*jsonschema.Schema, error) {
	if s == nil {
		return nil, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	const url = "https://writ.invalid/gateway/input.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

func (g *Gateway) route(name string) *route {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.routes[name]
}

func (g *Gateway) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.call(ctx, name, req)
	}
}

// Caller is whom one call is checked for.
type Caller struct {
	TenantID string
	Actor    writ.Actor
	// Token is the caller's bearer token over HTTP, if any (a Writ that
	// is a remote server may present it).
	Token string
	// Principal is the caller's authenticated API key, if any: the
	// gateway passes it to the Writ it checks with (writ.WithPrincipal),
	// so the caller's identity is authenticated (docs/trust.md).
	Principal *writ.Principal
}

type callerKey struct{}

// CallerFrom returns the caller of the tools/call ctx serves, if any: a
// Writ that reaches a remote server may use its token.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// Token info Extra keys set by the HTTP front (see cmd/writ).
const (
	TokenTenant = "tenant_id"
	TokenRaw    = "token"
	// TokenPrincipal holds the caller's *writ.Principal.
	TokenPrincipal = "principal"
)

func (g *Gateway) caller(req *mcp.CallToolRequest) (Caller, error) {
	c := Caller{TenantID: g.cfg.Tenant, Actor: writ.Actor{Type: writ.ActorAgent, ID: "mcp-agent"}}
	if a := g.cfg.Actor; a != nil {
		c.Actor = writ.Actor{Type: a.Type, ID: a.ID, WorkloadIdentity: a.WorkloadIdentity, DelegatedUserID: a.DelegatedUserID}
		if c.Actor.Type == "" {
			c.Actor.Type = writ.ActorAgent
		}
	}
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		ti := req.Extra.TokenInfo
		c.TenantID, _ = ti.Extra[TokenTenant].(string)
		c.Token, _ = ti.Extra[TokenRaw].(string)
		c.Actor = writ.Actor{Type: writ.ActorAgent, ID: ti.UserID}
		if p, ok := ti.Extra[TokenPrincipal].(*writ.Principal); ok && p != nil {
			// The key's principal is the actor (writ.BindActor).
			own := p.Actor()
			c.Principal, c.Actor = p, writ.Actor{Type: own.Type, ID: own.ID}
		}
	}
	if c.TenantID == "" {
		return c, errors.New("the gateway has no tenant for this call: set tenant in the gateway configuration, or connect with an API key")
	}
	return c, nil
}
