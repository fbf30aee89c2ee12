package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/workflow"
)

// replaying is the replay of one record in progress.
type replaying struct {
	r   *Replayer
	res *Result
	raw []byte
	// audit is the stored seal; sealBroken is set when the stored bytes
	// do not hash to its record_hash (or it cannot be read), and every
	// difference found is then tampering.
	audit      writ.Audit
	sealBroken bool
	head       recordHead
	// packChanged is set when the record is rebuilt under another pack
	// than it pins (Options.Pack).
	packChanged bool
}

// tamper adds a tamper finding.
func (rp *replaying) tamper(path, input, format string, args ...any) {
	rp.res.Differences = append(rp.res.Differences, Difference{Class: ClassTamper, Path: path, Input: input, Detail: fmt.Sprintf(format, args...)})
}

func (rp *replaying) run(ctx context.Context, tenantID string, raw []byte) error {
	rp.raw = raw
	// 1. The stored bytes against their own record_hash.
	input, audit, err := record.SplitSeal(raw)
	rp.audit, rp.res.Seq = audit, audit.Seq
	if err != nil {
		rp.sealBroken = true
		rp.tamper("audit", "", "the stored record's seal cannot be read: %v", err)
	} else if got := record.Digest(input); got != audit.RecordHash {
		rp.sealBroken = true
		rp.res.Differences = append(rp.res.Differences, Difference{Class: ClassTamper, Path: "audit.record_hash",
			Recorded: jsonValue(audit.RecordHash), Replayed: jsonValue(got),
			Detail: "the stored record's bytes no longer hash to the record_hash they carry: they changed after they were sealed"})
	}
	h, err := decodeHead(raw)
	if err != nil {
		if !rp.sealBroken {
			rp.errorf("the stored record cannot be read: %v", err)
		}
		return nil
	}
	rp.head = h
	rp.res.RecordID, rp.res.DecisionKey, rp.res.Kind = h.RecordID, h.DecisionKey, KindOf(h.DecisionKey)
	if h.TenantID != tenantID {
		rp.tamper("tenant_id", "", "a record of tenant %q is stored in the chain of tenant %q", h.TenantID, tenantID)
		return nil
	}

	// 2. The pinned inputs against the record.
	pin, ok, err := rp.pack(ctx)
	if err != nil || !ok {
		return err
	}
	envelope, ok, err := rp.envelope(ctx)
	if err != nil || !ok {
		return err
	}

	// 3. Decide again and rebuild; 4. compare.
	var rebuilt *writ.Record
	switch rp.res.Kind {
	case KindStepVerdict:
		rebuilt, err = rp.stepVerdict(ctx, pin, envelope)
	case KindApprovalDecision:
		rebuilt, err = rp.approvalDecision(ctx, pin, envelope)
	case KindExecutionReport:
		rebuilt, err = rp.executionReport(ctx, pin, envelope)
	case KindParamsChange:
		rebuilt, err = rp.paramsChange(pin, envelope)
	case KindErasure:
		rebuilt, err = rp.erasure(pin, envelope)
	case KindEvidence:
		rebuilt, err = rp.evidence(pin, envelope)
	case KindRetraction, KindFeedback, KindReplayResult:
		rebuilt, err = rp.annotation(ctx, pin, envelope)
	default:
		rebuilt, err = rp.check(ctx, pin, envelope)
	}
	if err != nil || rebuilt == nil {
		return err
	}
	rp.packChanged = rebuilt.Lineage.PackHash != h.Lineage.PackHash
	rp.compare(rebuilt)
	return nil
}

// pack returns the pack to rebuild the record under: the one it pins,
// rebuilt from its stored files and checked, or Options.Pack.
func (rp *replaying) pack(ctx context.Context) (*pinned, bool, error) {
	if rp.r.what != nil {
		return rp.r.what, true, nil
	}
	hash := rp.head.Lineage.PackHash
	if hash == "" {
		rp.tamper("lineage.pack_hash", "", "the record pins no pack")
		return nil, false, nil
	}
	pin, err := rp.r.packs.get(ctx, rp.r.store, hash)
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	if err != nil {
		rp.tamper("lineage.pack_hash", "pack "+hash, "the pinned pack cannot be rebuilt from its stored files: %v", err)
		return nil, false, nil
	}
	return pin, true, nil
}

// envelope returns the stored request envelope, checked against the
// record's replay_packet_id.
func (rp *replaying) envelope(ctx context.Context) ([]byte, bool, error) {
	id := rp.head.Replay.ReplayPacketID
	if id == "" {
		rp.tamper("replay.replay_packet_id", "", "the record names no request envelope")
		return nil, false, nil
	}
	b, err := rp.r.store.Envelope(ctx, rp.head.TenantID, rp.head.Audit.Seq, id)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		rp.tamper("replay.replay_packet_id", "envelope "+id, "the request envelope the record names is not stored")
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read envelope %s of record %s: %w", id, rp.head.RecordID, err)
	}
	if got := record.Digest(b); got != id {
		rp.tamper("replay.replay_packet_id", "envelope "+id, "the stored request envelope hashes to %s, not to the replay_packet_id the record names: it changed after it was stored", got)
		return nil, false, nil
	}
	return b, true, nil
}

// check decides a boundary check again from its envelope, as
// engine.Engine.Check decided it.
func (rp *replaying) check(ctx context.Context, pin *pinned, envelope []byte) (*writ.Record, error) {
	decided, ok, err := rp.unseal(ctx, envelope)
	if err != nil || !ok {
		return nil, err
	}
	var req writ.CheckRequest
	if err := decodeEnvelope(decided, &req); err != nil {
		rp.errorf("the stored request envelope does not decode as a check request: %v", err)
		return nil, nil
	}
	if f := rp.r.opts.Request; f != nil {
		f(&req)
	}
	now := rp.head.Timestamp.UTC()
	presented, ok, err := rp.presented(ctx, &req, now)
	if err != nil || !ok {
		return nil, err
	}
	rec, err := rebuildCheck(pin, &req, presented, rp.head, record.Digest(envelope))
	if err != nil {
		rp.errorf("%v", err)
		return nil, nil
	}
	if err := rp.checkTranscript(ctx, pin, &req, rec); err != nil {
		return nil, err
	}
	if err := rp.checkHistory(ctx); err != nil {
		return nil, err
	}
	if err := rp.checkParams(ctx); err != nil {
		return nil, err
	}
	return rec, nil
}

// unseal returns the envelope with its classified values put back from
// the classified store, each checked against its commitment: the request
// the engine decided. A value the store no longer has was erased, and the
// result is inputs_erased; one that does not hash to its commitment is
// tampering. An envelope without classified values is returned as is.
func (rp *replaying) unseal(ctx context.Context, envelope []byte) ([]byte, bool, error) {
	refs, err := record.ClassifiedRefs(envelope)
	if err != nil || len(refs) == 0 {
		return envelope, true, nil // a bad envelope is reported by its decoding
	}
	cs, ok := rp.r.store.(ledger.ClassifiedStore)
	if !ok {
		rp.errorf("the request envelope holds classified values, and the store replayed from keeps none")
		return nil, false, nil
	}
	vals, err := cs.ClassifiedValues(ctx, rp.head.TenantID, refs)
	if err != nil {
		return nil, false, fmt.Errorf("read classified values of record %s: %w", rp.head.RecordID, err)
	}
	out, erased, mismatched, err := record.Unseal(envelope, func(ref string) ([]byte, []byte, bool) {
		v, ok := vals[ref]
		return v.Salt, v.Value, ok
	})
	if err != nil {
		rp.errorf("the stored request envelope cannot be read: %v", err)
		return nil, false, nil
	}
	for _, ref := range mismatched {
		rp.tamper("replay.replay_packet_id", "classified "+ref, "the classified value stored for %s does not hash to its commitment: it changed after it was stored", ref)
	}
	if len(mismatched) > 0 {
		return nil, false, nil
	}
	if len(erased) > 0 {
		rp.res.Erased = erased
		return nil, false, nil
	}
	return out, true, nil
}

// erasure rebuilds an erasure's record from its envelope.
func (rp *replaying) erasure(pin *pinned, envelope []byte) (*writ.Record, error) {
	rec, err := record.Erasure(pin.pol.Pack, rp.head.RecordID, envelope, rp.head.Timestamp.UTC())
	if err != nil {
		rp.errorf("the erasure cannot be rebuilt: %v", err)
		return nil, nil
	}
	return rec, nil
}

// presented reads the approvals a check presented, as they stood when it
// was decided: only their events before the record (not the redemption
// appended with the record itself), derived at the recorded clock.
func (rp *replaying) presented(ctx context.Context, req *writ.CheckRequest, now time.Time) ([]*writ.ApprovalRequest, bool, error) {
	var out []*writ.ApprovalRequest
	for _, id := range req.ApprovalIDs {
		a, err := rp.r.store.Approval(ctx, req.TenantID, id, now)
		switch {
		case writ.ErrorCode(err) == writ.ENOTFOUND:
			rp.tamper("", "approval "+id, "the check presented approval %s, which is not on file", id)
			return nil, false, nil
		case err != nil:
			return nil, false, fmt.Errorf("read approval %s of record %s: %w", id, rp.head.RecordID, err)
		}
		out = append(out, approvalBefore(a, rp.head.RecordID, now))
	}
	return out, true, nil
}

// approvalBefore returns a copy of a with only the events that happened
// before the record recordID was decided at now, derived at now.
func approvalBefore(a *writ.ApprovalRequest, recordID string, now time.Time) *writ.ApprovalRequest {
	cp := *a
	cp.Events = slices.DeleteFunc(slices.Clone(a.Events), func(ev writ.ApprovalEvent) bool {
		return ev.At.After(now) || ev.RecordID == recordID
	})
	cp.Apply(now)
	return &cp
}

// stepVerdict evaluates a step attempt again from its envelope and the
// run's events before its verdict.
func (rp *replaying) stepVerdict(ctx context.Context, pin *pinned, envelope []byte) (*writ.Record, error) {
	var req writ.AttemptRequest
	if err := decodeEnvelope(envelope, &req); err != nil {
		rp.errorf("the stored request envelope does not decode as a step attempt: %v", err)
		return nil, nil
	}
	events, err := rp.r.store.RunEvents(ctx, req.TenantID, req.RunID)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		rp.tamper("", "run "+req.RunID, "the attempt's run %s has no events on file", req.RunID)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read run %s of record %s: %w", req.RunID, rp.head.RecordID, err)
	}
	at := slices.IndexFunc(events, func(ev ledger.RunEvent) bool {
		return ev.Kind == ledger.StepAttempt && ev.RecordID == rp.head.RecordID
	})
	if at < 0 {
		rp.tamper("", "run "+req.RunID, "run %s has no step_attempt event for this record, which is appended with it", req.RunID)
		return nil, nil
	}
	// A verdict decided before issue 31 (its record's outputs have no
	// claimed_calls) is evaluated under the defaults it was decided with.
	contracts, err := pin.contracts(len(rp.head.Outputs.ClaimedCalls) == 0)
	if err != nil {
		rp.errorf("the pack's verification contracts do not compile: %v", err)
		return nil, nil
	}
	rec, err := rebuildVerdict(pin, contracts, events[:at], &req, rp.head.RecordID, rp.head.DecisionID, rp.head.Timestamp.UTC())
	if err != nil {
		rp.errorf("the verdict cannot be evaluated again: %v", err)
		return nil, nil
	}
	return rec, nil
}

// approvalDecision rebuilds an approval's or a denial's record from its
// envelope and the approval request it decided.
func (rp *replaying) approvalDecision(ctx context.Context, pin *pinned, envelope []byte) (*writ.Record, error) {
	var req writ.DecideApprovalRequest
	if err := decodeEnvelope(envelope, &req); err != nil {
		rp.errorf("the stored request envelope does not decode as an approval decision: %v", err)
		return nil, nil
	}
	now := rp.head.Timestamp.UTC()
	a, err := rp.r.store.Approval(ctx, req.TenantID, req.ApprovalID, now)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		rp.tamper("", "approval "+req.ApprovalID, "the decided approval request %s is not on file", req.ApprovalID)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read approval %s of record %s: %w", req.ApprovalID, rp.head.RecordID, err)
	}
	if !slices.ContainsFunc(a.Events, func(ev writ.ApprovalEvent) bool {
		return ev.RecordID == rp.head.RecordID && (ev.Kind == writ.ApprovalEventApproved || ev.Kind == writ.ApprovalEventDenied || ev.Kind == writ.ApprovalEventWithdrawn)
	}) {
		rp.tamper("", "approval "+req.ApprovalID, "approval %s has no decision event for this record, which is appended with it", req.ApprovalID)
		return nil, nil
	}
	rec, err := rebuildApprovalDecision(pin, &req, a, rp.head.RecordID, rp.head.DecisionID, now)
	if err != nil {
		rp.errorf("the approval decision cannot be rebuilt: %v", err)
		return nil, nil
	}
	return rec, nil
}

// executionReport rebuilds an execution report's record from its envelope
// and the record it reports for.
func (rp *replaying) executionReport(ctx context.Context, pin *pinned, envelope []byte) (*writ.Record, error) {
	var req writ.ExecutionReport
	if err := decodeEnvelope(envelope, &req); err != nil {
		rp.errorf("the stored request envelope does not decode as an execution report: %v", err)
		return nil, nil
	}
	target, err := rp.r.store.Record(ctx, req.TenantID, rp.head.Supersedes)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		rp.tamper("supersedes", "record "+rp.head.Supersedes, "the record the execution report closes is not on file")
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read record %s of record %s: %w", rp.head.Supersedes, rp.head.RecordID, err)
	}
	if target.Record.DecisionID != rp.head.DecisionID {
		rp.tamper("decision_id", "record "+rp.head.Supersedes, "the execution report names decision %s, but the record it closes is of decision %s", rp.head.DecisionID, target.Record.DecisionID)
		return nil, nil
	}
	if req.TraceID == "" {
		rp.errorf("the execution report cannot be rebuilt: it has no trace id; a stored one always has one")
		return nil, nil
	}
	place, err := rp.transcriptPlace(ctx, pin, &target.Record)
	if err != nil || (place == nil && rp.head.Execution.Transcript != nil) {
		return nil, err
	}
	rec, _, err := record.ExecutionReport(pin.pol.Pack, pin.red, &req, &target.Record, rp.head.RecordID, rp.head.Timestamp.UTC())
	if err == nil && place != nil {
		err = engine.AddTranscript(rec, &req, &target.Record, place)
	}
	if err != nil {
		rp.errorf("the execution report cannot be rebuilt: %v", err)
		return nil, nil
	}
	return rec, nil
}

// compare compares the rebuilt record with the stored one: sealed at the
// recorded chain position, it must hash to the recorded record_hash.
// Otherwise every path that differs is a Difference.
func (rp *replaying) compare(rebuilt *writ.Record) {
	// The bound digests are the stored companions', not the decision's:
	// the rebuilt record carries the recorded ones (and diffRecords leaves
	// them out).
	rebuilt.Bound = rp.head.Bound
	if !rp.sealBroken {
		// The quick way first (see quickPreseal); only a record that does
		// not match pays for record.Preseal, the engine's own way.
		if b, err := quickPreseal(rebuilt); err == nil && rp.sealsToRecorded(b) {
			return
		}
	}
	presealed, err := record.Preseal(rebuilt)
	if err != nil {
		rp.errorf("the rebuilt record does not encode: %v", err)
		return
	}
	if !rp.sealBroken && rp.sealsToRecorded(presealed) {
		return
	}
	ds, err := diffRecords(rp.raw, presealed)
	if err != nil {
		rp.errorf("the records cannot be compared: %v", err)
		return
	}
	for i := range ds {
		ds[i].Class = Classify(rp.res.Kind, ds[i].Path, rp.packChanged)
		if rp.sealBroken {
			ds[i].Class = ClassTamper
		}
	}
	if len(ds) == 0 && !rp.sealBroken {
		ds = append(ds, Difference{Class: ClassRecord, Detail: "the canonical bytes differ although every member is equal: the stored record is not in canonical form"})
	}
	rp.res.Differences = append(rp.res.Differences, ds...)
}

// sealsToRecorded reports whether presealed, sealed at the recorded
// chain position, hashes to the recorded record_hash: whether its
// canonical bytes are the stored ones.
func (rp *replaying) sealsToRecorded(presealed []byte) bool {
	_, hash, err := record.SealPresealed(presealed, record.Seal{Seq: rp.audit.Seq, PrevHash: rp.audit.PrevHash})
	return err == nil && hash == rp.audit.RecordHash
}

// quickPreseal is record.Preseal; record.Canonical has used the same RFC
// 8785 implementation (jsontext.Value.Canonicalize) since it replaced
// gowebpki/jcs, so the second attempt in compare is now belt and braces.
// It is used only to show equality: if its bytes seal to the recorded
// record_hash, they are the stored bytes, so the rebuilt record has the
// stored record's JSON value, whose canonical form under any RFC 8785
// implementation is the stored bytes. When they do not match, compare
// decides again with record.Preseal, so a disagreement between the two
// implementations can never show as a difference.
func quickPreseal(rec *writ.Record) ([]byte, error) {
	rec.Audit = writ.Audit{}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		return nil, err
	}
	return v, nil
}

// jsonValue encodes a string as a JSON value.
func jsonValue(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// annotation rebuilds the record of a retraction, a feedback entry or a
// replay result from its envelope and the record it is about.
func (rp *replaying) annotation(ctx context.Context, pin *pinned, envelope []byte) (*writ.Record, error) {
	tenantID, about, err := record.AnnotationTarget(envelope)
	if err != nil {
		rp.errorf("the stored request envelope does not decode as a record about a record: %v", err)
		return nil, nil
	}
	if tenantID != rp.head.TenantID {
		rp.tamper("tenant_id", "envelope "+rp.head.Replay.ReplayPacketID, "the record's envelope is of tenant %q", tenantID)
		return nil, nil
	}
	target, err := rp.r.store.Record(ctx, tenantID, about)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		rp.tamper("outputs.record_id", "record "+about, "the record it is about is not on file")
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read record %s of record %s: %w", about, rp.head.RecordID, err)
	}
	rec, err := record.Annotation(pin.pol.Pack, rp.head.RecordID, envelope, &target.Record, rp.head.Timestamp.UTC())
	if err != nil {
		rp.errorf("the record cannot be rebuilt: %v", err)
		return nil, nil
	}
	return rec, nil
}

// rebuildVerdict evaluates a step attempt again, as the engine's
// SubmitAttempt did: req is the attempt as stored (its envelope, which
// carries the trace id), events are the run's events before the
// verdict's own, contracts the pack's verification contracts under the
// defaults the verdict was decided with, and recordID, decisionID and
// now the recorded ones.
func rebuildVerdict(pin *pinned, contracts *acceptance.Contracts, events []ledger.RunEvent, req *writ.AttemptRequest, recordID, decisionID string, now time.Time) (*writ.Record, error) {
	if req.TraceID == "" {
		return nil, fmt.Errorf("the attempt has no trace id; a stored attempt always has one")
	}
	p := pin.pol.Pack
	st, err := workflow.Fold(p, req.TenantID, req.RunID, events)
	if err != nil {
		return nil, err
	}
	if st.Run == nil {
		return nil, fmt.Errorf("run %s has no events before the verdict", req.RunID)
	}
	w, ok := p.Workflows[st.Run.WorkflowID]
	if !ok {
		return nil, fmt.Errorf("workflow %q is not defined in pack %s", st.Run.WorkflowID, p.ID())
	}
	if w.Step(req.StepID) == nil {
		return nil, fmt.Errorf("workflow %s has no step %q", w.WorkflowID, req.StepID)
	}
	v, err := workflow.Evaluate(contracts, pin.red, req, w, st)
	if err != nil {
		return nil, err
	}
	v.DecisionID, v.RecordID = decisionID, recordID
	rec, _, err := workflow.VerdictRecord(p, pin.red, req, w, st, v, now)
	return rec, err
}

// rebuildApprovalDecision rebuilds the record of an approval, a denial
// or a withdrawal: req is the decision as stored (its envelope), a the
// approval request it decided, and recordID, decisionID and now the
// recorded ones.
func rebuildApprovalDecision(pin *pinned, req *writ.DecideApprovalRequest, a *writ.ApprovalRequest, recordID, decisionID string, now time.Time) (*writ.Record, error) {
	if req.TraceID == "" {
		return nil, fmt.Errorf("the approval decision has no trace id; a stored one always has one")
	}
	if strings.TrimSpace(req.Approver) == "" {
		return nil, fmt.Errorf("the approval decision names no approver")
	}
	rec, _, err := record.ApprovalDecision(pin.pol.Pack, pin.red, req, a, recordID, now)
	if err != nil {
		return nil, err
	}
	rec.DecisionID = decisionID
	return rec, nil
}
