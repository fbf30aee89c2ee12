package policy_test

import (
	"slices"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/policy"
)

func codes(rs []writ.Reason) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

// An approval is asked for only when it can help: an approval rule that
// fires alongside another blocking check is deferred, and the receipt says
// what must change first. Issue 39's wasted-approval case.
func TestApprovalDeferredBehindOtherBlockers(t *testing.T) {
	rules := rule("R_EXTERNAL", "args.to.endsWith('@customer.example')", "require_approval", "gate: G",
		"safe_next_steps: [{code: REQUEST_EXTERNAL_SEND_APPROVAL, message: 'Ask for approval.'}]") +
		rule("R_BLOCKED_DOMAIN", "args.to.endsWith('@blocked.example')", "deny",
			"safe_next_steps: [{code: PICK_ANOTHER_RECIPIENT, message: 'Send to someone else.'}]")
	spec := "required_evidence:\n  - kind: customer_consent\n    on_missing: replan_local\n"
	pol := testPack(t, rules, spec, "")
	consent := []writ.Evidence{{Kind: "customer_consent", ID: "c1", Version: "1"}}
	tests := []struct {
		name     string
		to       string
		evidence []writ.Evidence
		effect   policy.Effect
		open     []string
		reasons  []string
		steps    []string
		changes  []string
	}{
		{
			name: "no consent: replan first, no approval", to: "a@customer.example",
			effect: policy.ReplanLocal, open: nil,
			reasons: []string{"missing_evidence", "r_external", "approval_deferred"},
			steps:   []string{"FETCH_CUSTOMER_CONSENT"},
			changes: []string{writ.ConditionEvidence},
		},
		{
			name: "consent: the approval can help now", to: "a@customer.example", evidence: consent,
			effect: policy.RequireApproval, open: []string{"G"},
			reasons: []string{"r_external"},
			steps:   []string{"REQUEST_EXTERNAL_SEND_APPROVAL"},
			changes: []string{writ.ConditionApproval},
		},
		{
			name: "deny: nothing but the deny's own steps", to: "a@blocked.example", evidence: consent,
			effect: policy.Deny, open: nil,
			reasons: []string{"r_blocked_domain"},
			steps:   []string{"PICK_ANOTHER_RECIPIENT"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: map[string]any{"to": tt.to, "order": "o1"}, Evidence: tt.evidence})
			if d.Effect != tt.effect {
				t.Errorf("Decide(to=%s).Effect = %s, want %s", tt.to, d.Effect, tt.effect)
			}
			if got := d.OpenGates(); !slices.Equal(got, tt.open) {
				t.Errorf("Decide(to=%s).OpenGates() = %v, want %v", tt.to, got, tt.open)
			}
			if got := codes(rc.Reasons); !slices.Equal(got, tt.reasons) {
				t.Errorf("Decide(to=%s) reasons = %v, want %v", tt.to, got, tt.reasons)
			}
			if got := codes(rc.SafeNextSteps); !slices.Equal(got, tt.steps) {
				t.Errorf("Decide(to=%s) safe_next_steps = %v, want %v", tt.to, got, tt.steps)
			}
			var kinds []string
			for _, c := range rc.WhatWouldChangeThisConditions {
				kinds = append(kinds, c.Kind)
			}
			if !slices.Equal(kinds, tt.changes) {
				t.Errorf("Decide(to=%s) what_would_change_this kinds = %v, want %v", tt.to, kinds, tt.changes)
			}
		})
	}
}

// A terminal deny lists only the next steps of the checks that denied:
// seeking an approval, fetching evidence or replanning cannot change it.
// Issue 39's deny-lists-approval case.
func TestDenyListsOnlyItsOwnNextSteps(t *testing.T) {
	rules := rule("R_APPROVE", "true", "require_approval", "gate: G",
		"safe_next_steps: [{code: REQUEST_EXTERNAL_SEND_APPROVAL, message: 'Ask for approval.'}]") +
		rule("R_LOCAL", "true", "replan_local", "safe_next_steps: [{code: ADD_CONTEXT, message: 'Add context.'}]") +
		rule("R_DENY", "true", "deny", "safe_next_steps: [{code: STOP, message: 'Stop.'}]")
	pol := testPack(t, rules, "", "")
	d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: map[string]any{"order": "o1"}})
	if d.Effect != policy.Deny {
		t.Fatalf("Decide.Effect = %s, want deny", d.Effect)
	}
	if got := codes(rc.SafeNextSteps); !slices.Equal(got, []string{"STOP"}) {
		t.Errorf("Decide safe_next_steps = %v, want [STOP]", got)
	}
	// Every fired rule's reason is still reported; no approval_deferred,
	// since nothing will ever ask for one.
	if got := codes(rc.Reasons); !slices.Equal(got, []string{"r_deny", "r_local", "r_approve"}) {
		t.Errorf("Decide reasons = %v, want [r_deny r_local r_approve]", got)
	}
}
