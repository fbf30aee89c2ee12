package writ

import "time"

// CheckRequest asks whether one side effect may happen now. It names the
// action (a tool, or a decision key directly), the actor, the subjects, the
// evidence the caller holds and the resources it has used so far.
//
// Arguments, Context and Outputs are free-form JSON objects; everything else
// is typed. Decoders must reject unknown fields.
type CheckRequest struct {
	// TenantID is the isolated customer space the check belongs to. Required.
	TenantID string `json:"tenant_id"`
	// DecisionKey names the decision spec. Optional when Tool is given and
	// the pack's tool manifest maps the tool to a decision key.
	DecisionKey string `json:"decision_key,omitempty"`
	// Tool is the tool (or MCP tool) whose call is being checked.
	Tool string `json:"tool,omitempty"`
	// Arguments are the arguments of the side effect. Their RFC 8785 digest
	// binds idempotency, must_not_retry_same_action and (later) approvals.
	Arguments map[string]any `json:"arguments,omitempty"`
	// ApprovalMode is the approval mode the caller asks to act under. The
	// effective mode is the riskier of this and the spec's mode (the tool's
	// ceiling when neither is set); above the tool's ceiling, the check is
	// denied.
	ApprovalMode ApprovalMode `json:"approval_mode,omitempty"`
	// ToolDefinitionDigest is the digest of the tool's definition as the
	// caller observed it (the MCP gateway sends it; see docs/mcp.md). When
	// the tool manifest pins a digest for the tool, another digest is
	// denied with reason tool_definition_changed.
	ToolDefinitionDigest string `json:"tool_definition_digest,omitempty"`
	// ToolCallID identifies the tool call being checked, when the caller
	// has one; it becomes the record's tool_lineage entry for this call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IdempotencyKey makes the check safe to retry: the same tenant, key and
	// arguments return the same receipt and write one record. A receipt
	// that asks to retry this node (a replan, or an approval still needed)
	// does not claim the key, so the retry is decided afresh.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// ApprovalIDs present an approval to redeem (at most one per check):
	// the approval_id a human_review receipt pointed to, once approved.
	ApprovalIDs []string `json:"approval_ids,omitempty"`

	Actor      Actor        `json:"actor"`
	IntentRef  string       `json:"intent_ref,omitempty"`
	SubjectIDs []string     `json:"subject_ids,omitempty"`
	InputsRefs *InputsRefs  `json:"inputs_refs,omitempty"`
	Workflow   *WorkflowRef `json:"workflow,omitempty"`

	// Evidence are typed references to facts the caller holds.
	Evidence []Evidence `json:"evidence,omitempty"`
	// Context carries facts that rules may read (for example a fraud score).
	Context map[string]any `json:"context,omitempty"`
	// Outputs is the typed result the action will produce if allowed; it is
	// validated against the decision spec's outputs schema.
	Outputs map[string]any `json:"outputs,omitempty"`

	Usage       *Usage             `json:"usage,omitempty"`
	Scorecard   map[string]float64 `json:"scorecard,omitempty"`
	ToolLineage []ToolLineage      `json:"tool_lineage,omitempty"`
	// Lineage pins the parts of the runtime substrate that the caller owns
	// (knowledge-graph snapshot, model profile, evaluator suite).
	Lineage *CallerLineage `json:"lineage,omitempty"`

	// Supersedes names an earlier record of the tenant that this decision
	// corrects. Records are never edited: a correction is a new record
	// that points at the one it replaces.
	Supersedes string `json:"supersedes,omitempty"`

	// TraceID is the W3C trace id (32 lowercase hex). Over HTTP it comes from
	// the traceparent header; when absent, writ generates one.
	TraceID string `json:"trace_id,omitempty"`
	// TraceState is the W3C tracestate of the caller's trace (vendor
	// entries such as "congo=t61rcWkgMzE"), kept in the stored envelope
	// so an auditor can join the decision to the caller's tracing
	// system. Over HTTP it comes from the tracestate header that goes
	// with a valid traceparent. Rules never read it.
	TraceState string `json:"trace_state,omitempty"`
}

// Actor separates who proposed the action from who delegated authority.
//
// A caller names Type, ID, WorkloadIdentity and DelegatedUserID; the
// members after them are writ's to set (BindActor), from the credential
// the request came with, and a request that sets any of them is refused.
// Records sealed before writ set them have none (docs/trust.md).
type Actor struct {
	Type             string `json:"type"` // AGENT, HUMAN or SERVICE
	ID               string `json:"id"`
	WorkloadIdentity string `json:"workload_identity,omitempty"`
	DelegatedUserID  string `json:"delegated_user_id,omitempty"`

	// Provenance says how writ knows Type and ID: authenticated (from
	// the API key the request came with) or claimed (development mode,
	// no keys).
	Provenance Provenance `json:"provenance,omitempty"`
	// KeyID is the API key the request came with (keyed mode).
	KeyID string `json:"key_id,omitempty"`
	// ActedBy is the API key's own principal when the key acted for the
	// actor (a key's acts_for): who acted for whom.
	ActedBy *ActorRef `json:"acted_by,omitempty"`
	// DelegatedUserProvenance says how writ knows DelegatedUserID:
	// authenticated (the subject of a delegation token writ verified) or
	// claimed. Set only when DelegatedUserID is.
	DelegatedUserProvenance Provenance `json:"delegated_user_provenance,omitempty"`
	// DelegatedUserIssuer is the issuer of the delegation token that
	// authenticated DelegatedUserID.
	DelegatedUserIssuer string `json:"delegated_user_issuer,omitempty"`
}

// ActorRef names a principal: its type and id.
type ActorRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Claimed returns the members of a a caller may name, without the ones
// writ sets.
func (a Actor) Claimed() Actor {
	return Actor{Type: a.Type, ID: a.ID, WorkloadIdentity: a.WorkloadIdentity, DelegatedUserID: a.DelegatedUserID}
}

// Bound reports whether any member writ sets is set.
func (a Actor) Bound() bool {
	return a.Provenance != "" || a.KeyID != "" || a.ActedBy != nil || a.DelegatedUserProvenance != "" || a.DelegatedUserIssuer != ""
}

// Actor types.
const (
	ActorAgent   = "AGENT"
	ActorHuman   = "HUMAN"
	ActorService = "SERVICE"
)

// InputsRefs references the request, the session and attachments by id and
// hash; raw payloads are never stored in a record.
type InputsRefs struct {
	Request     string   `json:"request,omitempty"`
	Session     string   `json:"session,omitempty"`
	Attachments []string `json:"attachments,omitempty"`
}

// WorkflowRef places the check inside a larger workflow.
type WorkflowRef struct {
	WorkflowID string `json:"workflow_id,omitempty"`
	NodeID     string `json:"node_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	StepID     string `json:"step_id,omitempty"`
}

// Evidence is a typed reference to a fact: kind:id#version, its content
// hash, the tenant it belongs to and when it was observed. Attributes carry
// the few typed facts rules need (a review status, say), never raw payloads.
type Evidence struct {
	Kind       string         `json:"kind"`
	ID         string         `json:"id"`
	Version    string         `json:"version,omitempty"`
	Hash       string         `json:"hash,omitempty"`
	TenantID   string         `json:"tenant_id,omitempty"`
	ObservedAt *time.Time     `json:"observed_at,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
	// JWS, when set, carries an issuer-signed item (AddEvidenceRequest's
	// JWS): writ verifies it with the tenant's registered issuer keys and
	// decides on the signed item.
	JWS string `json:"jws,omitempty"`

	// Set by writ when it resolves the citation against the evidence
	// store (a request that sets any of them is refused); the stored
	// request envelope pins them, so replay decides on exactly what was
	// resolved. A resolved citation's Kind, ID, Hash (the content
	// address), TenantID, ObservedAt and Attributes are the stored
	// item's. Envelopes sealed before writ resolved evidence have none
	// of them, and are decided as they were.
	Resolution string     `json:"resolution,omitempty"`
	Provenance Provenance `json:"provenance,omitempty"`
	Issuer     string     `json:"issuer,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	// SubjectIDs are the resolved item's subjects, pinned when the
	// check's spec takes a context field from evidence
	// (context_from_evidence), which must know whose fact it is, and
	// when the item is about none of the check's subjects
	// (ResolutionSubjectMismatch), so the record shows whose it was.
	SubjectIDs []string `json:"subject_ids,omitempty"`
}

// Ref renders the evidence reference as kind:id#version (or #hash).
func (e Evidence) Ref() string {
	ref := e.Kind + ":" + e.ID
	switch {
	case e.Version != "":
		ref += "#" + e.Version
	case e.Hash != "":
		ref += "#" + e.Hash
	}
	return ref
}

// Usage is the resource use of the run so far, checked against the spec's budgets.
type Usage struct {
	Tokens       int64   `json:"tokens,omitempty"`
	ToolCalls    int64   `json:"tool_calls,omitempty"`
	CostUSDCents float64 `json:"cost_usd_cents,omitempty"`
	WallClockMS  int64   `json:"wall_clock_ms,omitempty"`
	// Provenance is set by writ (BindUsage): issued when a key with the
	// role meter sent the figures; empty means claimed, the caller's word.
	Provenance Provenance `json:"provenance,omitempty"`
}

// MeteredUsage is what writ counted for a check's budgets: the tool
// calls, the checks it allowed in the session with this one (for a
// tool_calls budget), and the checks it allowed the actor in an
// actor_tool_calls budget's window with this one. Its provenance is
// observed. A member writ did not count is absent (never 0: each count
// includes this check).
type MeteredUsage struct {
	ToolCalls      int64      `json:"tool_calls,omitempty"`
	ActorToolCalls int64      `json:"actor_tool_calls,omitempty"`
	Provenance     Provenance `json:"provenance"`
}

// ToolLineage references one side-effect transcript entry.
type ToolLineage struct {
	ToolCallID            string       `json:"tool_call_id"`
	ToolResultID          string       `json:"tool_result_id,omitempty"`
	ApprovalModeEffective ApprovalMode `json:"approval_mode_effective,omitempty"`
	IdempotencyKey        string       `json:"idempotency_key,omitempty"`
	ReversalToken         string       `json:"reversal_token,omitempty"`
}

// CallerLineage pins versions the caller owns.
type CallerLineage struct {
	KGSnapshot     string `json:"kg_snapshot,omitempty"`
	ModelProfile   string `json:"model_profile,omitempty"`
	EvaluatorSuite string `json:"evaluator_suite,omitempty"`
}

// ApprovalMode is the approval class of an action, from least to most risky.
type ApprovalMode string

// Approval modes, in increasing order of risk.
const (
	ModeReadOnly    ApprovalMode = "read_only"
	ModeLocalWrite  ApprovalMode = "local_write"
	ModeNetwork     ApprovalMode = "network"
	ModeDelegated   ApprovalMode = "delegated"
	ModeDestructive ApprovalMode = "destructive"
)

// Rank orders approval modes; an unknown mode ranks -1.
func (m ApprovalMode) Rank() int {
	switch m {
	case ModeReadOnly:
		return 0
	case ModeLocalWrite:
		return 1
	case ModeNetwork:
		return 2
	case ModeDelegated:
		return 3
	case ModeDestructive:
		return 4
	}
	return -1
}

// ValidTraceID reports whether id is a W3C Trace Context trace id: 32
// lowercase hex digits, not all zero.
func ValidTraceID(id string) bool {
	if len(id) != 32 {
		return false
	}
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
		zero = zero && c == '0'
	}
	return !zero
}

// ContextSource says where a context field that a spec takes from
// evidence (context_from_evidence) got its value: the cited item writ
// resolved, and that item's provenance. Evidence and Provenance are
// empty when no cited item could fill the field (then the field is
// absent); IgnoredClaim says the caller sent a value of its own, which
// writ did not read.
type ContextSource struct {
	Kind         string     `json:"kind"`
	Attribute    string     `json:"attribute"`
	Evidence     string     `json:"evidence,omitempty"`
	Provenance   Provenance `json:"provenance,omitempty"`
	IgnoredClaim bool       `json:"ignored_claim,omitempty"`
}
