package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

// BacktestStore is what a backtest reads: what replay reads, and what
// verification reads of the tenant. A ledger.Store satisfies it.
type BacktestStore interface {
	Store
	Checkpoints(ctx context.Context, tenantID string) ([]*ledger.Checkpoint, error)
	Head(ctx context.Context, tenantID string) (ledger.Head, error)
	ScanHashes(ctx context.Context, tenantID string, from int64, limit int) ([]tlog.Hash, error)
}

// BacktestOptions configure a backtest.
type BacktestOptions struct {
	TenantID string
	// Candidate is the pack to decide the recorded requests under.
	Candidate *policy.Policy
	// From (inclusive) and To (exclusive) bound the records' timestamps;
	// zero values do not bound.
	From, To time.Time
	// DecisionKey, when set, keeps only records of this decision key.
	DecisionKey string
	// Verify configures the verification of the tenant's ledger that runs
	// first (verify.Verify): with Keys and Rules it checks signatures and
	// validation rules too; its zero value checks the hashes, the chain,
	// the tree and the checkpoints.
	Verify verify.VerifyOptions
	// Workers decide this many records at once (default 4 × GOMAXPROCS,
	// as for replay).
	Workers int
	// Examples is how many record ids to keep per transition (default 3).
	Examples int
}

// BacktestReport is what a candidate pack would have decided over the
// tenant's verified history.
type BacktestReport struct {
	TenantID      string     `json:"tenant_id"`
	Candidate     string     `json:"candidate"`
	CandidateHash string     `json:"candidate_hash"`
	From          *time.Time `json:"from,omitempty"`
	To            *time.Time `json:"to,omitempty"`
	DecisionKey   string     `json:"decision_key,omitempty"`
	// Records is how many records of the window were read; Decided how
	// many were decided again, Changed how many of those got another
	// outcome.
	Records int `json:"records"`
	Decided int `json:"decided"`
	Changed int `json:"changed"`
	// Skipped counts records that are not boundary checks, by kind.
	Skipped map[string]int `json:"skipped"`
	// Findings are the problems verification found, and the records
	// whose pinned request envelope did not check out; Excluded counts
	// the records of the window they name, which were not used.
	Findings []verify.Finding `json:"findings"`
	Excluded int              `json:"excluded"`
	// Transitions count the records per recorded outcome → candidate
	// outcome, changed ones first, then by count.
	Transitions []*Transition `json:"transitions"`
}

// Transition counts records per recorded outcome (From) and the
// candidate's To; see writ.OutcomeTransition.
type Transition = writ.OutcomeTransition

// sortTransitions puts changed transitions first, then the most
// frequent, then by outcome names.
func sortTransitions(ts []*Transition) {
	slices.SortStableFunc(ts, func(a, b *Transition) int {
		if a.Changed() != b.Changed() {
			if a.Changed() {
				return -1
			}
			return 1
		}
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.From+" "+a.To, b.From+" "+b.To)
	})
}

// OutcomeError is the To of records the candidate cannot decide (a
// decision key or tool it does not define, say).
const OutcomeError = "error"

// Backtest decides the tenant's recorded boundary checks again under a
// candidate pack, each at its recorded clock, and counts how the outcomes
// would change. It reads verified history only: it verifies the tenant's
// ledger first, and records that verification names, or whose request
// envelope does not match its record, are reported and not used. Step
// verdicts and approval decisions are not boundary checks; they are
// counted as skipped.
func Backtest(ctx context.Context, st BacktestStore, opts BacktestOptions) (*BacktestReport, error) {
	if opts.TenantID == "" || opts.Candidate == nil {
		return nil, writ.Errorf(writ.EINVALID, "a backtest needs a tenant and a candidate pack")
	}
	if opts.Workers <= 0 {
		opts.Workers = 4 * runtime.GOMAXPROCS(0)
	}
	if opts.Examples <= 0 {
		opts.Examples = 3
	}
	p := opts.Candidate.Pack
	rep := &BacktestReport{TenantID: opts.TenantID, Candidate: p.ID(), CandidateHash: p.Hash, DecisionKey: opts.DecisionKey,
		Skipped: map[string]int{}, Findings: []verify.Finding{}, Transitions: []*Transition{}}
	if !opts.From.IsZero() {
		rep.From = &opts.From
	}
	if !opts.To.IsZero() {
		rep.To = &opts.To
	}

	src := tenantSource{st, opts.TenantID}
	vopts := opts.Verify
	vopts.Hashes = src // the tenant's stored tree hashes, compared with its records'
	vr, err := verify.Verify(ctx, src, vopts)
	if err != nil {
		return nil, fmt.Errorf("verify tenant %s: %w", opts.TenantID, err)
	}
	rep.Findings = append(rep.Findings, vr.Findings...)
	badID, badSeq := map[string]bool{}, map[int64]bool{}
	for _, f := range vr.Findings {
		if f.RecordID != "" {
			badID[f.RecordID] = true
		}
		// A tree or checkpoint finding is about the stored tree, not a
		// record: the records themselves are what a backtest reads.
		if f.Seq > 0 && f.TreeSize == 0 && f.Kind != verify.FindingTreeHashMismatch {
			badSeq[f.Seq] = true
		}
	}

	bt := &backtest{st: st, opts: opts, pin: newPinned(opts.Candidate), rep: rep, byKey: map[string]*Transition{}}
	// The chain, not a record query: a record whose bytes no longer
	// parse must be skipped as the finding it is, not end the backtest.
	var after int64
	for {
		page, err := st.Chain(ctx, opts.TenantID, after, pageSize)
		if err != nil {
			return nil, err
		}
		var todo []*writ.StoredRecord
		for _, raw := range page {
			sr, err := ledger.ParseStored(raw)
			if err != nil {
				continue // verification names it (hash_mismatch or malformed); it has no window
			}
			rec := &sr.Record
			if !bt.matches(rec) {
				continue
			}
			rep.Records++
			_, seal, _ := record.SplitSeal(raw)
			switch {
			case badID[rec.RecordID] || badSeq[seal.Seq]:
				rep.Excluded++
			case KindOf(rec.DecisionKey) != KindCheck:
				rep.Skipped[KindOf(rec.DecisionKey)]++
			default:
				todo = append(todo, sr)
			}
		}
		if err := bt.decideAll(ctx, todo); err != nil {
			return nil, err
		}
		if len(page) < pageSize {
			break
		}
		after = verify.NextAfter(after, page)
	}
	sortTransitions(rep.Transitions)
	return rep, nil
}

// matches reports whether rec is in the backtest's window.
func (bt *backtest) matches(rec *writ.Record) bool {
	o := bt.opts
	return (o.DecisionKey == "" || rec.DecisionKey == o.DecisionKey) &&
		(o.From.IsZero() || !rec.Timestamp.Before(o.From)) && (o.To.IsZero() || rec.Timestamp.Before(o.To))
}

type backtest struct {
	st    BacktestStore
	opts  BacktestOptions
	pin   *pinned
	mu    sync.Mutex
	rep   *BacktestReport
	byKey map[string]*Transition
}

// decided is one record decided under the candidate.
type decided struct {
	sr      *writ.StoredRecord
	to      string
	err     string
	fired   []string
	cleared []string
	finding *verify.Finding // the record's envelope did not check out
}

func (bt *backtest) decideAll(ctx context.Context, srs []*writ.StoredRecord) error {
	out := make([]decided, len(srs))
	errs := make([]error, len(srs))
	each(len(srs), bt.opts.Workers, func(i int) {
		out[i], errs[i] = bt.decide(ctx, srs[i])
	})
	for i := range out {
		if errs[i] != nil {
			return errs[i]
		}
		bt.count(out[i])
	}
	return nil
}

// decide decides one recorded check under the candidate.
func (bt *backtest) decide(ctx context.Context, sr *writ.StoredRecord) (decided, error) {
	rec := &sr.Record
	out := decided{sr: sr}
	tamper := func(format string, args ...any) (decided, error) {
		out.finding = &verify.Finding{TenantID: rec.TenantID, Seq: rec.Audit.Seq, RecordID: rec.RecordID, Kind: ClassTamper, Detail: fmt.Sprintf(format, args...)}
		return out, nil
	}
	id := rec.Replay.ReplayPacketID
	env, err := bt.st.Envelope(ctx, rec.TenantID, rec.Audit.Seq, id)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		return tamper("the request envelope %s the record names is not stored", id)
	case err != nil:
		return out, fmt.Errorf("read envelope %s of record %s: %w", id, rec.RecordID, err)
	}
	if got := record.Digest(env); got != id {
		return tamper("the stored request envelope %s hashes to %s: it changed after it was stored", id, got)
	}
	var req writ.CheckRequest
	if err := decodeEnvelope(env, &req); err != nil {
		out.to, out.err = OutcomeError, fmt.Sprintf("%s: the stored request envelope does not decode: %v", rec.RecordID, err)
		return out, nil
	}
	now := rec.Timestamp.UTC()
	var presented []*writ.ApprovalRequest
	for _, aid := range req.ApprovalIDs {
		a, err := bt.st.Approval(ctx, req.TenantID, aid, now)
		switch {
		case writ.ErrorCode(err) == writ.ENOTFOUND:
			return tamper("the check presented approval %s, which is not on file", aid)
		case err != nil:
			return out, fmt.Errorf("read approval %s of record %s: %w", aid, rec.RecordID, err)
		}
		presented = append(presented, approvalBefore(a, rec.RecordID, now))
	}
	hist, err := backtestHistory(ctx, bt.st, bt.pin, &req, rec)
	if err != nil {
		return out, err
	}
	_, d, err := decideCheckWith(bt.pin, &req, presented, now, policy.Inputs{History: hist, Params: pinnedParams(bt.pin, rec.Params)})
	if err != nil {
		out.to, out.err = OutcomeError, fmt.Sprintf("%s: %v", rec.RecordID, err)
		return out, nil
	}
	out.to = string(d.Effect.Outcome())
	if from, _ := rec.Outputs["outcome"].(string); from != out.to {
		out.fired, out.cleared = rulesChanged(rec.PolicyDecisions, d)
	}
	return out, nil
}

// rulesChanged names the checks (bundle:rule) that fired at the strongest
// effect of d, and those that fired in the recorded decision (any effect
// but allow) and no longer fire in d. Bundles match by id whatever their
// version, so a candidate that bumps a bundle's version still matches.
func rulesChanged(recorded []writ.PolicyDecision, d *policy.Decision) (fired, cleared []string) {
	firesNow := map[string]bool{}
	for _, a := range d.Applied {
		if a.Firing == nil || a.Satisfied != "" {
			continue
		}
		if a.Verdict != policy.Allow {
			firesNow[unversioned(a.ID.BundleID)+":"+a.ID.RuleID] = true
		}
		if a.Verdict == d.Effect && d.Effect != policy.Allow {
			fired = append(fired, a.ID.BundleID+":"+a.ID.RuleID)
		}
	}
	for _, pd := range recorded {
		if pd.Verdict == "allow" {
			continue
		}
		for _, rule := range pd.RuleIDs {
			if !firesNow[unversioned(pd.BundleID)+":"+rule] {
				cleared = append(cleared, pd.BundleID+":"+rule)
			}
		}
	}
	return fired, cleared
}

func unversioned(bundleID string) string {
	id, _, _ := strings.Cut(bundleID, "@")
	return id
}

// count adds one decided record to the report.
func (bt *backtest) count(d decided) {
	rep, rec := bt.rep, &d.sr.Record
	if d.finding != nil {
		rep.Findings = append(rep.Findings, *d.finding)
		rep.Excluded++
		return
	}
	rep.Decided++
	from, _ := rec.Outputs["outcome"].(string)
	key := from + "\x00" + d.to
	t := bt.byKey[key]
	if t == nil {
		t = &Transition{From: from, To: d.to, Examples: []string{}}
		bt.byKey[key] = t
		rep.Transitions = append(rep.Transitions, t)
	}
	t.Count++
	if len(t.Examples) < bt.opts.Examples {
		t.Examples = append(t.Examples, rec.RecordID)
	}
	if d.err != "" && len(t.Errors) < bt.opts.Examples {
		t.Errors = append(t.Errors, d.err)
	}
	if !t.Changed() {
		return
	}
	rep.Changed++
	for _, r := range d.fired {
		if t.RulesFired == nil {
			t.RulesFired = map[string]int{}
		}
		t.RulesFired[r]++
	}
	for _, r := range d.cleared {
		if t.RulesCleared == nil {
			t.RulesCleared = map[string]int{}
		}
		t.RulesCleared[r]++
	}
}

// tenantSource is one tenant of a store, as verify.Verify reads it.
type tenantSource struct {
	st     BacktestStore
	tenant string
}

func (s tenantSource) Tenants(context.Context) ([]string, error) { return []string{s.tenant}, nil }

func (s tenantSource) Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error) {
	return s.st.Chain(ctx, tenantID, after, limit)
}

func (s tenantSource) Checkpoints(ctx context.Context, tenantID string) ([]*ledger.Checkpoint, error) {
	return s.st.Checkpoints(ctx, tenantID)
}

func (s tenantSource) Head(ctx context.Context, tenantID string) (ledger.Head, error) {
	return s.st.Head(ctx, tenantID)
}

func (s tenantSource) ScanHashes(ctx context.Context, tenantID string, from int64, limit int) ([]tlog.Hash, error) {
	return s.st.ScanHashes(ctx, tenantID, from, limit)
}
