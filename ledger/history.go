package ledger

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/writhq/writ"
)

// History aggregates, as stores keep them.
//
// A pack's aggregates (policy.HistoryPlan) are kept as contributions:
// append-only rows (tenant, aggregate id, group key, time, amount,
// record seq), indexed by (tenant, aggregate, group, time). An aggregate's
// value for a group is the sum of its contributions after a time (the
// check's clock minus the window): an index range read of the group's
// contributions in the window, never a scan of records.
//
// An Entry carries the values its decision read (HistoryReads, pinned in
// its record) and what it contributes (Contributions). Inside the append
// transaction, with the tenant's chain head locked (so no other
// transaction of the tenant, on any server, appends meanwhile), the store
// reads each value again, adding the contributions of entries appended
// earlier in the same batch. If any differs from the pinned value, the
// decision was made on a stale value: the entry is refused with
// RefusedHistory, nothing of it is written, and the engine decides again
// with the current values. Otherwise the entry is appended with its
// contributions. So every appended record's pinned values are exact at
// its position in the chain.

// HistoryRead is one aggregate value a decision read: the sum of the
// tenant's contributions to (Aggregate, Group) with At after Since.
type HistoryRead struct {
	Aggregate string
	Group     string
	Since     time.Time
	Value     float64
}

// Contribution adds Amount to (Aggregate, Group) at At.
type Contribution struct {
	Aggregate string
	Group     string
	At        time.Time
	Amount    float64
	// Usage, on a pending contribution of a sum of usage.<dimension>,
	// names the dimension: an executing entry with ExecutedUsage adds
	// that usage instead of Amount.
	Usage string
}

// Executed returns the contributions an executing entry adds for pending:
// each as it was stored, except that a sum of a usage dimension adds the
// execution's own usage of it when the entry reports usage (u non-nil).
func Executed(pending []Contribution, u *writ.Usage) []Contribution {
	if u == nil {
		return pending
	}
	out := make([]Contribution, len(pending))
	for i, c := range pending {
		switch c.Usage {
		case "tokens":
			c.Amount = float64(u.Tokens)
		case "tool_calls":
			c.Amount = float64(u.ToolCalls)
		case "cost_usd_cents":
			c.Amount = u.CostUSDCents
		case "wall_clock_ms":
			c.Amount = float64(u.WallClockMS)
		}
		out[i] = c
	}
	return out
}

// Executed decisions. An aggregate with filter executed counts a decision
// once its execution report says it succeeded. The check's entry carries
// what it would add (PendingContributions, computed when it was decided,
// from the unredacted request); the store keeps them under the decision's
// id. The entry that appends a succeeded execution report sets Executes
// to the decision id, and the store adds those contributions in that
// entry's transaction, timed at the decision and attributed to the
// report's record (its seq). An id with no pending contributions (an
// unknown decision, another tenant's, one that counts toward no such
// aggregate) adds nothing; refusing a report is the caller's business.

// RefusedHistory is the reason an entry is refused when a history value
// its decision read changed before it could be appended (see Entry).
const RefusedHistory = "history_changed"

// HistoryStore is the history part of a Store.
type HistoryStore interface {
	// HistoryValues returns, for each read, the sum of the amounts of the
	// tenant's contributions to its aggregate and group with a time after
	// its Since (0 when there are none). Value of the reads is ignored.
	HistoryValues(ctx context.Context, tenantID string, reads []HistoryRead) ([]float64, error)
	// HistoryAsOf is HistoryValues of one read counting only the
	// contributions of records before seq in the tenant's chain: what the
	// record at seq could have read. Replay checks pinned values with it.
	HistoryAsOf(ctx context.Context, tenantID string, read HistoryRead, seq int64) (float64, error)
}

// HistoryBatch settles the history reads of a batch's entries, one entry
// at a time in batch order, as both stores do inside Append.
type HistoryBatch struct {
	added   []batchContribution
	pending map[[2]string][]Contribution // by tenant and decision id
}

type batchContribution struct {
	tenant string
	Contribution
}

// Fresh reports whether every value e pinned equals the current one:
// db[i] (the stored sum for e.HistoryReads[i], read inside the
// transaction) plus what entries admitted earlier in the batch add to it.
func (b *HistoryBatch) Fresh(e *Entry, db []float64) bool {
	for i, r := range e.HistoryReads {
		v := db[i]
		for _, c := range b.added {
			if c.tenant == e.Record.TenantID && c.Aggregate == r.Aggregate && c.Group == r.Group && c.At.After(r.Since) {
				v += c.Amount
			}
		}
		if v != r.Value {
			return false
		}
	}
	return true
}

// Admit notes the contributions of e, which is appended, and executed,
// the pending contributions its Executes adds (PendingOf).
func (b *HistoryBatch) Admit(e *Entry, executed []Contribution) {
	for _, c := range e.Contributions {
		b.added = append(b.added, batchContribution{e.Record.TenantID, c})
	}
	for _, c := range executed {
		b.added = append(b.added, batchContribution{e.Record.TenantID, c})
	}
	if len(e.PendingContributions) > 0 {
		if b.pending == nil {
			b.pending = map[[2]string][]Contribution{}
		}
		b.pending[[2]string{e.Record.TenantID, e.Record.DecisionID}] = e.PendingContributions
	}
}

// ExecutedBy returns what executing entry e adds: the pending
// contributions of the decision it Executes, as admitted earlier in this
// batch, or else stored (what the store read for it inside the
// transaction), with e's ExecutedUsage applied (Executed).
func (b *HistoryBatch) ExecutedBy(e *Entry, stored []Contribution) []Contribution {
	if cs, ok := b.pending[[2]string{e.Record.TenantID, e.Executes}]; ok {
		stored = cs
	}
	return Executed(stored, e.ExecutedUsage)
}

// checkHistory refuses history reads and contributions a store could not
// keep: an empty aggregate id or group key, a time out of range, or an
// amount that is not a finite number.
func checkHistory(e *Entry) error {
	for _, r := range e.HistoryReads {
		if r.Aggregate == "" || r.Group == "" || math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
			return errors.New("a history read needs an aggregate, a group and a finite value")
		}
	}
	for _, c := range append(slices.Clip(e.Contributions), e.PendingContributions...) {
		switch {
		case c.Aggregate == "" || c.Group == "":
			return errors.New("a history contribution needs an aggregate and a group")
		case math.IsNaN(c.Amount) || math.IsInf(c.Amount, 0):
			return errors.New("a history contribution's amount must be a finite number")
		case c.At.Before(MinTime) || c.At.After(MaxTime):
			return errors.New("a history contribution's time is out of range")
		}
	}
	return nil
}
