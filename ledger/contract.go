package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/record"
)

// The append contract every Store holds to, checked before anything of a
// batch is written (ValidateBatch, CheckBlobs, CheckKeySignature), and
// what a store's answers share with the engine's: the record page cursor,
// page sizes, the timestamp range. The SQL the stores share is in
// internal/sqlkit.

// Page sizes of Store.Records.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// MinTime and MaxTime bound the timestamps an int64 of Unix nanoseconds
// can hold; stores refuse records outside them.
var (
	MinTime = time.Unix(0, math.MinInt64)
	MaxTime = time.Unix(0, math.MaxInt64)
)

// ValidateEntry rejects entry i of a batch before anything of the batch
// is written.
func ValidateEntry(i int, e *Entry) error {
	bad := func(format string, args ...any) error {
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("ledger entry %d: "+format, append([]any{i}, args...)...)}
	}
	switch {
	case e == nil || e.Record == nil:
		return bad("no record")
	case e.Record.TenantID == "":
		return bad("record has no tenant_id")
	case e.Record.RecordID == "":
		return bad("record has no record_id")
	case e.Record.Timestamp.Before(MinTime) || e.Record.Timestamp.After(MaxTime):
		return bad("record timestamp %s is out of range", e.Record.Timestamp)
	case e.Idempotency != nil && e.Idempotency.Key == "":
		return bad("empty idempotency key")
	case e.RunEvent != nil && (e.RunEvent.TenantID == "" || e.RunEvent.RunID == "" || e.RunEvent.Kind == ""):
		return bad("a run event needs a tenant, a run id and a kind")
	}
	if e.Envelope != nil {
		if got := record.Digest(e.Envelope); got != e.Record.Replay.ReplayPacketID {
			return bad("the envelope hashes to %s; the record pins %q", got, e.Record.Replay.ReplayPacketID)
		}
	}
	for _, a := range e.NewApprovals {
		if err := checkNewApproval(e.Record.TenantID, a); err != nil {
			return bad("%s", err)
		}
	}
	if d := e.Shadow; d != nil {
		if err := checkShadow(e.Record.TenantID, d); err != nil {
			return bad("%s", err)
		}
	}
	if err := checkHistory(e); err != nil {
		return bad("%s", err)
	}
	if ev := e.ApprovalEvent; ev != nil {
		switch {
		case ev.TenantID != e.Record.TenantID:
			// The guard runs under the record's tenant's head: an event
			// of another tenant would escape it.
			return bad("approval event of tenant %q with a record of tenant %q", ev.TenantID, e.Record.TenantID)
		case ev.ApprovalID == "":
			return bad("approval event without an approval id")
		case ev.Event.Kind != writ.ApprovalEventApproved && ev.Event.Kind != writ.ApprovalEventDenied && ev.Event.Kind != writ.ApprovalEventWithdrawn && ev.Event.Kind != writ.ApprovalEventRedeemed:
			return bad("approval event of unknown kind %q", ev.Event.Kind)
		case !inRange(ev.Event.At):
			return bad("approval event time %s is out of range", ev.Event.At)
		}
	}
	return CheckBlobs(e.Blobs)
}

// checkNewApproval rejects an approval request a store could not keep and
// answer for: one of another tenant, without an id or gate, with a
// binding digest OpenApproval would never find it under, or with an
// allowance or lifetime that means nothing.
func checkNewApproval(tenantID string, a NewApproval) error {
	r := a.Request
	switch {
	case r == nil:
		return errors.New("new approval without a request")
	case r.TenantID != tenantID:
		return fmt.Errorf("approval %s of tenant %q with a record of tenant %q", r.ApprovalID, r.TenantID, tenantID)
	case r.ApprovalID == "" || r.GateID == "":
		return fmt.Errorf("approval %q needs an approval id and a gate id", r.ApprovalID)
	case r.Allowance < 1:
		return fmt.Errorf("approval %s has allowance %d, want at least 1", r.ApprovalID, r.Allowance)
	case !inRange(r.CreatedAt) || !inRange(r.ExpiresAt):
		return fmt.Errorf("approval %s: times out of range", r.ApprovalID)
	case !r.ExpiresAt.After(r.CreatedAt):
		return fmt.Errorf("approval %s expires at %s, not after it was created (%s)", r.ApprovalID, r.ExpiresAt, r.CreatedAt)
	}
	digest, err := BindingDigest(r.Binding)
	if err != nil {
		return fmt.Errorf("approval %s: binding: %w", r.ApprovalID, err)
	}
	if a.BindingDigest != digest {
		return fmt.Errorf("approval %s has binding digest %q, want %q", r.ApprovalID, a.BindingDigest, digest)
	}
	return nil
}

func inRange(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// ValidateBatch validates each entry of a batch and rejects a record id
// or a new approval id that appears twice in it, before anything of the
// batch is written (the database would refuse it half-way through).
func ValidateBatch(entries []*Entry) error {
	records := make(map[string]bool, len(entries))
	approvals := make(map[[2]string]bool)
	for i, e := range entries {
		if err := ValidateEntry(i, e); err != nil {
			return err
		}
		if err := CheckClassified(e); err != nil {
			return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("ledger entry %d: %v", i, err)}
		}
		if records[e.Record.RecordID] {
			return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("ledger entry %d: record %s appears twice in the batch", i, e.Record.RecordID)}
		}
		records[e.Record.RecordID] = true
		for _, a := range e.NewApprovals {
			k := [2]string{a.Request.TenantID, a.Request.ApprovalID}
			if approvals[k] {
				return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("ledger entry %d: approval %s appears twice in the batch", i, k[1])}
			}
			approvals[k] = true
		}
	}
	return nil
}

// CheckBlobs refuses a blob whose hash is not the digest of its data:
// blobs are insert-if-absent, so a wrong one would squat its address
// forever.
func CheckBlobs(blobs []Blob) error {
	for _, b := range blobs {
		if got := record.Digest(b.Data); got != b.Hash {
			return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("blob %s: its data hashes to %s", b.Hash, got)}
		}
	}
	return nil
}

// ParseStored pairs stored bytes with the record they hold.
func ParseStored(raw []byte) (*writ.StoredRecord, error) {
	sr := &writ.StoredRecord{Raw: raw}
	if err := json.Unmarshal(raw, &sr.Record); err != nil {
		return nil, fmt.Errorf("stored record does not parse: %w", err)
	}
	return sr, nil
}

// PageSize returns the page size of a record query's limit: the default
// for 0, at most MaxPageSize; a negative limit is EINVALID.
func PageSize(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, &writ.Error{Code: writ.EINVALID, Message: "invalid limit", Details: []writ.Detail{{Field: "limit", Message: "must not be negative"}}}
	case limit == 0:
		return DefaultPageSize, nil
	case limit > MaxPageSize:
		return MaxPageSize, nil
	}
	return limit, nil
}

// cursor is what a page's NextCursor encodes: the seq of the last record
// served. It is JSON so that it can grow fields without breaking old
// cursors, and base64url so that it is opaque and URL-safe.
type cursor struct {
	After int64 `json:"after"`
}

// EncodeCursor returns the cursor of a page that ended at seq after.
func EncodeCursor(after int64) string {
	b, _ := json.Marshal(cursor{After: after})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a cursor EncodeCursor made; anything else is EINVALID.
func DecodeCursor(s string) (int64, error) {
	invalid := &writ.Error{Code: writ.EINVALID, Message: "invalid cursor", Details: []writ.Detail{{Field: "cursor", Message: "not a cursor this store issued"}}}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, invalid
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c cursor
	if err := dec.Decode(&c); err != nil || dec.More() || c.After < 1 {
		return 0, invalid
	}
	return c.After, nil
}

// UnixNanos converts a query bound to Unix nanoseconds, clamping instants
// an int64 cannot hold (which then still compare correctly).
func UnixNanos(t time.Time) int64 {
	switch {
	case t.Before(MinTime):
		return MinTime.UnixNano()
	case t.After(MaxTime):
		return MaxTime.UnixNano()
	}
	return t.UnixNano()
}

// ApprovalModesMessage is the problem detail of an unknown approval mode.
const ApprovalModesMessage = "must be one of read_only, local_write, network, delegated, destructive"

// AboutRecord reports whether a record with decision key key is a record
// about another record: a retraction, a feedback entry or a replay
// result, which names the record in outputs.record_id.
func AboutRecord(key string) bool {
	return strings.HasPrefix(key, writ.RetractionKeyPrefix) || strings.HasPrefix(key, writ.FeedbackKeyPrefix) || strings.HasPrefix(key, writ.ReplayKeyPrefix)
}

// checkShadow rejects a shadow decision a store could not keep beside
// the record of tenantID: one of another tenant (it would be listed under
// a tenant that never decided it), one that names no shadow pack (it
// could never be told apart from another pack's), one whose outcomes are
// not writ outcomes, or one whose time an int64 of nanoseconds cannot
// hold.
func checkShadow(tenantID string, d *ShadowDecision) error {
	switch {
	case d.TenantID != tenantID:
		return fmt.Errorf("shadow decision of tenant %q with a record of tenant %q", d.TenantID, tenantID)
	case d.PackHash == "":
		return errors.New("shadow decision without a pack hash")
	case !isOutcome(d.Outcome):
		return fmt.Errorf("shadow decision with outcome %q, not a writ outcome", d.Outcome)
	case !isOutcome(d.EnforcedOutcome):
		return fmt.Errorf("shadow decision with enforced outcome %q, not a writ outcome", d.EnforcedOutcome)
	case !inRange(d.At):
		return fmt.Errorf("shadow decision time %s is out of range", d.At)
	}
	return nil
}

func isOutcome(o writ.Outcome) bool {
	switch o {
	case writ.OutcomeAllow, writ.OutcomeAllowWithWarning, writ.OutcomeReplanRequired, writ.OutcomeGoalFailTerminal:
		return true
	}
	return false
}

// CheckKeySignature rejects an API key signature a store is asked to
// keep that lacks a part: a signing key id, a signing time in range, an
// Ed25519 signature (64 bytes). Whether it verifies is auth.Verify's
// question, not the store's.
func CheckKeySignature(k *auth.Key) error {
	switch {
	case k == nil || k.ID == "":
		return &writ.Error{Code: writ.EINVALID, Message: "an API key signature needs the key's id"}
	case k.SignedBy == "" || len(k.Signature) != ed25519.SignatureSize:
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("API key %s: a signature needs a signing key id and 64 bytes of Ed25519 signature", k.ID)}
	case k.SignedAt.Before(MinTime) || k.SignedAt.After(MaxTime):
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("API key %s: signing time %s is out of range", k.ID, k.SignedAt)}
	}
	return nil
}
