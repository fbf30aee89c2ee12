package writ

import "time"

// HistoryValue is the value of one of the pack's history aggregates that
// a decision read (history.<name> in its conditions), pinned in the
// record so that replay decides with exactly what the decision saw.
//
// Value is the aggregate over the tenant's sealed decisions counted for
// Group (of Aggregate) with a timestamp after Since: the decision's
// clock reading minus the aggregate's window. It never includes the
// decision itself.
type HistoryValue struct {
	// Name is the aggregate's name in the pack (history.<name>).
	Name string `json:"name"`
	// Aggregate identifies the aggregate's definition: its name and a
	// digest of everything that decides what it counts (see
	// docs/pack-format.md).
	Aggregate string `json:"aggregate"`
	// Group is the check's group key (redacted with the pack's patterns
	// in the record).
	Group string    `json:"group"`
	Since time.Time `json:"since"`
	Value float64   `json:"value"`
}
