// Package gateway is writ's MCP gateway: an MCP server to the agent and
// an MCP client to the real tool servers (upstreams), so that every
// tools/call passes through writ's decision loop without any change to
// the agent.
//
// It is an adapter: it translates one tools/call into a check
// (writ.Service), forwards only what the receipt permits, and reports
// what happened (writ.Lifecycle), under the same decision_id. It decides
// nothing itself: pinned tool definitions and annotations become fields
// of the check (tool_definition_digest, approval_mode), judged by the
// pack like everything else. It must never forward a call writ did not
// allow: when writ cannot decide or record, the call is refused.
//
// docs/mcp.md documents the configuration, what the agent sees, the
// _meta keys and the digest that pins a tool's definition.
package gateway
