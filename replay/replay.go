// Package replay re-runs recorded decisions on their pinned inputs and
// compares what it rebuilds with what was sealed, and backtests a
// candidate pack over a tenant's verified history.
//
// A replay of one record:
//
//  1. checks the stored bytes: record_hash recomputed from them
//     (record.SplitSeal);
//  2. fetches the pinned inputs and checks them against the record: the
//     request envelope at replay.replay_packet_id (its digest must be that
//     id) and the pack at lineage.pack_hash (pack.LoadPinned, which
//     checks the manifest and every file); then the approvals a check
//     presented, the run events a step verdict was decided on, or the
//     approval request an approval decision decided, as they stood before
//     the record;
//  3. decides again with the recorded clock, with the same pure functions
//     the engine used (policy.Resolve, Decide, ApplyApprovals and
//     record.Build for a check; workflow.Fold, Evaluate and VerdictRecord
//     for a step verdict; record.ApprovalDecision, ExecutionReport and
//     the other record builders for the rest), and rebuilds the record
//     with the recorded ids;
//  4. compares canonical bytes: the rebuilt record, sealed at the recorded
//     chain position, must hash to the recorded record_hash.
//
// Equal bytes are StatusEqual (replay_equal). Otherwise the result is
// StatusDiff with every JSON path that differs, each with its class: a
// changed pinned input or stored byte is ClassTamper; a difference in the
// record is classified by the part of the record it is in (see Classify).
//
// Replay never re-executes a side effect and never writes: it reads
// through Store, and the deciding and comparing in between are pure.
// What-if replays substitute inputs through Options; substituted inputs
// are deliberate and are not hash-checked, while stored inputs always
// are.
package replay

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

// Store is what replay reads. A ledger.Store satisfies it; every read is
// scoped to one tenant, except blobs, which are content-addressed.
type Store interface {
	// Blob returns a content-addressed pinned input, or ENOTFOUND.
	Blob(ctx context.Context, hash string) ([]byte, error)
	// Envelope returns the request envelope stored with a record, or
	// ENOTFOUND (ledger.Store.Envelope).
	Envelope(ctx context.Context, tenantID string, seq int64, hash string) ([]byte, error)
	// Record returns one record exactly as sealed, or ENOTFOUND.
	Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error)
	// Records lists records matching q in chain order.
	Records(ctx context.Context, q writ.RecordQuery) (*writ.RecordPage, error)
	// Chain returns up to limit raw records with seq > after, in order.
	Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error)
	// Approval returns an approval request with all its events.
	Approval(ctx context.Context, tenantID, approvalID string, now time.Time) (*writ.ApprovalRequest, error)
	// RunEvents returns a run's events in seq order, or ENOTFOUND.
	RunEvents(ctx context.Context, tenantID, runID string) ([]ledger.RunEvent, error)
	// HistoryAsOf returns a history value as of a chain position.
	HistoryAsOf(ctx context.Context, tenantID string, read ledger.HistoryRead, seq int64) (float64, error)
	// Transcript and TranscriptHead read tool transcripts (the records
	// of their entries): replay never calls a tool again, it reads what
	// the calls were.
	ledger.TranscriptReader
}

// Statuses of a replay.
const (
	StatusEqual = writ.ReplayEqual
	StatusDiff  = writ.ReplayDiff
	StatusError = writ.ReplayError
	// StatusInputsErased: the record and its envelope verify, but
	// classified values the decision read were erased, so it cannot be
	// decided again (Result.Erased lists them).
	StatusInputsErased = writ.ReplayInputsErased
)

// Difference classes.
const (
	ClassEvidence        = "changed_evidence"
	ClassPolicy          = "changed_policy"
	ClassToolTranscript  = "changed_tool_transcript"
	ClassCompiledContext = "changed_compiled_context"
	ClassScorecard       = "changed_scorecard"
	ClassTamper          = "tamper_detected"
	// ClassRecord is any other part of the record (ids, actor, subjects,
	// the caller's outputs and lineage, budget usage).
	ClassRecord = "changed_record"
)

// Record kinds, by decision key.
const (
	KindCheck            = "check"                // a boundary check
	KindStepVerdict      = "step_verdict"         // "workflow:<workflow>/<step>"
	KindApprovalDecision = "approval_decision"    // "approval:<gate>"
	KindExecutionReport  = "execution_report"     // "execution:<decision key>"
	KindParamsChange     = "params_change"        // "params:<pack name>"
	KindRetraction       = writ.StoryRetraction   // "retraction:<decision key>"
	KindFeedback         = writ.StoryFeedback     // "feedback:<decision key>"
	KindReplayResult     = writ.StoryReplayResult // "replay:<decision key>"
	KindErasure          = "erasure"              // "erasure:<pack name>"
	KindEvidence         = "evidence"             // "evidence:<kind>" and "evidence_revocation:<kind>"
)

// KindOf returns the kind of a record with decision key key.
func KindOf(key string) string {
	switch {
	case strings.HasPrefix(key, "workflow:"):
		return KindStepVerdict
	case strings.HasPrefix(key, "approval:"):
		return KindApprovalDecision
	case strings.HasPrefix(key, "execution:"):
		return KindExecutionReport
	case strings.HasPrefix(key, pack.ParamsKeyPrefix):
		return KindParamsChange
	case strings.HasPrefix(key, pack.ErasureKeyPrefix):
		return KindErasure
	case strings.HasPrefix(key, ledger.EvidenceKeyPrefix), strings.HasPrefix(key, ledger.EvidenceRevocationKeyPrefix):
		return KindEvidence
	case strings.HasPrefix(key, writ.RetractionKeyPrefix):
		return KindRetraction
	case strings.HasPrefix(key, writ.FeedbackKeyPrefix):
		return KindFeedback
	case strings.HasPrefix(key, writ.ReplayKeyPrefix):
		return KindReplayResult
	}
	return KindCheck
}

// Result is the replay of one record (writ.ReplayResult).
type Result = writ.ReplayResult

// Difference is one thing that differs between the record as sealed and
// as replayed (writ.ReplayDifference).
type Difference = writ.ReplayDifference

// Options configure a Replayer. The zero Options replay every record on
// its own pinned inputs.
type Options struct {
	// Pack, when set, replays every record under this compiled pack
	// instead of the one it pins: a what-if of a changed pack. It is not
	// hash-checked.
	Pack *policy.Policy
	// Request, when set, changes each check's request, as decoded from
	// its stored envelope, before it is decided: a what-if of changed
	// evidence, tool lineage, scorecard or anything else. The rebuilt
	// record still names the stored envelope it started from.
	Request func(*writ.CheckRequest)
	// Workers is how many records Tenant and Trace replay at once
	// (default 4 × GOMAXPROCS: a replay waits on the store's reads, so
	// more workers than CPUs keep the CPUs busy).
	Workers int
}

// Replayer replays records of a store. It keeps each pinned pack it
// rebuilds, compiled, for the records after; it is safe for concurrent
// use.
type Replayer struct {
	store Store
	opts  Options
	packs packCache
	// what is Options.Pack, prepared.
	what *pinned
}

// New returns a Replayer reading st.
func New(st Store, opts Options) *Replayer {
	if opts.Workers <= 0 {
		opts.Workers = 4 * runtime.GOMAXPROCS(0)
	}
	r := &Replayer{store: st, opts: opts, packs: packCache{m: map[string]*packEntry{}}}
	if opts.Pack != nil {
		r.what = newPinned(opts.Pack)
	}
	return r
}

var _ writ.Replays = (*Replayer)(nil)

// Replay replays one record of the tenant (writ.Replays).
func (r *Replayer) Replay(ctx context.Context, tenantID, recordID string) (*Result, error) {
	return r.Record(ctx, tenantID, recordID)
}

// ReplayTrace replays the records of a trace (writ.Replays).
func (r *Replayer) ReplayTrace(ctx context.Context, tenantID, traceID string) ([]*Result, error) {
	return r.Trace(ctx, tenantID, traceID)
}

// Record replays one record of the tenant. A record the tenant does not
// have is ENOTFOUND; an error reading the store is returned as is.
// Everything about the record itself is in the Result.
func (r *Replayer) Record(ctx context.Context, tenantID, recordID string) (*Result, error) {
	sr, err := r.store.Record(ctx, tenantID, recordID)
	if err != nil {
		return nil, err
	}
	return r.Raw(ctx, tenantID, sr.Raw)
}

// Trace replays every record of the tenant with the trace id, in chain
// order. A trace without records is ENOTFOUND.
func (r *Replayer) Trace(ctx context.Context, tenantID, traceID string) ([]*Result, error) {
	var raws []json.RawMessage
	q := writ.RecordQuery{TenantID: tenantID, TraceID: traceID, Limit: 1000}
	for {
		page, err := r.store.Records(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, sr := range page.Records {
			raws = append(raws, sr.Raw)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if len(raws) == 0 {
		return nil, writ.Errorf(writ.ENOTFOUND, "tenant %s has no records of trace %s", tenantID, traceID)
	}
	return r.replayAll(ctx, tenantID, raws)
}

// Summary counts the results of a bulk replay.
type Summary struct {
	TenantID string `json:"tenant_id"`
	Records  int64  `json:"records"`
	Equal    int64  `json:"replay_equal"`
	Diff     int64  `json:"diff"`
	// InputsErased counts the records whose classified inputs were
	// erased (writ.ReplayInputsErased).
	InputsErased int64 `json:"inputs_erased"`
	Errors       int64 `json:"errors"`
	// Classes counts the records with a difference of each class.
	Classes map[string]int64 `json:"classes"`
	// Kinds counts the records of each kind.
	Kinds map[string]int64 `json:"kinds"`
}

// Add counts one result.
func (s *Summary) Add(res *Result) {
	if s.Classes == nil {
		s.Classes = map[string]int64{}
	}
	if s.Kinds == nil {
		s.Kinds = map[string]int64{}
	}
	s.Records++
	if res.Kind != "" {
		s.Kinds[res.Kind]++
	}
	switch res.Status {
	case StatusEqual:
		s.Equal++
	case StatusDiff:
		s.Diff++
	case StatusInputsErased:
		s.InputsErased++
	default:
		s.Errors++
	}
	for _, c := range res.Classes {
		s.Classes[c]++
	}
}

// pageSize is how many records Tenant reads at once.
const pageSize = 2048

// Tenant replays every record of the tenant, in chain order, Workers at
// a time, and hands each result to each (in chain order) as it goes. It
// stops at the first error of each or of the store.
func (r *Replayer) Tenant(ctx context.Context, tenantID string, each func(*Result) error) (*Summary, error) {
	sum, _, err := r.tenantFrom(ctx, tenantID, 0, nil, each)
	return sum, err
}

// Sampled reports whether a record is in a replay sample of rate (0 to
// 1): whether the first 8 bytes of the SHA-256 of its record id, read as
// a big-endian fraction of 2^64, are below rate. The sample is the same
// on every run and every server, so a scheduled sample replays each
// record it holds again, and one outside it never.
func Sampled(recordID string, rate float64) bool {
	if rate >= 1 {
		return true
	}
	h := sha256.Sum256([]byte(recordID))
	return float64(binary.BigEndian.Uint64(h[:8]))/math.Exp2(64) < rate
}

// Sample replays the tenant's records after seq after that are in the
// sample of rate (Sampled), in chain order, as Tenant does; a replay
// result's own record is never in a sample. It returns the seq of the
// last record it read, from which the next sample continues.
func (r *Replayer) Sample(ctx context.Context, tenantID string, rate float64, after int64, each func(*Result) error) (*Summary, int64, error) {
	return r.tenantFrom(ctx, tenantID, after, func(raw []byte) bool {
		h, err := decodeHead(raw)
		return err != nil || KindOf(h.DecisionKey) != KindReplayResult && Sampled(h.RecordID, rate)
	}, each)
}

func (r *Replayer) tenantFrom(ctx context.Context, tenantID string, start int64, keep func([]byte) bool, each func(*Result) error) (*Summary, int64, error) {
	after := start
	type fetched struct {
		page []json.RawMessage
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Read the next page while the current one is replayed.
	pages := make(chan fetched, 1)
	go func() {
		defer close(pages)
		for {
			page, err := r.store.Chain(ctx, tenantID, after, pageSize)
			select {
			case pages <- fetched{page, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || len(page) < pageSize {
				return
			}
			after = verify.NextAfter(after, page)
		}
	}()
	sum := &Summary{TenantID: tenantID, Classes: map[string]int64{}, Kinds: map[string]int64{}}
	last := start
	for f := range pages {
		if f.err != nil {
			return nil, 0, f.err
		}
		if len(f.page) > 0 {
			last = verify.NextAfter(last, f.page)
		}
		page := f.page
		if keep != nil {
			page = slices.DeleteFunc(slices.Clone(page), func(raw json.RawMessage) bool { return !keep(raw) })
		}
		results, err := r.replayAll(ctx, tenantID, page)
		if err != nil {
			return nil, 0, err
		}
		for _, res := range results {
			sum.Add(res)
			if each != nil {
				if err := each(res); err != nil {
					return nil, 0, err
				}
			}
		}
	}
	return sum, last, nil
}

// replayAll replays raws in parallel and returns their results in order.
func (r *Replayer) replayAll(ctx context.Context, tenantID string, raws []json.RawMessage) ([]*Result, error) {
	out := make([]*Result, len(raws))
	errs := make([]error, len(raws))
	each(len(raws), r.opts.Workers, func(i int) {
		if errs[i] = ctx.Err(); errs[i] == nil {
			out[i], errs[i] = r.Raw(ctx, tenantID, raws[i])
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// each calls do(i) for every i in [0, n) on at most workers goroutines,
// and returns when all calls have.
func each(n, workers int, do func(i int)) {
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	wg.Wait()
}

// Raw replays a record of the tenant given as its stored bytes. The
// error is a failure to read the store (or a cancelled ctx); everything
// about the record is in the Result.
func (r *Replayer) Raw(ctx context.Context, tenantID string, raw []byte) (*Result, error) {
	rp := &replaying{r: r, res: &Result{TenantID: tenantID}}
	if err := rp.run(ctx, tenantID, raw); err != nil {
		return nil, err
	}
	return rp.finish(), nil
}

// packCache keeps pinned packs by hash, compiled, with the error that
// rebuilding one gave.
type packCache struct {
	mu sync.Mutex
	m  map[string]*packEntry
}

type packEntry struct {
	once sync.Once
	pin  *pinned
	err  error
}

// pinned is a compiled pack and what replay needs of it.
type pinned struct {
	pol *policy.Policy
	red *record.Redactor

	// The pack's verification contracts, compiled on first use: under
	// today's defaults, and lenient (acceptance.Options.Lenient) for
	// verdicts decided before issue 31.
	contractsOnce [2]sync.Once
	compiled      [2]*acceptance.Contracts
	compileErr    [2]error
}

func newPinned(pol *policy.Policy) *pinned {
	return &pinned{pol: pol, red: record.NewRedactor(pol.Pack.Controls.Redaction)}
}

// contracts compiles the pack's verification contracts on first use,
// lenient or not.
func (p *pinned) contracts(lenient bool) (*acceptance.Contracts, error) {
	i := 0
	if lenient {
		i = 1
	}
	p.contractsOnce[i].Do(func() {
		p.compiled[i], p.compileErr[i] = acceptance.CompileWith(p.pol.Pack, acceptance.Options{Lenient: lenient})
	})
	return p.compiled[i], p.compileErr[i]
}

// get returns the pinned pack of hash, rebuilt from blobs and checked by
// pack.LoadPinned, then compiled. An error is kept: the stored
// files do not change.
func (c *packCache) get(ctx context.Context, blobs verify.BlobSource, hash string) (*pinned, error) {
	c.mu.Lock()
	e, ok := c.m[hash]
	if !ok {
		e = &packEntry{}
		c.m[hash] = e
	}
	c.mu.Unlock()
	e.once.Do(func() {
		p, err := pack.LoadPinned(ctx, blobs, hash)
		if err != nil {
			e.err = err
			return
		}
		pol, err := policy.Compile(p)
		if err != nil {
			e.err = err
			return
		}
		e.pin = newPinned(pol)
	})
	if e.err != nil && ctx.Err() != nil {
		// A cancelled read says nothing about the pack: forget it.
		c.mu.Lock()
		delete(c.m, hash)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
	return e.pin, e.err
}

// classes returns the distinct classes of ds, sorted.
func classes(ds []Difference) []string {
	var out []string
	for _, d := range ds {
		if !slices.Contains(out, d.Class) {
			out = append(out, d.Class)
		}
	}
	slices.Sort(out)
	return out
}

func (rp *replaying) finish() *Result {
	res := rp.res
	switch {
	case len(res.Differences) > 0:
		res.Status = StatusDiff
	case len(res.Erased) > 0:
		res.Status = StatusInputsErased
	case res.Error != "":
		res.Status = StatusError
	default:
		res.Status = StatusEqual
	}
	res.Classes = classes(res.Differences)
	return res
}

// errorf sets the result's error (the record could not be replayed).
func (rp *replaying) errorf(format string, args ...any) {
	if rp.res.Error == "" {
		rp.res.Error = fmt.Sprintf(format, args...)
	}
}
