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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
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
		e.rules = verify.NewRules(pinned.NewPacks(mem))
	}
	if cfg.Keys != nil {
		// Checkpoints state the tenant's API key revocations: a store
		// that cannot list them would sign checkpoints stating none.
		cps, ok := cfg.Store.(ledger.CheckpointStore)
		if !ok {
			return nil, fmt.Errorf("engine: the store (%T) does not list API keys, so the checkpoints Keys would sign could not state their revocations", cfg.Store)
		}
		if cfg.LedgerName == "" {
			cfg.LedgerName = "writ"
		}
		if _, err := cfg.Keys(e.now()); err != nil {
			return nil, fmt.Errorf("engine: signing key: %w", err)
		}
		cfg.Appender.Seal = ledger.NewSeal(cfg.Keys)
		e.checkpointer = ledger.NewCheckpointer(cps, cfg.Keys, cfg.LedgerName, cfg.Checkpoints, e.now, e.log)
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

// packBlobs are a pack's manifest and files, content-addressed.
func packBlobs(p *pack.Pack) []ledger.Blob {
	blobs := []ledger.Blob{{Hash: p.Hash, Kind: "pack_manifest", Data: p.Manifest}}
	for _, f := range p.Files {
		blobs = append(blobs, ledger.Blob{Hash: f.Hash, Kind: "pack_file", Data: f.Data})
	}
	return blobs
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
