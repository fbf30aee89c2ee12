package ledgertest

import (
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/transcript"
)

// transcriptEntry returns an entry of rec's tenant that appends a call
// to transcript run after last, claiming its place as the engine does.
func transcriptEntry(t *testing.T, rec *writ.Record, run string, last *writ.TranscriptEntry) *ledger.Entry {
	t.Helper()
	te, err := transcript.Next(run, last, writ.TranscriptCall{ToolCallID: "call_" + rec.RecordID, DecisionID: rec.DecisionID, Permit: rec.RecordID, Status: writ.ExecutionSucceeded})
	if err != nil {
		t.Fatalf("transcript.Next(%s) = %v", run, err)
	}
	rec.Execution = &writ.Execution{Status: writ.ExecutionSucceeded, Transcript: te}
	rec.Replay.ToolTranscriptChainHash = te.Head
	e := NewEntry(rec)
	e.Idempotency = &ledger.IdempotencyClaim{Key: ledger.TranscriptClaim(run, te.Seq), ArgsDigest: te.Head}
	return e
}

func transcriptOf(e *ledger.Entry) *writ.TranscriptEntry { return e.Record.Execution.Transcript }

func wantTranscript(t *testing.T, st ledger.Store, tenant, run string, before int64, want ...*ledger.Entry) {
	t.Helper()
	got, err := st.Transcript(t.Context(), tenant, run, before)
	if err != nil {
		t.Fatalf("Transcript(%s, %s, %d) = %v", tenant, run, before, err)
	}
	var gotIDs, wantIDs []string
	for _, sr := range got {
		gotIDs = append(gotIDs, sr.Record.RecordID)
	}
	for _, e := range want {
		wantIDs = append(wantIDs, e.Record.RecordID)
	}
	if len(gotIDs) != len(wantIDs) {
		t.Errorf("Transcript(%s, %s, %d) = %v, want %v", tenant, run, before, gotIDs, wantIDs)
		return
	}
	for i := range gotIDs {
		if gotIDs[i] != wantIDs[i] {
			t.Errorf("Transcript(%s, %s, %d) = %v, want %v", tenant, run, before, gotIDs, wantIDs)
			return
		}
	}
}

func wantTranscriptHead(t *testing.T, st ledger.Store, tenant, run string, before int64, want *ledger.Entry) {
	t.Helper()
	got, err := st.TranscriptHead(t.Context(), tenant, run, before)
	if err != nil {
		t.Fatalf("TranscriptHead(%s, %s, %d) = %v", tenant, run, before, err)
	}
	switch {
	case want == nil && got != nil:
		t.Errorf("TranscriptHead(%s, %s, %d) = record %s, want none", tenant, run, before, got.Record.RecordID)
	case want != nil && got == nil:
		t.Errorf("TranscriptHead(%s, %s, %d) = none, want record %s", tenant, run, before, want.Record.RecordID)
	case want != nil && got.Record.RecordID != want.Record.RecordID:
		t.Errorf("TranscriptHead(%s, %s, %d) = record %s, want %s", tenant, run, before, got.Record.RecordID, want.Record.RecordID)
	case want != nil && *got.Record.Execution.Transcript != *transcriptOf(want):
		t.Errorf("TranscriptHead(%s, %s, %d) = entry %+v, want %+v", tenant, run, before, got.Record.Execution.Transcript, transcriptOf(want))
	}
}

// testTranscripts: a run's transcript is read back in chain order from
// the records that carry its entries, scoped by tenant and by exact
// name, and a second entry at the same place is refused.
func testTranscripts(t *testing.T, st ledger.Store) {
	const run, near = "session:mcp:s1", "session:mcp:s1:x"
	first := transcriptEntry(t, NewRecord("acme", 1), run, nil)
	mustAppend(t, st, first)
	other := transcriptEntry(t, NewRecord("acme", 2), near, nil)
	second := transcriptEntry(t, NewRecord("acme", 3), run, transcriptOf(first))
	foreign := transcriptEntry(t, NewRecord("globex", 1), run, nil)
	mustAppend(t, st, other, second, foreign)
	plain := NewEntry(NewRecord("acme", 4))
	mustAppend(t, st, plain)

	wantTranscript(t, st, "acme", run, 0, first, second)
	wantTranscript(t, st, "acme", near, 0, other)
	wantTranscript(t, st, "globex", run, 0, foreign)
	wantTranscript(t, st, "acme", "session:mcp:none", 0)
	wantTranscriptHead(t, st, "acme", run, 0, second)
	wantTranscriptHead(t, st, "acme", "session:mcp:none", 0, nil)

	// Before a chain position: the transcript as it stood there.
	sec, err := st.Record(t.Context(), "acme", second.Record.RecordID)
	if err != nil {
		t.Fatalf("Record(acme, %s) = %v", second.Record.RecordID, err)
	}
	wantTranscript(t, st, "acme", run, sec.Record.Audit.Seq, first)
	wantTranscriptHead(t, st, "acme", run, sec.Record.Audit.Seq, first)
	wantTranscriptHead(t, st, "acme", run, 1, nil)

	// Two reports built on the same head: the second is refused by the
	// claim of its place, in another transaction or in the same batch.
	fork := transcriptEntry(t, NewRecord("acme", 5), run, transcriptOf(first))
	mustAppend(t, st, fork)
	if fork.Prior == nil || fork.Prior.RecordID != second.Record.RecordID || fork.Raw != nil {
		t.Errorf("Append(a second entry 2 of %s): Prior = %s, appended %v; want the first claim's, not appended", run, fmtPrior(fork.Prior), fork.Raw != nil)
	}
	a := transcriptEntry(t, NewRecord("acme", 6), run, transcriptOf(second))
	b := transcriptEntry(t, NewRecord("acme", 7), run, transcriptOf(second))
	mustAppend(t, st, a, b)
	if a.Raw == nil || b.Prior == nil || b.Prior.RecordID != a.Record.RecordID {
		t.Errorf("Append(two entries 3 of %s in one batch): first appended %v, second's Prior = %s; want the first appended and the second refused", run, a.Raw != nil, fmtPrior(b.Prior))
	}
	wantTranscript(t, st, "acme", run, 0, first, second, a)
	wantNoFindings(t, st, 6)
}
