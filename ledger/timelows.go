package ledger

import "fmt"

// Time lows let a range with an end, read newest first, start its walk
// back at the range's last record instead of at the chain's end. The
// time marks (TimeMarker) cannot: a running maximum bounds the records
// before a seq, and a walk back needs a bound on those after it, which
// are not appended yet. A record's time is the engine's clock when it
// decided (several servers' clocks, a batch sealed after a later
// decision, a clock stepped back), so it is not ordered by seq and no
// bound on how far it trails can be assumed.
//
// A low is the minimum of the times of a whole, aligned block of a
// tenant's chain: a low of level L at seq covers the TimeLowFanout^L
// records (seq − TimeLowFanout^L, seq], and seq is a multiple of
// TimeLowFanout^L. A block is complete once its last record is appended,
// and nothing is appended inside it afterwards, so its low is written
// once, with that record, in the same transaction, and never changes:
// append-only, whatever order the times come in. A level's lows are
// computed from the level below (level 0 being the records themselves).
//
// TimeCeiling searches them like a tree: up from the end of the chain
// through at most TimeLowFanout−1 items of each level, then down into the
// last block whose low is before the end, to the last record before it.
// It reads at most 2·TimeLowFanout items per level, whatever the chain's
// length or the records' order.

// TimeLowFanout is how many blocks of one level make a block of the next.
const TimeLowFanout = 16

// TimeLowLevels is the highest level of lows: its blocks hold 16^6
// (16,777,216) records; TimeCeiling reads a tenant's top-level lows all
// (one per 16.8 million records).
const TimeLowLevels = 6

// TimeLowSpan returns how many records a block of level holds.
func TimeLowSpan(level int) int64 {
	n := int64(1)
	for range level {
		n *= TimeLowFanout
	}
	return n
}

// TimeLow is one low: every record of TenantID in (Seq − TimeLowSpan(Level),
// Seq] has a time (Unix nanoseconds) of at least MinNanos, and one has it.
type TimeLow struct {
	TenantID string
	Level    int
	Seq      int64
	MinNanos int64
}

// StoredMin returns the minimum of a tenant's stored items of a level (0:
// the records' times, otherwise the lows' minima) whose seq is in (lo,
// hi], and false if there is none.
type StoredMin func(level int, lo, hi int64) (int64, bool, error)

// TimeLows returns the lows that an append of a tenant's records after
// seq prior completes: times[i] is the time (Unix nanoseconds) of the
// record at prior+1+i. A block that began before the append takes the
// minimum of its earlier part from stored (at most one read per level).
func TimeLows(tenant string, prior int64, times []int64, stored StoredMin) ([]TimeLow, error) {
	type item struct{ seq, min int64 }
	head := prior + int64(len(times))
	below := make([]item, len(times)) // the level below's new items, in seq order
	for i, ns := range times {
		below[i] = item{prior + 1 + int64(i), ns}
	}
	var lows []TimeLow
	for level := 1; level <= TimeLowLevels; level++ {
		span, child := TimeLowSpan(level), TimeLowSpan(level-1)
		var items []item
		j := 0
		for end := (prior/span + 1) * span; end <= head; end += span {
			start := end - span // the block is (start, end]
			m, ok := int64(0), false
			if storedTo := prior / child * child; start < storedTo {
				v, found, err := stored(level-1, start, storedTo)
				if err != nil {
					return nil, err
				}
				if !found {
					return nil, fmt.Errorf("tenant %s: no stored time of level %d in (%d, %d]: the time lows are incomplete", tenant, level-1, start, storedTo)
				}
				m, ok = v, true
			}
			for ; j < len(below) && below[j].seq <= end; j++ {
				if below[j].seq > start && (!ok || below[j].min < m) {
					m, ok = below[j].min, true
				}
			}
			items = append(items, item{end, m})
			lows = append(lows, TimeLow{TenantID: tenant, Level: level, Seq: end, MinNanos: m})
		}
		if len(items) == 0 {
			break // no block of this level ends here, so none above does
		}
		below = items
	}
	return lows, nil
}

// FindBefore returns the highest seq in (lo, hi] of a tenant's stored
// item of a level (0: a record, otherwise a low) whose time (a record's)
// or minimum (a low's) is before the time being searched for, or 0.
type FindBefore func(level int, lo, hi int64) (int64, error)

// TimeCeiling returns the highest seq at or below hi (at most the
// tenant's head) of a record whose time is before the time find searches
// for, or 0 when no record up to hi is. Every record after it and up to
// hi is at or after that time, so a walk back in chain order from an end
// may start there.
func TimeCeiling(hi int64, find FindBefore) (int64, error) {
	level := 0
	for hi > 0 {
		lo := int64(0) // the top level reads every block up to hi
		if level < TimeLowLevels {
			span := TimeLowSpan(level + 1)
			lo = hi / span * span
		}
		if hi > lo {
			seq, err := find(level, lo, hi)
			if err != nil {
				return 0, err
			}
			if seq > 0 {
				// Down into the block: one of its items is before.
				for l := level - 1; l >= 0; l-- {
					inner, err := find(l, seq-TimeLowSpan(l+1), seq)
					if err != nil {
						return 0, err
					}
					if inner == 0 {
						return 0, fmt.Errorf("the time low of level %d at %d is before the time, and nothing in its block is: the time lows are inconsistent", l+1, seq)
					}
					seq = inner
				}
				return seq, nil
			}
		}
		hi, level = lo, level+1
	}
	return 0, nil
}
