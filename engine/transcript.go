package engine

import (
	"context"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/transcript"
)

// maxTranscriptAttempts bounds how many times an execution report is
// built again after another report took its place in its transcript.
const maxTranscriptAttempts = 8

// transcriptPlace reads where the report of permit's call goes.
func (e *Engine) transcriptPlace(ctx context.Context, permit *writ.Record) (*transcript.Place, error) {
	req, err := e.checkRequestOf(ctx, permit)
	if err != nil {
		return nil, err
	}
	p := transcript.PlaceOf(req, permit, e.redactor)
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
	return transcript.EntryOf(&sr.Record, run)
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
	run := transcript.OfCheck(rq, e.redactor)
	if run == "" {
		return "", nil
	}
	last, err := e.transcriptHead(ctx, rq.TenantID, run, 0)
	if err != nil || last == nil {
		return "", err
	}
	return last.Head, nil
}
