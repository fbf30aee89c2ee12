package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/policy"
)

// TestApplyApprovals covers every way a presented approval can settle, or
// fail to settle, the gate a rule requires.
func TestApplyApprovals(t *testing.T) {
	pol := testPack(t, rule("R_APPROVE", "args.amount > 4", "require_approval", "gate: G")+rule("R_WARN", "args.amount > 100", "warn"), "", "")
	binding := writ.ApprovalBinding{DecisionKey: "t.act", ArgumentsDigest: "hmac-sha256:aa", EvidenceSnapshotHash: "sha256:ee", BundleRevisions: []string{"B@2.0.0"}}
	decided := now.Add(-time.Hour)
	approved := func(mut func(a *writ.ApprovalRequest)) *writ.ApprovalRequest {
		a := &writ.ApprovalRequest{ApprovalID: "apr_1", GateID: "G", Binding: binding, Allowance: 1,
			CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(22 * time.Hour),
			Events: []writ.ApprovalEvent{{Seq: 1, Kind: writ.ApprovalEventApproved, Actor: "fin_lead", Reason: "ok", At: decided}}}
		if mut != nil {
			mut(a)
		}
		a.Apply(now)
		return a
	}
	tests := []struct {
		name      string
		amount    float64
		presented *writ.ApprovalRequest
		effect    policy.Effect
		granted   bool
		reason    string // code of the reason the approval check adds
		message   string // a fragment of its message
	}{
		{"none presented", 50, nil, policy.RequireApproval, false, "", ""},
		{"valid approval redeems", 50, approved(nil), policy.Allow, true, "", ""},
		{"valid approval keeps other warnings", 150, approved(nil), policy.Warn, true, "", ""},
		{"not needed: changes nothing", 1, approved(func(a *writ.ApprovalRequest) { a.Binding.ArgumentsDigest = "x" }), policy.Allow, false, "", ""},
		{"arguments changed", 50, approved(func(a *writ.ApprovalRequest) { a.Binding.ArgumentsDigest = "hmac-sha256:bb" }), policy.RequireApproval, false, "approval_stale", "arguments changed"},
		{"evidence changed", 50, approved(func(a *writ.ApprovalRequest) { a.Binding.EvidenceSnapshotHash = "sha256:old" }), policy.RequireApproval, false, "approval_stale", "evidence changed since it was approved (snapshot sha256:old, now sha256:ee)"},
		{"bundle revision changed", 50, approved(func(a *writ.ApprovalRequest) { a.Binding.BundleRevisions = []string{"B@1.0.0"} }), policy.RequireApproval, false, "approval_stale", "bundle B changed from 1.0.0 to 2.0.0"},
		{"decision key changed", 50, approved(func(a *writ.ApprovalRequest) { a.Binding.DecisionKey = "t.other" }), policy.RequireApproval, false, "approval_stale", "decision key t.other, not t.act"},
		{"approval expired", 50, approved(func(a *writ.ApprovalRequest) {
			a.Events[0].At = now.Add(-25 * time.Hour)
			a.CreatedAt, a.ExpiresAt = now.Add(-26*time.Hour), now.Add(-2*time.Hour)
		}), policy.RequireApproval, false, "approval_stale", "expired at"},
		{"request expired undecided", 50, approved(func(a *writ.ApprovalRequest) {
			a.Events = nil
			a.CreatedAt, a.ExpiresAt = now.Add(-26*time.Hour), now.Add(-2*time.Hour)
		}), policy.RequireApproval, false, "approval_stale", "expired undecided"},
		{"used up", 50, approved(func(a *writ.ApprovalRequest) {
			a.Events = append(a.Events, writ.ApprovalEvent{Seq: 2, Kind: writ.ApprovalEventRedeemed, At: decided})
		}), policy.RequireApproval, false, "approval_stale", "already used 1 of 1 times"},
		{"pending", 50, approved(func(a *writ.ApprovalRequest) { a.Events = nil }), policy.RequireApproval, false, "approval_pending", "still waiting"},
		{"denied denies", 50, approved(func(a *writ.ApprovalRequest) {
			a.Events[0].Kind, a.Events[0].Reason = writ.ApprovalEventDenied, "refund looks like fraud"
		}), policy.Deny, false, "approval_denied", "denied by fin_lead: refund looks like fraud"},
		{"denied, but for other arguments: stale", 50, approved(func(a *writ.ApprovalRequest) {
			a.Events[0].Kind = writ.ApprovalEventDenied
			a.Binding.ArgumentsDigest = "hmac-sha256:bb"
		}), policy.RequireApproval, false, "approval_stale", "arguments changed"},
		{"terminal escalation never redeems", 50, approved(func(a *writ.ApprovalRequest) { a.Terminal = true }), policy.RequireApproval, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &writ.CheckRequest{TenantID: "acme", DecisionKey: "t.act", Actor: writ.Actor{Type: "AGENT", ID: "a"}, Arguments: map[string]any{"amount": tt.amount, "order": "o1"}}
			r, err := pol.Resolve(req)
			if err != nil {
				t.Fatal(err)
			}
			d := pol.Decide(r, req, now)
			var presented []*writ.ApprovalRequest
			if tt.presented != nil {
				presented = append(presented, tt.presented)
			}
			d.ApplyApprovals(presented, binding, now)
			if d.Effect != tt.effect {
				t.Errorf("effect = %s, want %s", d.Effect, tt.effect)
			}
			if got := len(d.Granted) == 1; got != tt.granted {
				t.Errorf("granted = %v, want %v", d.Granted, tt.granted)
			}
			rc := d.Receipt(r, req, "dec_t")
			var found *writ.Reason
			for i, x := range rc.Reasons {
				if strings.HasPrefix(x.Code, "approval_") && x.Code != "approval_redeemed" {
					found = &rc.Reasons[i]
				}
			}
			switch {
			case tt.reason == "" && found != nil:
				t.Errorf("unexpected approval reason %+v", *found)
			case tt.reason != "" && found == nil:
				t.Errorf("reasons %+v lack %s", rc.Reasons, tt.reason)
			case tt.reason != "" && (found.Code != tt.reason || !strings.Contains(found.Message, tt.message)):
				t.Errorf("reason = %+v, want code %s with %q", *found, tt.reason, tt.message)
			}
			if tt.granted {
				if rc.Reasons[0].Code != "approval_redeemed" || !strings.Contains(rc.Reasons[0].Message, "by fin_lead") || !strings.Contains(rc.Reasons[0].Message, "use 1 of 1") {
					t.Errorf("first reason = %+v, want the redemption", rc.Reasons[0])
				}
				for _, x := range rc.Reasons {
					if x.Code == "r_approve" {
						t.Errorf("a satisfied rule's reason is still in the receipt: %+v", rc.Reasons)
					}
				}
				if !rc.SafeToExecute || len(d.OpenGates()) != 0 {
					t.Errorf("safe = %v, open gates %v; want safe with no open gate", rc.SafeToExecute, d.OpenGates())
				}
				// The satisfied rule stays in the record with its verdict.
				var kept bool
				for _, a := range d.Applied {
					kept = kept || (a.ID.RuleID == "R_APPROVE" && a.Verdict == policy.RequireApproval && a.Satisfied == "apr_1")
				}
				if !kept {
					t.Error("the satisfied require_approval rule is no longer among the applied checks")
				}
			}
			if tt.effect == policy.Deny && !rc.MustNotRetrySameAction {
				t.Error("a denial of this exact action must set must_not_retry_same_action")
			}
		})
	}
}

// TestApplyApprovalsIsPure: the same inputs give the same decision.
func TestApplyApprovalsIsPure(t *testing.T) {
	pol := testPack(t, rule("R_APPROVE", "args.amount > 4", "require_approval", "gate: G"), "", "")
	binding := writ.ApprovalBinding{DecisionKey: "t.act", ArgumentsDigest: "d", EvidenceSnapshotHash: "e", BundleRevisions: []string{"B@2.0.0"}}
	a := &writ.ApprovalRequest{ApprovalID: "apr_1", GateID: "G", Binding: binding, Allowance: 1, CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour),
		Events: []writ.ApprovalEvent{{Seq: 1, Kind: writ.ApprovalEventApproved, Actor: "x", At: now.Add(-time.Minute)}}}
	a.Apply(now)
	req := &writ.CheckRequest{TenantID: "acme", DecisionKey: "t.act", Actor: writ.Actor{Type: "AGENT", ID: "a"}, Arguments: map[string]any{"amount": 9.0, "order": "o"}}
	r, _ := pol.Resolve(req)
	var first []string
	for i := 0; i < 3; i++ {
		d := pol.Decide(r, req, now)
		d.ApplyApprovals([]*writ.ApprovalRequest{a}, binding, now)
		var got []string
		for _, ap := range d.Applied {
			got = append(got, ap.PolicyDecisionID()+"/"+ap.Satisfied)
		}
		if i == 0 {
			first = got
		} else if strings.Join(got, ",") != strings.Join(first, ",") {
			t.Fatalf("run %d = %v, want %v", i, got, first)
		}
	}
}

// TestApplyApprovalsReplayBinding: replay never sees unredacted
// arguments, so it leaves the keyed digest empty and the redacted digest
// decides.
func TestApplyApprovalsReplayBinding(t *testing.T) {
	pol := testPack(t, rule("R_APPROVE", "args.amount > 4", "require_approval", "gate: G"), "", "")
	live := writ.ApprovalBinding{DecisionKey: "t.act", ArgumentsDigest: "hmac-sha256:aa", RedactedArgumentsDigest: "sha256:rr", EvidenceSnapshotHash: "e", BundleRevisions: []string{"B@2.0.0"}}
	mk := func() *writ.ApprovalRequest {
		a := &writ.ApprovalRequest{ApprovalID: "apr_1", GateID: "G", Binding: live, Allowance: 1, CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour),
			Events: []writ.ApprovalEvent{{Seq: 1, Kind: writ.ApprovalEventApproved, Actor: "x", At: now.Add(-time.Minute)}}}
		a.Apply(now)
		return a
	}
	for _, tt := range []struct {
		name     string
		redacted string
		want     policy.Effect
	}{
		{"same redacted arguments", "sha256:rr", policy.Allow},
		{"other redacted arguments", "sha256:zz", policy.RequireApproval},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &writ.CheckRequest{TenantID: "acme", DecisionKey: "t.act", Actor: writ.Actor{Type: "AGENT", ID: "a"}, Arguments: map[string]any{"amount": 9.0, "order": "o"}}
			r, _ := pol.Resolve(req)
			d := pol.Decide(r, req, now)
			replay := live
			replay.ArgumentsDigest, replay.RedactedArgumentsDigest = "", tt.redacted
			d.ApplyApprovals([]*writ.ApprovalRequest{mk()}, replay, now)
			if d.Effect != tt.want {
				t.Errorf("effect = %s, want %s", d.Effect, tt.want)
			}
		})
	}
}
