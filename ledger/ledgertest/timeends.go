package ledgertest

import (
	"slices"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// RecordsEnds runs the conformance test of ranges with an end read newest
// first alone, for a store to run again with its query routes changed.
func RecordsEnds(t *testing.T, st ledger.Store) { testRecordsEnds(t, st) }

// testRecordsEnds appends 700 records of a tenant in batches of uneven
// sizes, with times out of chain order (a clock stepped back for 50
// records, every ninth record ahead, one far behind near the end), and
// reads every range with an end newest first (and, with a start, in
// chain order), paged, against the records' times: a store that starts
// the walk back, or ends the walk forward, at the last record before the
// end (the time lows, ledger.TimeCeiling) must never miss one after it,
// nor serve one twice. 700 records hold whole blocks of two levels of
// lows, and parts of the third.
func testRecordsEnds(t *testing.T, st ledger.Store) {
	const tenant, n = "ends", 700
	base := time.Date(2026, time.March, 1, 0, 0, 0, 0, time.UTC)
	recs := records(tenant, 1, n)
	for i, r := range recs {
		at := base.Add(time.Duration(i) * time.Second)
		switch {
		case i >= 400 && i < 450:
			at = at.Add(-100 * time.Second) // a clock stepped back
		case i == 650:
			at = base.Add(-time.Hour)
		case i%9 == 4:
			at = at.Add(1000 * time.Second) // a clock ahead
		}
		r.Timestamp = at
	}
	for i, size := 0, 1; i < n; size = size*3%61 + 1 {
		k := min(size, n-i)
		mustAppend(t, st, entries(recs[i:i+k]...)...)
		i += k
	}
	// A record of another tenant, in another append, in between.
	mustAppend(t, st, entries(NewRecord("ends-other", 1))...)

	at := func(i int) time.Time { return recs[i].Timestamp }
	ends := []int{0, 1, 15, 16, 17, 255, 256, 257, 399, 400, 449, 450, 650, 651, 699}
	for i := 3; i < n; i += 97 {
		ends = append(ends, i)
	}
	for _, i := range ends {
		for k, to := range []time.Time{at(i), at(i).Add(time.Nanosecond), at(i).Add(-time.Nanosecond)} {
			for _, from := range []time.Time{to.Add(-150 * time.Second), {}} {
				if k > 0 && from.IsZero() {
					continue // the end alone, at a record's time only
				}
				var want []string
				for j := n - 1; j >= 0; j-- {
					r := recs[j]
					if r.Timestamp.Before(to) && (from.IsZero() || !r.Timestamp.Before(from)) {
						want = append(want, r.RecordID)
					}
				}
				q := writ.RecordQuery{TenantID: tenant, From: from, To: to, Newest: true, Limit: 60}
				if got := allPages(t, st, q); !slices.Equal(got, want) {
					t.Errorf("Records(%s) pages = %v, want %v", fmtQuery(q), got, want)
				}
				if !from.IsZero() {
					// In chain order, the walk ends at the same record.
					slices.Reverse(want)
					q.Newest = false
					if got := allPages(t, st, q); !slices.Equal(got, want) {
						t.Errorf("Records(%s) pages = %v, want %v", fmtQuery(q), got, want)
					}
				}
			}
		}
	}
	// Before every record, and after every one.
	for _, to := range []time.Time{base.Add(-2 * time.Hour), base.Add(time.Hour)} {
		q := writ.RecordQuery{TenantID: tenant, To: to, Newest: true, Limit: 500}
		want := 0
		if to.After(base) {
			want = n
		}
		if got := allPages(t, st, q); len(got) != want {
			t.Errorf("Records(%s) served %d records, want %d", fmtQuery(q), len(got), want)
		}
	}
}
