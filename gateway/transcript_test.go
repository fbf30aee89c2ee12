package gateway_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/transcript"
)

// TestToolTranscript: each call the gateway forwards is appended to its
// MCP session's tool transcript (the execution report's record carries
// the entry), the chain links call to call, the next check pins the
// head, and every record replays equal from the recorded transcript.
func TestToolTranscript(t *testing.T) {
	f := newFixture(t, packDir(), &files{}, "")
	cs := f.client(t, protocols[1])
	ctx := context.Background()
	const calls = 3
	for i := range calls {
		call(t, cs, "fs.write_file", map[string]any{"path": "/allowed/t.txt", "content": string(rune('a' + i))})
		// The report is committed in the background, with the next check
		// when it comes soon enough: wait for it, so the next check sees
		// it (docs/mcp.md, "Tool transcripts").
		flushGateways()
	}
	ids := decisionsOf(t, f.eng, "files.write")
	if len(ids) != calls {
		t.Fatalf("decisions of files.write = %v, want %d", ids, calls)
	}
	var (
		last   *writ.TranscriptEntry
		chains transcript.Chains
		all    []string
	)
	for i, id := range ids {
		_, st := story(t, f.eng, id)
		if len(st.Records) != 2 {
			t.Fatalf("story of %s has %d records, want the check and its report", id, len(st.Records))
		}
		var check, report writ.Record
		if err := json.Unmarshal(st.Records[0].Record, &check); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(st.Records[1].Record, &report); err != nil {
			t.Fatal(err)
		}
		all = append(all, check.RecordID, report.RecordID)
		if last != nil && check.Replay.ToolTranscriptChainHash != last.Head {
			t.Errorf("check %d pins tool_transcript_chain_hash %s, want the head of its session's transcript %s", i+1, check.Replay.ToolTranscriptChainHash, last.Head)
		}
		if report.Execution == nil || report.Execution.Transcript == nil {
			t.Fatalf("report %d carries no transcript entry", i+1)
		}
		e := report.Execution.Transcript
		if e.Seq != int64(i+1) || e.Call.Tool != "fs.write_file" || e.Call.Permit != check.RecordID || e.Call.Status != writ.ExecutionSucceeded ||
			e.Call.ArgumentsDigest != check.Replay.ArgumentsDigest || e.Call.ResultDigest == "" || e.Call.StartedAt == nil {
			t.Errorf("report %d's entry = %+v, want seq %d of fs.write_file, permitted by %s, succeeded, with its digests and times", i+1, e, i+1, check.RecordID)
		}
		if last != nil && (e.Run != last.Run || e.Prev != last.Head) {
			t.Errorf("report %d's entry is of %s after %s, want of %s after %s", i+1, e.Run, e.Prev, last.Run, last.Head)
		}
		if report.Replay.ToolTranscriptChainHash != e.Head {
			t.Errorf("report %d's tool_transcript_chain_hash = %s, want its entry's head %s", i+1, report.Replay.ToolTranscriptChainHash, e.Head)
		}
		if err := chains.Add(e); err != nil {
			t.Errorf("the transcript does not chain: %v", err)
		}
		last = e
	}
	got, err := f.store.Transcript(ctx, tenant, last.Run, 0)
	if err != nil || len(got) != calls {
		t.Fatalf("Transcript(%s) = %d records, %v; want %d", last.Run, len(got), err, calls)
	}
	rp := replay.New(f.store, replay.Options{})
	for _, id := range all {
		res, err := rp.Replay(ctx, tenant, id)
		if err != nil || res.Status != replay.StatusEqual {
			t.Errorf("Replay(%s) = %+v, %v; want replay_equal", id, res, err)
		}
	}
	verifyLedger(t, f)
}
