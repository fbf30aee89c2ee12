package ledger

import (
	"bytes"
	"context"

	"github.com/writhq/writ"
)

// The append contract, once: which entries of a batch Store.Append
// writes, and what it answers for the others. Both stores run Settle
// inside their append transaction, after taking what keeps every other
// append of the batch's tenants out (PostgreSQL's head and approval
// locks, SQLite's single writer), and before sealing anything; each store
// supplies only the reads, as SQL.

// SettleReads are the reads Settle makes inside an append transaction.
// Each returns what the store holds, as committed before the transaction
// (nothing of the batch is written while Settle runs); Settle adds what
// the batch's earlier entries change. A store may read everything ahead
// (PostgreSQL, in one round trip) or on demand (SQLite); Settle asks at
// most once for each key.
type SettleReads interface {
	// Report returns the answer of the decision's execution report (its
	// ArgsDigest the report's digest), or nil when it has none.
	Report(ctx context.Context, tenantID, decisionID string) (*Prior, error)
	// Claim returns the first answer under the tenant's idempotency key,
	// or nil when the key is not claimed.
	Claim(ctx context.Context, tenantID, key string) (*Prior, error)
	// HistoryValues returns the stored value of each of e's history reads,
	// in order; e is entries[i] of the batch.
	HistoryValues(ctx context.Context, i int, e *Entry) ([]float64, error)
	// Pending returns the pending contributions of a decision: those its
	// last record that stored any stored (none is not an error).
	Pending(ctx context.Context, tenantID, decisionID string) ([]Contribution, error)
	// Tally returns what the guard of an event of the approval request
	// needs, or nil when the tenant has no such request. Settle counts the
	// batch's events into it.
	Tally(ctx context.Context, tenantID, approvalID string) (*ApprovalTally, error)
}

// Settlement is what Settle decided for a batch of entries.
type Settlement struct {
	// Appended are the indexes of the entries to seal and write, in
	// batch order.
	Appended []int
	// Priors and Refused hold, by entry index, the answer of an entry that
	// is skipped: the first answer under its claim, or why it is refused.
	Priors  []*Prior
	Refused []string
	// Executed holds, by entry index, the pending contributions an
	// appended entry's Executes adds to the history aggregates: the store
	// writes them with the entry's own contributions.
	Executed [][]Contribution
}

// Settle decides, for each entry in batch order, what appending it means
// (the contract of Store.Append):
//
//  1. an execution report for a decision that already has one, in the
//     store or earlier in the batch, is skipped, its Prior the first
//     report's answer;
//  2. an entry whose idempotency key is claimed, in the store or earlier
//     in the batch, is skipped, its Prior the first claim's answer;
//  3. an entry a history value it read no longer holds for (stored
//     values plus what earlier entries of the batch add) is refused with
//     RefusedHistory;
//  4. an entry whose approval event fails its guard (ApprovalTally.Admit)
//     is refused with the guard's reason, and its event's Seq and RecordID
//     are cleared (an earlier attempt of the batch may have set them);
//  5. any other entry is appended: its approval event gets its Seq and
//     its record's id, and its claims, new approval requests and history
//     contributions count for the entries after it.
//
// An error from a read fails the batch.
func Settle(ctx context.Context, entries []*Entry, r SettleReads) (*Settlement, error) {
	s := &Settlement{
		Appended: make([]int, 0, len(entries)),
		Priors:   make([]*Prior, len(entries)),
		Refused:  make([]string, len(entries)),
		Executed: make([][]Contribution, len(entries)),
	}
	b := settler{r: r}
	for i, e := range entries {
		if err := b.settle(ctx, s, i, e); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Answer sets each entry's outcome once its batch committed: the sealed
// bytes raws[i] of an appended entry, or its Prior or Refused.
func (s *Settlement) Answer(entries []*Entry, raws [][]byte) {
	for i, e := range entries {
		e.Raw, e.Prior, e.Refused = raws[i], s.Priors[i], s.Refused[i]
	}
}

type settleKey struct{ tenant, key string }

// settler holds what a batch settled so far: the store's answers it read
// and the claims, requests and contributions of the entries it appended.
type settler struct {
	r       SettleReads
	reports map[settleKey]*Prior
	claims  map[settleKey]*Prior
	tallies map[settleKey]*ApprovalTally
	history HistoryBatch
}

func (b *settler) settle(ctx context.Context, s *Settlement, i int, e *Entry) error {
	rec := e.Record
	if c := e.Report; c != nil {
		prior, err := read(ctx, &b.reports, settleKey{rec.TenantID, c.DecisionID}, b.r.Report)
		if err != nil || prior != nil {
			s.Priors[i] = prior
			return err
		}
	}
	if c := e.Idempotency; c != nil {
		prior, err := read(ctx, &b.claims, settleKey{rec.TenantID, c.Key}, b.r.Claim)
		if err != nil || prior != nil {
			s.Priors[i] = prior
			return err
		}
	}
	if len(e.HistoryReads) > 0 {
		stored, err := b.r.HistoryValues(ctx, i, e)
		if err != nil {
			return err
		}
		if !b.history.Fresh(e, stored) {
			s.Refused[i] = RefusedHistory
			return nil
		}
	}
	if ev := e.ApprovalEvent; ev != nil {
		t, err := read(ctx, &b.tallies, settleKey{ev.TenantID, ev.ApprovalID}, b.r.Tally)
		if err != nil {
			return err
		}
		seq, reason := int64(0), RefusedUnknown
		if t != nil {
			seq, reason = t.Admit(ev.Event.Kind)
		}
		if reason != "" {
			s.Refused[i] = reason
			ev.Event.Seq, ev.Event.RecordID = 0, ""
			return nil
		}
		ev.Event.Seq, ev.Event.RecordID = seq, rec.RecordID
	}

	// Appended: what it claims and adds counts for the entries after it.
	if c := e.Report; c != nil {
		b.reports[settleKey{rec.TenantID, c.DecisionID}] = &Prior{ArgsDigest: c.ReportDigest, Receipt: bytes.Clone(e.Receipt), RecordID: rec.RecordID}
	}
	if c := e.Idempotency; c != nil {
		b.claims[settleKey{rec.TenantID, c.Key}] = &Prior{ArgsDigest: c.ArgsDigest, Receipt: bytes.Clone(e.Receipt), RecordID: rec.RecordID}
	}
	for _, a := range e.NewApprovals {
		if b.tallies == nil {
			b.tallies = map[settleKey]*ApprovalTally{}
		}
		b.tallies[settleKey{a.Request.TenantID, a.Request.ApprovalID}] = &ApprovalTally{Allowance: a.Request.Allowance}
	}
	if id := e.Executes; id != "" {
		stored, err := b.r.Pending(ctx, rec.TenantID, id)
		if err != nil {
			return err
		}
		s.Executed[i] = b.history.ExecutedBy(e, stored)
	}
	b.history.Admit(e, s.Executed[i])
	s.Appended = append(s.Appended, i)
	return nil
}

// read returns the value of k in *m, reading it with fetch (and keeping
// it, nil too) the first time; *m is made on first use.
func read[V any](ctx context.Context, m *map[settleKey]*V, k settleKey, fetch func(context.Context, string, string) (*V, error)) (*V, error) {
	if v, ok := (*m)[k]; ok {
		return v, nil
	}
	v, err := fetch(ctx, k.tenant, k.key)
	if err != nil {
		return nil, err
	}
	if *m == nil {
		*m = map[settleKey]*V{}
	}
	(*m)[k] = v
	return v, nil
}

// ApprovalTally is what the guard of an approval event needs to know of
// its request: how many redemptions it allows, its decision so far, how
// many times it was redeemed, and the seq of its last event. A store
// reads it inside the append transaction (under a lock that keeps other
// writers out) and keeps it up to date through the batch, so the events
// of earlier entries count.
type ApprovalTally struct {
	Allowance int
	Decision  string // the kind of its decision event, or ""
	Redeemed  int
	LastSeq   int64
}

// Admit checks an event of kind against the guard of ledger.ApprovalEvent.
// If the event may be appended, Admit counts it and returns its seq;
// otherwise it returns the refusal reason (one of the Refused* reasons)
// and leaves the tally as it was.
func (t *ApprovalTally) Admit(kind string) (seq int64, refused string) {
	switch kind {
	case writ.ApprovalEventApproved, writ.ApprovalEventDenied, writ.ApprovalEventWithdrawn:
		if t.Decision != "" {
			return 0, RefusedDecided
		}
		t.Decision = kind
	case writ.ApprovalEventRedeemed:
		if t.Decision != writ.ApprovalEventApproved {
			return 0, RefusedNotGiven
		}
		if t.Redeemed >= t.Allowance {
			return 0, RefusedExhausted
		}
		t.Redeemed++
	}
	t.LastSeq++
	return t.LastSeq, ""
}
