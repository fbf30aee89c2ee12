package writ

import (
	"context"
	"time"
)

// An evidence item is a fact writ can resolve: kept per tenant in the
// evidence store, sealed in the tenant's chain as an evidence record
// (decision key "evidence:<kind>"), content-addressed, and never edited
// (a revocation is a record of its own). A check cites an item by its id
// or its content address; writ resolves the citation against the store
// before deciding, and the decision reads the stored item, not the
// caller's copy (docs/trust.md, docs/pack-format.md).

// EvidenceItem is the canonical item: what its content address digests
// (record.CanonicalDigest: "sha256:" over the RFC 8785 form) and what an
// issuer signs.
type EvidenceItem struct {
	TenantID string `json:"tenant_id"`
	Kind     string `json:"kind"`
	// ID names the item within its tenant: the issuer's own id, or one
	// writ assigns ("ev_" and 26 base32 characters). It never begins
	// with "sha256:", which names items by content address.
	ID         string         `json:"id"`
	SubjectIDs []string       `json:"subject_ids"`
	Attributes map[string]any `json:"attributes"`
	ObservedAt time.Time      `json:"observed_at"`
	// ExpiresAt, when set, is when the item stops supporting decisions.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Issuer names who vouches for the item: the subject of the issuer
	// key that submitted it, or the issuer that signed it.
	Issuer string `json:"issuer"`
}

// AddEvidenceRequest submits an evidence item (POST /v1/evidence). Either
// the item's fields are given and the caller holds the issuer role, or
// JWS is given alone (with TenantID): a compact JWS whose payload is the
// item's canonical JSON, signed by an evidence issuer key the tenant
// registered; then any key of the tenant may carry it in.
type AddEvidenceRequest struct {
	TenantID   string         `json:"tenant_id"`
	Kind       string         `json:"kind,omitempty"`
	ID         string         `json:"id,omitempty"`
	SubjectIDs []string       `json:"subject_ids,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
	ObservedAt *time.Time     `json:"observed_at,omitempty"`
	ExpiresAt  *time.Time     `json:"expires_at,omitempty"`
	// Issuer is set by writ from the credential (the issuer key's
	// subject) or the signature (the issuer's name); a request that sets
	// it to anything else is refused.
	Issuer string `json:"issuer,omitempty"`
	JWS    string `json:"jws,omitempty"`
	// Observation, when set, says the item is what the MCP gateway saw a
	// tool return: only the gateway submits it (its own key has the
	// gateway role, or it runs in process), and the item is observed.
	Observation *EvidenceObservation `json:"observation,omitempty"`
	TraceID     string               `json:"trace_id,omitempty"`
}

// EvidenceObservation names the tool call whose result the MCP gateway
// captured as an evidence item (tools.yaml, captures): the call's check
// decided it, and it succeeded.
type EvidenceObservation struct {
	// Tool is the tool as the agent called it; ToolCallID the gateway's
	// id of the call (the check's tool_call_id).
	Tool       string `json:"tool"`
	ToolCallID string `json:"tool_call_id"`
	// DecisionID is the decision that allowed the call.
	DecisionID string `json:"decision_id"`
	// ResultDigest is "sha256:" over the canonical JSON of the result the
	// gateway returned to the agent (its execution report's
	// result_digest).
	ResultDigest string `json:"result_digest"`
}

// RevokeEvidenceRequest revokes an item (POST /v1/evidence/{id}/revoke):
// a new record, never an edit. Only an issuer key may revoke.
type RevokeEvidenceRequest struct {
	TenantID string `json:"tenant_id"`
	ID       string `json:"id"`
	Reason   string `json:"reason"`
	TraceID  string `json:"trace_id,omitempty"`
}

// StoredEvidence is an evidence item as the store holds it.
type StoredEvidence struct {
	Item EvidenceItem `json:"item"`
	// ContentAddress is "sha256:" over the item's canonical JSON.
	ContentAddress string `json:"content_address"`
	// Provenance is issued (submitted by an issuer key, or signed by a
	// registered issuer key) or observed (captured by the MCP gateway
	// from a tool's result: Observation names the call).
	Provenance  Provenance           `json:"provenance"`
	Observation *EvidenceObservation `json:"observation,omitempty"`
	// SubmittedBy is the API key that submitted it ("" in development
	// mode); SignedBy the issuer key id (the JWS kid) that signed it.
	SubmittedBy string `json:"submitted_by,omitempty"`
	SignedBy    string `json:"signed_by,omitempty"`
	// RecordID is the evidence record that sealed it, at Seq.
	RecordID string    `json:"record_id"`
	Seq      int64     `json:"seq"`
	StoredAt time.Time `json:"stored_at"`
	// Revoked is set once the item is revoked.
	Revoked *EvidenceRevocation `json:"revoked,omitempty"`
}

// EvidenceRevocation is the revocation of an item.
type EvidenceRevocation struct {
	At       time.Time `json:"at"`
	Reason   string    `json:"reason"`
	By       string    `json:"by,omitempty"`
	RecordID string    `json:"record_id"`
}

// The decision keys of the records of the evidence store: an item is
// sealed as an evidence record (EvidenceKeyPrefix + kind), a revocation
// as an evidence revocation record (EvidenceRevocationKeyPrefix + kind).
const (
	EvidenceKeyPrefix           = "evidence:"
	EvidenceRevocationKeyPrefix = "evidence_revocation:"
)

// Resolutions of a cited evidence item (Evidence.Resolution), set by writ
// when it resolves a check's citations against the store.
const (
	// ResolutionResolved: the item is in the tenant's store (or carried
	// in with a valid issuer signature) and the citation matches it.
	ResolutionResolved = "resolved"
	// ResolutionUnresolvable: no such item in the tenant's store; the
	// citation is the caller's word (provenance claimed).
	ResolutionUnresolvable = "unresolvable"
	// ResolutionHashMismatch: the citation's hash is not the stored
	// item's content address, or the stored item no longer hashes to it.
	ResolutionHashMismatch = "hash_mismatch"
	// ResolutionBadSignature: the carried JWS does not verify with a key
	// the tenant registered.
	ResolutionBadSignature = "bad_signature"
	// ResolutionSubjectMismatch: the item is in the tenant's store (or
	// validly signed), but none of its subject ids is one of the check's:
	// it is a fact about someone else (one customer's identity
	// verification cited on another customer's refund), so it satisfies
	// no requirement and no rule sees it. The citation pins the item's
	// subjects.
	ResolutionSubjectMismatch = "subject_mismatch"
)

// EvidenceService is the evidence store's API (the engine implements it;
// so do the HTTP client and the servers).
type EvidenceService interface {
	AddEvidence(ctx context.Context, req *AddEvidenceRequest) (*StoredEvidence, error)
	Evidence(ctx context.Context, tenantID, id string) (*StoredEvidence, error)
	RevokeEvidence(ctx context.Context, req *RevokeEvidenceRequest) (*StoredEvidence, error)
}

// MaxEvidenceItemBytes bounds an evidence item's canonical JSON (and a
// JWS carrying one, at twice the size for its encoding).
const MaxEvidenceItemBytes = 16 << 10
