package ledger

import (
	"context"

	"github.com/writhq/writ"
)

// The evidence store is the chain itself. An evidence item is sealed as
// an evidence record (decision key EvidenceKeyPrefix + kind), and a
// revocation as an evidence revocation record (EvidenceRevocationKeyPrefix
// + kind). Each is indexed by the claims it makes in its append
// transaction, which its record binds (bound.claims) and `writ ledger
// verify` checks like every claim:
//
//   - an idempotency claim of EvidenceClaim(id) (a revocation:
//     EvidenceRevocationClaim(id)) with the item's content address as
//     its digest: a second item (revocation) of the same id is refused
//     in the transaction, whatever the race;
//   - a block of EvidenceBlockKey (EvidenceRevocationBlockKey) with the
//     content address as its digest and an empty pack hash, through
//     which a citation by content address is resolved.
//
// Client idempotency keys cannot begin with "writ:" (engine validation),
// and no spec's decision key can be one of these block keys, so neither
// index is shared with checks.
const (
	EvidenceKeyPrefix           = writ.EvidenceKeyPrefix
	EvidenceRevocationKeyPrefix = writ.EvidenceRevocationKeyPrefix
	EvidenceBlockKey            = "writ:evidence"
	EvidenceRevocationBlockKey  = "writ:evidence-revocation"
	evidenceClaimPrefix         = "writ:evidence:"
	evidenceRevocationPrefix    = "writ:evidence-revocation:"
)

// EvidenceClaim is the idempotency key an evidence item of id claims.
func EvidenceClaim(id string) string { return evidenceClaimPrefix + id }

// EvidenceRevocationClaim is the idempotency key the revocation of the
// item id claims.
func EvidenceRevocationClaim(id string) string { return evidenceRevocationPrefix + id }

// EvidenceReader reads evidence records in one query: every evidence
// record and evidence revocation record of the tenant whose item has one
// of ids or one of addresses (content addresses), in no particular
// order. The engine resolves all of a check's citations with one call, so
// a check pays one read for its evidence however many items it cites.
type EvidenceReader interface {
	EvidenceRecords(ctx context.Context, tenantID string, ids, addresses []string) ([]writ.StoredRecord, error)
}
