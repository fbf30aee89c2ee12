package ledger

// Time marks let a time range start its walk of the chain near the range
// instead of at the chain's beginning. A record's time is not ordered by
// seq (several servers' clocks, a clock stepped back), so the first seq
// of a range cannot be read off the time index without reading the whole
// range; the running maximum of the records' times along the chain is
// ordered by seq by construction. A mark (tenant, seq, max) says that every
// record of the tenant up to seq has a time (Unix nanoseconds) of at most
// max. For a range that begins at from, the last mark whose max is before
// from bounds the walk: every record up to its seq is before the range.
//
// Stores append marks with the records, in the same transaction, never
// change them, and read them with TimeFloorSeq's rule.

// TimeMarkEvery is how many records apart a tenant's marks are at most
// (besides one at the end of each append of the tenant): a range's walk
// starts at most that many records before the first record of the range
// (when the clock never stepped back).
const TimeMarkEvery = 16

// TimeMark is one mark: every record of TenantID up to Seq has a
// timestamp of at most MaxNanos (Unix nanoseconds).
type TimeMark struct {
	TenantID string
	Seq      int64
	MaxNanos int64
}

// TimeMarker computes the marks of an append: feed it the records in
// chain order (each tenant's in ascending seq), then call Marks.
type TimeMarker struct {
	// prior is each tenant's running maximum before the append (absent:
	// the tenant has no mark yet).
	prior map[string]int64
	run   map[string]*TimeMark
	marks []TimeMark
}

// NewTimeMarker starts the marks of an append on top of each tenant's
// last mark's maximum, prior (read under the tenant's append lock).
func NewTimeMarker(prior map[string]int64) *TimeMarker {
	return &TimeMarker{prior: prior, run: map[string]*TimeMark{}}
}

// Add adds a record of tenant at seq with timestamp ns (UnixNanos of its
// timestamp).
func (m *TimeMarker) Add(tenant string, seq, ns int64) {
	r := m.run[tenant]
	if r == nil {
		r = &TimeMark{TenantID: tenant, MaxNanos: ns}
		if p, ok := m.prior[tenant]; ok {
			r.MaxNanos = max(p, ns)
		}
		m.run[tenant] = r
	}
	r.Seq, r.MaxNanos = seq, max(r.MaxNanos, ns)
	if seq%TimeMarkEvery == 0 {
		m.marks = append(m.marks, *r)
	}
}

// Marks returns the append's marks: every TimeMarkEvery-th seq, and each
// tenant's last record.
func (m *TimeMarker) Marks() []TimeMark {
	out := m.marks
	for _, r := range m.run {
		if r.Seq%TimeMarkEvery != 0 {
			out = append(out, *r)
		}
	}
	return out
}
