package verify

import (
	"fmt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// Finding kinds of signed evidence items (docs/ledger-format.md §2.10).
const (
	// FindingBadEvidenceSignature: a signed evidence item whose JWS does
	// not verify under the issuer keys given to verification
	// (VerifyOptions.EvidenceIssuers): an unknown key, a bad signature, a
	// payload that is not the item, or a key that is not the record's
	// signed_by.
	FindingBadEvidenceSignature = "bad_evidence_signature"
	// FindingUncheckedEvidenceSignatures: a notice that a tenant's signed
	// evidence items' signatures were not checked, as no issuer keys were
	// given (their payload and kid still are, by the evidence rule).
	FindingUncheckedEvidenceSignatures = "unchecked_evidence_signatures"
)

// EvidenceSignatures verifies the compact JWS of a signed evidence item
// of a tenant against the issuer keys the tenant registered, returning
// the item and the key id (delegation.EvidenceIssuers, read from the
// file `writ serve --evidence-issuers` reads).
type EvidenceSignatures interface {
	Verify(tenantID, token string) (*writ.EvidenceItem, string, error)
}

// checkEvidenceSignature verifies a signed item's JWS with the issuer
// keys, when verification was given them, and reports whether it did.
func (v *tenantVerifier) checkEvidenceSignature(c *checked, problem func(kind, format string, args ...any)) (checked bool) {
	ev := c.cite.evidence
	if ev == nil || ev.jws == "" || v.opts.EvidenceIssuers == nil {
		return false
	}
	item, kid, err := v.opts.EvidenceIssuers.Verify(v.tenant, ev.jws)
	if err != nil {
		problem(FindingBadEvidenceSignature, "the JWS of %s item %s: %s", ev.kind, ev.id, writ.ErrorMessage(err))
		return true
	}
	if kid != ev.signedBy {
		problem(FindingBadEvidenceSignature, "the JWS of %s item %s verifies under key %s, but the record says it was signed by %s", ev.kind, ev.id, kid, ev.signedBy)
	}
	if ca, err := record.CanonicalDigest(item); err != nil || ca != ev.contentAddress {
		problem(FindingBadEvidenceSignature, "the JWS of %s item %s signs an item whose content address is %s, not the record's %s", ev.kind, ev.id, ca, ev.contentAddress)
	}
	return true
}

// uncheckedSignatures is the notice of a tenant whose n signed items'
// signatures were not checked.
func uncheckedSignatures(tenant string, n int64) Finding {
	return Finding{TenantID: tenant, Kind: FindingUncheckedEvidenceSignatures,
		Detail: fmt.Sprintf("the signatures of %d signed evidence items were not checked: no issuer keys were given (--evidence-issuers); their payloads and kids were", n)}
}
