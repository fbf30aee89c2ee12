package ledgertest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
)

// baseTime anchors fixture timestamps. It has sub-second digits so that
// stores keeping less than nanosecond precision fail the time filters.
var baseTime = time.Date(2025, time.March, 14, 9, 26, 53, 589793238, time.UTC)

// fixtureID derives a stable identifier from its parts, so that the same
// (tenant, n) always names the same record and different tenants never
// share a record id.
func fixtureID(prefix string, parts ...any) string {
	sum := sha256.Sum256(fmt.Append(nil, parts...))
	return prefix + hex.EncodeToString(sum[:12])
}

// NewRecord returns a valid, unsealed decision record of tenant, as the
// engine would build it for a refund check. n makes its record and decision
// ids unique (for that tenant) and spreads its timestamp (n seconds after a
// fixed instant), subjects and trace id; callers adjust the fields a test is
// about.
func NewRecord(tenant string, n int) *writ.Record {
	args := map[string]any{"order_id": fmt.Sprintf("o-%05d", n), "amount_cents": 1250 + n}
	argsDigest, err := record.CanonicalDigest(args)
	if err != nil {
		panic(err) // a fixed map of strings and numbers always encodes
	}
	return &writ.Record{
		RecordID:        fixtureID("rec_", tenant, n),
		DecisionID:      fixtureID("dec_", tenant, n),
		TenantID:        tenant,
		DecisionKey:     "payments.refund",
		DecisionVersion: "3",
		Timestamp:       baseTime.Add(time.Duration(n) * time.Second),
		Status:          writ.StatusDecided,
		ActionClass:     "refund",
		Actor: writ.Actor{
			Type:             writ.ActorAgent,
			ID:               "agent:support-bot",
			WorkloadIdentity: "spiffe://acme.example/agents/support-bot",
			DelegatedUserID:  "user:u-1042",
		},
		IntentRef:  fmt.Sprintf("intent:refund-%d", n),
		SubjectIDs: []string{fmt.Sprintf("customer:c-%03d", n%10), fmt.Sprintf("order:o-%05d", n)},
		InputsRefs: writ.InputsRefs{
			Request: fixtureID("req_", tenant, n),
			Session: "sess_7f3a9c",
		},
		Outputs:      map[string]any{"refund_id": fmt.Sprintf("rf-%05d", n), "currency": "EUR"},
		EvidenceRefs: []string{fmt.Sprintf("order:o-%05d#v2", n), "policy_ack:refunds#2025-01"},
		PolicyDecisions: []writ.PolicyDecision{{
			PolicyDecisionID: "pd_refund_limit_v3",
			BundleID:         "refunds",
			RuleIDs:          []string{"refund_under_limit"},
			Verdict:          "allow",
		}},
		Approvals:             []writ.Approval{},
		ApprovalModeEffective: writ.ModeNetwork,
		ControlsActive: writ.ControlsActive{
			MustRefuse:           []string{},
			MustEscalate:         []string{"refund_over_500"},
			ApprovalGatesActive:  []string{},
			RedactionRulesActive: []string{"pii_email"},
		},
		BudgetUsage: &writ.Usage{Tokens: 5120, ToolCalls: 3, CostUSDCents: 1.5, WallClockMS: 2300},
		Lineage: writ.Lineage{
			PackVersion:    "2025.03.1",
			PackHash:       "sha256:4f1b2d0c9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
			PolicyVersions: []string{"refunds@3"},
			DecisionSpec:   "payments.refund@3",
		},
		TraceID: fixtureID("", "trace", tenant, n%7) + "00000000",
		Replay: writ.Replay{
			ReplayPacketID:       fixtureID("sha256:", "envelope", tenant, n),
			CompiledContextHash:  fixtureID("sha256:", "context", tenant, n),
			EvidenceSnapshotHash: fixtureID("sha256:", "evidence", tenant, n),
			ArgumentsDigest:      argsDigest,
		},
	}
}

// NewEntry returns an entry for rec carrying the receipt the engine would
// have answered with it: an allow, naming the record. It sets no
// idempotency claim, block or blobs.
func NewEntry(rec *writ.Record) *ledger.Entry {
	rcpt := writ.Receipt{
		ReceiptType:                   writ.ReceiptType,
		DecisionID:                    rec.DecisionID,
		Outcome:                       writ.OutcomeAllow,
		ActionClass:                   rec.ActionClass,
		SafeToExecute:                 true,
		Reasons:                       []writ.Reason{{Code: "refund_under_limit", Message: "The refund is under the agent's limit."}},
		SafeNextSteps:                 []writ.Reason{},
		ViewerGuidance:                []string{},
		WhatWouldChangeThis:           []string{},
		WhatWouldChangeThisConditions: []writ.Condition{},
		Disposition:                   writ.Disposition{Mode: writ.ModeContinueDownstream, DownstreamAllowed: true},
		Routing:                       writ.Routing{Direction: writ.DirectionDownstream},
		ResumeContract:                writ.ResumeContract{ResumeWhen: []string{}, ResumeWhenConditions: []writ.Condition{}},
		RuntimeLoopback:               writ.RuntimeLoopback{SameGoalState: true},
		Metadata: writ.Metadata{
			RecordID:    rec.RecordID,
			DecisionKey: rec.DecisionKey,
			Pack:        "acme-payments",
			PackHash:    rec.Lineage.PackHash,
			TraceID:     rec.TraceID,
		},
	}
	b, err := json.Marshal(rcpt)
	if err != nil {
		panic(err) // a receipt of plain fields always encodes
	}
	return &ledger.Entry{Record: rec, Receipt: b}
}

// NewBlob returns a content-addressed blob of kind holding data.
func NewBlob(kind string, data []byte) ledger.Blob {
	return ledger.Blob{Hash: record.Digest(data), Kind: kind, Data: data}
}

// ApprovalTTL is the lifetime of the approval requests NewApproval makes:
// the time they may be decided in, and the time an approval stays
// redeemable after it is given.
const ApprovalTTL = time.Hour

// NewBinding returns an approval binding for decisionKey; n spreads its
// argument and evidence digests, so different n bind different actions.
func NewBinding(decisionKey string, n int) writ.ApprovalBinding {
	return writ.ApprovalBinding{
		DecisionKey:          decisionKey,
		ArgumentsDigest:      fixtureID("hmac-sha256:", "args", decisionKey, n),
		EvidenceSnapshotHash: fixtureID("sha256:", "evidence", decisionKey, n),
		BundleRevisions:      []string{"refunds@3"},
	}
}

// NewApproval returns an approval request at gateID, asked by the check
// of rec, created at createdAt and expiring ApprovalTTL later, as the
// engine would put it in rec's entry.
func NewApproval(rec *writ.Record, approvalID, gateID string, b writ.ApprovalBinding, createdAt time.Time, allowance int) ledger.NewApproval {
	digest, err := ledger.BindingDigest(b)
	if err != nil {
		panic(err) // a binding of plain strings always encodes
	}
	return ledger.NewApproval{
		Request: &writ.ApprovalRequest{
			ApprovalID:            approvalID,
			TenantID:              rec.TenantID,
			GateID:                gateID,
			TargetHint:            "finance_approvers",
			ApprovalModeEffective: rec.ApprovalModeEffective,
			Binding:               b,
			RecordID:              rec.RecordID,
			DecisionID:            rec.DecisionID,
			ReplayPacketID:        rec.Replay.ReplayPacketID,
			TraceID:               rec.TraceID,
			SubjectIDs:            rec.SubjectIDs,
			RequestedBy:           writ.Requester{ActorID: rec.Actor.ID, DelegatedUserID: rec.Actor.DelegatedUserID, KeyID: "key_agent", Subject: "support-bot"},
			Reasons:               []writ.Reason{{Code: "high_value_refund", Message: "The refund exceeds the agent's limit."}},
			CreatedAt:             createdAt,
			ExpiresAt:             createdAt.Add(ApprovalTTL),
			Allowance:             allowance,
		},
		BindingDigest: digest,
	}
}

// NewApprovalEntry returns an entry for rec carrying ev for the tenant's
// approval request approvalID: a decision, or a redemption by rec's check.
func NewApprovalEntry(rec *writ.Record, approvalID string, ev writ.ApprovalEvent) *ledger.Entry {
	e := NewEntry(rec)
	e.ApprovalEvent = &ledger.ApprovalEvent{TenantID: rec.TenantID, ApprovalID: approvalID, Event: ev}
	return e
}

// NewShadow returns the decision a shadow pack of packHash would have
// made for rec's check, at rec's time: outcome where the enforced pack
// allowed (NewEntry's receipt), with the policy decision and reason that
// say so. Its RecordID is rec's, as Append stores it.
func NewShadow(rec *writ.Record, packHash string, outcome writ.Outcome) *ledger.ShadowDecision {
	status, verdict := writ.StatusDecided, "allow"
	if outcome == writ.OutcomeReplanRequired || outcome == writ.OutcomeGoalFailTerminal {
		status, verdict = writ.StatusRejected, "deny"
	}
	return &ledger.ShadowDecision{
		TenantID:        rec.TenantID,
		RecordID:        rec.RecordID,
		DecisionKey:     rec.DecisionKey,
		At:              rec.Timestamp,
		Pack:            "acme-payments-candidate",
		PackHash:        packHash,
		EnforcedOutcome: writ.OutcomeAllow,
		Outcome:         outcome,
		Status:          status,
		PolicyDecisions: []writ.PolicyDecision{{
			PolicyDecisionID: "pd_refund_limit_v4",
			BundleID:         "refunds",
			RuleIDs:          []string{"refund_limit_lowered"},
			Verdict:          verdict,
		}},
		Reasons: []writ.Reason{{Code: "refund_limit_lowered", Message: "The candidate pack lowers the agent's refund limit."}},
	}
}
