package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
)

// ApprovalsBundle is the bundle_id of the checks that settle the
// approvals a check presents.
const ApprovalsBundle = "approvals"

// ApplyApprovals settles the approval gates of d with the approval
// requests the check presents, each derived at now
// (writ.ApprovalRequest.Apply), against the binding of the check being
// decided. It is pure, like Decide, and is called right after it.
//
// A presented approval redeems the gate it was asked at when that gate is
// required by a fired rule, the approval was given, it is still valid
// (now is before its ValidUntil), it has uses left, and its binding equals
// current: the decision key, the arguments digest, the evidence snapshot
// and the policy bundle revisions. The rules it satisfies stay in the
// record with their require_approval verdict, and the approval is listed
// in Granted. Any other presented approval for a required gate does not
// redeem it and adds a reason saying why: stale (naming each binding that
// changed), expired, used up, still pending, or denied. A denial of
// exactly this action denies it. Approvals for gates no fired rule needs
// change nothing.
func (d *Decision) ApplyApprovals(presented []*writ.ApprovalRequest, current writ.ApprovalBinding, now time.Time) {
	if len(presented) == 0 {
		return
	}
	for _, a := range presented {
		if !slices.Contains(d.Gates, a.GateID) {
			continue
		}
		if d.settled(a.GateID) {
			continue // an earlier presented approval already redeemed the gate
		}
		changed := bindingChanges(a.Binding, current)
		ap := Applied{}
		f := &Firing{Gate: a.GateID}
		switch {
		case a.Terminal:
			continue // escalations are never redeemed
		case len(changed) > 0:
			ap.Verdict = RequireApproval
			f.Reason = writ.Reason{Code: "approval_stale", Message: fmt.Sprintf("Approval %s no longer applies: %s.", a.ApprovalID, strings.Join(changed, "; "))}
		case a.State == writ.ApprovalDenied:
			ap.Verdict = Deny
			f.Reason = writ.Reason{Code: "approval_denied", Message: fmt.Sprintf("Approval %s for this exact action was denied by %s: %s", a.ApprovalID, a.Decision.Approver, a.Decision.Reason)}
			f.NextSteps = []writ.Reason{{Code: "DO_NOT_RETRY_UNCHANGED", Message: "Do not retry this action unchanged; a changed action needs a new approval."}}
			f.MustNotRetry = true
		case a.State == writ.ApprovalWithdrawn:
			// Its requester withdrew it: answered as a denial is, so a
			// resume of the decision ends it instead of waiting on.
			ap.Verdict = Deny
			f.Reason = writ.Reason{Code: "approval_withdrawn", Message: fmt.Sprintf("Approval %s for this exact action was withdrawn by %s: %s", a.ApprovalID, a.Decision.Approver, a.Decision.Reason)}
			f.NextSteps = []writ.Reason{{Code: "DO_NOT_RETRY_UNCHANGED", Message: "The request for approval was withdrawn; check the action again to ask anew."}}
			f.MustNotRetry = true
		case a.State == writ.ApprovalPending:
			ap.Verdict = RequireApproval
			f.Reason = writ.Reason{Code: "approval_pending", Message: fmt.Sprintf("Approval %s at %s is still waiting for a decision.", a.ApprovalID, a.GateID)}
		case a.State == writ.ApprovalExpired:
			ap.Verdict = RequireApproval
			f.Reason = writ.Reason{Code: "approval_stale", Message: fmt.Sprintf("Approval %s expired undecided at %s.", a.ApprovalID, a.ExpiresAt.UTC().Format(time.RFC3339))}
		case !now.Before(a.Decision.ValidUntil):
			ap.Verdict = RequireApproval
			f.Reason = writ.Reason{Code: "approval_stale", Message: fmt.Sprintf("Approval %s expired at %s.", a.ApprovalID, a.Decision.ValidUntil.UTC().Format(time.RFC3339))}
		case a.Uses >= a.Allowance:
			ap.Verdict = RequireApproval
			f.Reason = writ.Reason{Code: "approval_stale", Message: fmt.Sprintf("Approval %s was already used %d of %d times.", a.ApprovalID, a.Uses, a.Allowance)}
		default:
			d.redeem(a)
			continue
		}
		ap.ID, ap.Firing = approvalCheckID(a.GateID, ap.Verdict), f
		d.add(ap)
	}
	d.settle()
}

// settled reports whether a presented approval redeemed gate.
func (d *Decision) settled(gate string) bool {
	return slices.ContainsFunc(d.Granted, func(a *writ.ApprovalRequest) bool { return a.GateID == gate })
}

// redeem marks the rules that required a's gate as satisfied by it.
func (d *Decision) redeem(a *writ.ApprovalRequest) {
	for i := range d.Applied {
		ap := &d.Applied[i]
		if ap.Firing != nil && ap.Verdict == RequireApproval && ap.Firing.Gate == a.GateID {
			ap.Satisfied = a.ApprovalID
		}
	}
	d.Granted = append(d.Granted, a)
}

// OpenGates are the gates still needing an approval: required by a fired
// rule, not redeemed by a presented approval, and not deferred behind
// another blocking check.
func (d *Decision) OpenGates() []string {
	var out []string
	for _, g := range d.Gates {
		deferred := slices.ContainsFunc(d.Applied, func(a Applied) bool { return a.Deferred && a.Firing.Gate == g })
		if !d.settled(g) && !deferred {
			out = append(out, g)
		}
	}
	return out
}

// EscalatedBy is the id of the first rule whose escalation decided d, or
// "" when d is not an escalation.
func (d *Decision) EscalatedBy() string {
	if d.Effect != Escalate {
		return ""
	}
	for _, a := range d.Applied {
		if a.Firing != nil && a.Verdict == Escalate {
			return a.ID.RuleID
		}
	}
	return ""
}

// approvalCheckID names the check of a presented approval at gate.
func approvalCheckID(gate string, verdict Effect) *CheckID {
	return newCheckID(ApprovalsBundle, gate, "pd:approvals:", verdict)
}

// bindingChanges names each part of an approval's binding that differs
// from the current check's.
func bindingChanges(was, now writ.ApprovalBinding) []string {
	var out []string
	if was.DecisionKey != now.DecisionKey {
		out = append(out, fmt.Sprintf("it approved decision key %s, not %s", was.DecisionKey, now.DecisionKey))
	}
	// A live check knows the keyed digest of the unredacted arguments;
	// replay knows only the redacted digest (and leaves the keyed one
	// empty).
	if now.ArgumentsDigest != "" && was.ArgumentsDigest != now.ArgumentsDigest ||
		now.ArgumentsDigest == "" && was.RedactedArgumentsDigest != now.RedactedArgumentsDigest {
		out = append(out, "the action's arguments changed since it was approved")
	}
	if was.EvidenceSnapshotHash != now.EvidenceSnapshotHash {
		out = append(out, fmt.Sprintf("the evidence changed since it was approved (snapshot %s, now %s)", was.EvidenceSnapshotHash, now.EvidenceSnapshotHash))
	}
	if !slices.Equal(was.BundleRevisions, now.BundleRevisions) {
		out = append(out, "the policy changed since it was approved ("+revisionChanges(was.BundleRevisions, now.BundleRevisions)+")")
	}
	return out
}

// revisionChanges describes how two lists of bundle_id@version differ.
func revisionChanges(was, now []string) string {
	split := func(l []string) map[string]string {
		m := map[string]string{}
		for _, s := range l {
			id, v, _ := strings.Cut(s, "@")
			m[id] = v
		}
		return m
	}
	w, n := split(was), split(now)
	var out []string
	for _, s := range was {
		id, v, _ := strings.Cut(s, "@")
		switch nv, ok := n[id]; {
		case !ok:
			out = append(out, fmt.Sprintf("bundle %s@%s no longer applies", id, v))
		case nv != v:
			out = append(out, fmt.Sprintf("bundle %s changed from %s to %s", id, v, nv))
		}
	}
	for _, s := range now {
		id, v, _ := strings.Cut(s, "@")
		if _, ok := w[id]; !ok {
			out = append(out, fmt.Sprintf("bundle %s@%s now applies", id, v))
		}
	}
	if len(out) == 0 {
		return "the bundles were reordered"
	}
	return strings.Join(out, ", ")
}
