package engine

import (
	"context"
	"fmt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/transcript"
)

// maxTranscriptAttempts bounds how many times an execution report is
// built again after another report took its place in its transcript.
const maxTranscriptAttempts = 8

// CheckTranscript returns the name of the tool transcript of a check's
// run or session (transcript.Name), or "" when it has neither: such a
// check pins no transcript. The names are redacted as the record's are.
func CheckTranscript(req *writ.CheckRequest, red *record.Redactor) string {
	var run, session string
	if w := req.Workflow; w != nil {
		run = red.String(w.RunID)
	}
	if ir := req.InputsRefs; ir != nil {
		session = red.String(ir.Session)
	}
	if run == "" && session == "" {
		return ""
	}
	return transcript.Name(run, session, "")
}

// TranscriptPlace is where an execution report's call goes: the
// transcript of its permit's check (its run, else its session, else its
// decision), the tool that check named, and the transcript's latest
// entry (nil for an empty transcript).
type TranscriptPlace struct {
	Run  string
	Tool string
	Last *writ.TranscriptEntry
}

// PlaceOf returns the transcript and tool of permit's check, whose
// stored request envelope is req; Last is left for the caller to read.
func PlaceOf(req *writ.CheckRequest, permit *writ.Record, red *record.Redactor) TranscriptPlace {
	run := CheckTranscript(req, red)
	if run == "" {
		run = transcript.Name("", "", permit.DecisionID)
	}
	return TranscriptPlace{Run: run, Tool: red.String(req.Tool)}
}

// transcriptPlace reads where the report of permit's call goes.
func (e *Engine) transcriptPlace(ctx context.Context, permit *writ.Record) (*TranscriptPlace, error) {
	req, err := e.checkRequestOf(ctx, permit)
	if err != nil {
		return nil, err
	}
	p := PlaceOf(req, permit, e.redactor)
	if p.Last, err = e.transcriptHead(ctx, permit.TenantID, p.Run, 0); err != nil {
		return nil, err
	}
	return &p, nil
}

// transcriptHead reads the latest entry of the tenant's transcript run
// (below chain seq before, when not 0), or nil.
func (e *Engine) transcriptHead(ctx context.Context, tenantID, run string, before int64) (*writ.TranscriptEntry, error) {
	sr, err := e.store.TranscriptHead(ctx, tenantID, run, before)
	if err != nil || sr == nil {
		return nil, err
	}
	return EntryOf(&sr.Record, run)
}

// EntryOf returns the transcript entry a stored record carries, checking
// it is one of run's.
func EntryOf(rec *writ.Record, run string) (*writ.TranscriptEntry, error) {
	if rec.Execution == nil || rec.Execution.Transcript == nil || rec.Execution.Transcript.Run != run {
		return nil, fmt.Errorf("record %s, indexed in tool transcript %q, carries no entry of it", rec.RecordID, run)
	}
	return rec.Execution.Transcript, nil
}

// AddTranscript appends the call an execution report's record rec
// reports (rq, closing permit) to its transcript at place: the record
// carries the entry (execution.transcript), and its
// replay.tool_transcript_chain_hash is the transcript's new head.
func AddTranscript(rec *writ.Record, rq *writ.ExecutionReport, permit *writ.Record, place *TranscriptPlace) error {
	x := rec.Execution
	call := writ.TranscriptCall{DecisionID: permit.DecisionID, Permit: permit.RecordID, Tool: place.Tool,
		ArgumentsDigest: permit.Replay.ArgumentsDigest, ResultDigest: rq.ResultDigest, Status: rq.Status,
		StartedAt: x.StartedAt, EndedAt: x.EndedAt}
	if n := len(rec.ToolLineage); n > 0 {
		call.ToolCallID = rec.ToolLineage[n-1].ToolCallID
	}
	if x.Error != nil {
		call.ErrorCode = x.Error.Code
	}
	entry, err := transcript.Next(place.Run, place.Last, call)
	if err != nil {
		return err
	}
	x.Transcript = entry
	rec.Replay.ToolTranscriptChainHash = entry.Head
	return nil
}

// claimTranscript claims the report's place in its transcript: a second
// entry at the same place is refused in the append transaction.
func claimTranscript(entry *ledger.Entry) {
	if x := entry.Record.Execution; x != nil && x.Transcript != nil {
		t := x.Transcript
		entry.Idempotency = &ledger.IdempotencyClaim{Key: ledger.TranscriptClaim(t.Run, t.Seq), ArgsDigest: t.Head}
	}
}

// checkTranscriptHead is the head of the transcript of a check's run or
// session at decision time, which its record pins: "" when the check
// has neither, or its transcript no entry yet.
func (e *Engine) checkTranscriptHead(ctx context.Context, rq *writ.CheckRequest) (string, error) {
	run := CheckTranscript(rq, e.redactor)
	if run == "" {
		return "", nil
	}
	last, err := e.transcriptHead(ctx, rq.TenantID, run, 0)
	if err != nil || last == nil {
		return "", err
	}
	return last.Head, nil
}
