// Package sqlkit is what the SQL stores (sqlite, postgres) share beyond
// the ledger's contract: reading query rows into record, approval and
// shadow pages, checking a paged query, the terms a record is indexed
// under, schema migrations, and the stored forms of approval requests and
// shadow decisions. Keeping them in one place makes the stores agree byte
// for byte (a cursor of one store is a cursor of the other). It runs no
// query itself and imports no driver: rows come from the store.
package sqlkit

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// RecordNotFound is the error of a record the tenant cannot see. It says
// the same whether the id is unknown or belongs to another tenant.
func RecordNotFound(recordID string) error {
	return &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("record %q not found", recordID)}
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
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("unknown approval mode %q", q.ApprovalMode), Details: []writ.Detail{{Field: "approval_mode_effective", Message: ledger.ApprovalModesMessage}}}
	}
	if q.Scorecard != "" && q.Scorecard != writ.ScorecardFailedQuery {
		return 0, 0, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("unknown scorecard filter %q", q.Scorecard), Details: []writ.Detail{{Field: "scorecard", Message: "must be failed"}}}
	}
	return pageStart("a record query", q.TenantID, q.Limit, q.Cursor)
}

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
	if ledger.AboutRecord(rec.DecisionKey) {
		if id, ok := rec.Outputs["record_id"].(string); ok {
			add(TermRefersTo, id)
		}
	}
	return terms
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
	if limit, err = ledger.PageSize(size); err != nil {
		return 0, 0, err
	}
	if cursor != "" {
		if after, err = ledger.DecodeCursor(cursor); err != nil {
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
			page.NextCursor = ledger.EncodeCursor(last)
			break
		}
		var raw []byte
		if err := rows.Scan(&last, &raw); err != nil {
			return nil, fmt.Errorf("query records: %w", err)
		}
		sr, err := ledger.ParseStored(raw)
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
				page.NextCursor = ledger.EncodeCursor(last)
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

// shadowDetail is the JSON a store keeps of a shadow decision beside its
// columns. Nil and empty lists stay apart (null and []), so a decision
// reads back as it was appended.
type shadowDetail struct {
	PolicyDecisions []writ.PolicyDecision `json:"policy_decisions"`
	Reasons         []writ.Reason         `json:"reasons"`
}

// ShadowDetail returns the JSON a store keeps of d's policy decisions
// and reasons.
func ShadowDetail(d *ledger.ShadowDecision) ([]byte, error) {
	return json.Marshal(shadowDetail{PolicyDecisions: d.PolicyDecisions, Reasons: d.Reasons})
}

// ShadowPageQuery checks a shadow query and returns where its page starts
// (the insertion position after which decisions are served) and its page
// size. Cursors are those of record pages, over a store's insertion
// position of shadow decisions.
func ShadowPageQuery(q ledger.ShadowQuery) (after int64, limit int, err error) {
	return pageStart("a shadow query", q.TenantID, q.Limit, q.Cursor)
}

// ReadShadows reads a page of shadow decisions from rows of (position,
// tenant id, record id, decision key, pack, pack hash, time in Unix
// nanoseconds, enforced outcome, outcome, status, ShadowDetail JSON),
// ordered by position. The query asks for limit+1 rows: one row more than
// the page tells whether another page follows.
func ReadShadows(rows Rows, limit int) (*ledger.ShadowPage, error) {
	page := &ledger.ShadowPage{Decisions: make([]ledger.ShadowDecision, 0, min(limit, 64))}
	var last int64
	for rows.Next() {
		if len(page.Decisions) == limit {
			page.NextCursor = ledger.EncodeCursor(last)
			break
		}
		var d ledger.ShadowDecision
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
