// Package transcript computes and checks tool transcripts: the
// per-run, hash-chained lists of the tool calls the gateway and other
// clients report (writ.TranscriptEntry; docs/ledger-format.md, "Tool
// transcripts").
//
// It is pure: it reads no store and keeps no clock. The engine asks it
// for the next entry of a run given the run's latest one; `writ ledger
// verify`, `writ verify-bundle` and replay ask it to check entries read
// back from a chain. It must never accept an entry whose head it did not
// recompute.
package transcript

import (
	"fmt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// Prefixes of a transcript's name (writ.TranscriptEntry.Run).
const (
	RunPrefix      = "run:"
	SessionPrefix  = "session:"
	DecisionPrefix = "decision:"
)

// Name returns the name of the transcript a call belongs to: its
// workflow run when it has one, else its session, else its decision.
func Name(runID, session, decisionID string) string {
	switch {
	case runID != "":
		return RunPrefix + runID
	case session != "":
		return SessionPrefix + session
	}
	return DecisionPrefix + decisionID
}

// headView is what a head digests: the entry without its head.
type headView struct {
	Run  string              `json:"run"`
	Seq  int64               `json:"seq"`
	Prev string              `json:"prev"`
	Call writ.TranscriptCall `json:"call"`
}

// Head computes the head of a transcript with entry e last: "sha256:"
// and the hex SHA-256 of the RFC 8785 form of e's run, seq, prev and
// call (everything but its head). Times are UTC.
func Head(e *writ.TranscriptEntry) (string, error) {
	c := e.Call
	if c.StartedAt != nil {
		t := c.StartedAt.UTC()
		c.StartedAt = &t
	}
	if c.EndedAt != nil {
		t := c.EndedAt.UTC()
		c.EndedAt = &t
	}
	return record.CanonicalDigest(headView{Run: e.Run, Seq: e.Seq, Prev: e.Prev, Call: c})
}

// Next returns the entry that appends call to the transcript run, whose
// latest entry is last (nil for an empty transcript): seq one more, prev
// last's head, and its own head computed.
func Next(run string, last *writ.TranscriptEntry, call writ.TranscriptCall) (*writ.TranscriptEntry, error) {
	if run == "" {
		return nil, fmt.Errorf("transcript: an entry needs a transcript name")
	}
	e := &writ.TranscriptEntry{Run: run, Seq: 1, Call: call}
	if last != nil {
		if last.Run != run {
			return nil, fmt.Errorf("transcript: the latest entry read for %q is of %q", run, last.Run)
		}
		e.Seq, e.Prev = last.Seq+1, last.Head
	}
	if c := &e.Call; c.StartedAt != nil {
		t := c.StartedAt.UTC()
		c.StartedAt = &t
	}
	if c := &e.Call; c.EndedAt != nil {
		t := c.EndedAt.UTC()
		c.EndedAt = &t
	}
	h, err := Head(e)
	if err != nil {
		return nil, err
	}
	e.Head = h
	return e, nil
}

// Break is a transcript entry that does not chain: its Reason says how.
type Break struct {
	Run    string
	Seq    int64
	Reason string
}

func (b *Break) Error() string {
	return fmt.Sprintf("transcript %s entry %d: %s", b.Run, b.Seq, b.Reason)
}

// Chains checks the transcripts of one tenant's chain, entry by entry in
// chain order (the order they were appended in: an entry is built from
// the committed entry before it). The zero Chains is ready to use.
type Chains struct {
	last map[string]*writ.TranscriptEntry
	// hashed is, for a run whose latest entry's head did not recompute,
	// the head its members hash to: the entry after it may chain on from
	// either (a changed call keeps the old head's successor; a forged
	// head the true one's).
	hashed map[string]string
}

// Add checks e against the entries added before it: its head recomputed,
// its seq one more than its run's latest (1 for a new run), its prev that
// entry's head ("" for the first). A broken entry is returned as a
// *Break and still kept as its run's latest: the run's next entry is
// checked against it (its prev may then be the head the broken entry
// states or the one it hashes to), so one break (a changed call, a forged
// head, a dropped or repeated entry) is reported once, not again at every
// entry after it.
func (c *Chains) Add(e *writ.TranscriptEntry) error {
	if c.last == nil {
		c.last, c.hashed = map[string]*writ.TranscriptEntry{}, map[string]string{}
	}
	if e.Run == "" {
		return &Break{Seq: e.Seq, Reason: "the entry names no transcript"}
	}
	l, lHashed := c.last[e.Run], c.hashed[e.Run]
	c.last[e.Run] = e
	delete(c.hashed, e.Run)
	h, err := Head(e)
	if err != nil {
		return &Break{Run: e.Run, Seq: e.Seq, Reason: err.Error()}
	}
	if h != e.Head {
		c.hashed[e.Run] = h
		return &Break{Run: e.Run, Seq: e.Seq, Reason: fmt.Sprintf("its head is %s, but its run, seq, prev and call hash to %s", e.Head, h)}
	}
	var wantSeq int64 = 1
	wantPrev := ""
	if l != nil {
		wantSeq, wantPrev = l.Seq+1, l.Head
	}
	if e.Seq != wantSeq {
		return &Break{Run: e.Run, Seq: e.Seq, Reason: fmt.Sprintf("seq %d follows seq %d; seqs are contiguous from 1", e.Seq, wantSeq-1)}
	}
	if e.Prev != wantPrev && (lHashed == "" || e.Prev != lHashed) {
		return &Break{Run: e.Run, Seq: e.Seq, Reason: fmt.Sprintf("its prev is %q, but the head before it is %q", e.Prev, wantPrev)}
	}
	return nil
}

// Head returns the latest head of run among the entries added, or "".
func (c *Chains) Head(run string) string {
	if l := c.last[run]; l != nil {
		return l.Head
	}
	return ""
}

// OfCheck returns the name of the tool transcript of a check's
// run or session (transcript.Name), or "" when it has neither: such a
// check pins no transcript. The names are redacted as the record's are.
func OfCheck(req *writ.CheckRequest, red *record.Redactor) string {
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
	return Name(run, session, "")
}

// Place is where an execution report's call goes: the
// transcript of its permit's check (its run, else its session, else its
// decision), the tool that check named, and the transcript's latest
// entry (nil for an empty transcript).
type Place struct {
	Run  string
	Tool string
	Last *writ.TranscriptEntry
}

// PlaceOf returns the transcript and tool of permit's check, whose
// stored request envelope is req; Last is left for the caller to read.
func PlaceOf(req *writ.CheckRequest, permit *writ.Record, red *record.Redactor) Place {
	run := OfCheck(req, red)
	if run == "" {
		run = Name("", "", permit.DecisionID)
	}
	return Place{Run: run, Tool: red.String(req.Tool)}
}

// EntryOf returns the transcript entry a stored record carries, checking
// it is one of run's.
func EntryOf(rec *writ.Record, run string) (*writ.TranscriptEntry, error) {
	if rec.Execution == nil || rec.Execution.Transcript == nil || rec.Execution.Transcript.Run != run {
		return nil, fmt.Errorf("record %s, indexed in tool transcript %q, carries no entry of it", rec.RecordID, run)
	}
	return rec.Execution.Transcript, nil
}

// Add appends the call an execution report's record rec
// reports (rq, closing permit) to its transcript at place: the record
// carries the entry (execution.transcript), and its
// replay.tool_transcript_chain_hash is the transcript's new head.
func Add(rec *writ.Record, rq *writ.ExecutionReport, permit *writ.Record, place *Place) error {
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
	entry, err := Next(place.Run, place.Last, call)
	if err != nil {
		return err
	}
	x.Transcript = entry
	rec.Replay.ToolTranscriptChainHash = entry.Head
	return nil
}
