package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool definition may carry fields the SDK's Tool type does not have
// (MCP 2025-11-25's execution, say): the SDK drops them when it decodes
// an upstream's tools/list. The gateway keeps them beside the definition
// (toolFields) and puts them back into the tools/list answers it gives
// the agent (withToolFields), so the agent sees every field the upstream
// listed.

// sdkToolFields are the members of a tool the SDK's Tool type decodes.
var sdkToolFields = map[string]bool{"name": true, "title": true, "description": true, "inputSchema": true, "outputSchema": true, "annotations": true, "icons": true, "_meta": true}

// toolFields are a tool's members the SDK's Tool type does not decode, by
// name, as the upstream wrote them.
type toolFields map[string]jsontext.Value

func (f toolFields) equal(o toolFields) bool {
	return maps.EqualFunc(f, o, func(a, b jsontext.Value) bool { return bytes.Equal(a, b) })
}

// fieldsTransport reads the tools/list answers of a stdio upstream (or an
// in-memory one) as they arrive, before the SDK decodes them, and keeps
// each tool's other fields (see toolFields) in seen. A Streamable HTTP
// upstream's connection cannot be wrapped (it takes the session's state
// through a method of the SDK's own, with an unexported parameter type);
// its HTTP client's transport reads the same answers instead
// (fieldsRoundTripper).
type fieldsTransport struct {
	mcp.Transport
	seen *seenFields
}

func (t *fieldsTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &fieldsConn{Connection: c, lists: listAnswers{seen: t.seen, ids: map[any]bool{}}}, nil
}

// seenFields are the other fields of an upstream's tools, by the tool's
// name on the upstream, from its latest tools/list pages.
type seenFields struct {
	mu     sync.Mutex
	fields map[string]toolFields
}

func (s *seenFields) of(name string) toolFields {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fields[name]
}

// listAnswers follows one session's messages: the ids of the tools/list
// requests the gateway sent, and the answers to them, whose tools' other
// fields it keeps in seen.
type listAnswers struct {
	seen *seenFields

	mu  sync.Mutex
	ids map[any]bool // ids of tools/list requests not answered yet
}

// sent notes a message the gateway sent the upstream.
func (l *listAnswers) sent(m jsonrpc.Message) {
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "tools/list" && r.ID.IsValid() {
		l.mu.Lock()
		l.ids[r.ID.Raw()] = true
		l.mu.Unlock()
	}
}

// received notes a message from the upstream, before the SDK reads it.
func (l *listAnswers) received(m jsonrpc.Message) {
	r, ok := m.(*jsonrpc.Response)
	if !ok || !r.ID.IsValid() {
		return
	}
	l.mu.Lock()
	list := l.ids[r.ID.Raw()]
	delete(l.ids, r.ID.Raw())
	l.mu.Unlock()
	if list && r.Error == nil {
		l.keep(r.Result)
	}
}

type fieldsConn struct {
	mcp.Connection
	lists listAnswers
}

func (c *fieldsConn) Write(ctx context.Context, m jsonrpc.Message) error {
	c.lists.sent(m)
	return c.Connection.Write(ctx, m)
}

func (c *fieldsConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.lists.received(m)
	}
	return m, err
}

// keep records the other fields of each tool of one tools/list page. A
// page it cannot read is left to the SDK, which answers it.
func (l *listAnswers) keep(result json.RawMessage) {
	var page struct {
		Tools []map[string]jsontext.Value `json:"tools"`
	}
	if jsonv2.Unmarshal(result, &page) != nil {
		return
	}
	l.seen.mu.Lock()
	defer l.seen.mu.Unlock()
	if l.seen.fields == nil {
		l.seen.fields = map[string]toolFields{}
	}
	for _, t := range page.Tools {
		var name string
		if jsonv2.Unmarshal(t["name"], &name) != nil {
			continue
		}
		var f toolFields
		for k, v := range t {
			if !sdkToolFields[k] {
				if f == nil {
					f = toolFields{}
				}
				f[k] = bytes.Clone(v)
			}
		}
		l.seen.fields[name] = f
	}
}

// withToolFields is a tools/list answer to the agent with each tool's
// other fields put back (see toolFields).
type withToolFields struct {
	*mcp.ListToolsResult
	fields map[string]toolFields // by the name the agent sees
}

func (r *withToolFields) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.ListToolsResult)
	if err != nil {
		return nil, err
	}
	var m map[string]jsontext.Value
	if err := jsonv2.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var tools []map[string]jsontext.Value
	if err := jsonv2.Unmarshal(m["tools"], &tools); err != nil {
		return nil, err
	}
	for _, t := range tools {
		var name string
		if jsonv2.Unmarshal(t["name"], &name) != nil {
			continue
		}
		for k, v := range r.fields[name] {
			if _, ok := t[k]; !ok {
				t[k] = v
			}
		}
	}
	if m["tools"], err = jsonv2.Marshal(tools); err != nil {
		return nil, err
	}
	return jsonv2.Marshal(m, jsonv2.Deterministic(true))
}

// toolFieldsMiddleware puts the other fields of the tools the agent is
// shown back into the gateway's tools/list answers.
func (g *Gateway) toolFieldsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		lr, ok := res.(*mcp.ListToolsResult)
		if err != nil || !ok || method != "tools/list" {
			return res, err
		}
		fields := map[string]toolFields{}
		g.mu.Lock()
		for _, t := range lr.Tools {
			if f := g.shownFields[t.Name]; len(f) > 0 {
				fields[t.Name] = f
			}
		}
		g.mu.Unlock()
		if len(fields) == 0 {
			return res, nil
		}
		return &withToolFields{ListToolsResult: lr, fields: fields}, nil
	}
}
