// Package engine runs writ's decision loop for boundary checks:
//
//	request → resolve (pinned pack) → decide (pure) → build record →
//	seal + durable append (group commit) → receipt
//
// An Engine answers a receipt that permits execution only after the
// record behind it is durable. When the record cannot be committed, the
// answer is a fail-closed receipt (safe_to_execute false) and an
// EUNAVAILABLE error; writ never drops a record to keep up.
//
// Engine satisfies writ.Service. It owns no storage: the caller opens a
// ledger.Store (SQLite, PostgreSQL) and hands it in.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/workflow"
)

var _ writ.Service = (*Engine)(nil)

// Config configures an Engine. Policy and Store are required.
type Config struct {
	// Policy is the compiled, pinned pack every check is decided under.
	Policy *policy.Policy
	// Store keeps the ledger.
	Store ledger.Store
	// BindingKey (at least 32 secret bytes) keys the digests that bind
	// idempotency keys and blocked actions to exact, unredacted inputs. It
	// must stay the same across restarts of the same ledger, and it must
	// not be stored in the ledger.
	BindingKey []byte
	// Now is the clock (default time.Now). Each check reads it once, and
	// the reading is the decision's timestamp.
	Now func() time.Time
	// Random is the source of ids and trace ids (default crypto/rand). It
	// must be safe for concurrent use.
	Random io.Reader
	// Keys signs records and checkpoints: the key valid at each record's
	// timestamp. Without keys, records are hash-chained but unsigned and no
	// checkpoints are issued. With keys, Store must list API keys
	// (ledger.APIKeyLister, as both writ stores do), whose revocations
	// each checkpoint states; New refuses a store that does not.
	Keys ledger.KeySource
	// LedgerName names the ledger in checkpoint origins ("<name>/<tenant>";
	// default "writ").
	LedgerName string
	// Checkpoints says when checkpoints are issued.
	Checkpoints ledger.CheckpointPolicy
	// Appender tunes group commit.
	Appender ledger.AppenderConfig
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Shadow, when set, is a candidate pack decided in shadow: every check
	// is also decided under it, and its decision is stored beside the
	// enforced record (ledger.ShadowDecision), never enforced and never
	// in a receipt.
	Shadow *policy.Policy
	// Announce, when set, is called with each new approval request once
	// its record is durable (a webhook delivery queue, say). It must not
	// block.
	Announce func(*writ.ApprovalRequest)
	// AnnounceDecided, when set, is called with each approval request
	// once its approval, denial or withdrawal is durable (a webhook's
	// "approval decided" event, so an orchestrator can resume). It must not block.
	AnnounceDecided func(*writ.ApprovalRequest)
	// ResumeSweep, when positive, is how often the engine looks for
	// approvals that another server decided while resumes here wait on
	// them: set it when several servers share the store (PostgreSQL).
	// Zero means this engine decides every approval of its store, and
	// wakes its waiters itself.
	ResumeSweep time.Duration
	// CommitTimeout, when positive, is how long a check (or an approval
	// decision, execution report or step attempt) waits for its record's
	// commit. A check whose commit does not return in time is answered
	// fail-closed (reason commit_timeout); the commit itself is not
	// cancelled and may still land, so a retry with the same idempotency
	// key then gets its receipt. Zero waits as long as the caller does.
	CommitTimeout time.Duration
	// TracerProvider, when set, traces checks: writ.decide and
	// writ.ledger.append spans (see engine/telemetry.go). Nil traces
	// nothing.
	TracerProvider trace.TracerProvider
	// EvidenceIssuers verifies signed evidence items against the issuer
	// keys each tenant registered (delegation.EvidenceIssuers): an item
	// one of their keys signed is issued, whoever carries it in. Nil
	// registers none, and every signed item is refused.
	EvidenceIssuers EvidenceVerifier
}

// Engine is the in-process writ runtime.
type Engine struct {
	policy        *policy.Policy
	checkpointer  *ledger.Checkpointer // nil without keys
	stopCP        context.CancelFunc
	cpDone        chan struct{}
	store         ledger.Store
	appender      *ledger.Appender
	commitTimeout time.Duration
	now           func() time.Time
	random        io.Reader
	redactor      *record.Redactor
	binder        *record.Binder
	rules         *verify.Rules // the record validation rules, checked before append

	contracts *acceptance.Contracts // the pack\'s verification contracts
	runs      runLocks
	announcer func(*writ.ApprovalRequest)
	onDecided func(*writ.ApprovalRequest)
	waiters   waiters
	stopSweep context.CancelFunc
	sweepDone chan struct{}
	shadow    *policy.Policy // nil without a shadow pack
	issuers   EvidenceVerifier
	log       *slog.Logger
	tracer    trace.Tracer
}

// New starts an engine. It stores the pack's files content-addressed (so
// that replay can find the exact pack later) before it accepts checks.
// Without a Policy the engine serves the ledger only (checkpoints and
// proofs) and refuses checks.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("engine: Config.Store is required")
	}
	var binder *record.Binder
	if cfg.Policy != nil {
		var err error
		if binder, err = record.NewBinder(cfg.BindingKey); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	e := &Engine{policy: cfg.Policy, store: cfg.Store, binder: binder, now: cfg.Now, random: cfg.Random, log: cfg.Logger, announcer: cfg.Announce, onDecided: cfg.AnnounceDecided, shadow: cfg.Shadow, issuers: cfg.EvidenceIssuers}
	if e.now == nil {
		e.now = time.Now
	}
	if e.random == nil {
		e.random = rand.Reader
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.tracer = newTracer(cfg.TracerProvider)
	if cfg.Appender.Logger == nil {
		cfg.Appender.Logger = e.log
	}
	if p := cfg.Policy; p != nil {
		e.redactor = record.NewRedactor(p.Pack.Controls.Redaction)
		blobs := packBlobs(p.Pack)
		if err := cfg.Store.PutBlobs(ctx, blobs); err != nil {
			return nil, fmt.Errorf("engine: store pack %s: %w", p.Pack.ID(), err)
		}
		if sh := cfg.Shadow; sh != nil {
			// The shadow pack is pinned like the enforced one, so its
			// decisions can be traced to its exact files.
			if err := cfg.Store.PutBlobs(ctx, packBlobs(sh.Pack)); err != nil {
				return nil, fmt.Errorf("engine: store shadow pack %s: %w", sh.Pack.ID(), err)
			}
		}
		if p.Pack.Classifies() {
			if _, ok := cfg.Store.(ledger.ClassifiedStore); !ok {
				return nil, fmt.Errorf("engine: pack %s classifies values, and the store (%T) keeps no classified values", p.Pack.ID(), cfg.Store)
			}
		}
		contracts, err := acceptance.Compile(p.Pack)
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		e.contracts = contracts
		mem := memBlobs{}
		for _, b := range blobs {
			mem[b.Hash] = b.Data
		}
		e.rules = verify.NewRules(mem)
	}
	if cfg.Keys != nil {
		// Checkpoints state the tenant's API key revocations: a store
		// that cannot list them would sign checkpoints stating none.
		if _, ok := cfg.Store.(ledger.APIKeyLister); !ok {
			return nil, fmt.Errorf("engine: the store (%T) does not list API keys, so the checkpoints Keys would sign could not state their revocations", cfg.Store)
		}
		if cfg.LedgerName == "" {
			cfg.LedgerName = "writ"
		}
		if _, err := cfg.Keys(e.now()); err != nil {
			return nil, fmt.Errorf("engine: signing key: %w", err)
		}
		cfg.Appender.Seal = ledger.NewSeal(cfg.Keys)
		e.checkpointer = ledger.NewCheckpointer(cfg.Store, cfg.Keys, cfg.LedgerName, cfg.Checkpoints, e.now, e.log)
		cfg.Appender.OnCommit = e.checkpointer.Observe
		var cpCtx context.Context
		cpCtx, e.stopCP = context.WithCancel(context.Background())
		e.cpDone = make(chan struct{})
		go func() {
			defer close(e.cpDone)
			e.checkpointer.Run(cpCtx)
		}()
	}
	e.appender = ledger.NewAppender(cfg.Store, cfg.Appender)
	e.commitTimeout = cfg.CommitTimeout
	if cfg.Policy != nil && cfg.ResumeSweep > 0 {
		var sweepCtx context.Context
		sweepCtx, e.stopSweep = context.WithCancel(context.Background())
		e.sweepDone = make(chan struct{})
		go func() {
			defer close(e.sweepDone)
			e.sweep(sweepCtx, cfg.ResumeSweep)
		}()
	}
	return e, nil
}

// Close stops accepting checks, waits for queued records to commit and
// checkpoints every tenant with records not yet covered. It does not
// close the store.
func (e *Engine) Close() error {
	err := e.appender.Close()
	if e.stopSweep != nil {
		e.stopSweep()
		<-e.sweepDone
	}
	if e.stopCP != nil {
		e.stopCP()
		<-e.cpDone
	}
	return err
}

// Pack returns the pinned pack.
func (e *Engine) Pack() *pack.Pack { return e.policy.Pack }

// Check runs one boundary check. See writ.Service.
//
// The actor is bound to the request's credentials first (writ.BindActor):
// in keyed mode the API key's principal, authenticated; in development
// mode the actor as named, claimed.
func (e *Engine) Check(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error) {
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty check request")
	}
	bound, err := bindActor(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.check(ctx, bound, "")
}

// bindActor returns a copy of req whose actor and usage are bound to
// ctx's credentials (writ.BindActor, writ.BindUsage). The caller's
// request stays theirs.
func bindActor(ctx context.Context, req *writ.CheckRequest) (*writ.CheckRequest, error) {
	a, err := writ.BindActor(ctx, req.TenantID, req.Actor)
	if err != nil {
		return nil, err
	}
	u, err := writ.BindUsage(ctx, req.Usage)
	if err != nil {
		return nil, err
	}
	rq := *req
	rq.Actor, rq.Usage = a, u
	return &rq, nil
}

// check runs one boundary check whose actor is bound (bindActor). With cont, the check continues decision
// cont (a resume): its record and receipt carry that decision id.
// Otherwise a check that redeems an approval continues the decision that
// asked for it, and any other check is a new decision.
func (e *Engine) check(ctx context.Context, req *writ.CheckRequest, cont string) (*writ.Receipt, error) {
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
			return e.failClosed(&rq, r, "the superseded record could not be read", err)
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
			return e.failClosed(&rq, r, "the cited evidence could not be resolved", err)
		}
	}
	// Values under classified fields leave the envelope as salted
	// commitments; the raw values go to the classified store with the
	// record (ledger.Entry.Classified).
	envelope, sealed, err := record.ClassifiedEnvelope(&rq, e.redactor, e.random)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if hasNUL(envelope) {
		return nil, errNUL
	}
	size := len(envelope)
	if e.redactor.Active() {
		// Redaction shortens what is stored; the bound is on what decide sees.
		if raw, err := json.Marshal(&rq); err == nil {
			size = len(raw)
		}
	}
	if size > policy.MaxInputBytes {
		// Conditions are proven cheap for inputs up to this size (see
		// policy.MaxInputBytes); larger ones are refused, not evaluated.
		return nil, writ.Errorf(writ.ETOOLARGE, "the check request is %d bytes; the limit is %d", size, policy.MaxInputBytes)
	}
	argsDigest, err := e.binder.Arguments(req.Arguments)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	actionDigest, err := e.binder.Action(req, r.Spec.DecisionKey)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	block := ledger.BlockKey{DecisionKey: r.Spec.DecisionKey, ArgsDigest: actionDigest, PackHash: e.policy.Pack.Hash}
	// One read answers both: an earlier answer under the idempotency key
	// comes first, then a block on the action.
	priors, err := e.store.Priors(ctx, req.TenantID, req.IdempotencyKey, block)
	if err != nil {
		return e.failClosed(&rq, r, "the idempotency key and blocked actions could not be looked up", err)
	}
	if priors.Idempotent != nil {
		return e.repeated(ctx, &rq, r, priors.Idempotent, argsDigest, writ.RepeatedIdempotent, nil)
	}
	if priors.Blocked != nil {
		return e.repeated(ctx, &rq, r, priors.Blocked, actionDigest, writ.RepeatedMustNotRetry, &block)
	}

	// A presented approval can be redeemed or decided concurrently by
	// another check or approver; the store refuses the loser's entry,
	// which is then decided again with the approval as it now stands.
	for attempt, histAttempts := 0, 0; ; attempt++ {
		rc, refused, err := e.decide(ctx, req, &rq, r, envelope, sealed, argsDigest, block, cont)
		if refused == ledger.RefusedHistory {
			// A history value changed under the decision: decide again
			// with the current values (see maxHistoryAttempts).
			if histAttempts++; histAttempts < maxHistoryAttempts {
				attempt--
				continue
			}
			return e.failClosed(&rq, r, "the history aggregates it reads kept changing", errHistoryBusy)
		}
		if refused == "" || attempt == 2 {
			if refused != "" {
				return e.failClosed(&rq, r, "the presented approval kept changing while it was being redeemed", errRecordInvalid)
			}
			return rc, err
		}
	}
}

// decide decides a check at the current clock reading, builds and
// appends its record, and answers its receipt. refused is set when the
// store refused the entry because a presented approval changed
// concurrently (see ledger.Entry.Refused); nothing was appended then.
func (e *Engine) decide(ctx context.Context, req, rq *writ.CheckRequest, r *policy.Resolved, envelope []byte, sealed []record.Sealed, argsDigest string, block ledger.BlockKey, cont string) (_ *writ.Receipt, refused string, _ error) {
	ctx, span := e.tracer.Start(ctx, "writ.decide")
	defer span.End()
	now := e.now().UTC()
	presented, err := e.presentedApprovals(ctx, req, now)
	if err != nil {
		if writ.ErrorCode(err) == writ.EINVALID {
			return nil, "", err
		}
		rc, err := e.failClosed(rq, r, "the presented approval could not be read", err)
		return rc, "", err
	}
	digests, err := record.InputDigests(rq, now, e.redactor)
	if err != nil {
		return nil, "", &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	binding := record.Binding(r, digests, argsDigest)
	params, err := e.checkParams(ctx, rq.TenantID)
	if err != nil {
		rc, err := e.failClosed(rq, r, "the tenant's parameter values could not be read", err)
		return rc, "", err
	}
	hist, err := e.readHistory(ctx, r, rq, now, paramValues(params))
	if err != nil {
		rc, err := e.failClosed(rq, r, "the history aggregates could not be read", err)
		return rc, "", err
	}
	transcriptHead, err := e.checkTranscriptHead(ctx, rq)
	if err != nil {
		rc, err := e.failClosed(rq, r, "the tool transcript of its run or session could not be read", err)
		return rc, "", err
	}
	d := e.policy.DecideInputs(r, rq, now, policy.Inputs{History: hist.values, Params: paramValues(params)})
	d.ApplyApprovals(presented, binding, now)
	envHash := record.Digest(envelope)
	decisionID, recordID := e.newID("dec_", now), e.newID("dr_", now)
	switch {
	case cont != "":
		decisionID = cont
	case len(d.Granted) == 1:
		// Redeeming an approval goes on with the decision that asked
		// for it: one decision id tells the whole story.
		decisionID = d.Granted[0].DecisionID
	}
	rec, err := record.Build(record.Input{
		RecordID: recordID, DecisionID: decisionID, Now: now,
		Request: rq, Resolved: r, Decision: d, EnvelopeHash: envHash, Redactor: e.redactor, Digests: &digests,
		TranscriptHead: transcriptHead,
	})
	if err != nil {
		return nil, "", &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	rec.History = pinnedHistory(hist)
	rec.Params = params
	rc := d.Receipt(r, rq, decisionID)
	rc.Metadata = writ.Metadata{RecordID: recordID, DecisionKey: r.Spec.DecisionKey, Pack: e.policy.Pack.ID(), PackHash: e.policy.Pack.Hash, TraceID: rq.TraceID}
	if x := rec.Execution; x != nil {
		rc.Metadata.ExpiresAt = x.ValidUntil
		if x.ReportRequired {
			rc.Metadata.ExecutionReport = "required"
		}
	}
	redactReceipt(e.redactor, rc)
	newApprovals, err := e.askApprovals(ctx, rq, r, d, rc, rec, binding, now)
	if err != nil {
		rc, err := e.failClosed(rq, r, "pending approvals could not be looked up", err)
		return rc, "", err
	}
	rcJSON, err := json.Marshal(rc)
	if err != nil {
		return nil, "", fmt.Errorf("encode receipt: %w", err)
	}

	// Emission-time validation: a record that breaks a validation rule is
	// never appended, and the check fails closed saying why.
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		rc, err := e.failClosed(rq, r, "the decision record breaks a validation rule ("+strings.Join(broken, "; ")+")", errRecordInvalid)
		return rc, "", err
	}
	entry := &ledger.Entry{Record: rec, Receipt: rcJSON, Envelope: envelope, NewApprovals: newApprovals}
	for _, sv := range sealed {
		entry.Classified = append(entry.Classified, ledger.ClassifiedValue{TenantID: rq.TenantID, Sealed: sv, SubjectIDs: rec.SubjectIDs})
	}
	if req.IdempotencyKey != "" && (rc.SafeToExecute || !rc.ResumeContract.RetryThisNode) {
		// Only an answer that settles the action claims the key: a
		// receipt that asks to retry this node leaves the retry to be
		// decided afresh.
		entry.Idempotency = &ledger.IdempotencyClaim{Key: req.IdempotencyKey, ArgsDigest: argsDigest}
	}
	// A check presents at most one approval (see validate), so at most one
	// is redeemed, in the same transaction as the record it allows.
	if len(d.Granted) == 1 {
		a := d.Granted[0]
		entry.ApprovalEvent = &ledger.ApprovalEvent{TenantID: rq.TenantID, ApprovalID: a.ApprovalID, Event: writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, At: now}}
	}
	var runStart *ledger.RunEvent // the start event of the run the entry appends to
	if w := rq.Workflow; w != nil && w.RunID != "" && w.StepID != "" && rc.SafeToExecute {
		// writ saw this call for the run's step: a verification contract
		// may count it as observed, not merely claimed. A run this tenant
		// does not have has nothing to observe it; a run that cannot be
		// read fails the check closed, since allowing the call unrecorded
		// would later make it look merely claimed.
		start, err := e.store.RunStart(ctx, rq.TenantID, w.RunID)
		if err != nil && writ.ErrorCode(err) != writ.ENOTFOUND {
			rc, err := e.failClosed(rq, r, "the workflow run it is a step of could not be read", err)
			return rc, "", err
		}
		if err == nil {
			runStart = start
			tool := rq.Tool
			if tool == "" {
				tool = r.Spec.DecisionKey
			}
			data, err := json.Marshal(workflow.ObservedCall{Tool: tool, Args: e.redactor.Map(rq.Arguments), DecisionID: decisionID})
			if err != nil {
				return nil, "", &writ.Error{Code: writ.EINVALID, Message: err.Error()}
			}
			entry.RunEvent = &ledger.RunEvent{TenantID: rq.TenantID, RunID: w.RunID, Kind: ledger.CallObserved, StepID: w.StepID, At: now, Data: data}
		}
	}
	if rc.MustNotRetrySameAction && !rc.SafeToExecute {
		entry.Block = &block
	}
	entry.Shadow = e.decideShadow(ctx, rq, presented, digests, argsDigest, rc, rec, now, params)
	hist.pin(entry, rc, now)
	// The record binds what is stored beside it (receipt, run event,
	// approval facts) before it is sealed.
	if err := ledger.Bind(entry, runStart); err != nil {
		return nil, "", err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, "", fmt.Errorf("canonicalize record: %w", err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		what := "the decision record could not be committed"
		if errors.Is(err, errCommitTimeout) {
			what = "its commit did not return within the commit timeout"
		}
		rc, err := e.failClosed(rq, r, what, err)
		return rc, "", err
	}
	if entry.Prior != nil {
		// A concurrent check claimed the same idempotency key first.
		rc, err := e.repeated(ctx, rq, r, entry.Prior, argsDigest, writ.RepeatedIdempotent, nil)
		return rc, "", err
	}
	if entry.Refused != "" {
		return nil, entry.Refused, nil
	}
	e.announce(newApprovals)
	return rc, "", nil
}

// decideShadow decides the check under the shadow pack, with the same
// request, approvals and clock reading, for the record. It returns nil
// without a shadow pack, or when the shadow pack cannot resolve the check
// (it does not know the tool or decision key): then there is nothing to
// compare, and the enforced decision stands alone.
func (e *Engine) decideShadow(ctx context.Context, rq *writ.CheckRequest, presented []*writ.ApprovalRequest, digests record.Digests, argsDigest string, rc *writ.Receipt, rec *writ.Record, now time.Time, params *writ.ParamsPin) *ledger.ShadowDecision {
	sh := e.shadow
	if sh == nil {
		return nil
	}
	r, err := sh.Resolve(rq)
	if err != nil {
		e.log.Debug("shadow pack cannot resolve the check", "pack", sh.Pack.ID(), "record", rec.RecordID, "err", err)
		return nil
	}
	// The shadow pack reads the tenant's values the check read, as it
	// declares its parameters (its defaults for the others).
	shParams := sh.Pack.EffectiveParams(paramValues(params))
	d := sh.DecideInputs(r, rq, now, policy.Inputs{History: e.shadowHistory(ctx, sh, r, rq, now, shParams), Params: shParams})
	d.ApplyApprovals(presented, record.Binding(r, digests, argsDigest), now)
	src := d.Receipt(r, rq, rec.DecisionID)
	redactReceipt(e.redactor, src)
	return &ledger.ShadowDecision{
		TenantID: rq.TenantID, RecordID: rec.RecordID, DecisionKey: r.Spec.DecisionKey, At: now,
		Pack: sh.Pack.ID(), PackHash: sh.Pack.Hash,
		EnforcedOutcome: rc.Outcome, Outcome: src.Outcome, Status: d.Effect.Status(),
		PolicyDecisions: record.PolicyDecisions(d), Reasons: src.Reasons,
	}
}

// packBlobs are a pack's manifest and files, content-addressed.
func packBlobs(p *pack.Pack) []ledger.Blob {
	blobs := []ledger.Blob{{Hash: p.Hash, Kind: "pack_manifest", Data: p.Manifest}}
	for _, f := range p.Files {
		blobs = append(blobs, ledger.Blob{Hash: f.Hash, Kind: "pack_file", Data: f.Data})
	}
	return blobs
}

// repeated answers an earlier decision again: the stored receipt, marked,
// or a conflict when an idempotency key is reused with other arguments.
// prior was found through the idempotency key (block nil) or through the
// block of the action. The stored receipt is answered only if its sealed
// record still binds it (ledger.CheckStoredReceipt) and binds the index
// row that led to it (ledger.CheckStoredClaim); a receipt edited behind
// writ's back, or a row pointed at another record, fails the check
// closed.
func (e *Engine) repeated(ctx context.Context, req *writ.CheckRequest, r *policy.Resolved, prior *ledger.Prior, digest, why string, block *ledger.BlockKey) (*writ.Receipt, error) {
	if prior.ArgsDigest != digest {
		return nil, &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("idempotency key was already used with other arguments (record %s)", prior.RecordID)}
	}
	sr, err := e.store.Record(ctx, req.TenantID, prior.RecordID)
	if err != nil {
		return e.failClosed(req, r, "the record of the earlier answer could not be read", err)
	}
	if err := ledger.CheckStoredReceipt(sr.Raw, prior.Receipt); err != nil {
		return e.failClosed(req, r, "the stored answer does not match its sealed record "+prior.RecordID, err)
	}
	kind, claim, err := priorClaim(req, prior, block)
	if err == nil {
		err = ledger.CheckStoredClaim(sr.Raw, kind, claim)
	}
	if err != nil {
		return e.failClosed(req, r, "the stored answer's record "+prior.RecordID+" does not claim the "+kind+" that led to it", err)
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

// failClosed answers a check that could not be decided and durably
// recorded (a store read or the commit failed, or the record broke a
// rule): the action must not run, and the caller may retry the check
// later. req is the check as decided (rq), so the receipt carries its
// trace id.
func (e *Engine) failClosed(req *writ.CheckRequest, r *policy.Resolved, what string, cause error) (*writ.Receipt, error) {
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
		e.log.Error("check failed closed", "tenant", req.TenantID, "decision_id", id, "decision_key", r.Spec.DecisionKey, "reason", what, "err", cause)
	}
	msg := "writ could not durably record this decision (" + what + "), so the action must not run. Retry the check shortly."
	rc := &writ.Receipt{
		ReceiptType:    writ.ReceiptType,
		DecisionID:     id,
		Outcome:        writ.OutcomeReplanRequired,
		ActionClass:    r.ActionClass,
		SafeToExecute:  false,
		Reasons:        []writ.Reason{{Code: code, Message: msg}},
		SafeNextSteps:  []writ.Reason{{Code: "RETRY_CHECK_LATER", Message: "Retry the same check after a short delay; do not perform the action until a receipt allows it."}},
		ViewerGuidance: []string{}, WhatWouldChangeThis: []string{"writ's ledger accepts the record again."},
		WhatWouldChangeThisConditions: []writ.Condition{},
		Disposition:                   writ.Disposition{Mode: writ.ModeLocalReplan, LocalReplanRecommended: true},
		Routing:                       writ.Routing{Direction: writ.DirectionLocal},
		ResumeContract:                writ.ResumeContract{RetryThisNode: true, ResumeWhen: []string{"writ's ledger accepts the record again."}, ResumeWhenConditions: []writ.Condition{}},
		RuntimeLoopback:               writ.RuntimeLoopback{SameGoalState: true},
		Metadata:                      writ.Metadata{DecisionKey: r.Spec.DecisionKey, Pack: e.policy.Pack.ID(), PackHash: e.policy.Pack.Hash, TraceID: req.TraceID, FailClosed: true},
	}
	if w := req.Workflow; w != nil {
		rc.Routing.WorkflowID, rc.Routing.NodeID = w.WorkflowID, w.NodeID
	}
	return rc, &writ.Error{Code: writ.EUNAVAILABLE, Message: msg}
}

// Record returns one of the tenant's records, exactly as sealed.
func (e *Engine) Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error) {
	if tenantID == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "tenant_id is required", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	return e.store.Record(ctx, tenantID, recordID)
}

// Records lists the tenant's records matching q.
func (e *Engine) Records(ctx context.Context, q writ.RecordQuery) (*writ.RecordPage, error) {
	if q.TenantID == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "tenant_id is required", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	if q.Limit < 0 || q.Limit > 1000 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "limit must be between 1 and 1000", Details: []writ.Detail{{Field: "limit", Message: "out of range"}}}
	}
	return e.store.Records(ctx, q)
}

// errRecordInvalid marks a record that failed emission-time validation.
var errRecordInvalid = &writ.Error{Code: writ.EINTERNAL, Message: "the decision record breaks a validation rule"}

// memBlobs serves the pinned pack's files from memory to the rules.
type memBlobs map[string][]byte

func (m memBlobs) Blob(_ context.Context, hash string) ([]byte, error) {
	if b, ok := m[hash]; ok {
		return b, nil
	}
	return nil, writ.Errorf(writ.ENOTFOUND, "blob %s not found", hash)
}
