package gateway

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
)

// blocked is the result of a call writ did not allow: isError, a short
// text a model can act on, the receipt as JSON text, and the receipt
// under MetaReceipt in the result's _meta. Never structuredContent: a
// tool with an output schema would fail its client's validation.
func blocked(tool string, rc *writ.Receipt) *mcp.CallToolResult {
	raw, err := json.Marshal(rc)
	if err != nil {
		return refusal(tool, "writ blocked this call, and its receipt could not be encoded: "+err.Error())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "writ blocked this call to %s: %s (%s). The call was not sent to the tool.\n", tool, rc.Outcome, rc.Disposition.Mode)
	if rc.Metadata.FailClosed {
		b.WriteString("writ could not record a decision, so it failed closed; retrying later may succeed.\n")
	}
	if len(rc.Reasons) > 0 {
		b.WriteString("Why:\n")
		for _, r := range rc.Reasons {
			fmt.Fprintf(&b, "- %s: %s\n", r.Code, r.Message)
		}
	}
	if len(rc.SafeNextSteps) > 0 {
		b.WriteString("Safe next steps:\n")
		for _, s := range rc.SafeNextSteps {
			fmt.Fprintf(&b, "- %s\n", s.Message)
		}
	}
	if len(rc.WhatWouldChangeThis) > 0 {
		b.WriteString("What would change this:\n")
		for _, s := range rc.WhatWouldChangeThis {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	switch {
	case rc.Disposition.Mode == writ.ModeHumanReview && !rc.HumanReviewTerminal && len(rc.Metadata.ApprovalIDs) > 0:
		fmt.Fprintf(&b, "A person must approve it: approval request %s is pending. Once it is decided, make the same call again with the same arguments; writ will then redeem the approval. (A client that can set _meta may present it as %s.)\n", strings.Join(rc.Metadata.ApprovalIDs, ", "), MetaApprovalID)
	case rc.MustNotRetrySameAction:
		b.WriteString("Do not retry this call unchanged: the same call gets the same answer.\n")
	}
	fmt.Fprintf(&b, "Decision %s, record %s.", rc.DecisionID, rc.Metadata.RecordID)
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: b.String()}, &mcp.TextContent{Text: string(raw)}},
		Meta:    mcp.Meta{MetaReceipt: json.RawMessage(raw)},
	}
}

// refusal is the result of a call that writ did not decide (bad input,
// an unlisted tool, writ unreachable): isError, nothing forwarded,
// nothing recorded.
func refusal(tool, why string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("The call to %s was refused and not sent to the tool: %s", tool, why)}}}
}

// CompactReceipt is the receipt of an allowed call as its result carries
// it, under MetaReceipt in the result's _meta (docs/mcp.md, "_meta
// keys"): enough to find the decision and its record, and to see under
// which pack it was allowed. The full receipt is writ decisions show's.
type CompactReceipt struct {
	DecisionID    string       `json:"decision_id"`
	RecordID      string       `json:"record_id"`
	Outcome       writ.Outcome `json:"outcome"`
	SafeToExecute bool         `json:"safe_to_execute"`
	DecisionKey   string       `json:"decision_key,omitempty"`
	PackHash      string       `json:"pack_hash,omitempty"`
	TraceID       string       `json:"trace_id,omitempty"`
}

func compactReceipt(rc *writ.Receipt) CompactReceipt {
	return CompactReceipt{DecisionID: rc.DecisionID, RecordID: rc.Metadata.RecordID, Outcome: rc.Outcome, SafeToExecute: rc.SafeToExecute, DecisionKey: rc.Metadata.DecisionKey, PackHash: rc.Metadata.PackHash, TraceID: rc.Metadata.TraceID}
}
