package writ

import "time"

// A tool transcript is the hash-chained list of the tool calls made in
// one run (issue 32; the seed's "Tool Gateway transcript store"). Each
// execution report, from the gateway or any client, appends its call's
// toolCall/toolResult envelope to the transcript of the run its permit
// was checked in: the entry is sealed in the report's own record
// (Execution.Transcript), so the tenant's chain is the transcript store,
// and a check pins the head of its run's transcript as its
// replay.tool_transcript_chain_hash. docs/ledger-format.md specifies the
// bytes; package transcript computes and checks them.
type TranscriptEntry struct {
	// Run names the transcript: "run:" and the workflow run id of the
	// permit's check, else "session:" and its inputs_refs.session (the
	// gateway's MCP session), else "decision:" and the decision id (a
	// call made outside any run or session is a transcript of its own).
	Run string `json:"run"`
	// Seq is the entry's place in its transcript, from 1, contiguous.
	Seq int64 `json:"seq"`
	// Prev is the head of the transcript before this entry: the Head of
	// entry Seq-1, or "" for the first.
	Prev string `json:"prev"`
	// Call is the call's toolCall/toolResult envelope: redacted, with
	// digests of its payloads, never the payloads.
	Call TranscriptCall `json:"call"`
	// Head is the transcript's head with this entry:
	// "sha256:" and the hex SHA-256 of the RFC 8785 form of
	// {"call", "prev", "run", "seq"}.
	Head string `json:"head"`
}

// TranscriptCall is one call as a transcript keeps it.
type TranscriptCall struct {
	// ToolCallID names the call; Tool is the tool called (the permit's
	// check tool, when it named one).
	ToolCallID string `json:"tool_call_id"`
	Tool       string `json:"tool,omitempty"`
	// DecisionID and Permit are the decision and the check record that
	// permitted (or refused) the call.
	DecisionID string `json:"decision_id"`
	Permit     string `json:"permit"`
	// ArgumentsDigest is the permit's replay.arguments_digest (the
	// digest of the redacted arguments); ResultDigest the reporter's
	// digest of the result.
	ArgumentsDigest string          `json:"arguments_digest,omitempty"`
	ResultDigest    string          `json:"result_digest,omitempty"`
	Status          ExecutionStatus `json:"status"`
	ErrorCode       string          `json:"error_code,omitempty"`
	StartedAt       *time.Time      `json:"started_at,omitempty"`
	EndedAt         *time.Time      `json:"ended_at,omitempty"`
}
