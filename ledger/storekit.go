package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
	"golang.org/x/mod/sumdb/tlog"
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

// Rows is what a store's query returns: database/sql's *Rows and pgx's
// Rows both have this shape.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// PageQuery checks a record query and returns where its page starts (the
// seq after which records are served) and its page size.
func PageQuery(q writ.RecordQuery) (after int64, limit int, err error) {
	if q.TenantID == "" {
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: "a record query needs a tenant", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	if limit, err = PageSize(q.Limit); err != nil {
		return 0, 0, err
	}
	if q.Cursor != "" {
		if after, err = DecodeCursor(q.Cursor); err != nil {
			return 0, 0, err
		}
	}
	return after, limit, nil
}

// ReadPage reads a page of records from rows of (seq, raw) in chain
// order. The query asks for limit+1 rows: one row more than the page
// tells whether another page follows.
func ReadPage(rows Rows, limit int) (*writ.RecordPage, error) {
	page := &writ.RecordPage{Records: make([]writ.StoredRecord, 0, min(limit, 64))}
	var last int64
	for rows.Next() {
		if len(page.Records) == limit {
			page.NextCursor = EncodeCursor(last)
			break
		}
		var raw []byte
		if err := rows.Scan(&last, &raw); err != nil {
			return nil, fmt.Errorf("query records: %w", err)
		}
		sr, err := ParseStored(raw)
		if err != nil {
			return nil, err
		}
		page.Records = append(page.Records, *sr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query records: %w", err)
	}
	return page, nil
}

// ReadHashRows reads rows of (storage index, hash) of a tenant's tree.
func ReadHashRows(rows Rows, tenantID string) (map[int64]tlog.Hash, error) {
	found := map[int64]tlog.Hash{}
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, fmt.Errorf("read tree hashes: %w", err)
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("tree hash %d of tenant %s has %d bytes", idx, tenantID, len(b))
		}
		var h tlog.Hash
		copy(h[:], b)
		found[idx] = h
	}
	return found, rows.Err()
}

// Migration is one schema version of a store. Versions are numbered from
// 1 by the file name prefix (0001_name.sql) and applied in order; a
// released migration is never edited, only followed by a new one.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// ReadMigrations lists the migrations in dir of fsys, checking that they
// are numbered 1, 2, 3… without gaps.
func ReadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v != len(ms)+1 {
			return nil, fmt.Errorf("migration %s: want the name %04d_*.sql", e.Name(), len(ms)+1)
		}
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	return ms, nil
}
