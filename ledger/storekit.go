package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// What every Store implementation shares: entry validation, the record
// page cursor, page sizes, the not-found error and the timestamp range.
// Keeping them here makes the stores agree byte for byte (a cursor of one
// store is a cursor of the other).

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
	return CheckBlobs(e.Blobs)
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

// RecordNotFound is the error of a record the tenant cannot see. It says
// the same whether the id is unknown or belongs to another tenant.
func RecordNotFound(recordID string) error {
	return &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("record %q not found", recordID)}
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
