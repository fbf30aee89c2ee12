package ledger

import (
	"encoding/json"
	"fmt"
)

// The rows a store yields of what it keeps beside the records, for
// verification (ledger/verify) to check against the digests the sealed
// records bind.

// StoredReceipt is a record as sealed with the receipt and the request
// envelope stored beside it. EnvelopeHash is the content address stored
// with the envelope; both are empty when the record has no envelope of its
// own (Entry.Envelope), as records appended before envelopes were kept
// with their records do not.
type StoredReceipt struct {
	Seq          int64
	Record       json.RawMessage
	Receipt      []byte
	EnvelopeHash string
	Envelope     []byte
}

// ClaimRow is an index row through which a record's answer is found
// again: an idempotency key's claim, the block of an action, or the
// claim of a decision's execution report. One of Idempotency, Block and
// Report is set, by Kind.
type ClaimRow struct {
	Kind        string
	RecordID    string
	Idempotency *IdempotencyClaim
	Block       *BlockKey
	Report      *ReportClaim
}

// NewClaimRow is the row of a kind from its columns in the order
// ScanClaims reads them: an idempotency row's key and args_digest, a
// block's decision_key, args_digest and pack_hash, a report claim's
// decision_id and report_digest (unused columns empty).
func NewClaimRow(kind, a, b, c, recordID string) ClaimRow {
	row := ClaimRow{Kind: kind, RecordID: recordID}
	switch kind {
	case ClaimIdempotency:
		row.Idempotency = &IdempotencyClaim{Key: a, ArgsDigest: b}
	case ClaimBlock:
		row.Block = &BlockKey{DecisionKey: a, ArgsDigest: b, PackHash: c}
	case ClaimReport:
		row.Report = &ReportClaim{DecisionID: a, ReportDigest: b}
	}
	return row
}

// Digest is the digest of the row as a record binds it (bound.claims).
func (c *ClaimRow) Digest(tenantID string) (string, error) {
	switch c.Kind {
	case ClaimIdempotency:
		return IdempotencyDigest(tenantID, c.Idempotency)
	case ClaimBlock:
		return BlockDigest(tenantID, c.Block)
	case ClaimReport:
		return ReportDigest(tenantID, c.Report)
	}
	return "", fmt.Errorf("unknown claim kind %q", c.Kind)
}

// ApprovalIndex is what a store keeps of an approval request in columns
// of its own, beside the request's document: what lookups and the
// redemption guard read (OpenApproval finds a request by gate, binding
// digest and expiry; a redemption is refused beyond the allowance). Each
// column must equal what the bound document says; VerifyStored compares
// them.
type ApprovalIndex struct {
	ApprovalID    string
	GateID        string
	DecisionKey   string
	BindingDigest string
	Allowance     int
	RecordID      string
	CreatedNS     int64
	ExpiresNS     int64
}
