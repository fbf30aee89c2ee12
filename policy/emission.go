package policy

import (
	"fmt"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// The seed's lineage and approval validation rules, decided where every
// other check is, so that a record that would break them is never an
// allow:
//
//   - lineage: a spec that declares required_pins is not allowed without
//     each pin in the request's lineage (replan_local, reason
//     missing_lineage_pin);
//   - approval: a check whose approval_mode_effective reaches a required
//     gate's approval mode needs an approval at that gate
//     (require_approval at the gate, reason approval_mode_requires_gate),
//     redeemed like any rule's gate.
//
// Packs that declare neither apply neither check, so records decided
// before these rules existed replay equal.

// pinCheck is one lineage pin a spec requires.
type pinCheck struct {
	cid *CheckID
	pin string
}

// gateCheck is one required approval gate.
type gateCheck struct {
	cid  *CheckID
	gate *pack.Gate
}

// compilePins compiles the spec's required pins.
func compilePins(s *pack.Spec) []*pinCheck {
	var out []*pinCheck
	for _, pin := range s.RequiredPins {
		out = append(out, &pinCheck{cid: newCheckID("spec:"+s.ID(), "lineage."+pin, "pd:"+s.ID()+":", ReplanLocal), pin: pin})
	}
	return out
}

// compileRequiredGates compiles the pack's required gates.
func compileRequiredGates(p *pack.Pack) []*gateCheck {
	var out []*gateCheck
	for _, g := range p.Controls.ApprovalGates {
		if g.Required && g.ApprovalMode != "" {
			out = append(out, &gateCheck{cid: newCheckID("controls", "gate."+g.ID, "pd:"+p.ID()+":controls:", RequireApproval), gate: g})
		}
	}
	return out
}

// PinOf returns the value of the lineage pin named pin ("" when unset).
func PinOf(l *writ.CallerLineage, pin string) string {
	if l == nil {
		return ""
	}
	switch pin {
	case pack.PinKGSnapshot:
		return l.KGSnapshot
	case pack.PinModelProfile:
		return l.ModelProfile
	case pack.PinEvaluatorSuite:
		return l.EvaluatorSuite
	}
	return ""
}

// lineagePins applies the spec's required pins to req.
func (d *Decision) lineagePins(idx *specIndex, req *writ.CheckRequest) {
	for _, pc := range idx.lineagePins {
		a := Applied{ID: pc.cid}
		if PinOf(req.Lineage, pc.pin) == "" {
			a.Verdict = ReplanLocal
			a.Firing = &Firing{
				Reason: writ.Reason{Code: "missing_lineage_pin", Message: fmt.Sprintf("Lineage rule: spec %s requires lineage.%s to be pinned, and the check pins none.", idx.spec.ID(), pc.pin)},
				NextSteps: []writ.Reason{{Code: "PIN_" + strings.ToUpper(pc.pin),
					Message: fmt.Sprintf("Retry the check with lineage.%s set to the version the decision was made with.", pc.pin)}},
			}
		}
		d.add(a)
	}
}

// requiredGates applies the pack's required gates to the check's
// effective approval mode.
func (d *Decision) requiredGates(gates []*gateCheck, mode writ.ApprovalMode) {
	for _, gc := range gates {
		a := Applied{ID: gc.cid}
		if mode.Rank() >= writ.ApprovalMode(gc.gate.ApprovalMode).Rank() {
			a.Verdict = RequireApproval
			a.Firing = &Firing{
				Reason: writ.Reason{Code: "approval_mode_requires_gate", Message: fmt.Sprintf("Approval rule: approval mode %s requires an approval at gate %s (required from %s up).", mode, gc.gate.ID, gc.gate.ApprovalMode)},
				Gate:   gc.gate.ID,
				Changes: []writ.Condition{{Kind: writ.ConditionApproval, GateID: gc.gate.ID,
					Text: "An approval at gate " + gc.gate.ID + " for this exact action."}},
				Routing: pack.Routing{TargetHint: gc.gate.TargetHint},
			}
		}
		d.add(a)
	}
}

// CompiledControls returns the controls that resolution compiled for the
// spec decisionKey under the compiled context hash contextHash (one
// (spec, tool) pair's, see compiledContextHash), and whether any
// compilation of the spec hashes so. The seed's controls rule compares
// a record's controls_active with it.
func (p *Policy) CompiledControls(decisionKey, contextHash string) (writ.ControlsActive, bool) {
	idx, ok := p.specs[decisionKey]
	if !ok {
		return writ.ControlsActive{}, false
	}
	if idx.noTool.contextHash == contextHash {
		return idx.noTool.controls, true
	}
	for _, cs := range idx.byTool {
		if cs.contextHash == contextHash {
			return cs.controls, true
		}
	}
	return writ.ControlsActive{}, false
}
