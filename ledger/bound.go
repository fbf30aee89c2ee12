package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// What a store keeps beside a record (its receipt, the run event and the
// approval facts appended with it) is not sealed itself. The record binds
// each by digest (writ.Record.Bound) before it is sealed, so that an edit
// to any of them is caught: by VerifyStored, and before a stored receipt
// is answered again (CheckStoredReceipt).

// ErrReceiptMismatch is the error of a stored receipt that does not match
// the digest its sealed record binds: it must not be answered.
var ErrReceiptMismatch = errors.New("the stored receipt does not match its sealed record")

// runEventView is the part of a run event its digest covers: everything
// but the seq, which the store assigns inside the transaction, after the
// record is sealed.
type runEventView struct {
	TenantID string          `json:"tenant_id"`
	RunID    string          `json:"run_id"`
	Kind     string          `json:"kind"`
	StepID   string          `json:"step_id"`
	RecordID string          `json:"record_id"`
	At       time.Time       `json:"at"`
	Data     json.RawMessage `json:"data"`
}

// RunEventDigest is the digest a record binds a run event by: the SHA-256
// of the RFC 8785 form of the event's tenant_id, run_id, kind, step_id,
// record_id, at (RFC 3339, UTC) and data, without its seq. recordID is
// the record the event is appended with (empty for a run's start).
func RunEventDigest(ev *RunEvent, recordID string) (string, error) {
	data := ev.Data
	if data == nil {
		data = json.RawMessage("{}")
	}
	return record.CanonicalDigest(runEventView{TenantID: ev.TenantID, RunID: ev.RunID, Kind: ev.Kind, StepID: ev.StepID,
		RecordID: recordID, At: ev.At.UTC(), Data: data})
}

// approvalEventView is the part of an approval event its digest covers:
// everything but the seq, which the store assigns.
type approvalEventView struct {
	TenantID   string    `json:"tenant_id"`
	ApprovalID string    `json:"approval_id"`
	Kind       string    `json:"kind"`
	Actor      string    `json:"actor"`
	Reason     string    `json:"reason"`
	RecordID   string    `json:"record_id"`
	At         time.Time `json:"at"`
}

// ApprovalEventDigest is the digest a record binds an approval event by:
// the SHA-256 of the RFC 8785 form of the event's tenant_id, approval_id,
// kind, actor, reason, record_id and at (RFC 3339, UTC), without its seq.
func ApprovalEventDigest(tenantID, approvalID string, ev *writ.ApprovalEvent, recordID string) (string, error) {
	return record.CanonicalDigest(approvalEventView{TenantID: tenantID, ApprovalID: approvalID, Kind: ev.Kind, Actor: ev.Actor,
		Reason: ev.Reason, RecordID: recordID, At: ev.At.UTC()})
}

// shadowView is the part of a shadow decision its digest covers: all of
// it, its time in UTC and its lists never null.
type shadowView struct {
	TenantID        string                `json:"tenant_id"`
	RecordID        string                `json:"record_id"`
	DecisionKey     string                `json:"decision_key"`
	At              time.Time             `json:"at"`
	Pack            string                `json:"pack"`
	PackHash        string                `json:"pack_hash"`
	EnforcedOutcome writ.Outcome          `json:"enforced_outcome"`
	Outcome         writ.Outcome          `json:"outcome"`
	Status          writ.Status           `json:"status"`
	PolicyDecisions []writ.PolicyDecision `json:"policy_decisions"`
	Reasons         []writ.Reason         `json:"reasons"`
}

// ShadowDecisionDigest is the digest a record binds the shadow decision
// stored beside it by: the SHA-256 of the RFC 8785 form of the decision's
// tenant_id, record_id (the record's, recordID), decision_key, at (RFC
// 3339, UTC), pack, pack_hash, enforced_outcome, outcome, status,
// policy_decisions and reasons (empty lists as []).
func ShadowDecisionDigest(d *ShadowDecision, recordID string) (string, error) {
	v := shadowView{TenantID: d.TenantID, RecordID: recordID, DecisionKey: d.DecisionKey, At: d.At.UTC(), Pack: d.Pack, PackHash: d.PackHash,
		EnforcedOutcome: d.EnforcedOutcome, Outcome: d.Outcome, Status: d.Status, PolicyDecisions: d.PolicyDecisions, Reasons: d.Reasons}
	if v.PolicyDecisions == nil {
		v.PolicyDecisions = []writ.PolicyDecision{}
	}
	if v.Reasons == nil {
		v.Reasons = []writ.Reason{}
	}
	return record.CanonicalDigest(v)
}

// ApprovalRequestDigest is the digest a record binds an approval request
// it created by: the SHA-256 of the RFC 8785 form of the request as
// stored, without what is derived from its events (state, decision, uses,
// events).
func ApprovalRequestDigest(r *writ.ApprovalRequest) (string, error) {
	c := *r
	c.State, c.Decision, c.Uses, c.Events = "", nil, 0, nil
	return record.CanonicalDigest(&c)
}

// idempotencyView, blockView and reportView are what the digests of a
// record's claims cover: the index row as the store keeps it, without
// the record id it points at (the record that binds the digest is that
// record).
type idempotencyView struct {
	TenantID   string `json:"tenant_id"`
	Key        string `json:"key"`
	ArgsDigest string `json:"args_digest"`
}

type blockView struct {
	TenantID    string `json:"tenant_id"`
	DecisionKey string `json:"decision_key"`
	ArgsDigest  string `json:"args_digest"`
	PackHash    string `json:"pack_hash"`
}

type reportView struct {
	TenantID     string `json:"tenant_id"`
	DecisionID   string `json:"decision_id"`
	ReportDigest string `json:"report_digest"`
}

// IdempotencyDigest is the digest a record binds its claim of an
// idempotency key by (bound.claims.idempotency): the SHA-256 of the RFC
// 8785 form of the claim's tenant_id, key and args_digest.
func IdempotencyDigest(tenantID string, c *IdempotencyClaim) (string, error) {
	return record.CanonicalDigest(idempotencyView{TenantID: tenantID, Key: c.Key, ArgsDigest: c.ArgsDigest})
}

// BlockDigest is the digest a record binds its block of an action by
// (bound.claims.block): the SHA-256 of the RFC 8785 form of the block's
// tenant_id, decision_key, args_digest and pack_hash.
func BlockDigest(tenantID string, k *BlockKey) (string, error) {
	return record.CanonicalDigest(blockView{TenantID: tenantID, DecisionKey: k.DecisionKey, ArgsDigest: k.ArgsDigest, PackHash: k.PackHash})
}

// ReportDigest is the digest a record binds its claim of its decision's
// execution report by (bound.claims.report): the SHA-256 of the RFC 8785
// form of the claim's tenant_id, decision_id and report_digest.
func ReportDigest(tenantID string, c *ReportClaim) (string, error) {
	return record.CanonicalDigest(reportView{TenantID: tenantID, DecisionID: c.DecisionID, ReportDigest: c.ReportDigest})
}

// Bind sets e.Record.Bound to the digests of what e stores beside its
// record: its receipt, its run event (and runStart, the start event of
// that run, when given), the approval requests it creates, its approval
// event, its shadow decision, and its claims (idempotency key, block,
// execution report). Call it before the record is presealed: the digests
// are part of the sealed bytes.
func Bind(e *Entry, runStart *RunEvent) error {
	rec := e.Record
	b := &writ.Bound{}
	if e.Receipt != nil {
		b.Receipt = record.Digest(e.Receipt)
	}
	var err error
	if ev := e.RunEvent; ev != nil {
		if b.RunEvent, err = RunEventDigest(ev, rec.RecordID); err != nil {
			return fmt.Errorf("bind run event: %w", err)
		}
		if runStart != nil {
			if b.RunStart, err = RunEventDigest(runStart, runStart.RecordID); err != nil {
				return fmt.Errorf("bind run start: %w", err)
			}
		}
	}
	for _, a := range e.NewApprovals {
		d, err := ApprovalRequestDigest(a.Request)
		if err != nil {
			return fmt.Errorf("bind approval %s: %w", a.Request.ApprovalID, err)
		}
		b.ApprovalRequests = append(b.ApprovalRequests, d)
	}
	if a := e.ApprovalEvent; a != nil {
		if b.ApprovalEvent, err = ApprovalEventDigest(a.TenantID, a.ApprovalID, &a.Event, rec.RecordID); err != nil {
			return fmt.Errorf("bind approval event: %w", err)
		}
	}
	if s := e.Shadow; s != nil {
		if b.Shadow, err = ShadowDecisionDigest(s, rec.RecordID); err != nil {
			return fmt.Errorf("bind shadow decision: %w", err)
		}
	}
	b.Claims = &writ.BoundClaims{}
	if c := e.Idempotency; c != nil {
		if b.Claims.Idempotency, err = IdempotencyDigest(rec.TenantID, c); err != nil {
			return fmt.Errorf("bind idempotency claim: %w", err)
		}
	}
	if k := e.Block; k != nil {
		if b.Claims.Block, err = BlockDigest(rec.TenantID, k); err != nil {
			return fmt.Errorf("bind block: %w", err)
		}
	}
	if c := e.Report; c != nil {
		if b.Claims.Report, err = ReportDigest(rec.TenantID, c); err != nil {
			return fmt.Errorf("bind report claim: %w", err)
		}
	}
	rec.Bound = b
	return nil
}

// Kinds of claim CheckStoredClaim checks.
const (
	ClaimIdempotency = "idempotency"
	ClaimBlock       = "block"
	ClaimReport      = "report"
)

// CheckStoredClaim checks, before an answer found through an index row is
// served again, that the sealed record the row points at (raw) binds the
// row: its bound.claims member of the kind must be digest (computed from
// the row as read). A record sealed before writ bound claims has none to
// check, and passes. A mismatch (the row pointed at another record, or
// its columns changed) is ErrReceiptMismatch: the answer must not be
// served. Call it after CheckStoredReceipt, which checks the record's
// bytes.
func CheckStoredClaim(raw []byte, kind, digest string) error {
	var r struct {
		Bound *writ.Bound `json:"bound"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%w: the record cannot be read: %v", ErrReceiptMismatch, err)
	}
	if r.Bound == nil || r.Bound.Claims == nil {
		return nil
	}
	var bound string
	switch kind {
	case ClaimIdempotency:
		bound = r.Bound.Claims.Idempotency
	case ClaimBlock:
		bound = r.Bound.Claims.Block
	case ClaimReport:
		bound = r.Bound.Claims.Report
	default:
		return fmt.Errorf("check stored claim: unknown kind %q", kind)
	}
	if bound != digest {
		if bound == "" {
			return fmt.Errorf("%w: the index points at a record that claims no %s", ErrReceiptMismatch, kind)
		}
		return fmt.Errorf("%w: the %s row hashes to %s; the record binds %s", ErrReceiptMismatch, kind, digest, bound)
	}
	return nil
}

// CheckStoredReceipt checks a stored receipt against its sealed record
// (raw, as the store serves it) before the receipt is answered again:
// the record's bytes must match its record_hash, and the receipt its
// bound.receipt digest. A record sealed before writ bound receipts has no
// digest to check, and its receipt passes. Any mismatch is
// ErrReceiptMismatch: the receipt must not be served.
func CheckStoredReceipt(raw, receipt []byte) error {
	digest, audit, err := record.SealDigest(raw)
	if err != nil {
		return fmt.Errorf("%w: the record cannot be read: %v", ErrReceiptMismatch, err)
	}
	if digest != audit.RecordHash {
		return fmt.Errorf("%w: the record's bytes do not match its record_hash", ErrReceiptMismatch)
	}
	var r struct {
		Bound *writ.Bound `json:"bound"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%w: the record cannot be read: %v", ErrReceiptMismatch, err)
	}
	if r.Bound == nil || r.Bound.Receipt == "" {
		return nil
	}
	if got := record.Digest(receipt); got != r.Bound.Receipt {
		return fmt.Errorf("%w: the receipt hashes to %s; the record binds %s", ErrReceiptMismatch, got, r.Bound.Receipt)
	}
	return nil
}
