package writ

import "time"

// Status is the state a decision record names explicitly.
type Status string

// Record statuses.
const (
	StatusDecided   Status = "DECIDED"
	StatusDeferred  Status = "DEFERRED"
	StatusRejected  Status = "REJECTED"
	StatusEscalated Status = "ESCALATED"
	StatusInFlight  Status = "IN_FLIGHT"
	StatusClosed    Status = "CLOSED"
)

// Record is a decision record: the append-only, hash-chained audit artifact
// of one governed decision. It carries references and hashes, never raw
// payloads. Field names follow the decision record contract; writ adds
// tenant_id (the partition key), decision_id (shared with the receipt),
// action_class, approval_mode_effective and supersedes.
//
// Once sealed, a record's bytes never change: the ledger keeps the exact
// canonical bytes that were hashed and serves them as they are.
type Record struct {
	RecordID        string    `json:"record_id"`
	DecisionID      string    `json:"decision_id"`
	TenantID        string    `json:"tenant_id"`
	DecisionKey     string    `json:"decision_key"`
	DecisionVersion string    `json:"decision_version"`
	Timestamp       time.Time `json:"timestamp"`
	Status          Status    `json:"status"`
	ActionClass     string    `json:"action_class,omitempty"`
	// Supersedes names the record this one corrects; records are never edited.
	Supersedes string `json:"supersedes,omitempty"`

	Actor        Actor          `json:"actor"`
	IntentRef    string         `json:"intent_ref,omitempty"`
	SubjectIDs   []string       `json:"subject_ids"`
	InputsRefs   InputsRefs     `json:"inputs_refs"`
	Outputs      map[string]any `json:"outputs"`
	EvidenceRefs []string       `json:"evidence_refs"`

	PolicyDecisions       []PolicyDecision `json:"policy_decisions"`
	Approvals             []Approval       `json:"approvals"`
	ApprovalModeEffective ApprovalMode     `json:"approval_mode_effective,omitempty"`
	ControlsActive        ControlsActive   `json:"controls_active"`

	ToolLineage []ToolLineage `json:"tool_lineage,omitempty"`
	// Execution is set on a permit that expires or needs a report, and on
	// an execution report's record.
	Execution *Execution         `json:"execution,omitempty"`
	Scorecard map[string]float64 `json:"scorecard,omitempty"`
	// ScorecardFailed lists, in byte order, the scorecard dimensions
	// below the spec's pass mark (scorecard_pass), a dimension the
	// scorecard leaves out included. It is set only when the spec
	// declares a pass mark, the record carries a scorecard and at least
	// one dimension failed.
	ScorecardFailed []string `json:"scorecard_failed,omitempty"`
	// BudgetUsage is the caller's usage, as it sent it: claimed.
	BudgetUsage *Usage `json:"budget_usage,omitempty"`
	// MeteredUsage is what writ itself counted of the session's usage
	// for the spec's budgets (observed), set when it metered the check;
	// the budgets counted the larger of it and BudgetUsage.
	MeteredUsage *MeteredUsage `json:"metered_usage,omitempty"`
	// ContextSources says, for each context field the spec takes from
	// evidence (context_from_evidence), which cited item filled it and
	// with what provenance, or that none did; set only for such a spec.
	ContextSources map[string]ContextSource `json:"context_sources,omitempty"`
	Lineage        Lineage                  `json:"lineage"`
	TraceID        string                   `json:"trace_id"`
	Replay         Replay                   `json:"replay"`
	// History pins the history aggregates the decision read, by name
	// (absent when it read none). JSON field order does not matter: the
	// sealed bytes are canonical (RFC 8785).
	History []HistoryValue `json:"history,omitempty"`
	// Params pins the tenant parameter values the decision's conditions
	// could read (absent when its pack declares none; see ParamsPin).
	Params *ParamsPin `json:"params,omitempty"`
	// Bound pins what the store keeps beside the record, written in the
	// same transaction: the receipt answered with it, the run event and
	// approval facts it appends. Records sealed before writ bound them
	// have none.
	Bound *Bound `json:"bound,omitempty"`
	Audit Audit  `json:"audit"`
}

// Bound holds the digests of what a store keeps beside a record, so that
// the record's seal covers them: an edit to any of them no longer matches
// its digest. Each member is set only when the record has that companion.
// docs/ledger-format.md defines the bytes each digest covers.
type Bound struct {
	// Receipt is the digest of the stored receipt's exact bytes.
	Receipt string `json:"receipt,omitempty"`
	// RunEvent is the digest of the run event appended with the record.
	RunEvent string `json:"run_event,omitempty"`
	// RunStart is the digest of the start event of that run, so that a
	// run's start is pinned by every record that advances it.
	RunStart string `json:"run_start,omitempty"`
	// ApprovalRequests are the digests of the approval requests the
	// record's check created, in the order created.
	ApprovalRequests []string `json:"approval_requests,omitempty"`
	// ApprovalEvent is the digest of the approval event appended with the
	// record (a decision or a redemption).
	ApprovalEvent string `json:"approval_event,omitempty"`
	// Shadow is the digest of the shadow pack's decision of the same
	// check, stored beside the record (writ serve --shadow-pack).
	Shadow string `json:"shadow,omitempty"`
	// Claims are the digests of the index rows the store keeps pointing
	// at the record, through which its receipt is answered again. Every
	// record writ writes has it ({} when the record claims nothing);
	// records sealed before writ bound claims have none.
	Claims *BoundClaims `json:"claims,omitempty"`
}

// BoundClaims are the digests of what a record claims in the store's
// indexes (docs/ledger-format.md §2.7), each present when it claims it.
type BoundClaims struct {
	// Idempotency is the digest of its claim of an idempotency key.
	Idempotency string `json:"idempotency,omitempty"`
	// Block is the digest of its block of an action (must not retry).
	Block string `json:"block,omitempty"`
	// Report is the digest of its claim of its decision's one execution
	// report.
	Report string `json:"report,omitempty"`
}

// PolicyDecision names one deterministic check that was applied: a rule of
// a policy bundle, an evidence requirement or a budget of the decision
// spec, or a runtime control. PolicyDecisionID is stable for the same check
// at the same version, so queries can group by it.
type PolicyDecision struct {
	PolicyDecisionID string   `json:"policy_decision_id"`
	BundleID         string   `json:"bundle_id"`
	RuleIDs          []string `json:"rule_ids"`
	Verdict          string   `json:"verdict"`
}

// Approval is a human or delegated gate decision bound to frozen evidence.
type Approval struct {
	GateID                string       `json:"gate_id"`
	Approver              string       `json:"approver"`
	ApprovalModeEffective ApprovalMode `json:"approval_mode_effective"`
	EvidenceSnapshotHash  string       `json:"evidence_snapshot_hash"`
	DecidedAt             time.Time    `json:"decided_at"`
}

// ControlsActive lists the runtime controls in force at decision time.
type ControlsActive struct {
	MustRefuse           []string `json:"must_refuse"`
	MustEscalate         []string `json:"must_escalate"`
	ApprovalGatesActive  []string `json:"approval_gates_active"`
	RedactionRulesActive []string `json:"redaction_rules_active"`
}

// Lineage pins the runtime substrate the decision was made under.
type Lineage struct {
	PackVersion    string   `json:"pack_version"`
	PackHash       string   `json:"pack_hash"`
	PolicyVersions []string `json:"policy_versions"`
	DecisionSpec   string   `json:"decision_spec"`
	KGSnapshot     string   `json:"kg_snapshot,omitempty"`
	ModelProfile   string   `json:"model_profile,omitempty"`
	EvaluatorSuite string   `json:"evaluator_suite,omitempty"`
}

// Replay holds the content addresses replay needs to find the pinned inputs.
type Replay struct {
	// ReplayPacketID is the content address of the stored (redacted)
	// request envelope.
	ReplayPacketID          string `json:"replay_packet_id"`
	CompiledContextHash     string `json:"compiled_context_hash"`
	EvidenceSnapshotHash    string `json:"evidence_snapshot_hash"`
	ArgumentsDigest         string `json:"arguments_digest"`
	ToolTranscriptChainHash string `json:"tool_transcript_chain_hash,omitempty"`
}

// Audit is the seal. Seq is the record's position in its tenant's chain
// (1-based); PrevHash is the previous record's RecordHash (GenesisHash for
// the first). RecordHash is "sha256:" and the hex SHA-256 of the record's
// canonical bytes: the RFC 8785 form of the record with audit.record_hash,
// audit.signed_by and audit.signature left out. The signature fields are
// filled by the sealed ledger.
type Audit struct {
	Seq        int64  `json:"seq"`
	PrevHash   string `json:"prev_hash"`
	RecordHash string `json:"record_hash,omitempty"`
	SignedBy   string `json:"signed_by,omitempty"`
	Signature  string `json:"signature,omitempty"`
}

// GenesisHash is the prev_hash of a tenant's first record.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
