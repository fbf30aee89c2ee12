package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream may ask its client something in the middle of a call: a
// form elicitation (a question for the user) or a sampling request (a
// completion from the agent's model). The gateway is that client; it
// relays the request to the agent's session whose tools/call is in
// progress on the upstream, and the answer back. The answer is the
// upstream's business: writ does not read it, and it approves nothing.

// agentCallKey carries, in the context of a call forwarded upstream, the
// agent's tools/call it forwards. An upstream on 2026-07-28 asks through
// an input-required result, which the gateway's client fulfils within
// that context; one on 2025-11-25 sends a request of its own, in no
// call's context (see agentCall).
type agentCallKey struct{}

// begin and end track the agent's calls in progress on u.
func (u *upstream) begin(req *mcp.CallToolRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.inflight == nil {
		u.inflight = map[*mcp.CallToolRequest]int{}
	}
	u.inflight[req]++
}

func (u *upstream) end(req *mcp.CallToolRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.inflight[req]--; u.inflight[req] <= 0 {
		delete(u.inflight, req)
	}
}

// agentCall finds the agent's call on whose behalf u asks: the call in
// ctx, else the one call in progress on u. With several in progress, a
// request of u's own cannot be told apart, and is refused rather than
// put to the wrong user.
func (u *upstream) agentCall(ctx context.Context) (*mcp.CallToolRequest, error) {
	if req, ok := ctx.Value(agentCallKey{}).(*mcp.CallToolRequest); ok {
		return req, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.inflight) == 1 {
		for req := range u.inflight {
			return req, nil
		}
	}
	return nil, fmt.Errorf("writ gateway: the tool server %s asked while %d calls were in progress on it, so the gateway cannot tell which agent to ask; refused", u.cfg.Name, len(u.inflight))
}

// relayTo returns the agent's session a request of u's goes to, or why
// there is none.
func relayTo(ctx context.Context, u *upstream, what string) (*mcp.ServerSession, *mcp.ClientCapabilities, error) {
	req, err := u.agentCall(ctx)
	if err != nil {
		return nil, nil, err
	}
	if req.Session == nil {
		return nil, nil, fmt.Errorf("writ gateway: the agent's session cannot be asked; %s refused", what)
	}
	if req.ProtocolVersion() >= revisionInputRequired {
		// That revision lets a server ask only by ending the call with an
		// input-required result; the upstream's call cannot be held open
		// across the agent's retry.
		return nil, nil, fmt.Errorf("writ gateway: the agent's session is on MCP %s, where the gateway does not relay a tool server's %s; refused", req.ProtocolVersion(), what)
	}
	caps := req.ClientCapabilities()
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	return req.Session, caps, nil
}

// relayElicit relays an upstream's form elicitation to the agent's
// client. The message says which tool server asks, so that the user does
// not take it for writ's own approval question.
func (g *Gateway) relayElicit(u *upstream) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(ctx context.Context, er *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		ss, caps, err := relayTo(ctx, u, "elicitation")
		if err == nil && caps.Elicitation == nil {
			err = fmt.Errorf("writ gateway: the agent's client does not accept elicitation; refused")
		}
		if err != nil {
			g.log.Info("gateway: a tool server's elicitation was not relayed", "upstream", u.cfg.Name, "error", err)
			return nil, relayError(err)
		}
		p := *er.Params
		p.Message = fmt.Sprintf("The tool server %q asks (your answer goes to it, not to writ, and approves nothing in writ): %s", u.cfg.Name, er.Params.Message)
		g.log.Info("gateway: relaying a tool server's elicitation to the agent's client", "upstream", u.cfg.Name)
		res, err := ss.Elicit(ctx, &p)
		return res, relayError(err)
	}
}

// relaySample relays an upstream's sampling request to the agent's
// client.
func (g *Gateway) relaySample(u *upstream) func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return func(ctx context.Context, cr *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		ss, caps, err := relayTo(ctx, u, "sampling request")
		if err == nil && caps.Sampling == nil {
			err = fmt.Errorf("writ gateway: the agent's client does not accept sampling; refused")
		}
		if err != nil {
			g.log.Info("gateway: a tool server's sampling request was not relayed", "upstream", u.cfg.Name, "error", err)
			return nil, relayError(err)
		}
		g.log.Info("gateway: relaying a tool server's sampling request to the agent's client", "upstream", u.cfg.Name)
		res, err := ss.CreateMessage(ctx, cr.Params)
		return res, relayError(err)
	}
}

// relayError makes a relay's failure a JSON-RPC error answered to the
// upstream: its session stays up (see send), and only its call fails.
func relayError(err error) error {
	var rpcErr *jsonrpc.Error
	if err == nil || errors.As(err, &rpcErr) {
		return err
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
}
