package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
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

// PageQuery checks a record query (an unknown outcome is EINVALID) and returns where its page starts (the
// seq after which records are served) and its page size.
func PageQuery(q writ.RecordQuery) (after int64, limit int, err error) {
	if q.Outcome != "" && !slices.Contains(writ.Outcomes, q.Outcome) {
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("unknown outcome %q", q.Outcome), Details: []writ.Detail{{Field: "outcome", Message: "must be one of allow, allow_with_warning, replan_required, goal_fail_terminal"}}}
	}
	if q.ApprovalMode != "" && q.ApprovalMode.Rank() < 0 {
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("unknown approval mode %q", q.ApprovalMode), Details: []writ.Detail{{Field: "approval_mode_effective", Message: ApprovalModesMessage}}}
	}
	if q.Scorecard != "" && q.Scorecard != writ.ScorecardFailedQuery {
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("unknown scorecard filter %q", q.Scorecard), Details: []writ.Detail{{Field: "scorecard", Message: "must be failed"}}}
	}
	return pageStart("a record query", q.TenantID, q.Limit, q.Cursor)
}

// ApprovalModesMessage is the problem detail of an unknown approval mode.
const ApprovalModesMessage = "must be one of read_only, local_write, network, delegated, destructive"

// Terms of a record that stores index besides its columns and subjects:
// the seed's query keys a record holds any number of.
const (
	TermPolicyDecisionID = "policy_decision_id"
	TermApprover         = "approver"
	// TermRefersTo is the record another record is about: the one it
	// supersedes (a correction, a retraction, an execution report, a
	// re-check) or, for a feedback entry or a replay result, the one
	// its outputs.record_id names.
	TermRefersTo = "refers_to"
	// TermScorecard is "failed" on a record whose scorecard failed its
	// spec's pass mark (a non-empty scorecard_failed).
	TermScorecard = "scorecard"
	// TermTranscript indexes an execution report's record under the name
	// of the tool transcript its entry belongs to (see TranscriptReader).
	TermTranscript = "transcript"
)

// Term is one (term, value) pair a store indexes for a record.
type Term struct{ Term, Value string }

// RecordTerms returns the distinct terms of rec a store indexes so that
// Records can filter by them: each policy_decision_id of its policy
// decisions and each approver of its approvals. Empty values are left out.
func RecordTerms(rec *writ.Record) []Term {
	var terms []Term
	add := func(term, value string) {
		t := Term{term, value}
		if value != "" && !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	}
	for _, p := range rec.PolicyDecisions {
		add(TermPolicyDecisionID, p.PolicyDecisionID)
	}
	for _, a := range rec.Approvals {
		add(TermApprover, a.Approver)
	}
	add(TermRefersTo, rec.Supersedes)
	if x := rec.Execution; x != nil && x.Transcript != nil {
		add(TermTranscript, x.Transcript.Run)
	}
	if len(rec.ScorecardFailed) > 0 {
		add(TermScorecard, writ.ScorecardFailedQuery)
	}
	if AboutRecord(rec.DecisionKey) {
		if id, ok := rec.Outputs["record_id"].(string); ok {
			add(TermRefersTo, id)
		}
	}
	return terms
}

// AboutRecord reports whether a record with decision key key is a record
// about another record: a retraction, a feedback entry or a replay
// result, which names the record in outputs.record_id.
func AboutRecord(key string) bool {
	return strings.HasPrefix(key, writ.RetractionKeyPrefix) || strings.HasPrefix(key, writ.FeedbackKeyPrefix) || strings.HasPrefix(key, writ.ReplayKeyPrefix)
}

// QueryTerms returns the terms a record query filters by.
func QueryTerms(q writ.RecordQuery) []Term {
	var out []Term
	for _, t := range []Term{{TermPolicyDecisionID, q.PolicyDecisionID}, {TermApprover, q.Approver}, {TermRefersTo, q.RefersTo}, {TermScorecard, q.Scorecard}} {
		if t.Value != "" {
			out = append(out, t)
		}
	}
	return out
}

// PrefixEnd returns the least string above every string that begins with
// prefix, in byte order, among strings of valid UTF-8: the prefix
// followed by U+10FFFF, the greatest code point (whose UTF-8 bytes, F4 8F
// BF BF, are the greatest of any encoded code point). A prefix search is
// then the index range [prefix, PrefixEnd(prefix)).
func PrefixEnd(prefix string) string { return prefix + "\U0010FFFF" }

// pageStart checks what every paged query has (a tenant, a page size and
// an optional cursor) and returns where the page starts and its size.
// what names the query in the error for a missing tenant.
func pageStart(what, tenantID string, size int, cursor string) (after int64, limit int, err error) {
	if tenantID == "" {
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: what + " needs a tenant", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	if limit, err = PageSize(size); err != nil {
		return 0, 0, err
	}
	if cursor != "" {
		if after, err = DecodeCursor(cursor); err != nil {
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

// Approval requests and their events, as both stores keep them: the
// request's immutable fields as JSON, its events as rows, and its state
// derived from them (writ.ApprovalRequest.Apply) whenever it is read.

// ApprovalJSON returns what a store keeps of an approval request: its
// JSON with the derived fields (State, Decision, Uses, Events) cleared,
// since those are never stored, only derived.
func ApprovalJSON(r *writ.ApprovalRequest) ([]byte, error) {
	c := *r
	c.State, c.Decision, c.Uses, c.Events = "", nil, 0, nil
	return json.Marshal(&c)
}

// ApprovalNotFound is the error of an approval request the tenant cannot
// see. It says the same whether the id is unknown or belongs to another
// tenant.
func ApprovalNotFound(approvalID string) error {
	return &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("approval %q not found", approvalID)}
}

// ApprovalPageQuery checks an approval query and returns where its page
// starts (the position after which requests are served) and its page
// size. Cursors are those of record pages, over a store's insertion
// position of requests instead of a chain seq.
func ApprovalPageQuery(q writ.ApprovalQuery) (after int64, limit int, err error) {
	if after, limit, err = pageStart("an approval query", q.TenantID, q.Limit, q.Cursor); err != nil {
		return 0, 0, err
	}
	switch q.State {
	case "", writ.ApprovalPending, writ.ApprovalApproved, writ.ApprovalDenied, writ.ApprovalWithdrawn, writ.ApprovalExpired:
	default:
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: "invalid state", Details: []writ.Detail{{Field: "state", Message: "must be pending, approved, denied, withdrawn or expired"}}}
	}
	return after, limit, nil
}

// ReadApprovals reads approval requests with their events from rows of
// (position, request JSON, event seq, kind, actor, reason, record id,
// event time in Unix nanoseconds), ordered by position, then seq; a
// request without events comes as one row of seq 0. It derives each
// request at now. The query asks for limit+1 requests: a request beyond
// limit tells that another page follows.
func ReadApprovals(rows Rows, limit int, now time.Time) (*writ.ApprovalPage, error) {
	page := &writ.ApprovalPage{Approvals: make([]writ.ApprovalRequest, 0, min(limit, 64))}
	var last int64
	for rows.Next() {
		var pos, seq, at int64
		var doc []byte
		var ev writ.ApprovalEvent
		if err := rows.Scan(&pos, &doc, &seq, &ev.Kind, &ev.Actor, &ev.Reason, &ev.RecordID, &at); err != nil {
			return nil, fmt.Errorf("read approvals: %w", err)
		}
		if len(page.Approvals) == 0 || pos != last {
			if len(page.Approvals) == limit {
				page.NextCursor = EncodeCursor(last)
				break
			}
			var r writ.ApprovalRequest
			if err := json.Unmarshal(doc, &r); err != nil {
				return nil, fmt.Errorf("stored approval request does not parse: %w", err)
			}
			r.Events = []writ.ApprovalEvent{}
			page.Approvals = append(page.Approvals, r)
			last = pos
		}
		if seq > 0 {
			ev.Seq, ev.At = seq, time.Unix(0, at).UTC()
			r := &page.Approvals[len(page.Approvals)-1]
			r.Events = append(r.Events, ev)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read approvals: %w", err)
	}
	for i := range page.Approvals {
		page.Approvals[i].Apply(now)
	}
	return page, nil
}

// Shadow decisions, as both stores keep them: the decision's scalar
// fields as columns, its policy decisions and reasons as one JSON value
// (ShadowDetail), in insertion order.

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

// shadowDetail is the JSON a store keeps of a shadow decision beside its
// columns. Nil and empty lists stay apart (null and []), so a decision
// reads back as it was appended.
type shadowDetail struct {
	PolicyDecisions []writ.PolicyDecision `json:"policy_decisions"`
	Reasons         []writ.Reason         `json:"reasons"`
}

// ShadowDetail returns the JSON a store keeps of d's policy decisions
// and reasons.
func ShadowDetail(d *ShadowDecision) ([]byte, error) {
	return json.Marshal(shadowDetail{PolicyDecisions: d.PolicyDecisions, Reasons: d.Reasons})
}

// ShadowPageQuery checks a shadow query and returns where its page starts
// (the insertion position after which decisions are served) and its page
// size. Cursors are those of record pages, over a store's insertion
// position of shadow decisions.
func ShadowPageQuery(q ShadowQuery) (after int64, limit int, err error) {
	return pageStart("a shadow query", q.TenantID, q.Limit, q.Cursor)
}

// ReadShadows reads a page of shadow decisions from rows of (position,
// tenant id, record id, decision key, pack, pack hash, time in Unix
// nanoseconds, enforced outcome, outcome, status, ShadowDetail JSON),
// ordered by position. The query asks for limit+1 rows: one row more than
// the page tells whether another page follows.
func ReadShadows(rows Rows, limit int) (*ShadowPage, error) {
	page := &ShadowPage{Decisions: make([]ShadowDecision, 0, min(limit, 64))}
	var last int64
	for rows.Next() {
		if len(page.Decisions) == limit {
			page.NextCursor = EncodeCursor(last)
			break
		}
		var d ShadowDecision
		var at int64
		var detail []byte
		if err := rows.Scan(&last, &d.TenantID, &d.RecordID, &d.DecisionKey, &d.Pack, &d.PackHash, &at,
			&d.EnforcedOutcome, &d.Outcome, &d.Status, &detail); err != nil {
			return nil, fmt.Errorf("read shadow decisions: %w", err)
		}
		var x shadowDetail
		if err := json.Unmarshal(detail, &x); err != nil {
			return nil, fmt.Errorf("stored shadow decision of record %s does not parse: %w", d.RecordID, err)
		}
		d.At, d.PolicyDecisions, d.Reasons = time.Unix(0, at).UTC(), x.PolicyDecisions, x.Reasons
		page.Decisions = append(page.Decisions, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read shadow decisions: %w", err)
	}
	return page, nil
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
