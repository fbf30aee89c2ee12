package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/record"
)

// fakeService is a writ.Service, a writ.Ledger, writ.Workflows,
// writ.Approvals and writ.Replays for handler-level tests: it records what it was called
// with, and the principal each call saw, and answers with the values it
// was given.
type fakeService struct {
	keyCalls    int // calls to the key store of fakeKeys
	receipt     *writ.Receipt
	record      *writ.StoredRecord
	page        *writ.RecordPage
	checkpoint  *writ.Checkpoint
	inclusion   *writ.InclusionProof
	consistency *writ.ConsistencyProof
	run         *writ.Run          // the answer of StartRun and Run
	runs        *writ.RunPage      // the answer of Runs
	shadow      *writ.ShadowReport // the answer of ShadowReport
	verdict     *writ.StepVerdict
	approval    *writ.ApprovalRequest // the answer of Approval and DecideApproval
	approvals   *writ.ApprovalPage
	replay      *writ.ReplayResult   // the answer of Replay
	replays     []*writ.ReplayResult // the answer of ReplayTrace
	blobs       map[string][]byte    // the answers of Blob, by hash
	keys        []keyring.Key        // the answer of VerifierKeys
	err         error
	// owners, when set, maps record, run, approval and trace ids to the
	// tenant that has them: a lookup of an id by any other tenant is not
	// found, as a store answers, and so is an id it does not map.
	owners map[string]string
	// entered, when set, receives once a Check has started; Check then
	// waits for release to be closed.
	entered chan struct{}
	release chan struct{}
	// panicWith, when set, makes every method panic with it.
	panicWith any

	mu          sync.Mutex
	checks      []*writ.CheckRequest
	recordCalls [][2]string // tenant id, record id
	queries     []writ.RecordQuery
	ledgerCalls []ledgerCall
	starts      []*writ.StartRunRequest
	attempts    []*writ.AttemptRequest
	runCalls    [][2]string // tenant id, run id
	runQs       []writ.RunQuery
	shadowQs    []writ.ShadowQuery
	approvalQs  []writ.ApprovalQuery
	approvalGet [][2]string // tenant id, approval id
	decisions   []*writ.DecideApprovalRequest
	withdrawals []*writ.WithdrawApprovalRequest
	replayCalls [][3]string       // method, tenant id, record or trace id
	principals  []*writ.Principal // of every call, in order
	tenants     []string          // the tenant of every call, in order
}

// ledgerCall is one call of a writ.Ledger method: its name and arguments.
// Sizes are the size, tree size, or old and new sizes, in order.
type ledgerCall struct {
	method   string
	tenantID string
	recordID string
	sizes    [2]int64
}

var (
	_ writ.Service       = (*fakeService)(nil)
	_ writ.Ledger        = (*fakeService)(nil)
	_ writ.Workflows     = (*fakeService)(nil)
	_ writ.Approvals     = (*fakeService)(nil)
	_ writ.Replays       = (*fakeService)(nil)
	_ writ.ShadowReports = (*fakeService)(nil)
)

// saw records the principal and the tenant of a call; call it with f.mu
// held.
func (f *fakeService) saw(ctx context.Context, tenantID string) {
	f.principals = append(f.principals, writ.PrincipalFrom(ctx))
	f.tenants = append(f.tenants, tenantID)
}

// lookup answers ENOTFOUND when owners is set and tenantID does not have
// id, in the same words whether another tenant has it or none does.
func (f *fakeService) lookup(tenantID, id string) error {
	if f.owners != nil && f.owners[id] != tenantID {
		return writ.Errorf(writ.ENOTFOUND, "%s not found", id)
	}
	return nil
}

func (f *fakeService) Check(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error) {
	f.mu.Lock()
	f.checks = append(f.checks, req)
	f.saw(ctx, req.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.release
	}
	return f.receipt, f.err
}

func (f *fakeService) Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error) {
	f.mu.Lock()
	f.recordCalls = append(f.recordCalls, [2]string{tenantID, recordID})
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if err := f.lookup(tenantID, recordID); err != nil {
		return nil, err
	}
	return f.record, f.err
}

// Envelope serves Config.Envelopes: the fixture's envelopes by hash.
func (f *fakeService) Envelope(ctx context.Context, tenantID string, seq int64, hash string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.blobs[hash]; ok {
		return b, nil
	}
	return nil, writ.Errorf(writ.ENOTFOUND, "no blob %s", hash)
}

// VerifierKeys serves Config.VerifierKeys.
func (f *fakeService) VerifierKeys(ctx context.Context, tenantID string) ([]keyring.Key, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	return f.keys, f.err
}

func (f *fakeService) Latency(ctx context.Context, tenantID string) (*writ.LatencyStats, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return fullLatency(tenantID), nil
}

// Witnesses serves Config.Witnesses.
func (f *fakeService) Witnesses(ctx context.Context, tenantID string) (*writ.LedgerWitnesses, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return fullWitnesses(tenantID), nil
}

// fullWitnesses is a tenant's witness report with every field set: one
// witness caught up, one behind, one that never cosigned.
func fullWitnesses(tenantID string) *writ.LedgerWitnesses {
	at, got := testTime.Add(-time.Minute), testTime.Add(-time.Minute+time.Second)
	zero, behind := 0.0, 59.0
	return &writ.LedgerWitnesses{TenantID: tenantID, Checkpoint: &writ.CheckpointHead{TreeSize: 12, IssuedAt: testTime}, Witnesses: []writ.WitnessLag{
		{Name: "w1.example/witness", KeyID: "0a1b2c3d", CosignedSize: 12, CosignedAt: &at, ReceivedAt: &got, LagRecords: 0, LagSeconds: &zero},
		{Name: "w2.example/witness", KeyID: "4e5f6a7b", CosignedSize: 5, CosignedAt: &at, ReceivedAt: &got, LagRecords: 7, LagSeconds: &behind, Conflict: true},
		{Name: "w3.example/witness", KeyID: "8c9d0e1f", LagRecords: 12},
	}}
}

// fullLatency is a tenant's latency stats with every field set.
func fullLatency(tenantID string) *writ.LatencyStats {
	return &writ.LatencyStats{TenantID: tenantID, WindowSeconds: 60, Since: testTime, Windows: []writ.LatencyWindow{
		{Start: testTime, CheckLatency: writ.LatencySummary{Count: 3, P50Ms: 1.5, P99Ms: 4.25, MaxMs: 4.3}, AppendLag: writ.LatencySummary{Count: 3, P50Ms: 0.9, P99Ms: 2, MaxMs: 2.1}},
		{Start: testTime.Add(time.Minute), AppendLag: writ.LatencySummary{Count: 1, P50Ms: 0.5, P99Ms: 0.5, MaxMs: 0.5}},
	}}
}

func (f *fakeService) Records(ctx context.Context, q writ.RecordQuery) (*writ.RecordPage, error) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.saw(ctx, q.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.page, f.err
}

func (f *fakeService) Checkpoint(ctx context.Context, tenantID string, size int64) (*writ.Checkpoint, error) {
	f.ledgerCall(ctx, ledgerCall{method: "Checkpoint", tenantID: tenantID, sizes: [2]int64{size}})
	return f.checkpoint, f.err
}

func (f *fakeService) IssueCheckpoint(ctx context.Context, tenantID string) (*writ.Checkpoint, error) {
	f.ledgerCall(ctx, ledgerCall{method: "IssueCheckpoint", tenantID: tenantID})
	return f.checkpoint, f.err
}

func (f *fakeService) InclusionProof(ctx context.Context, tenantID, recordID string, treeSize int64) (*writ.InclusionProof, error) {
	f.ledgerCall(ctx, ledgerCall{method: "InclusionProof", tenantID: tenantID, recordID: recordID, sizes: [2]int64{treeSize}})
	if err := f.lookup(tenantID, recordID); err != nil {
		return nil, err
	}
	return f.inclusion, f.err
}

func (f *fakeService) ConsistencyProof(ctx context.Context, tenantID string, oldSize, newSize int64) (*writ.ConsistencyProof, error) {
	f.ledgerCall(ctx, ledgerCall{method: "ConsistencyProof", tenantID: tenantID, sizes: [2]int64{oldSize, newSize}})
	return f.consistency, f.err
}

func (f *fakeService) ledgerCall(ctx context.Context, c ledgerCall) {
	f.mu.Lock()
	f.ledgerCalls = append(f.ledgerCalls, c)
	f.saw(ctx, c.tenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
}

func (f *fakeService) StartRun(ctx context.Context, req *writ.StartRunRequest) (*writ.Run, error) {
	f.mu.Lock()
	f.starts = append(f.starts, req)
	f.saw(ctx, req.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.run, f.err
}

func (f *fakeService) SubmitAttempt(ctx context.Context, req *writ.AttemptRequest) (*writ.StepVerdict, error) {
	f.mu.Lock()
	f.attempts = append(f.attempts, req)
	f.saw(ctx, req.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if err := f.lookup(req.TenantID, req.RunID); err != nil {
		return nil, err
	}
	return f.verdict, f.err
}

func (f *fakeService) Run(ctx context.Context, tenantID, runID string) (*writ.Run, error) {
	f.mu.Lock()
	f.runCalls = append(f.runCalls, [2]string{tenantID, runID})
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if err := f.lookup(tenantID, runID); err != nil {
		return nil, err
	}
	return f.run, f.err
}

func (f *fakeService) Runs(ctx context.Context, q writ.RunQuery) (*writ.RunPage, error) {
	f.mu.Lock()
	f.runQs = append(f.runQs, q)
	f.saw(ctx, q.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.runs, f.err
}

func (f *fakeService) ShadowReport(ctx context.Context, q writ.ShadowQuery) (*writ.ShadowReport, error) {
	f.mu.Lock()
	f.shadowQs = append(f.shadowQs, q)
	f.saw(ctx, q.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.shadow, f.err
}

// fullShadowReport returns a shadow report of tenant acme with every
// field set.
func fullShadowReport() *writ.ShadowReport {
	from, to := testTime, testTime.Add(24*time.Hour)
	return &writ.ShadowReport{TenantID: "acme", PackHash: "sha256:c0ffee", DecisionKey: "support.refund.execute", From: &from, To: &to,
		Packs: []writ.ShadowPack{{Pack: "refund@1.1.0", PackHash: "sha256:c0ffee", Decisions: 5}}, Decisions: 5, Changed: 2,
		Transitions: []*writ.OutcomeTransition{
			{From: "allow", To: "replan_required", Count: 2, Examples: []string{"dr_1", "dr_2"},
				RulesFired: map[string]int{"refunds@1.1.0:R_REFUND_REVIEW": 2}, RulesCleared: map[string]int{"refunds@1.0.0:R_OLD": 1}},
			{From: "allow", To: "allow", Count: 3, Examples: []string{"dr_3"}},
		}}
}

func (f *fakeService) Approvals(ctx context.Context, q writ.ApprovalQuery) (*writ.ApprovalPage, error) {
	f.mu.Lock()
	f.approvalQs = append(f.approvalQs, q)
	f.saw(ctx, q.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.approvals, f.err
}

func (f *fakeService) Approval(ctx context.Context, tenantID, approvalID string) (*writ.ApprovalRequest, error) {
	f.mu.Lock()
	f.approvalGet = append(f.approvalGet, [2]string{tenantID, approvalID})
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if err := f.lookup(tenantID, approvalID); err != nil {
		return nil, err
	}
	return f.approval, f.err
}

func (f *fakeService) DecideApproval(ctx context.Context, req *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error) {
	f.mu.Lock()
	f.decisions = append(f.decisions, req)
	f.saw(ctx, req.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if err := f.lookup(req.TenantID, req.ApprovalID); err != nil {
		return nil, err
	}
	return f.approval, f.err
}

func (f *fakeService) WithdrawApproval(ctx context.Context, req *writ.WithdrawApprovalRequest) (*writ.ApprovalRequest, error) {
	f.mu.Lock()
	f.withdrawals = append(f.withdrawals, req)
	f.saw(ctx, req.TenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if err := f.lookup(req.TenantID, req.ApprovalID); err != nil {
		return nil, err
	}
	return f.approval, f.err
}

func (f *fakeService) Replay(ctx context.Context, tenantID, recordID string) (*writ.ReplayResult, error) {
	if err := f.replayCall(ctx, "Replay", tenantID, recordID); err != nil {
		return nil, err
	}
	return f.replay, f.err
}

func (f *fakeService) ReplayTrace(ctx context.Context, tenantID, traceID string) ([]*writ.ReplayResult, error) {
	if err := f.replayCall(ctx, "ReplayTrace", tenantID, traceID); err != nil {
		return nil, err
	}
	return f.replays, f.err
}

// replayCall records a call of a writ.Replays method, and answers
// ENOTFOUND when the tenant does not have the record or the trace id.
func (f *fakeService) replayCall(ctx context.Context, method, tenantID, id string) error {
	f.mu.Lock()
	f.replayCalls = append(f.replayCalls, [3]string{method, tenantID, id})
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.lookup(tenantID, id)
}

// replayArgs returns the calls of writ.Replays methods: the method, the
// tenant id and the record or trace id.
func (f *fakeService) replayArgs() [][3]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.replayCalls)
}

// calls returns how many times any method was called.
func (f *fakeService) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.checks) + len(f.recordCalls) + len(f.queries) + len(f.ledgerCalls) +
		len(f.starts) + len(f.attempts) + len(f.runCalls) +
		len(f.approvalQs) + len(f.approvalGet) + len(f.decisions) + len(f.replayCalls) + f.keyCalls
}

// approvalQueries returns the queries Approvals was called with.
func (f *fakeService) approvalQueries() []writ.ApprovalQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.approvalQs)
}

// approvalArgs returns the tenant and approval ids Approval was called
// with.
func (f *fakeService) approvalArgs() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.approvalGet)
}

// decisionArgs returns the requests DecideApproval was called with.
func (f *fakeService) decisionArgs() []*writ.DecideApprovalRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.decisions)
}

// seen returns the principals the calls saw, in order.
func (f *fakeService) seen() []*writ.Principal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.principals)
}

// tenantsSeen returns the tenants the calls were for, in order.
func (f *fakeService) tenantsSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tenants)
}

// startArgs returns the requests StartRun was called with.
func (f *fakeService) startArgs() []*writ.StartRunRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

// attemptArgs returns the requests SubmitAttempt was called with.
func (f *fakeService) attemptArgs() []*writ.AttemptRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.attempts)
}

// runArgs returns the tenant and run ids Run was called with.
func (f *fakeService) runArgs() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runCalls)
}

// ledgerArgs returns the calls of writ.Ledger methods.
func (f *fakeService) ledgerArgs() []ledgerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ledgerCalls)
}

// recordQueries returns the queries Records was called with.
func (f *fakeService) recordQueries() []writ.RecordQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queries)
}

// recordArgs returns the tenant and record ids Record was called with.
func (f *fakeService) recordArgs() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.recordCalls)
}

func (f *fakeService) lastCheck() *writ.CheckRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.checks) == 0 {
		return nil
	}
	return f.checks[len(f.checks)-1]
}

var testTime = time.Date(2026, time.May, 9, 9, 31, 42, 123456789, time.UTC)

// fullCheckRequest returns a CheckRequest with every field set, using only
// values that survive a JSON round trip unchanged (float64 numbers, UTC
// times).
func fullCheckRequest() *writ.CheckRequest {
	observed := testTime.Add(-time.Minute)
	return &writ.CheckRequest{
		TenantID:       "acme",
		DecisionKey:    "support.refund.execute",
		Tool:           "payments.issue_refund",
		Arguments:      map[string]any{"order_id": "ord_881", "amount_inr": 4200.0, "lines": []any{"a", "b"}},
		ApprovalMode:   writ.ModeDestructive,
		ToolCallID:     "tc_121",
		IdempotencyKey: "ik_2x9k4j7m1q8w0p3z",
		Actor: writ.Actor{
			Type: writ.ActorAgent, ID: "agt_support",
			WorkloadIdentity: "spiffe://acme/agents/support", DelegatedUserID: "usr_771",
		},
		IntentRef:  "support.refund",
		SubjectIDs: []string{"customer:cus_77", "order:ord_881"},
		InputsRefs: &writ.InputsRefs{Request: "req_9f3a12", Session: "sess_42f1", Attachments: []string{"artifact:invoice_881#sha256:2f9cc0"}},
		Workflow:   &writ.WorkflowRef{WorkflowID: "REQ-2302", NodeID: "refund_node", RunID: "run_1", StepID: "step_3"},
		Evidence: []writ.Evidence{{
			Kind: "order", ID: "ord_881", Version: "2", Hash: "sha256:b2a1", TenantID: "acme",
			ObservedAt: &observed, Attributes: map[string]any{"review_status": "approved"},
		}},
		Context:   map[string]any{"fraud_score": 0.12},
		Outputs:   map[string]any{"refund_amount_inr": 4200.0, "currency": "INR"},
		Usage:     &writ.Usage{Tokens: 4720, ToolCalls: 4, CostUSDCents: 0.91, WallClockMS: 1840},
		Scorecard: map[string]float64{"policy": 1, "utility": 0.94},
		ToolLineage: []writ.ToolLineage{{
			ToolCallID: "tc_121", ToolResultID: "tr_121", ApprovalModeEffective: writ.ModeDestructive,
			IdempotencyKey: "ik_2x9k4j7m1q8w0p3z", ReversalToken: "rv_refund_txn_q9",
		}},
		Lineage: &writ.CallerLineage{KGSnapshot: "kg_2026_05_09", ModelProfile: "model.safe@1", EvaluatorSuite: "eval.refund@1"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

// fullReceipt returns a Receipt with every field set.
func fullReceipt() *writ.Receipt {
	cond := writ.Condition{
		Kind: writ.ConditionEvidence, Text: "A legal review event confirming WF-2302.",
		EvidenceKind: "legal_review", MaxAge: "24h", GateID: "GATE_LEGAL",
		Expression: `evidence.legal_review.status == "approved"`,
	}
	return &writ.Receipt{
		ReceiptType:                   writ.ReceiptType,
		DecisionID:                    "dec_composed_replan_1",
		Outcome:                       writ.OutcomeReplanRequired,
		ActionClass:                   "system_change",
		SafeToExecute:                 false,
		HumanReviewTerminal:           true,
		MustNotRetrySameAction:        true,
		Reasons:                       []writ.Reason{{Code: "missing_upstream_support", Message: "The workflow update is missing required upstream approval."}},
		SafeNextSteps:                 []writ.Reason{{Code: "GET_LEGAL_REVIEW", Message: "Obtain legal review approval for WF-2302."}},
		ViewerGuidance:                []string{"Route to legal."},
		WhatWouldChangeThis:           []string{cond.Text},
		WhatWouldChangeThisConditions: []writ.Condition{cond},
		Disposition: writ.Disposition{
			Mode: writ.ModeUpstreamReplan, DownstreamAllowed: false, LocalReplanRecommended: true, UpstreamReplanRequired: true,
		},
		Routing: writ.Routing{
			Direction: writ.DirectionUpstream, TargetHint: "workflow_supervisor", ReturnToNode: "workflow_supervisor",
			WorkflowID: "REQ-2302", NodeID: "handoff_note_node",
		},
		ResumeContract: writ.ResumeContract{
			RetryThisNode: true, PassReceiptUpstream: true, PassNewUpstreamContextOnRetry: true,
			ResumeWhen: []string{cond.Text}, ResumeWhenConditions: []writ.Condition{cond},
		},
		RuntimeLoopback: writ.RuntimeLoopback{SameGoalState: true},
		Metadata: writ.Metadata{
			RecordID: "dr_2026_05_09_a17", DecisionKey: "support.refund.execute", Pack: "ctxpack.support@1.0.0",
			PackHash: "sha256:9f0b", TraceID: "0af7651916cd43dd8448eb211c80319c",
			Repeated: writ.RepeatedIdempotent, FailClosed: true,
		},
	}
}

// fullRecord returns a Record with every field set.
func fullRecord() *writ.Record {
	return &writ.Record{
		RecordID:        "dr_2026_05_09_a17",
		DecisionID:      "dec_1",
		TenantID:        "acme",
		DecisionKey:     "support.refund.execute",
		DecisionVersion: "1.0.0",
		Timestamp:       testTime,
		Status:          writ.StatusDecided,
		ActionClass:     "record_mutation",
		Supersedes:      "dr_2026_05_09_a16",
		Actor:           writ.Actor{Type: writ.ActorAgent, ID: "agt_support", WorkloadIdentity: "spiffe://x", DelegatedUserID: "usr_771"},
		IntentRef:       "support.refund",
		SubjectIDs:      []string{"customer:cus_77"},
		InputsRefs:      writ.InputsRefs{Request: "req_1", Session: "sess_1", Attachments: []string{"artifact:a#sha256:1"}},
		Outputs:         map[string]any{"refund_amount_inr": 4200.0},
		EvidenceRefs:    []string{"kg:order:ord_881#snap"},
		PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pol_9900", BundleID: "POLICY_RETURNS_V1", RuleIDs: []string{"R1"}, Verdict: "allow"}},
		Approvals: []writ.Approval{{
			GateID: "GATE_FINANCE", Approver: "user_77", ApprovalModeEffective: writ.ModeDestructive,
			EvidenceSnapshotHash: "sha256:b2a1", DecidedAt: testTime.Add(-time.Second),
		}},
		ApprovalModeEffective: writ.ModeDestructive,
		ControlsActive: writ.ControlsActive{
			MustRefuse: []string{"a"}, MustEscalate: []string{"fraud_signal_high"},
			ApprovalGatesActive: []string{"GATE_FINANCE"}, RedactionRulesActive: []string{"pan"},
		},
		ToolLineage: []writ.ToolLineage{{ToolCallID: "tc_121", ToolResultID: "tr_121", ApprovalModeEffective: writ.ModeDestructive, IdempotencyKey: "ik", ReversalToken: "rv"}},
		Scorecard:   map[string]float64{"policy": 1},
		BudgetUsage: &writ.Usage{Tokens: 1, ToolCalls: 2, CostUSDCents: 0.5, WallClockMS: 4},
		Lineage: writ.Lineage{
			PackVersion: "ctxpack.support@1.0.0", PackHash: "sha256:9f0b", PolicyVersions: []string{"POLICY_RETURNS_V1@1.0.0"},
			DecisionSpec: "support.refund.execute@1.0.0", KGSnapshot: "kg_1", ModelProfile: "mp_1", EvaluatorSuite: "ev_1",
		},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Replay: writ.Replay{
			ReplayPacketID: "sha256:01", CompiledContextHash: "sha256:02", EvidenceSnapshotHash: "sha256:03",
			ArgumentsDigest: "sha256:04", ToolTranscriptChainHash: "sha256:05",
		},
		Audit: writ.Audit{Seq: 7, PrevHash: "sha256:6ad0", RecordHash: "sha256:9ea1", SignedBy: "kid_runtime_2026Q2", Signature: "c2ln"},
	}
}

// storedRecord returns rec as a StoredRecord whose raw bytes have its
// members in reverse alphabetical order, spaced oddly, so that any
// re-encoding would show.
func storedRecord(rec *writ.Record) *writ.StoredRecord {
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		panic(err)
	}
	keys := slices.Sorted(maps.Keys(members))
	slices.Reverse(keys)
	raw := []byte("{\n")
	for i, k := range keys {
		if i > 0 {
			raw = append(raw, " ,\n"...)
		}
		raw = fmt.Appendf(raw, "  %q :  %s", k, members[k])
	}
	raw = append(raw, "\n}"...)
	var back writ.Record
	if err := json.Unmarshal(raw, &back); err != nil {
		panic(err)
	}
	return &writ.StoredRecord{Record: back, Raw: raw}
}

// testHash returns a distinct tree hash, base64, for each n.
func testHash(n int) string {
	h := sha256.Sum256([]byte{byte(n)})
	return base64.StdEncoding.EncodeToString(h[:])
}

// fullCheckpoint returns a Checkpoint of the given size with every field
// set.
func fullCheckpoint(size int64) *writ.Checkpoint {
	root := testHash(int(size))
	return &writ.Checkpoint{
		TenantID: "acme",
		TreeSize: size,
		RootHash: root,
		Note:     fmt.Sprintf("writ/acme\n%d\n%s\n\n\u2014 writ-2026-05-09T093142Z c2lnbmF0dXJl\n", size, root),
		IssuedAt: testTime,
	}
}

// fullInclusionProof returns an InclusionProof against the checkpoint of
// size 7 with every field set.
func fullInclusionProof() *writ.InclusionProof {
	return &writ.InclusionProof{
		TenantID: "acme", RecordID: "dr_2026_05_09_a17", Seq: 5, TreeSize: 7,
		LeafHash: testHash(100), Proof: []string{testHash(101), testHash(102), testHash(103)},
		Checkpoint: *fullCheckpoint(7),
	}
}

// fullConsistencyProof returns a ConsistencyProof from size 3 to 7 with
// every field set.
func fullConsistencyProof() *writ.ConsistencyProof {
	return &writ.ConsistencyProof{
		TenantID: "acme", OldSize: 3, NewSize: 7,
		Proof: []string{testHash(200), testHash(201)},
		Old:   *fullCheckpoint(3), New: *fullCheckpoint(7),
	}
}

// fullLedger returns a fakeService answering every writ.Ledger method.
func fullLedger() *fakeService {
	return &fakeService{checkpoint: fullCheckpoint(7), inclusion: fullInclusionProof(), consistency: fullConsistencyProof()}
}

// fullStartRunRequest returns a StartRunRequest with every field set.
func fullStartRunRequest() *writ.StartRunRequest {
	return &writ.StartRunRequest{
		TenantID: "acme", WorkflowID: "ui.component.change", RunID: "run_1", Pack: "frontend@1.0.0",
		Context: map[string]any{"component": "Button", "ticket": "UI-142", "weight": 1.5},
	}
}

// fullAttemptRequest returns an AttemptRequest at step visual_check of
// run_1 with every field set.
func fullAttemptRequest() *writ.AttemptRequest {
	return &writ.AttemptRequest{
		TenantID: "acme", RunID: "run_1", StepID: "visual_check",
		Actor: writ.Actor{Type: writ.ActorAgent, ID: "agt_frontend", WorkloadIdentity: "spiffe://acme/agents/frontend", DelegatedUserID: "usr_9"},
		Result: map[string]any{
			"visualVerification": map[string]any{"performed": true, "screenshots": []any{"shot_1.png"}},
			"storybookInstance":  map[string]any{"url": "http://localhost:6006/?path=/story/button--primary"},
		},
		ToolCalls: []writ.ToolCallClaim{{
			Name: "open_simple_browser", Args: map[string]any{"url": "http://localhost:6006"}, Result: map[string]any{"status": 200.0},
		}},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

// fullVerdict returns a StepVerdict on step visual_check of run_1 with
// every field set.
func fullVerdict() *writ.StepVerdict {
	return &writ.StepVerdict{
		RunID: "run_1", StepID: "visual_check", State: writ.VerdictRetry,
		Checks: []writ.VerdictCheck{
			{Kind: "evidence", Target: "visualVerification.performed", Passed: false, RejectMessage: "Visual verification was not executed.", Detail: "got false"},
			{Kind: "tool_call", Target: "open_simple_browser", Passed: true},
		},
		Failed: []writ.VerdictCheck{
			{Kind: "evidence", Target: "visualVerification.performed", Passed: false, RejectMessage: "Visual verification was not executed.", Detail: "got false"},
		},
		AttemptsUsed: 1, AttemptsLeft: 1,
		RetryPrompt: "Return missing screenshots and validation details.", RetryAfterMS: 2000,
		NextStep: "done", EscalateTo: "frontend_reviewer", Exemption: "read-only preview",
		DecisionID: "dec_1", RecordID: "dr_1",
	}
}

// fullRun returns run_1 of tenant acme with every field set, and one
// event of each kind in its history.
func fullRun() *writ.Run {
	return &writ.Run{
		TenantID: "acme", RunID: "run_1", WorkflowID: "ui.component.change", WorkflowVersion: "1.0.0",
		Pack: "frontend@1.0.0", PackHash: "sha256:9f0b", Status: writ.RunActive, CurrentStep: "visual_check",
		Context:   map[string]any{"component": "Button", "ticket": "UI-142"},
		StartedAt: testTime,
		History: []writ.RunEvent{
			{Seq: 1, Kind: "run_started", StepID: "implement", At: testTime},
			{Seq: 2, Kind: "step_attempt", StepID: "implement", At: testTime.Add(time.Second), RecordID: "dr_0", Verdict: &writ.StepVerdict{
				RunID: "run_1", StepID: "implement", State: writ.VerdictAccepted, Checks: []writ.VerdictCheck{}, Failed: []writ.VerdictCheck{},
				AttemptsUsed: 1, NextStep: "visual_check", DecisionID: "dec_0", RecordID: "dr_0",
			}},
			{Seq: 3, Kind: "call_observed", StepID: "visual_check", At: testTime.Add(2 * time.Second), RecordID: "dr_00", Tool: "open_simple_browser"},
		},
	}
}

// fullRunPage returns a page of one run of tenant acme, every field set,
// and a next cursor.
func fullRunPage() *writ.RunPage {
	return &writ.RunPage{Runs: []writ.RunSummary{{
		TenantID: "acme", RunID: "run_1", WorkflowID: "ui.component.change", WorkflowVersion: "1.0.0",
		Pack: "frontend@1.0.0", PackHash: "sha256:9f2c", Status: writ.RunActive, CurrentStep: "visual_check",
		StartedAt: testTime, LastEventAt: testTime.Add(2 * time.Second), Attempts: 1,
	}}, NextCursor: "cmJ1bl8x"}
}

// fullWorkflows returns a fakeService answering every writ.Workflows
// method.
func fullWorkflows() *fakeService {
	return &fakeService{run: fullRun(), verdict: fullVerdict(), runs: fullRunPage()}
}

// fullApproval returns approval request apr_1 of tenant acme, approved
// and redeemed once, with every field set.
func fullApproval() *writ.ApprovalRequest {
	decided := testTime.Add(10 * time.Minute)
	return &writ.ApprovalRequest{
		ApprovalID: "apr_1", TenantID: "acme", GateID: "GATE_FINANCE_APPROVAL", Terminal: false, TargetHint: "finance_approvers",
		ApprovalModeEffective: writ.ModeDestructive,
		Binding: writ.ApprovalBinding{
			DecisionKey: "support.refund.execute", ArgumentsDigest: "hmac-sha256:9a0f", RedactedArgumentsDigest: "sha256:04", EvidenceSnapshotHash: "sha256:b2a1",
			BundleRevisions: []string{"POLICY_RETURNS_V1@1.0.0"},
		},
		RecordID: "dr_1", DecisionID: "dec_1", ReplayPacketID: "sha256:01", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		SubjectIDs:  []string{"customer:cus_77", "order:ord_881"},
		RequestedBy: writ.Requester{ActorID: "agt_support", DelegatedUserID: "usr_771", KeyID: "key_agent", Subject: "support-bot"},
		Reasons:     []writ.Reason{{Code: "high_value_refund", Message: "Refunds above 10,000 INR need finance approval."}},
		CreatedAt:   testTime, ExpiresAt: testTime.Add(24 * time.Hour), Allowance: 1,
		State: writ.ApprovalApproved,
		Decision: &writ.ApprovalDecision{
			Decision: writ.ApprovalApproved, Approver: "maria@acme.example", Reason: "Invoice checked.",
			At: decided, ValidUntil: decided.Add(24 * time.Hour), RecordID: "dr_2",
		},
		Uses: 1,
		Events: []writ.ApprovalEvent{
			{Seq: 1, Kind: writ.ApprovalEventApproved, Actor: "maria@acme.example", Reason: "Invoice checked.", RecordID: "dr_2", At: decided},
			{Seq: 2, Kind: writ.ApprovalEventRedeemed, RecordID: "dr_3", At: decided.Add(time.Minute)},
		},
	}
}

// fullService returns a fakeService answering every method of every
// interface with a value of tenant acme: record r1 and its replay, run
// run_1 and its step visual_check, approval apr_1, checkpoints up to size
// 7, and the replays of trace testTraceID.
func fullService() *fakeService {
	f := fullApprovals()
	env := []byte(`{"tool":"payments.issue_refund","arguments":{"card_number":"[REDACTED]"}}`)
	rec := fullRecord()
	rec.Replay.ReplayPacketID = record.Digest(env)
	f.blobs = map[string][]byte{rec.Replay.ReplayPacketID: env}
	f.keys = []keyring.Key{{Name: "writ-example", ID: "writ-example+18ab7136",
		VerifierKey: "writ-example+18ab7136+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4", ValidFrom: testTime}}
	f.receipt, f.record, f.page = fullReceipt(), storedRecord(rec), &writ.RecordPage{}
	f.checkpoint, f.inclusion, f.consistency = fullCheckpoint(7), fullInclusionProof(), fullConsistencyProof()
	f.run, f.verdict, f.runs, f.shadow = fullRun(), fullVerdict(), fullRunPage(), fullShadowReport()
	f.replay, f.replays = fullReplays().replay, fullReplays().replays
	return f
}

// testTraceID is the trace of the replays fullReplays answers.
const testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// equalReplay returns the replay of record r1 of tenant acme: equal.
func equalReplay() *writ.ReplayResult {
	return &writ.ReplayResult{
		TenantID: "acme", RecordID: "r1", Seq: 3, DecisionKey: "support.refund.execute",
		Kind: "check", Status: writ.ReplayEqual,
	}
}

// diffReplay returns the replay of record r2 of tenant acme: a diff with
// every field of a difference set, and values of several JSON types.
func diffReplay() *writ.ReplayResult {
	return &writ.ReplayResult{
		TenantID: "acme", RecordID: "r2", Seq: 4, DecisionKey: "support.refund.execute",
		Kind: "check", Status: writ.ReplayDiff,
		Classes: []string{"changed_policy", "tamper_detected"},
		Differences: []writ.ReplayDifference{
			{Class: "changed_policy", Path: "outputs.outcome", Recorded: json.RawMessage(`"allow"`), Replayed: json.RawMessage(`"replan_required"`)},
			{Class: "changed_policy", Path: "policy_decisions[7]", Recorded: json.RawMessage(`{"verdict":"allow","rule_ids":["R1"]}`)},
			{Class: "tamper_detected", Path: "outputs.refund_amount_inr", Recorded: json.RawMessage(`420`), Replayed: json.RawMessage(`4200`)},
			{Class: "tamper_detected", Path: "replay.replay_packet_id", Input: "envelope sha256:e53e6b98",
				Detail: "the stored request envelope hashes to sha256:94c56ab2, not to the replay_packet_id the record names"},
		},
	}
}

// errorReplay returns the replay of record r3 of tenant acme: an error.
func errorReplay() *writ.ReplayResult {
	return &writ.ReplayResult{
		TenantID: "acme", RecordID: "r3", Seq: 5, DecisionKey: "workflow:ui.component.change/visual_check",
		Kind: "step_verdict", Status: writ.ReplayError,
		Error: "the pinned pack no longer resolves the request: unknown tool",
	}
}

// fullReplays returns a fakeService answering every writ.Replays method:
// the replay of r1 (equal), and of trace testTraceID, whose records are
// r1 (equal), r2 (a diff) and r3 (an error).
func fullReplays() *fakeService {
	return &fakeService{replay: equalReplay(), replays: []*writ.ReplayResult{equalReplay(), diffReplay(), errorReplay()}}
}

// fullApprovals returns a fakeService answering every writ.Approvals
// method.
func fullApprovals() *fakeService {
	return &fakeService{approval: fullApproval(), approvals: &writ.ApprovalPage{Approvals: []writ.ApprovalRequest{*fullApproval()}, NextCursor: "c2"}}
}

// The lifecycle of a decision: the fake answers fixed values for tenant
// acme's decision dec_1 and records who asked.

func (f *fakeService) ReportExecution(ctx context.Context, r *writ.ExecutionReport) (*writ.ExecutionAck, error) {
	f.mu.Lock()
	f.saw(ctx, r.TenantID)
	f.mu.Unlock()
	if err := f.lookup(r.TenantID, r.DecisionID); err != nil {
		return nil, err
	}
	return &writ.ExecutionAck{TenantID: r.TenantID, DecisionID: r.DecisionID, RecordID: "dr_report", ReportedFor: "r1",
		Status: writ.StatusClosed, Execution: r.Status, Findings: []writ.Reason{}, TraceID: testTraceID}, f.err
}

func (f *fakeService) Resume(ctx context.Context, r *writ.ResumeRequest) (*writ.Receipt, error) {
	f.mu.Lock()
	f.saw(ctx, r.TenantID)
	f.mu.Unlock()
	if err := f.lookup(r.TenantID, r.DecisionID); err != nil {
		return nil, err
	}
	return fullReceipt(), f.err
}

func (f *fakeService) Decision(ctx context.Context, tenantID, decisionID string) (*writ.DecisionStory, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if err := f.lookup(tenantID, decisionID); err != nil {
		return nil, err
	}
	rec := f.record
	if rec == nil {
		rec = storedRecord(fullRecord())
	}
	return &writ.DecisionStory{TenantID: tenantID, DecisionID: decisionID,
		State: writ.DecisionState{Status: writ.StatusDecided, Outcome: writ.OutcomeAllow, SafeToExecute: true},
		Records: []writ.StoryRecord{{Kind: writ.StoryCheck, RecordID: rec.Record.RecordID, Status: rec.Record.Status, Timestamp: rec.Record.Timestamp,
			Seal: rec.Record.Audit, Record: rec.Raw}}}, f.err
}

func (f *fakeService) Params(ctx context.Context, tenantID string) (*writ.ParamsState, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	return &writ.ParamsState{TenantID: tenantID, Pack: "p@1.0.0", Declared: []writ.ParamDecl{}, Values: map[string]any{}, Effective: map[string]any{}}, f.err
}

func (f *fakeService) SetParams(ctx context.Context, r *writ.SetParamsRequest) (*writ.ParamsState, error) {
	f.mu.Lock()
	f.saw(ctx, r.TenantID)
	f.mu.Unlock()
	return &writ.ParamsState{TenantID: r.TenantID, Pack: "p@1.0.0", Declared: []writ.ParamDecl{}, Values: r.Values, Effective: r.Values}, f.err
}

func (f *fakeService) Erase(ctx context.Context, r *writ.EraseRequest) (*writ.Erasure, error) {
	f.mu.Lock()
	f.saw(ctx, r.TenantID)
	f.mu.Unlock()
	return &writ.Erasure{TenantID: r.TenantID, SubjectID: r.SubjectID, RecordID: "dr_erasure", Refs: []string{}}, f.err
}

func (f *fakeService) InFlight(ctx context.Context, q writ.InFlightQuery) (*writ.InFlightPage, error) {
	f.mu.Lock()
	f.saw(ctx, q.TenantID)
	f.mu.Unlock()
	return &writ.InFlightPage{Decisions: []writ.InFlightDecision{}}, f.err
}

func (f *fakeService) AddEvidence(ctx context.Context, r *writ.AddEvidenceRequest) (*writ.StoredEvidence, error) {
	f.mu.Lock()
	f.saw(ctx, r.TenantID)
	f.mu.Unlock()
	return &writ.StoredEvidence{Item: writ.EvidenceItem{TenantID: r.TenantID, Kind: r.Kind, ID: "ev_1", SubjectIDs: []string{}, Attributes: map[string]any{}, Issuer: "idv"},
		ContentAddress: "sha256:0000000000000000000000000000000000000000000000000000000000000000", Provenance: writ.ProvenanceIssued, RecordID: "dr_1", Seq: 1}, nil
}

func (f *fakeService) Evidence(ctx context.Context, tenantID, id string) (*writ.StoredEvidence, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	return &writ.StoredEvidence{Item: writ.EvidenceItem{TenantID: tenantID, Kind: "identity_verification", ID: id, SubjectIDs: []string{}, Attributes: map[string]any{}, Issuer: "idv"},
		ContentAddress: "sha256:0000000000000000000000000000000000000000000000000000000000000000", Provenance: writ.ProvenanceIssued, RecordID: "dr_1", Seq: 1}, nil
}

func (f *fakeService) RevokeEvidence(ctx context.Context, r *writ.RevokeEvidenceRequest) (*writ.StoredEvidence, error) {
	f.mu.Lock()
	f.saw(ctx, r.TenantID)
	f.mu.Unlock()
	se := &writ.StoredEvidence{Item: writ.EvidenceItem{TenantID: r.TenantID, Kind: "identity_verification", ID: r.ID, SubjectIDs: []string{}, Attributes: map[string]any{}, Issuer: "idv"},
		ContentAddress: "sha256:0000000000000000000000000000000000000000000000000000000000000000", Provenance: writ.ProvenanceIssued, RecordID: "dr_1", Seq: 1}
	se.Revoked = &writ.EvidenceRevocation{Reason: r.Reason, RecordID: "dr_2"}
	return se, nil
}

func (f *fakeService) annotation(ctx context.Context, kind, tenantID, about string) (*writ.AnnotationAck, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if err := f.lookup(tenantID, about); err != nil {
		return nil, err
	}
	return &writ.AnnotationAck{TenantID: tenantID, RecordID: "dr_" + kind, About: about, DecisionID: "dec_1", Kind: kind,
		Status: writ.StatusDecided, Outcome: "o", TraceID: testTraceID}, f.err
}

func (f *fakeService) Retract(ctx context.Context, r *writ.RetractRequest) (*writ.AnnotationAck, error) {
	return f.annotation(ctx, writ.StoryRetraction, r.TenantID, r.RecordID)
}

func (f *fakeService) Feedback(ctx context.Context, r *writ.FeedbackRequest) (*writ.AnnotationAck, error) {
	return f.annotation(ctx, writ.StoryFeedback, r.TenantID, r.RecordID)
}

// RecordReplay answers as annotation does, but sees nothing: the replay
// it records, asked for first, saw the tenant and the principal.
func (f *fakeService) RecordReplay(ctx context.Context, res *writ.ReplayResult) (*writ.AnnotationAck, error) {
	return &writ.AnnotationAck{TenantID: res.TenantID, RecordID: "dr_replay", About: res.RecordID, DecisionID: "dec_1", Kind: writ.StoryReplayResult,
		Status: writ.StatusDecided, Outcome: res.Status, TraceID: testTraceID}, f.err
}

func (f *fakeService) Links(ctx context.Context, tenantID, recordID string) (*writ.RecordLinks, error) {
	f.mu.Lock()
	f.saw(ctx, tenantID)
	f.mu.Unlock()
	if err := f.lookup(tenantID, recordID); err != nil {
		return nil, err
	}
	return &writ.RecordLinks{TenantID: tenantID, RecordID: recordID, SupersededBy: []string{}, Feedback: []string{}}, f.err
}
