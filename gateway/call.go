package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/codes"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/telemetry"
)

// errDefinitionChanged: the upstream came back with another definition
// of the tool between the check and the forward.
var errDefinitionChanged = errors.New("tool definition changed")

// errCallTimeout: the upstream did not answer a forwarded call within
// its call_timeout.
var errCallTimeout = errors.New("no answer in time")

// resumePoll is how long a repeated call waits for the approval its
// decision waits on: long enough to read it, not to block the agent.
const resumePoll = time.Millisecond

// call is one tools/call: check, forward if allowed, report.
func (g *Gateway) call(ctx context.Context, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r := g.route(name)
	if r == nil {
		return nil, fmt.Errorf("unknown tool %q", name)
	}
	if r.listed != nil {
		if r = g.refresh(ctx, r); r == nil {
			return nil, fmt.Errorf("unknown tool %q", name)
		}
	}
	caller, err := g.caller(req)
	if err != nil {
		return refusal(name, err.Error()), nil
	}
	callID := newCallID()
	creq, raw, err := checkRequest(r, caller, req.Params, callID)
	if err != nil {
		return refusal(name, err.Error()), nil
	}
	session := g.sessionOf(req)
	if creq.Workflow == nil || creq.Workflow.RunID == "" {
		// The MCP session is the calls' session, as the gateway observed
		// it: a budget's tool calls are counted across it (issue 31).
		creq.InputsRefs = &writ.InputsRefs{Session: session}
	}
	// The evidence this session's calls captured, about the call's
	// subjects, is cited: writ resolves it in its store (evidence.go).
	creq.Evidence = g.captured.cite(captureKey(creq.TenantID, session), creq.SubjectIDs)

	ctx = telemetry.ContextFromMeta(ctx, req.Params.Meta)
	ctx, span := telemetry.StartToolCall(ctx, name, callID)
	defer span.End()
	ctx = context.WithValue(ctx, callerKey{}, caller)
	if caller.Principal != nil {
		ctx = writ.WithPrincipal(ctx, caller.Principal)
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		creq.TraceID = sc.TraceID().String()
	}
	// A 2026-07-28 retry after an input-required result: the answer is
	// recorded first, so that the decision below redeems it.
	retried := req.Params.RequestState != ""
	if retried {
		if err := g.answered(ctx, req, creq); err != nil {
			span.SetStatus(codes.Error, "requestState refused")
			return refusal(name, errorMessage(err)+"; nothing was decided or forwarded. Make the call again without it."), nil
		}
	}
	rc, err := g.decide(ctx, creq)
	if err != nil {
		span.SetStatus(codes.Error, "writ could not decide")
		// A call writ refused as invalid is the agent's to fix, and it is
		// told so; the rest (the store, writ unreachable) are the
		// operator's.
		level := slog.LevelError
		if writ.ErrorCode(err) == writ.EINVALID {
			level = slog.LevelWarn
		}
		g.log.Log(ctx, level, "gateway: writ could not decide a call; not forwarded", "tool", name, "error", err)
		if rc != nil {
			return blocked(name, rc), nil
		}
		if len(creq.ApprovalIDs) > 0 && writ.ErrorCode(err) == writ.EINVALID {
			return refusal(name, fmt.Sprintf("writ refused the approval %q presented in _meta (%s): %s. Nothing was decided or forwarded; present the id of an approval request of this call, or make the call without it.", creq.ApprovalIDs[0], MetaApprovalID, errorMessage(err))), nil
		}
		return refusal(name, "writ could not decide this call, so it was not forwarded: "+errorMessage(err)), nil
	}
	switch {
	case rc.SafeToExecute || retried:
		// A retry is not asked again: a declined question stays declined.
	case req.ProtocolVersion() >= revisionInputRequired:
		if ir := g.inputRequired(req, creq, rc); ir != nil {
			return ir, nil
		}
	default:
		rc, _ = g.elicit(ctx, req, creq, rc)
	}
	if !rc.SafeToExecute {
		span.SetStatus(codes.Error, "blocked")
		return blocked(name, rc), nil
	}
	return g.forward(ctx, r, req, raw, rc, creq, session), nil
}

// checkRequest turns a tools/call of r, made by caller, into the check
// request writ decides (docs/mcp.md, "What a call becomes"), and returns
// the arguments to forward if it is allowed: the bytes the agent sent.
// The tool must be in the tool manifest and the arguments a JSON object
// valid against its input schema; the workflow and an approval to redeem
// come from _meta. The trace id is set by call, from the call's span. A
// call that cannot be checked is refused: the error says why, for the
// agent, and there is no request.
func checkRequest(r *route, caller Caller, p *mcp.CallToolParamsRaw, callID string) (*writ.CheckRequest, json.RawMessage, error) {
	if r.listed == nil {
		return nil, nil, fmt.Errorf("tool %s is not in the pack's tool manifest, so writ refuses every call to it (the gateway's unlisted: refuse). Ask the pack's owner to add it to tools.yaml.", r.name)
	}
	args, raw, err := arguments(p.Arguments)
	if err != nil {
		return nil, nil, err
	}
	if r.badSchem != nil {
		return nil, nil, fmt.Errorf("the upstream's input schema for %s does not compile (%v), so its arguments cannot be checked; the call was not forwarded", r.name, r.badSchem)
	}
	if r.schema != nil {
		if err := r.schema.Validate(decodeForSchema(raw)); err != nil {
			return nil, nil, errors.New("the arguments do not match the tool's input schema, so the call was not checked or forwarded: " + schemaMessage(err))
		}
	}
	meta := map[string]any(p.Meta)
	creq := &writ.CheckRequest{
		TenantID:             caller.TenantID,
		Tool:                 r.name,
		Arguments:            args,
		ApprovalMode:         r.mode,
		ToolCallID:           callID,
		ToolDefinitionDigest: r.digest,
		Actor:                caller.Actor,
		Workflow:             workflowOf(meta),
	}
	if creq.SubjectIDs, err = r.listed.Subjects(args); err != nil {
		return nil, nil, fmt.Errorf("%v; the call was not checked or forwarded", err)
	}
	// The outputs the call proposes are its arguments, as the manifest
	// maps them: the spec's outputs_schema validates them as it would any
	// caller's (a call with none is refused by a schema that needs some).
	if creq.Outputs, err = r.listed.ProposedOutputs(args); err != nil {
		return nil, nil, fmt.Errorf("%v; the call was not checked or forwarded", err)
	}
	if v, ok := meta[MetaApprovalID]; ok {
		id, _ := v.(string)
		if id == "" {
			got, _ := json.Marshal(v)
			return nil, nil, fmt.Errorf("%s in _meta must be the id of an approval request (a non-empty string), not %s; the call was not checked or forwarded", MetaApprovalID, got)
		}
		creq.ApprovalIDs = []string{id}
	}
	return creq, raw, nil
}

// decide checks the call, or resumes the decision the same call is
// waiting on (the same tenant, actor, tool and arguments), so that an
// approval decided since is redeemed.
func (g *Gateway) decide(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error) {
	key, err := waitKey(req)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	decision := g.waiting[key]
	g.mu.Unlock()
	var rc *writ.Receipt
	// An approval presented in _meta wins over the decision remembered:
	// the agent names the approval it means to redeem (one approved
	// before the gateway restarted, say), and a fresh check redeems it.
	if decision != "" && len(req.ApprovalIDs) == 0 {
		rc, err = g.opts.Writ.Resume(ctx, &writ.ResumeRequest{TenantID: req.TenantID, DecisionID: decision, Request: req, Wait: resumePoll})
		if c := writ.ErrorCode(err); c == writ.ECONFLICT || c == writ.ENOTFOUND || c == writ.EINVALID {
			// The decision ended (denied, say): decide the call afresh.
			rc, err = nil, nil
			g.forget(key)
		} else if err != nil {
			return rc, err
		}
	}
	if rc == nil {
		if rc, err = g.opts.Writ.Check(ctx, req); err != nil {
			return rc, err
		}
	}
	switch {
	case rc.SafeToExecute:
		g.forget(key)
	case rc.Disposition.Mode == writ.ModeHumanReview && !rc.HumanReviewTerminal && len(rc.Metadata.ApprovalIDs) > 0:
		g.mu.Lock()
		g.waiting[key] = rc.DecisionID
		g.mu.Unlock()
	default:
		g.forget(key)
	}
	return rc, nil
}

func (g *Gateway) forget(key string) {
	g.mu.Lock()
	delete(g.waiting, key)
	g.mu.Unlock()
}

func waitKey(req *writ.CheckRequest) (string, error) {
	d, err := record.CanonicalDigest(req.Arguments)
	if err != nil {
		return "", &writ.Error{Code: writ.EINVALID, Message: "arguments: " + err.Error()}
	}
	// A JSON array, so that no value's characters can shift one field
	// into the next.
	key, err := json.Marshal([]string{req.TenantID, req.Actor.Type, req.Actor.ID, req.Tool, d})
	if err != nil {
		return "", err
	}
	return string(key), nil
}

// forward sends an allowed call upstream, returns its result unchanged
// and reports the execution under the decision.
func (g *Gateway) forward(ctx context.Context, r *route, req *mcp.CallToolRequest, raw json.RawMessage, rc *writ.Receipt, creq *writ.CheckRequest, session string) *mcp.CallToolResult {
	callID := creq.ToolCallID
	started := g.now().UTC()
	res, err := g.send(ctx, r, req, raw)
	ended := g.now().UTC()
	rep := &writ.ExecutionReport{DecisionID: rc.DecisionID, Status: writ.ExecutionSucceeded, ToolCallID: callID, StartedAt: &started, EndedAt: &ended}
	if c, ok := CallerFrom(ctx); ok {
		rep.TenantID = c.TenantID
	}
	switch {
	case errors.Is(err, errUpstreamDown) || errors.Is(err, errDefinitionChanged):
		rep.Status = writ.ExecutionNotExecuted
		rep.Error = &writ.ExecutionError{Code: "upstream_unavailable", Message: err.Error()}
	case errors.Is(err, errCallTimeout):
		// The upstream was told to cancel; whether it had begun is not
		// known.
		rep.Status = writ.ExecutionFailed
		rep.Error = &writ.ExecutionError{Code: "timeout", Message: err.Error()}
		g.log.WarnContext(ctx, "gateway: an upstream did not answer a call in time; it was told to cancel", "tool", r.name, "upstream", r.up.cfg.Name, "decision_id", rc.DecisionID, "call_timeout", r.up.cfg.callTimeout().String())
	case err != nil && ctx.Err() != nil:
		// The agent gave up on the call; the upstream was told to stop.
		rep.Status = writ.ExecutionFailed
		rep.Error = &writ.ExecutionError{Code: "cancelled", Message: err.Error()}
	case err != nil:
		rep.Status = writ.ExecutionFailed
		rep.Error = &writ.ExecutionError{Code: "upstream_error", Message: err.Error()}
	case res.IsError:
		rep.Status = writ.ExecutionFailed
		rep.Error = &writ.ExecutionError{Code: "tool_error", Message: firstText(res)}
	}
	if res != nil {
		// The result is the tool's; the envelope is the session's. The
		// upstream's server identity and result type belong to the
		// gateway's session with it, and the gateway's own session with
		// the agent sets its own (on the 2026-07-28 revision).
		meta := mcp.Meta{}
		for k, v := range res.Meta {
			// writ's keys in a result are writ's to set: an upstream's
			// own would pass for a receipt.
			if k != mcp.MetaKeyServerInfo && !strings.HasPrefix(k, metaPrefix) {
				meta[k] = v
			}
		}
		meta[MetaDecisionID] = rc.DecisionID
		meta[MetaRecordID] = rc.Metadata.RecordID
		meta[MetaReceipt] = compactReceipt(rc)
		res = &mcp.CallToolResult{Meta: meta, Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}
		if d, derr := record.CanonicalDigest(res); derr == nil {
			rep.ResultDigest = d
		}
		if err == nil && !res.IsError && r.listed.Captures != nil && rep.ResultDigest != "" {
			// Before the result goes back: the agent's next call may
			// need the evidence.
			g.capture(ctx, r, creq, session, res, rc, rep.ResultDigest, ended)
		}
	}
	g.report(context.WithoutCancel(ctx), rep, r.name)
	if rep.Status == writ.ExecutionNotExecuted {
		return refusal(r.name, fmt.Sprintf("writ allowed it (decision %s), but it could not be sent: %v. Nothing was executed; the call may be made again later.", rc.DecisionID, err))
	}
	if errors.Is(err, errCallTimeout) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("writ allowed this call to %s (decision %s), but the tool server did not answer within %s, so the gateway told it to cancel the call. The timeout is recorded; the call may or may not have taken effect.", r.name, rc.DecisionID, r.up.cfg.callTimeout())}}}
	}
	if err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("writ allowed this call to %s (decision %s), but the tool server failed: %v. The failure is recorded; the call may or may not have taken effect.", r.name, rc.DecisionID, err)}}}
	}
	return res
}

// send forwards one call on the upstream's session. A session that
// breaks mid-call is dropped, so the next call starts the upstream
// again; the broken call is not retried (it may have taken effect).
func (g *Gateway) send(ctx context.Context, r *route, req *mcp.CallToolRequest, raw json.RawMessage) (*mcp.CallToolResult, error) {
	cs, _, err := g.session(ctx, r.up)
	if err != nil {
		return nil, err
	}
	if cur := g.route(r.name); cur == nil || cur.digest != r.digest {
		// The upstream restarted with another definition since the check.
		return nil, fmt.Errorf("%w: the definition of %s changed while the call was being checked", errDefinitionChanged, r.name)
	}
	params := &mcp.CallToolParams{Name: r.def.Name, Arguments: raw, Meta: upstreamMeta(req.Params.Meta)}
	r.up.begin(req)
	defer r.up.end(req)
	cctx, cancel := context.WithTimeout(ctx, r.up.cfg.callTimeout())
	defer cancel()
	res, err := cs.CallTool(context.WithValue(cctx, agentCallKey{}, req), params)
	if err != nil && ctx.Err() == nil && cctx.Err() == context.DeadlineExceeded {
		// The SDK told the upstream to cancel. Its session stays: the
		// upstream may be slow on this call only.
		return nil, fmt.Errorf("%w: upstream %s did not answer within %s (call_timeout)", errCallTimeout, r.up.cfg.Name, r.up.cfg.callTimeout())
	}
	if err != nil {
		// An error the upstream answered leaves its session intact; any
		// other (the connection broke, the process died) ends it.
		var rpcErr *jsonrpc.Error
		if ctx.Err() == nil && !errors.As(err, &rpcErr) {
			r.up.drop(cs)
		}
		return nil, err
	}
	return res, nil
}

func upstreamMeta(m mcp.Meta) mcp.Meta {
	if len(m) == 0 {
		return nil
	}
	out := mcp.Meta{}
	for k, v := range m {
		if !strings.HasPrefix(k, metaPrefix) && !reservedMeta(k) {
			out[k] = v
		}
	}
	return out
}

// reservedMeta reports whether a _meta key is the protocol's own (its
// prefix's second label is modelcontextprotocol or mcp, as in
// io.modelcontextprotocol/protocolVersion): those describe the agent's
// session with the gateway, not the gateway's with the upstream.
func reservedMeta(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	labels := strings.Split(prefix, ".")
	return len(labels) >= 2 && (labels[1] == "modelcontextprotocol" || labels[1] == "mcp")
}

// arguments decodes a call's arguments: a JSON object, or absent. Its
// bytes are what is forwarded, so they must mean to the upstream what
// they mean to the check, whatever JSON parser the upstream uses: a
// member name twice in an object (read as its last value here, perhaps
// its first there) and invalid UTF-8 (read as U+FFFD here) are refused.
func arguments(raw json.RawMessage) (map[string]any, json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, json.RawMessage("{}"), nil
	}
	var args map[string]any
	if err := jsonv2.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, nil, errors.New("the arguments must be a JSON object, with no member name twice in an object and only valid UTF-8; the call was not checked or forwarded")
	}
	return args, raw, nil
}

func decodeForSchema(raw json.RawMessage) any {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil
	}
	return v
}

var printer = message.NewPrinter(language.English)

func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			where := "/" + strings.Join(e.InstanceLocation, "/")
			msgs = append(msgs, where+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(msgs, "; ")
}

func workflowOf(meta map[string]any) *writ.WorkflowRef {
	str := func(k string) string { s, _ := meta[k].(string); return s }
	w := &writ.WorkflowRef{WorkflowID: str(MetaWorkflowID), NodeID: str(MetaNodeID), RunID: str(MetaRunID), StepID: str(MetaStepID)}
	if *w == (writ.WorkflowRef{}) {
		return nil
	}
	return w
}

// sessionOf names the MCP session a call came on: "mcp:" and the
// transport's session id, or this gateway's instance when the transport
// has none (stdio serves one client per gateway process). The gateway
// sets it, not the agent, so an agent cannot start a fresh count of its
// calls by naming another session.
func (g *Gateway) sessionOf(req *mcp.CallToolRequest) string {
	if req.Session != nil {
		if id := req.Session.ID(); id != "" {
			return "mcp:" + id
		}
	}
	return "mcp:" + g.instance
}

func newCallID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "mcp_" + hex.EncodeToString(b)
}

func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if len(t.Text) > 500 {
				return t.Text[:500]
			}
			return t.Text
		}
	}
	return "the tool returned isError"
}

func errorMessage(err error) string {
	var we *writ.Error
	if errors.As(err, &we) {
		return we.Message
	}
	return err.Error()
}

// maxPendingReports bounds the execution reports being recorded in the
// background at once; beyond it, a call waits for its own report.
const maxPendingReports = 256

// reportCommitWait is how long an execution report may wait to be
// committed with the next check (ledger.CommitLater) before it is
// committed alone.
const reportCommitWait = 10 * time.Millisecond

// report records an execution report. The effect has happened and the
// report permits nothing, so the agent does not wait for it: the report
// is recorded in the background (Flush and Close wait for it), and the
// call's result goes back at once. Committed alone, it would hold up the
// agent's next check behind its own commit and sync, so an in-process
// engine commits it with the next record that is waited for (the next
// call's check), or alone after reportCommitWait; the report is
// acknowledged, as always, only once it is committed. A report that
// cannot be recorded is logged; its permit stays in flight (writ
// decisions in-flight lists it) rather than the result being withheld.
func (g *Gateway) report(ctx context.Context, rep *writ.ExecutionReport, tool string) {
	ctx = ledger.CommitLater(ctx, reportCommitWait)
	record := func() {
		if _, err := g.opts.Writ.ReportExecution(ctx, rep); err != nil {
			g.log.Error("gateway: the execution report could not be recorded; the decision stays in flight", "decision_id", rep.DecisionID, "tool", tool, "error", err)
		}
	}
	select {
	case g.reportSlots <- struct{}{}:
		g.reportsMu.Lock()
		g.reports.Add(1)
		g.reportsMu.Unlock()
		go func() {
			defer func() { <-g.reportSlots; g.reports.Done() }()
			record()
		}()
	default:
		record()
	}
}

// Flush waits until every execution report begun so far is recorded (or
// has failed and been logged). A report begun while it waits begins when
// it returns.
func (g *Gateway) Flush() {
	g.reportsMu.Lock()
	defer g.reportsMu.Unlock()
	g.reports.Wait()
}
