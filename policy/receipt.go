package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
)

// Receipt builds the decision receipt of d. Reasons, safe next steps,
// guidance and conditions come from every check that fired, strongest
// first; routing hints come from the first fired check of the strongest
// effect that has them. Metadata is left for the caller.
func (d *Decision) Receipt(r *Resolved, req *writ.CheckRequest, decisionID string) *writ.Receipt {
	e := d.Effect
	rc := &writ.Receipt{
		ReceiptType:                   writ.ReceiptType,
		DecisionID:                    decisionID,
		Outcome:                       e.Outcome(),
		ActionClass:                   r.ActionClass,
		SafeToExecute:                 e.SafeToExecute(),
		HumanReviewTerminal:           e.HumanReviewTerminal(),
		Reasons:                       []writ.Reason{},
		SafeNextSteps:                 []writ.Reason{},
		ViewerGuidance:                []string{},
		WhatWouldChangeThis:           []string{},
		WhatWouldChangeThisConditions: []writ.Condition{},
		Disposition:                   disposition(e.Mode()),
		Routing:                       writ.Routing{Direction: direction(e.Mode())},
		ResumeContract:                resume(e),
		RuntimeLoopback:               writ.RuntimeLoopback{SameGoalState: e != Deny && e != Escalate},
	}
	fired := d.fired()
	for _, a := range d.Granted {
		rc.Reasons = append(rc.Reasons, writ.Reason{Code: "approval_redeemed", Message: fmt.Sprintf("Approval %s at %s by %s, decided %s, allows this action (use %d of %d).",
			a.ApprovalID, a.GateID, a.Decision.Approver, a.Decision.At.UTC().Format(time.RFC3339), a.Uses+1, a.Allowance)})
	}
	terminal := e == Deny || e == Escalate
	var blockers []string
	for _, a := range fired {
		f := a.Firing
		rc.Reasons = append(rc.Reasons, f.Reason)
		if a.Verdict > Warn && !slices.Contains(blockers, f.Reason.Code) {
			blockers = append(blockers, f.Reason.Code)
		}
		// A terminal decision changes only if its own causes go away, so
		// only their next steps and conditions are listed; otherwise every
		// blocking or warning cause is.
		relevant := a.Verdict >= Warn
		if terminal {
			relevant = a.Verdict == e
		}
		if !terminal || relevant {
			for _, s := range f.NextSteps {
				if !slices.Contains(rc.SafeNextSteps, s) {
					rc.SafeNextSteps = append(rc.SafeNextSteps, s)
				}
			}
		}
		rc.ViewerGuidance = append(rc.ViewerGuidance, f.Guidance...)
		if relevant {
			for _, c := range f.Changes {
				rc.WhatWouldChangeThis = append(rc.WhatWouldChangeThis, c.Text)
				rc.WhatWouldChangeThisConditions = append(rc.WhatWouldChangeThisConditions, c)
			}
			rc.WhatWouldChangeThis = append(rc.WhatWouldChangeThis, f.Awaits...)
		}
		if a.Verdict == e && f.MustNotRetry {
			rc.MustNotRetrySameAction = true
		}
	}
	// Approvals deferred behind another blocking check: their reasons say
	// an approval will be needed, but nothing asks for it yet, so they add
	// no next step and no condition (waiting on them could not help).
	var deferredGates []string
	for _, a := range d.Applied {
		if !a.Deferred {
			continue
		}
		rc.Reasons = append(rc.Reasons, a.Firing.Reason)
		rc.ViewerGuidance = append(rc.ViewerGuidance, a.Firing.Guidance...)
		if g := a.Firing.Gate; g != "" && !slices.Contains(deferredGates, g) {
			deferredGates = append(deferredGates, g)
		}
	}
	if !terminal {
		for _, g := range deferredGates {
			rc.Reasons = append(rc.Reasons, writ.Reason{Code: "approval_deferred", Message: fmt.Sprintf("No approval was requested at %s: writ asks for one only once every other blocking check passes, so first resolve %s.", g, strings.Join(blockers, ", "))})
		}
	}
	if terminal {
		rc.MustNotRetrySameAction = true
	}
	if rc.ResumeContract.RetryThisNode {
		rc.ResumeContract.ResumeWhen = slices.Clone(rc.WhatWouldChangeThis)
		rc.ResumeContract.ResumeWhenConditions = slices.Clone(rc.WhatWouldChangeThisConditions)
	}
	if e > Warn {
		for _, a := range fired {
			if a.Verdict != e {
				break
			}
			if h := a.Firing.Routing; h.TargetHint != "" || h.ReturnToNode != "" {
				rc.Routing.TargetHint, rc.Routing.ReturnToNode = h.TargetHint, h.ReturnToNode
				break
			}
		}
		if open := d.OpenGates(); rc.Routing.TargetHint == "" && e == RequireApproval && len(open) > 0 {
			rc.Routing.TargetHint = open[0]
			if g := r.pack.Gates[open[0]]; g != nil && g.TargetHint != "" {
				rc.Routing.TargetHint = g.TargetHint
			}
		}
	}
	if w := req.Workflow; w != nil {
		rc.Routing.WorkflowID, rc.Routing.NodeID = w.WorkflowID, w.NodeID
	}
	return rc
}

// fired returns the checks that fired and decide the effect (neither
// satisfied nor deferred), strongest first, in evaluation order within one
// effect.
func (d *Decision) fired() []Applied {
	var out []Applied
	for _, a := range d.Applied {
		if a.Firing != nil && a.Satisfied == "" && !a.Deferred {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b Applied) int { return int(b.Verdict) - int(a.Verdict) })
	return out
}

func disposition(m writ.Mode) writ.Disposition {
	return writ.Disposition{
		Mode:                   m,
		DownstreamAllowed:      m == writ.ModeContinueDownstream,
		LocalReplanRecommended: m == writ.ModeLocalReplan,
		UpstreamReplanRequired: m == writ.ModeUpstreamReplan,
	}
}

func direction(m writ.Mode) string {
	switch m {
	case writ.ModeContinueDownstream:
		return writ.DirectionDownstream
	case writ.ModeLocalReplan:
		return writ.DirectionLocal
	case writ.ModeUpstreamReplan:
		return writ.DirectionUpstream
	case writ.ModeHumanReview:
		return writ.DirectionHuman
	}
	return writ.DirectionStop
}

// resume is the resume contract of each strongest effect: a replan or an
// approval retries this node once its conditions hold; an upstream replan
// also passes the receipt upstream and expects new upstream context; a
// terminal escalation hands the receipt to people and ends the path.
func resume(e Effect) writ.ResumeContract {
	rc := writ.ResumeContract{ResumeWhen: []string{}, ResumeWhenConditions: []writ.Condition{}}
	switch e {
	case ReplanLocal, RequireApproval:
		rc.RetryThisNode = true
	case ReplanUpstream:
		rc.RetryThisNode, rc.PassReceiptUpstream, rc.PassNewUpstreamContextOnRetry = true, true, true
	case Escalate:
		rc.PassReceiptUpstream = true
	}
	return rc
}
