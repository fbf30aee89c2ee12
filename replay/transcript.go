package replay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/transcript"
)

// checkTranscript sets the tool transcript head a rebuilt check record
// pins: the head of its run's or session's transcript at decision time,
// read back from the transcript's entries sealed before the record and
// recomputed (transcript.Head). A check that pinned none (its
// transcript was empty, it had no run or session, or it was sealed
// before issue 32) keeps the digest of its own tool_lineage, which
// record.Build computed.
func (rp *replaying) checkTranscript(ctx context.Context, pin *pinned, req *writ.CheckRequest, rec *writ.Record) error {
	recorded := rp.head.Replay.ToolTranscriptChainHash
	if recorded == rec.Replay.ToolTranscriptChainHash {
		return nil
	}
	run := engine.CheckTranscript(req, pin.red)
	if run == "" {
		return nil
	}
	st, seq := rp.r.store, rp.head.Audit.Seq
	// Mostly the latest entry before the record: a report committed
	// between the check's read and its commit sits between them.
	last, err := st.TranscriptHead(ctx, rp.head.TenantID, run, seq)
	if err != nil {
		return fmt.Errorf("read tool transcript %s of record %s: %w", run, rp.head.RecordID, err)
	}
	if last == nil {
		return nil
	}
	found, err := engine.EntryOf(&last.Record, run)
	if err != nil {
		rp.tamper("replay.tool_transcript_chain_hash", "transcript "+run, "%v", err)
		return nil
	}
	if found.Head != recorded {
		all, err := st.Transcript(ctx, rp.head.TenantID, run, seq)
		if err != nil {
			return fmt.Errorf("read tool transcript %s of record %s: %w", run, rp.head.RecordID, err)
		}
		for i := range all {
			if e, err := engine.EntryOf(&all[i].Record, run); err == nil && e.Head == recorded {
				found = e
				break
			}
		}
	}
	// The head is recomputed, not taken from the entry: an entry whose
	// bytes changed shows here as a changed transcript.
	h, err := transcript.Head(found)
	if err != nil {
		return err
	}
	rec.Replay.ToolTranscriptChainHash = h
	return nil
}

// transcriptPlace reads where an execution report's call went in its
// tool transcript: the transcript of the permit's check (from its stored
// envelope) and its latest entry before the report's record. It is nil
// for a report sealed before issue 32, which carries no entry; when the
// place cannot be read, the replay has said why and it is nil.
func (rp *replaying) transcriptPlace(ctx context.Context, pin *pinned, permit *writ.Record) (*engine.TranscriptPlace, error) {
	if rp.head.Execution.Transcript == nil {
		return nil, nil
	}
	raw, err := rp.r.store.Envelope(ctx, permit.TenantID, permit.Audit.Seq, permit.Replay.ReplayPacketID)
	if writ.ErrorCode(err) == writ.ENOTFOUND {
		rp.tamper("supersedes", "envelope "+permit.Replay.ReplayPacketID, "the request envelope of the permit the execution report closes is not stored")
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read the envelope of record %s: %w", permit.RecordID, err)
	}
	var req writ.CheckRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		rp.errorf("the permit's request envelope does not decode as a check request: %v", err)
		return nil, nil
	}
	place := engine.PlaceOf(&req, permit, pin.red)
	last, err := rp.r.store.TranscriptHead(ctx, rp.head.TenantID, place.Run, rp.head.Audit.Seq)
	if err != nil {
		return nil, fmt.Errorf("read tool transcript %s of record %s: %w", place.Run, rp.head.RecordID, err)
	}
	if last != nil {
		if place.Last, err = engine.EntryOf(&last.Record, place.Run); err != nil {
			rp.tamper("execution.transcript", "transcript "+place.Run, "%v", err)
			return nil, nil
		}
	}
	return &place, nil
}
