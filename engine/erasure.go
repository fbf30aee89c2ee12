package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
)

var _ writ.Erasures = (*Engine)(nil)

// Erase erases a subject's classified values; see writ.Erasures. The
// erasure is a decision record (decision key "erasure:<pack name>")
// listing the references of the values it deleted, appended in the
// transaction that deletes them.
func (e *Engine) Erase(ctx context.Context, req *writ.EraseRequest) (*writ.Erasure, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty erasure request")
	}
	cs, ok := e.store.(ledger.ClassifiedStore)
	if !ok {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "the store (%T) keeps no classified values", e.store)
	}
	rq := *req
	var ds []writ.Detail
	bad := func(field, msg string) { ds = append(ds, writ.Detail{Field: field, Message: msg}) }
	if rq.TenantID == "" || !tenantPattern.MatchString(rq.TenantID) {
		bad("tenant_id", "a valid tenant_id is required")
	}
	if strings.TrimSpace(rq.SubjectID) == "" || len(rq.SubjectID) > 512 || hasNULString(rq.SubjectID) {
		bad("subject_id", "required: the subject as records name it (subject_ids), up to 512 bytes")
	}
	if strings.TrimSpace(rq.Reason) == "" {
		bad("reason", "required: say why, for the record")
	}
	bindSubject(ctx, &rq.By, "by", "who erases", bad)
	if rq.TraceID != "" && !writ.ValidTraceID(rq.TraceID) {
		bad("trace_id", "must be 32 lowercase hex digits, not all zero")
	}
	if len(ds) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid erasure: " + ds[0].Field + " " + ds[0].Message, Details: ds}
	}
	// Records name subjects as redacted by the pack's patterns, and
	// classified values are linked to the record's subjects.
	subject := e.redactor.String(rq.SubjectID)
	refs, err := cs.ClassifiedRefs(ctx, rq.TenantID, subject)
	if err != nil {
		return nil, notRecorded("the erasure", err)
	}
	if refs == nil {
		refs = []string{}
	}
	now := e.now().UTC()
	if rq.TraceID == "" {
		rq.TraceID = e.newTraceID(now)
	}
	envelope, err := json.Marshal(record.ErasureEnvelope{TenantID: rq.TenantID, SubjectID: subject, By: rq.By, Reason: e.redactor.String(rq.Reason), Refs: refs, TraceID: rq.TraceID})
	if err != nil {
		return nil, err
	}
	if hasNUL(envelope) {
		return nil, errNUL
	}
	p := e.policy.Pack
	rec, err := record.Erasure(p, e.newID("dr_", now), envelope, now)
	if err != nil {
		return nil, err
	}
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: "the erasure record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	out := &writ.Erasure{TenantID: rq.TenantID, SubjectID: subject, RecordID: rec.RecordID, Erased: len(refs), Refs: refs}
	receipt, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	entry := &ledger.Entry{Record: rec, Receipt: receipt, Envelope: envelope, Erasure: &ledger.Erasure{TenantID: rq.TenantID, Refs: refs}}
	if err := ledger.Bind(entry, nil); err != nil {
		return nil, err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, fmt.Errorf("canonicalize erasure record: %w", err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		return nil, notRecorded("the erasure", err)
	}
	return out, nil
}

func hasNULString(s string) bool { return strings.ContainsRune(s, 0) }
