package verify

import (
	"errors"
	"fmt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/transcript"
)

// FindingTranscriptBroken: an execution report's tool transcript entry
// (execution.transcript, docs/ledger-format.md §2.11) that does not chain
// onto the entries of its transcript before it in the tenant's chain: its
// head does not recompute, its seq is not one more than the run's
// previous entry's (1 for the first), its prev is not that entry's head,
// the record's replay.tool_transcript_chain_hash is not its head, or its
// call names another permit than the record reports for.
const FindingTranscriptBroken = "transcript_broken"

// transcriptFact is the transcript entry a record carries, with what the
// record states beside it.
type transcriptFact struct {
	entry       *writ.TranscriptEntry
	chainHash   string // replay.tool_transcript_chain_hash
	reportedFor string // execution.reported_for
}

// checkTranscript walks the tool transcripts in chain order
// (transcript.Chains): every entry is checked against the entries of its
// run the records before it carry. A tenant's chain holds each transcript
// from its first entry (a bundle holds the whole chain from seq 1), so
// nothing is taken as given.
func (v *tenantVerifier) checkTranscript(c *checked) {
	tf := c.cite.transcript
	if tf == nil {
		return
	}
	e := tf.entry
	problem := func(format string, args ...any) {
		v.add(Finding{Seq: c.audit.Seq, RecordID: c.recordID, Kind: FindingTranscriptBroken,
			Detail: fmt.Sprintf("transcript %s entry %d: ", e.Run, e.Seq) + fmt.Sprintf(format, args...)})
	}
	if err := v.transcripts.Add(e); err != nil {
		var b *transcript.Break
		if errors.As(err, &b) {
			problem("%s", b.Reason)
		} else {
			problem("%v", err)
		}
	}
	if tf.chainHash != e.Head {
		problem("the record's replay.tool_transcript_chain_hash is %s, not the entry's head %s", tf.chainHash, e.Head)
	}
	if e.Call.Permit != tf.reportedFor {
		problem("the call's permit is %s, but the record reports for %s", e.Call.Permit, tf.reportedFor)
	}
}
