package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/workflow"
)

// check runs one boundary check whose actor is bound (bindActor), in
// the order it happens:
//
//	prepare  validate and resolve the request, fill in its trace id, read
//	         what it names (a superseded record, cited evidence), read the
//	         clock, and record.Prepare it: envelope, digests, binding
//	earlier  one read for an earlier answer to repeat: the idempotency
//	         key's, or a block on the action
//	read     the presented approvals, the tenant's parameters, history
//	decide   pure: the decision under the pinned pack, and its ids
//	entry    the record, the receipt, and what is stored beside them
//	append   group commit: the receipt is answered once it is durable
//
// A store that refuses the entry because something it read changed
// meanwhile (a presented approval, a history value) has it read, decided
// and appended again. A read or a commit that fails, or a record that
// breaks a validation rule, answers a fail-closed receipt (failClosed).
//
// With cont, the check continues decision cont (a resume): its record
// and receipt carry that decision id. Otherwise a check that redeems an
// approval continues the decision that asked for it, and any other check
// is a new decision.
func (e *Engine) check(ctx context.Context, req *writ.CheckRequest, cont string) (*writ.Receipt, error) {
	c, err := e.prepare(ctx, req, cont)
	if err != nil {
		return e.answer(c, nil, err)
	}
	if rc, err := e.earlier(ctx, c); rc != nil || err != nil {
		return e.answer(c, rc, err)
	}
	for attempt, histAttempts := 0, 0; ; attempt++ {
		rc, refused, err := e.attempt(ctx, c)
		switch {
		case refused == ledger.RefusedHistory:
			// A history value changed under the decision: decide again
			// with the current values (see maxHistoryAttempts).
			if histAttempts++; histAttempts >= maxHistoryAttempts {
				return e.failClosed(c, "the history aggregates it reads kept changing", errHistoryBusy)
			}
			attempt--
		case refused == "":
			return e.answer(c, rc, err)
		case attempt == 2:
			return e.failClosed(c, "the presented approval kept changing while it was being redeemed", errRecordInvalid)
		}
	}
}

// attempt reads, decides, builds the entry and appends it. refused is
// set when the store refused the entry because a presented approval or
// a history value changed concurrently (see ledger.Entry.Refused);
// nothing was appended then.
func (e *Engine) attempt(ctx context.Context, c *checking) (_ *writ.Receipt, refused string, _ error) {
	ctx, span := e.tracer.Start(ctx, "writ.decide")
	defer span.End()
	in, err := e.read(ctx, c)
	if err != nil {
		return nil, "", err
	}
	out := e.decide(in)
	entry, rc, err := e.entry(ctx, out)
	if err != nil {
		return nil, "", err
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		what := "the decision record could not be committed"
		if errors.Is(err, errCommitTimeout) {
			what = "its commit did not return within the commit timeout"
		}
		return nil, "", failed(what, err)
	}
	switch {
	case entry.Prior != nil:
		// A concurrent check claimed the same idempotency key first.
		rc, err := e.repeated(ctx, c, entry.Prior, c.ArgsDigest, writ.RepeatedIdempotent, nil)
		return rc, "", err
	case entry.Refused != "":
		return nil, entry.Refused, nil
	}
	e.announce(entry.NewApprovals)
	return rc, "", nil
}

// checking is a check on its way: the request as it is decided (its
// trace id filled in, its cited evidence resolved), what it resolved to
// under the pinned pack, its clock reading, and what record.Prepare made
// of it.
type checking struct {
	req  *writ.CheckRequest
	r    *policy.Resolved
	cont string // the decision a resume continues
	now  time.Time
	*record.Prepared
	block ledger.BlockKey // the block the action would fall under
}

// prepare validates and resolves a check, fills in its trace id, reads
// what the request names (the record it supersedes, the evidence it
// cites) and prepares it (record.Prepare) at the clock reading that
// decides it. A nil checking means the request could not be resolved;
// errors after it can be answered fail-closed.
func (e *Engine) prepare(ctx context.Context, req *writ.CheckRequest, cont string) (*checking, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty check request")
	}
	if err := validate(req); err != nil {
		return nil, err
	}
	r, err := e.policy.Resolve(req)
	if err != nil {
		return nil, err
	}
	if err := validateOutputs(r.Spec, req.Outputs); err != nil {
		return nil, err
	}
	// Copy before filling in defaults: the caller's request stays theirs.
	// Every receipt from here on, a fail-closed one included, carries
	// the trace id.
	rq := *req
	c := &checking{req: &rq, r: r, cont: cont}
	span := spanTraceID(ctx)
	if rq.TraceID == "" {
		rq.TraceID = span
	}
	if rq.TraceID == "" {
		rq.TraceID = e.newTraceID(e.now())
	}
	if span != "" && rq.TraceID != span && cont == "" {
		// The seed's trace rule: with tracing on, a check's record
		// carries the trace of the runtime span it was decided in, so the
		// record and its spans join. A resume joins the decision's trace
		// by a link instead (linkDecisionTrace).
		msg := fmt.Sprintf("trace rule: trace_id %s is not the trace %s of the span this check runs in; send the trace as a W3C traceparent header, or leave trace_id out", rq.TraceID, span)
		return nil, &writ.Error{Code: writ.EINVALID, Message: msg, Details: []writ.Detail{{Field: "trace_id", Message: "does not match the runtime trace"}}}
	}
	if req.Supersedes != "" {
		// A correction names a record of the same tenant; another tenant's
		// record is as unknown as a missing one.
		if _, err := e.store.Record(ctx, req.TenantID, req.Supersedes); writ.ErrorCode(err) == writ.ENOTFOUND {
			return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("supersedes names record %q, which this tenant does not have", req.Supersedes), Details: []writ.Detail{{Field: "supersedes", Message: "unknown record"}}}
		} else if err != nil {
			return c, failed("the superseded record could not be read", err)
		}
	}
	if len(rq.Evidence) > 0 {
		// The citations are resolved against the evidence store with one
		// read, before deciding; the envelope pins what was resolved, so
		// decide stays a function of it and replay decides on the same.
		// A spec that takes context fields from evidence needs each
		// item's subjects, pinned with it.
		if rq.Evidence, err = e.resolveEvidence(ctx, &rq, len(r.Spec.ContextFromEvidence) > 0); err != nil {
			if writ.ErrorCode(err) == writ.ETOOLARGE {
				return nil, err
			}
			return c, failed("the cited evidence could not be resolved", err)
		}
	}
	// The one clock reading that decides the check, however often it is
	// decided again (see check).
	c.now = e.now().UTC()
	// Values under classified fields leave the envelope as salted
	// commitments; the raw values go to the classified store with the
	// record (ledger.Entry.Classified).
	c.Prepared, err = record.Prepare(record.Check{Received: req, Request: &rq, Resolved: r, Now: c.now, Redactor: e.redactor, Binder: e.binder, Random: e.random})
	if err != nil {
		return nil, err
	}
	c.block = ledger.BlockKey{DecisionKey: r.Spec.DecisionKey, ArgsDigest: c.ActionDigest, PackHash: e.policy.Pack.Hash}
	return c, nil
}

// earlier answers an earlier decision again, if there is one: the answer
// under the check's idempotency key, or else a block on the action. One
// read answers both. It returns nil, nil when there is none.
func (e *Engine) earlier(ctx context.Context, c *checking) (*writ.Receipt, error) {
	priors, err := e.store.Priors(ctx, c.req.TenantID, c.req.IdempotencyKey, c.block)
	switch {
	case err != nil:
		return nil, failed("the idempotency key and blocked actions could not be looked up", err)
	case priors.Idempotent != nil:
		return e.repeated(ctx, c, priors.Idempotent, c.ArgsDigest, writ.RepeatedIdempotent, nil)
	case priors.Blocked != nil:
		return e.repeated(ctx, c, priors.Blocked, c.ActionDigest, writ.RepeatedMustNotRetry, &c.block)
	}
	return nil, nil
}

// inputs are what a check is decided on: the prepared check and what was
// read for it.
type inputs struct {
	*checking
	presented []*writ.ApprovalRequest
	params    *writ.ParamsPin
	hist      *history
	// transcriptHead is the head of the tool transcript of the check's
	// run or session, which its record pins.
	transcriptHead string
	shadow         *shadowInputs // nil without a shadow pack that resolves the check
}

// read reads what a check is decided on besides its request: the
// approvals it presents, the tenant's parameter values, the history
// aggregates (the shadow pack's too) and the head of its tool transcript.
func (e *Engine) read(ctx context.Context, c *checking) (*inputs, error) {
	in := &inputs{checking: c}
	var err error
	if in.presented, err = e.presentedApprovals(ctx, c.req, c.now); err != nil {
		if writ.ErrorCode(err) == writ.EINVALID {
			return nil, err
		}
		return nil, failed("the presented approval could not be read", err)
	}
	if in.params, err = e.checkParams(ctx, c.req.TenantID); err != nil {
		return nil, failed("the tenant's parameter values could not be read", err)
	}
	if in.hist, err = e.readHistory(ctx, c.r, c.req, c.now, paramValues(in.params)); err != nil {
		return nil, failed("the history aggregates could not be read", err)
	}
	if in.transcriptHead, err = e.checkTranscriptHead(ctx, c.req); err != nil {
		return nil, failed("the tool transcript of its run or session could not be read", err)
	}
	in.shadow = e.readShadow(ctx, c, paramValues(in.params))
	return in, nil
}

// decided is a check decided: its inputs, the decision and its ids.
type decided struct {
	*inputs
	d                    *policy.Decision
	decisionID, recordID string
}

// decide decides a check on its inputs under the pinned pack, and draws
// its ids. It reads nothing: the decision is a function of in.
func (e *Engine) decide(in *inputs) *decided {
	d := e.policy.DecideInputs(in.r, in.req, in.now, policy.Inputs{History: in.hist.values, Params: paramValues(in.params)})
	d.ApplyApprovals(in.presented, in.Binding, in.now)
	out := &decided{inputs: in, d: d, decisionID: e.newID("dec_", in.now), recordID: e.newID("dr_", in.now)}
	switch {
	case in.cont != "":
		out.decisionID = in.cont
	case len(d.Granted) == 1:
		// Redeeming an approval goes on with the decision that asked
		// for it: one decision id tells the whole story.
		out.decisionID = d.Granted[0].DecisionID
	}
	return out
}

// entry builds what a decided check appends: its record (checked
// against the validation rules), its receipt, and what is stored beside
// them, bound by the record and presealed.
func (e *Engine) entry(ctx context.Context, out *decided) (*ledger.Entry, *writ.Receipt, error) {
	rq, d, now := out.req, out.d, out.now
	rec, err := record.Build(record.Input{
		RecordID: out.recordID, DecisionID: out.decisionID, Now: now,
		Request: rq, Resolved: out.r, Decision: d, EnvelopeHash: out.EnvelopeHash, Redactor: e.redactor, Digests: &out.Digests,
		TranscriptHead: out.transcriptHead,
	})
	if err != nil {
		return nil, nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	rec.History = pinnedHistory(out.hist)
	rec.Params = out.params
	rc := d.Receipt(out.r, rq, out.decisionID)
	e.finishReceipt(rc, out.checking, rec)
	newApprovals, err := e.askApprovals(ctx, rq, out.r, d, rc, rec, out.Binding, now)
	if err != nil {
		return nil, nil, failed("pending approvals could not be looked up", err)
	}
	rcJSON, err := json.Marshal(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("encode receipt: %w", err)
	}
	// Emission-time validation: a record that breaks a validation rule is
	// never appended, and the check fails closed saying why.
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, nil, failed("the decision record breaks a validation rule ("+strings.Join(broken, "; ")+")", errRecordInvalid)
	}
	entry := &ledger.Entry{Record: rec, Receipt: rcJSON, Envelope: out.Envelope, NewApprovals: newApprovals}
	for _, sv := range out.Sealed {
		entry.Classified = append(entry.Classified, ledger.ClassifiedValue{TenantID: rq.TenantID, Sealed: sv, SubjectIDs: rec.SubjectIDs})
	}
	if rq.IdempotencyKey != "" && (rc.SafeToExecute || !rc.ResumeContract.RetryThisNode) {
		// Only an answer that settles the action claims the key: a
		// receipt that asks to retry this node leaves the retry to be
		// decided afresh.
		entry.Idempotency = &ledger.IdempotencyClaim{Key: rq.IdempotencyKey, ArgsDigest: out.ArgsDigest}
	}
	// A check presents at most one approval (see validate), so at most one
	// is redeemed, in the same transaction as the record it allows.
	if len(d.Granted) == 1 {
		a := d.Granted[0]
		entry.ApprovalEvent = &ledger.ApprovalEvent{TenantID: rq.TenantID, ApprovalID: a.ApprovalID, Event: writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, At: now}}
	}
	runStart, err := e.observe(ctx, out, rc, entry)
	if err != nil {
		return nil, nil, err
	}
	if rc.MustNotRetrySameAction && !rc.SafeToExecute {
		entry.Block = &out.block
	}
	entry.Shadow = e.decideShadow(out, rc, rec)
	out.hist.pin(entry, rc, now)
	// The record binds what is stored beside it (receipt, run event,
	// approval facts) before it is sealed.
	if err := ledger.Bind(entry, runStart); err != nil {
		return nil, nil, err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, nil, fmt.Errorf("canonicalize record: %w", err)
	}
	return entry, rc, nil
}

// observe adds to entry the run event by which a workflow run observes
// an allowed call for its step (workflow.ObservedCall), and returns the
// run's start event, which the record binds: a verification contract may
// count the call as observed, not merely claimed. A run this tenant does
// not have has nothing to observe it; a run that cannot be read fails
// the check closed, since allowing the call unrecorded would later make
// it look merely claimed.
func (e *Engine) observe(ctx context.Context, out *decided, rc *writ.Receipt, entry *ledger.Entry) (*ledger.RunEvent, error) {
	rq := out.req
	w := rq.Workflow
	if w == nil || w.RunID == "" || w.StepID == "" || !rc.SafeToExecute {
		return nil, nil
	}
	start, err := e.store.RunStart(ctx, rq.TenantID, w.RunID)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		return nil, nil
	case err != nil:
		return nil, failed("the workflow run it is a step of could not be read", err)
	}
	tool := rq.Tool
	if tool == "" {
		tool = out.r.Spec.DecisionKey
	}
	data, err := json.Marshal(workflow.ObservedCall{Tool: tool, Args: e.redactor.Map(rq.Arguments), DecisionID: out.decisionID})
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	entry.RunEvent = &ledger.RunEvent{TenantID: rq.TenantID, RunID: w.RunID, Kind: ledger.CallObserved, StepID: w.StepID, At: out.now, Data: data}
	return start, nil
}

// finishReceipt gives a check's receipt its metadata and redacts its
// text, as it does every receipt of a check: a decided one (rec its
// record) or a fail-closed one (rec nil).
func (e *Engine) finishReceipt(rc *writ.Receipt, c *checking, rec *writ.Record) {
	rc.Metadata = writ.Metadata{DecisionKey: c.r.Spec.DecisionKey, Pack: e.policy.Pack.ID(), PackHash: e.policy.Pack.Hash, TraceID: c.req.TraceID}
	if rec == nil {
		rc.Metadata.FailClosed = true
	} else {
		rc.Metadata.RecordID = rec.RecordID
		if x := rec.Execution; x != nil {
			rc.Metadata.ExpiresAt = x.ValidUntil
			if x.ReportRequired {
				rc.Metadata.ExecutionReport = "required"
			}
		}
	}
	redactReceipt(e.redactor, rc)
}

// shadowInputs are what the shadow pack decides a check on: the check as
// it resolves under the shadow pack, the tenant's values as the shadow
// pack declares its parameters, and its history aggregates.
type shadowInputs struct {
	r      *policy.Resolved
	params map[string]any
	hist   policy.History
}

// readShadow reads what the shadow pack decides the check on. It returns
// nil without a shadow pack, or when the shadow pack cannot resolve the
// check (it does not know the tool or decision key): then there is
// nothing to compare, and the enforced decision stands alone.
func (e *Engine) readShadow(ctx context.Context, c *checking, params map[string]any) *shadowInputs {
	sh := e.shadow
	if sh == nil {
		return nil
	}
	r, err := sh.Resolve(c.req)
	if err != nil {
		e.log.Debug("shadow pack cannot resolve the check", "pack", sh.Pack.ID(), "decision_key", c.r.Spec.DecisionKey, "err", err)
		return nil
	}
	// The shadow pack reads the tenant's values the check read, as it
	// declares its parameters (its defaults for the others).
	shParams := sh.Pack.EffectiveParams(params)
	return &shadowInputs{r: r, params: shParams, hist: e.shadowHistory(ctx, sh, r, c.req, c.now, shParams)}
}

// decideShadow decides the check under the shadow pack, with the same
// request, approvals and clock reading, for the record: nil when
// readShadow read nothing.
func (e *Engine) decideShadow(out *decided, rc *writ.Receipt, rec *writ.Record) *ledger.ShadowDecision {
	in := out.shadow
	if in == nil {
		return nil
	}
	sh, rq, now := e.shadow, out.req, out.now
	d := sh.DecideInputs(in.r, rq, now, policy.Inputs{History: in.hist, Params: in.params})
	d.ApplyApprovals(out.presented, record.Binding(in.r, out.Digests, out.ArgsDigest), now)
	src := d.Receipt(in.r, rq, rec.DecisionID)
	redactReceipt(e.redactor, src)
	return &ledger.ShadowDecision{
		TenantID: rq.TenantID, RecordID: rec.RecordID, DecisionKey: in.r.Spec.DecisionKey, At: now,
		Pack: sh.Pack.ID(), PackHash: sh.Pack.Hash,
		EnforcedOutcome: rc.Outcome, Outcome: src.Outcome, Status: d.Effect.Status(),
		PolicyDecisions: record.PolicyDecisions(d), Reasons: src.Reasons,
	}
}

// repeated answers an earlier decision again: the stored receipt, marked,
// or a conflict when an idempotency key is reused with other arguments.
// prior was found through the idempotency key (block nil) or through the
// block of the action. The stored receipt is answered only if its sealed
// record still binds it (ledger.CheckStoredReceipt) and binds the index
// row that led to it (ledger.CheckStoredClaim); a receipt edited behind
// writ's back, or a row pointed at another record, fails the check
// closed.
func (e *Engine) repeated(ctx context.Context, c *checking, prior *ledger.Prior, digest, why string, block *ledger.BlockKey) (*writ.Receipt, error) {
	if prior.ArgsDigest != digest {
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("idempotency key was already used with other arguments (record %s)", prior.RecordID)}
	}
	sr, err := e.store.Record(ctx, c.req.TenantID, prior.RecordID)
	if err != nil {
		return nil, failed("the record of the earlier answer could not be read", err)
	}
	if err := ledger.CheckStoredReceipt(sr.Raw, prior.Receipt); err != nil {
		return nil, failed("the stored answer does not match its sealed record "+prior.RecordID, err)
	}
	kind, claim, err := priorClaim(c.req, prior, block)
	if err == nil {
		err = ledger.CheckStoredClaim(sr.Raw, kind, claim)
	}
	if err != nil {
		return nil, failed("the stored answer's record "+prior.RecordID+" does not claim the "+kind+" that led to it", err)
	}
	var rc writ.Receipt
	if err := json.Unmarshal(prior.Receipt, &rc); err != nil {
		return nil, fmt.Errorf("stored receipt of record %s: %w", prior.RecordID, err)
	}
	rc.Metadata.Repeated = why
	return &rc, nil
}

// priorClaim is the kind and digest of the index row through which prior
// was found, as the record it points at must bind it: the idempotency
// key's row (block nil), or the action's block.
func priorClaim(req *writ.CheckRequest, prior *ledger.Prior, block *ledger.BlockKey) (kind, digest string, err error) {
	if block == nil {
		digest, err = ledger.IdempotencyDigest(req.TenantID, &ledger.IdempotencyClaim{Key: req.IdempotencyKey, ArgsDigest: prior.ArgsDigest})
		return ledger.ClaimIdempotency, digest, err
	}
	digest, err = ledger.BlockDigest(req.TenantID, &ledger.BlockKey{DecisionKey: block.DecisionKey, ArgsDigest: prior.ArgsDigest, PackHash: block.PackHash})
	return ledger.ClaimBlock, digest, err
}

// failure is a step of a check that could not be done: a store read or
// the commit failed, or the record broke a validation rule. The check is
// then answered fail-closed (answer, failClosed).
type failure struct {
	what  string
	cause error
}

// failed returns the failure of the step that could not do what.
func failed(what string, cause error) error { return &failure{what: what, cause: cause} }

func (f *failure) Error() string { return f.what + ": " + f.cause.Error() }
func (f *failure) Unwrap() error { return f.cause }

// answer answers a check with its receipt or its error, and answers a
// failure (failed) fail-closed.
func (e *Engine) answer(c *checking, rc *writ.Receipt, err error) (*writ.Receipt, error) {
	if f, ok := err.(*failure); ok {
		return e.failClosed(c, f.what, f.cause)
	}
	return rc, err
}

// failClosed answers a check that could not be decided and durably
// recorded: the action must not run, and the caller may retry the check
// later. Its receipt is built as every receipt is, from the decision
// policy.FailClosed, and carries the check's trace id.
func (e *Engine) failClosed(c *checking, what string, cause error) (*writ.Receipt, error) {
	code := "record_not_committed"
	switch {
	case errors.Is(cause, ledger.ErrOverloaded):
		code = "ledger_overloaded"
	case errors.Is(cause, errRecordInvalid):
		code = "record_invalid"
	case errors.Is(cause, ledger.ErrReceiptMismatch):
		code = "stored_receipt_mismatch"
	case errors.Is(cause, errCommitTimeout):
		code = "commit_timeout"
	}
	now := e.now().UTC()
	id := e.newID("dec_", now)
	if !errors.As(cause, new(*writ.Error)) && !errors.Is(cause, errCommitTimeout) {
		e.log.Error("check failed closed", "tenant", c.req.TenantID, "decision_id", id, "decision_key", c.r.Spec.DecisionKey, "reason", what, "err", cause)
	}
	msg := "writ could not durably record this decision (" + what + "), so the action must not run. Retry the check shortly."
	rc := policy.FailClosed(code, msg).Receipt(c.r, c.req, id)
	e.finishReceipt(rc, c, nil)
	return rc, &writ.Error{Code: writ.EUNAVAILABLE, Message: msg}
}
