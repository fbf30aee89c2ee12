package ledger

import (
	"context"
	"strconv"

	"github.com/writhq/writ"
)

// The tool transcript store is the chain itself (issue 32). An execution
// report's record carries its call's transcript entry
// (writ.Execution.Transcript) and is indexed by it in its append
// transaction:
//
//   - record_terms under sqlkit.TermTranscript with the transcript's name, so a
//     transcript is read in chain order through that index
//     (TranscriptReader);
//   - an idempotency claim of TranscriptClaim(run, seq) with the entry's
//     head as its digest, which its record binds (bound.claims): a
//     second entry at the same place of the same transcript (a
//     concurrent or retried report) is refused in the transaction, so a
//     transcript cannot fork. The engine then reads the new head and
//     appends after it.
//
// Client idempotency keys cannot begin with "writ:" (engine validation),
// so the claims are never shared with checks.
const transcriptClaimPrefix = "writ:transcript:"

// TranscriptClaim is the idempotency key entry seq of transcript run
// claims.
func TranscriptClaim(run string, seq int64) string {
	return transcriptClaimPrefix + run + ":" + strconv.FormatInt(seq, 10)
}

// TranscriptReader reads tool transcripts: the records whose execution
// block carries an entry of the tenant's transcript run.
type TranscriptReader interface {
	// Transcript returns the records of the entries of run with chain
	// seq below before (every entry when before is 0), in chain order,
	// which is seq order. A transcript with no entries is none, not an
	// error.
	Transcript(ctx context.Context, tenantID, run string, before int64) ([]writ.StoredRecord, error)
	// TranscriptHead returns the record of run's latest entry with chain
	// seq below before (the latest of all when before is 0), or nil: one
	// indexed read, for a check that pins its run's head.
	TranscriptHead(ctx context.Context, tenantID, run string, before int64) (*writ.StoredRecord, error)
}
