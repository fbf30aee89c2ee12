package replay

import (
	"bytes"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/writhq/writ"
)

// recordHead is what replay reads of a stored record before it rebuilds
// it: the ids, the clock and the addresses of its pinned inputs.
type recordHead struct {
	RecordID    string    `json:"record_id"`
	DecisionID  string    `json:"decision_id"`
	TenantID    string    `json:"tenant_id"`
	DecisionKey string    `json:"decision_key"`
	Supersedes  string    `json:"supersedes"`
	Timestamp   time.Time `json:"timestamp"`
	Lineage     struct {
		PackHash string `json:"pack_hash"`
	} `json:"lineage"`
	Replay struct {
		ReplayPacketID          string `json:"replay_packet_id"`
		ToolTranscriptChainHash string `json:"tool_transcript_chain_hash"`
	} `json:"replay"`
	// Execution.Transcript is an execution report's entry in its tool
	// transcript (sealed since issue 32).
	Execution struct {
		Transcript *writ.TranscriptEntry `json:"transcript"`
	} `json:"execution"`
	// Audit.Seq is the record's place in its chain, where its envelope
	// is stored.
	Audit struct {
		Seq int64 `json:"seq"`
	} `json:"audit"`
	History []writ.HistoryValue `json:"history"`
	Params  *writ.ParamsPin     `json:"params"`
	// Outputs.ClaimedCalls is set on a step verdict decided under issue
	// 31's defaults (tool calls observed by default, the seed's mutating
	// classes mutating); without it the verdict is rebuilt leniently.
	// Outputs.Replaces is the change a parameter change replaced.
	Outputs struct {
		ClaimedCalls jsontext.Value `json:"claimed_calls"`
		Replaces     string         `json:"replaces"`
	} `json:"outputs"`
	// Bound is carried over to the rebuilt record: it pins what the store
	// keeps beside the record, not the decision.
	Bound *writ.Bound `json:"bound"`
}

// decodeHead reads the head of a stored record; other members are
// skipped.
func decodeHead(raw []byte) (recordHead, error) {
	var h recordHead
	if err := jsonv2.Unmarshal(raw, &h); err != nil {
		return h, err
	}
	if h.RecordID == "" || h.TenantID == "" || h.DecisionKey == "" || h.Timestamp.IsZero() {
		return h, fmt.Errorf("record_id, tenant_id, decision_key and timestamp are required")
	}
	return h, nil
}

// decodeEnvelope decodes a stored request envelope into v (a pointer to
// a request struct) as strictly as the HTTP API decodes a request body:
// one JSON object, no unknown or duplicate members, names matched
// exactly, every value of the right type. Replay decides on what this
// returns, so it must read an envelope as the server read the request.
func decodeEnvelope(data []byte, v any) error {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("the envelope is not a JSON object")
	}
	return jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true))
}
