package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Capturer stores the evidence the gateway captures from a tool's result
// (tools.yaml, captures) as observed: the in-process engine
// (engine.Engine.CaptureEvidence) or, for writ gateway --server, the
// server with the gateway's own key, which has the gateway role
// (remote.Writ).
type Capturer interface {
	CaptureEvidence(ctx context.Context, req *writ.AddEvidenceRequest) (*writ.StoredEvidence, error)
}

// Bounds of the captured items the gateway remembers to cite.
const (
	maxCaptureSessions   = 1024
	maxCapturesInSession = 64
)

// captured is an item the gateway captured in a session, as it cites it.
type captured struct {
	kind, id, address string
	// subjects are the call's subject ids, as the call named them (the
	// stored item's are redacted).
	subjects []string
}

// captures remembers, per tenant and MCP session, the items captured in
// it, oldest first; order lists the sessions, oldest first.
type captures struct {
	mu       sync.Mutex
	sessions map[string][]captured
	order    []string
}

func captureKey(tenantID, session string) string {
	k, _ := json.Marshal([]string{tenantID, session})
	return string(k)
}

func (c *captures) add(key string, item captured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[string][]captured{}
	}
	items, ok := c.sessions[key]
	if !ok {
		if len(c.order) >= maxCaptureSessions {
			delete(c.sessions, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, key)
	}
	if len(items) >= maxCapturesInSession {
		items = items[1:]
	}
	c.sessions[key] = append(items, item)
}

// cite returns the citations of a call with subject ids subjects: for
// each kind, the latest item captured in the session that shares a
// subject id with the call. A call with no subject ids cites nothing.
func (c *captures) cite(key string, subjects []string) []writ.Evidence {
	if len(subjects) == 0 {
		return nil
	}
	c.mu.Lock()
	items := c.sessions[key]
	c.mu.Unlock()
	var out []writ.Evidence
	seen := map[string]bool{}
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if seen[it.kind] || !slices.ContainsFunc(it.subjects, func(s string) bool { return slices.Contains(subjects, s) }) {
			continue
		}
		seen[it.kind] = true
		out = append(out, writ.Evidence{Kind: it.kind, ID: it.id, Hash: it.address})
	}
	slices.Reverse(out)
	return out
}

// capture stores the result of a successful call of r as the evidence its
// tool manifest entry says it is, and remembers it for the session's
// later calls. The tool has run, so its result goes back to the agent
// whatever happens here; an item that cannot be stored is logged, and a
// later check that needs it is refused for want of it.
func (g *Gateway) capture(ctx context.Context, r *route, creq *writ.CheckRequest, session string, res *mcp.CallToolResult, rc *writ.Receipt, resultDigest string, observed time.Time) {
	spec := r.listed.Captures
	if g.capturer == nil {
		g.log.ErrorContext(ctx, "gateway: the tool's result is evidence (captures), but this gateway cannot store evidence; nothing was captured", "tool", r.name, "kind", spec.Kind)
		return
	}
	req := &writ.AddEvidenceRequest{TenantID: creq.TenantID, Kind: spec.Kind, SubjectIDs: creq.SubjectIDs, Attributes: attributesOf(res, spec),
		ObservedAt: &observed, TraceID: creq.TraceID,
		Observation: &writ.EvidenceObservation{Tool: r.name, ToolCallID: creq.ToolCallID, DecisionID: rc.DecisionID, ResultDigest: resultDigest}}
	if spec.ValidFor > 0 {
		x := observed.Add(spec.ValidFor)
		req.ExpiresAt = &x
	}
	se, err := g.capturer.CaptureEvidence(ctx, req)
	if err != nil {
		g.log.ErrorContext(ctx, "gateway: the evidence a tool returned could not be stored; checks that need it will be refused", "tool", r.name, "kind", spec.Kind, "decision_id", rc.DecisionID, "error", err)
		return
	}
	g.captured.add(captureKey(creq.TenantID, session), captured{kind: se.Item.Kind, id: se.Item.ID, address: se.ContentAddress, subjects: slices.Clone(creq.SubjectIDs)})
}

// attributesOf picks the attributes spec names from a result: members of
// its structured content, or else of the JSON object its first text
// content holds. A member the result lacks is left out.
func attributesOf(res *mcp.CallToolResult, spec *pack.Capture) map[string]any {
	out := map[string]any{}
	if len(spec.Attributes) == 0 {
		return out
	}
	var obj map[string]any
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			_ = json.Unmarshal(b, &obj)
		}
	}
	if obj == nil {
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				_ = json.Unmarshal([]byte(t.Text), &obj)
				break
			}
		}
	}
	for _, name := range spec.Attributes {
		if v, ok := obj[name]; ok {
			out[name] = v
		}
	}
	return out
}
