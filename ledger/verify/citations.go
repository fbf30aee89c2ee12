package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// Finding kinds of what records cite (docs/ledger-format.md §7.5).
const (
	// FindingApprovalNotGranted: a record allowed with an approval that
	// no earlier approval record of its tenant grants as it states it
	// (gate, approver, decision time, evidence snapshot).
	FindingApprovalNotGranted = "approval_not_granted"
	// FindingRevocationsDropped: a checkpoint commits to fewer API key
	// revocations than a smaller one, or to other ones as many: the
	// revocations before a size only grow with it (§5.1), so a later
	// checkpoint re-signed without an earlier one's line is a finding.
	FindingRevocationsDropped = "revocations_dropped"
)

// citation is what one record states about other records of its chain:
// the approval an approval record grants, or those a check was allowed
// with; the evidence item an evidence record seals, or the one a
// revocation revokes; the tool transcript entry an execution report
// appends.
type citation struct {
	grant     *writ.Approval
	cites     []writ.Approval
	timestamp time.Time

	evidence   *evidenceFact
	revocation *revocationFact
	transcript *transcriptFact
}

// citationOf reads a decoded record's approvals, evidence and
// transcript entry.
func citationOf(rec *writ.Record) citation {
	c := citation{timestamp: rec.Timestamp}
	c.evidence, c.revocation = evidenceOf(rec)
	if x := rec.Execution; x != nil && x.Transcript != nil {
		c.transcript = &transcriptFact{entry: x.Transcript, chainHash: rec.Replay.ToolTranscriptChainHash, reportedFor: x.ReportedFor}
	}
	if strings.HasPrefix(rec.DecisionKey, "approval:") {
		if rec.Status == writ.StatusDecided && len(rec.Approvals) == 1 {
			c.grant = &rec.Approvals[0]
		}
		return c
	}
	c.cites = rec.Approvals
	return c
}

// citationOfRaw reads what a record not decoded otherwise cites; a record
// naming no gate, no transcript and not an evidence record has nothing
// to read. (Records are canonical JSON: the members' bytes are these.)
func citationOfRaw(raw []byte) citation {
	if !bytes.Contains(raw, []byte(`"gate_id"`)) && !bytes.Contains(raw, []byte(`"transcript":`)) &&
		!bytes.Contains(raw, []byte(`"decision_key":"evidence`)) {
		return citation{}
	}
	var rec writ.Record
	if json.Unmarshal(raw, &rec) != nil {
		return citation{} // malformed is reported by the seal checks
	}
	return citationOf(&rec)
}

// grantKey names one granted approval: its gate, approver and decision
// time, which the record allowed with it repeats.
type grantKey struct {
	gate, approver string
	at             int64 // Unix nanoseconds
}

func keyOf(a *writ.Approval) grantKey {
	return grantKey{a.GateID, a.Approver, a.DecidedAt.UnixNano()}
}

// grant is an approval that an approval record of the chain granted.
type grant struct {
	seq      int64
	evidence string
}

// checkCitations checks, in chain order, that each approval a record
// cites was granted by an earlier approval record of the same tenant,
// before the record's time, bound to the same evidence snapshot; and
// notes the approvals that approval records grant.
func (v *tenantVerifier) checkCitations(c *checked) {
	ct := c.cite
	if ct.grant != nil {
		if v.grants == nil {
			v.grants = map[grantKey]grant{}
		}
		k := keyOf(ct.grant)
		if _, dup := v.grants[k]; !dup {
			v.grants[k] = grant{seq: c.audit.Seq, evidence: ct.grant.EvidenceSnapshotHash}
		}
		return
	}
	for i := range ct.cites {
		a := &ct.cites[i]
		g, ok := v.grants[keyOf(a)]
		detail := ""
		switch {
		case !ok:
			detail = "no earlier approval record of the tenant grants it"
		case a.DecidedAt.After(ct.timestamp):
			detail = fmt.Sprintf("it was decided at %s, after the record's time", a.DecidedAt.UTC().Format(time.RFC3339Nano))
		case g.evidence != a.EvidenceSnapshotHash:
			detail = fmt.Sprintf("the approval record (seq %d) is bound to the evidence snapshot %s, not %s", g.seq, g.evidence, a.EvidenceSnapshotHash)
		default:
			continue
		}
		v.add(Finding{Seq: c.audit.Seq, RecordID: c.recordID, Kind: FindingApprovalNotGranted,
			Detail: fmt.Sprintf("the record cites the approval of gate %s by %s at %s: %s",
				a.GateID, a.Approver, a.DecidedAt.UTC().Format(time.RFC3339Nano), detail)})
	}
}

// checkRevocationGrowth checks that the revocations line of a tenant's
// valid checkpoints only grows with their size: a larger checkpoint
// commits to at least as many revocations as a smaller one, and to the
// same ones when as many.
func checkRevocationGrowth(tenant string, valid []validCheckpoint) []Finding {
	cps := slices.Clone(valid)
	slices.SortStableFunc(cps, func(a, b validCheckpoint) int { return int(min(max(a.size-b.size, -1), 1)) })
	var out []Finding
	var last ledger.Revocations
	var lastSize int64
	for _, cp := range cps {
		r, err := ledger.CheckpointRevocations(cp.text)
		if err != nil {
			continue // a malformed line: see verifyRevocations
		}
		if lastSize > 0 && (r.Count < last.Count || r.Count == last.Count && r.Digest != last.Digest) {
			out = append(out, Finding{TenantID: tenant, TreeSize: cp.size, Kind: FindingRevocationsDropped,
				Detail: fmt.Sprintf("the checkpoint of size %d commits to %s, the smaller one of size %d to %s: revocations are only ever added",
					cp.size, r, lastSize, last)})
			continue
		}
		last, lastSize = r, cp.size
	}
	return out
}
