package verify

import (
	"fmt"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// FindingEvidenceRevocationMismatch: an evidence revocation record whose
// superseded record is not an evidence record earlier in its tenant's
// chain, or is one of another kind or tenant, another decision, or
// another item (id or content address) than the revocation names
// (docs/ledger-format.md §2.10, §7.5).
const FindingEvidenceRevocationMismatch = "evidence_revocation_mismatch"

// evidenceFact is what an evidence record seals, as a revocation names it.
type evidenceFact struct {
	tenant, kind, id, contentAddress, decisionID string
	jws, signedBy                                string // a signed item's JWS and key id
	seq                                          int64
}

// revocationFact is what an evidence revocation record states of the
// item it revokes.
type revocationFact struct {
	kind, revokes, contentAddress, supersedes, decisionID string
}

// evidenceOf reads an evidence record's item, or what an evidence
// revocation record names; nil for other records.
func evidenceOf(rec *writ.Record) (*evidenceFact, *revocationFact) {
	ca, _ := rec.Outputs["content_address"].(string)
	if kind, ok := strings.CutPrefix(rec.DecisionKey, ledger.EvidenceRevocationKeyPrefix); ok {
		id, _ := rec.Outputs["revokes"].(string)
		return nil, &revocationFact{kind: kind, revokes: id, contentAddress: ca, supersedes: rec.Supersedes, decisionID: rec.DecisionID}
	}
	if kind, ok := strings.CutPrefix(rec.DecisionKey, ledger.EvidenceKeyPrefix); ok {
		item, _ := rec.Outputs["item"].(map[string]any)
		id, _ := item["id"].(string)
		tok, _ := rec.Outputs["jws"].(string)
		kid, _ := rec.Outputs["signed_by"].(string)
		return &evidenceFact{tenant: rec.TenantID, kind: kind, id: id, contentAddress: ca, decisionID: rec.DecisionID, jws: tok, signedBy: kid}, nil
	}
	return nil, nil
}

// checkEvidenceRevocation notes the evidence records of the chain and
// checks, in chain order, that each revocation supersedes an earlier one
// of the same tenant and kind and names its item: its id, its content
// address and its decision. A tenant's chain (a store's, or a bundle's:
// a bundle holds each tenant's whole chain) holds every record a
// revocation can supersede, so a superseded record not found is a
// finding, never taken as given.
func (v *tenantVerifier) checkEvidenceRevocation(c *checked) {
	if ev := c.cite.evidence; ev != nil {
		if v.evidence == nil {
			v.evidence = map[string]*evidenceFact{}
		}
		if _, dup := v.evidence[c.recordID]; !dup && c.recordID != "" {
			ev.seq = c.audit.Seq
			v.evidence[c.recordID] = ev
		}
		return
	}
	r := c.cite.revocation
	if r == nil {
		return
	}
	problem := func(format string, args ...any) {
		v.add(Finding{Seq: c.audit.Seq, RecordID: c.recordID, Kind: FindingEvidenceRevocationMismatch,
			Detail: fmt.Sprintf("the revocation of %s item %s supersedes record %s: ", r.kind, r.revokes, r.supersedes) + fmt.Sprintf(format, args...)})
	}
	ev, ok := v.evidence[r.supersedes]
	if !ok {
		problem("it is not an evidence record earlier in the tenant's chain")
		return
	}
	switch {
	case ev.tenant != v.tenant:
		problem("an evidence record of tenant %s", ev.tenant)
	case ev.kind != r.kind:
		problem("an evidence record of kind %s", ev.kind)
	case ev.id != r.revokes:
		problem("the evidence record (seq %d) seals item %s", ev.seq, ev.id)
	case ev.contentAddress != r.contentAddress:
		problem("the evidence record (seq %d) seals content address %s; the revocation names %s", ev.seq, ev.contentAddress, r.contentAddress)
	case ev.decisionID != r.decisionID:
		problem("the evidence record (seq %d) is decision %s; the revocation is of decision %s", ev.seq, ev.decisionID, r.decisionID)
	}
}
