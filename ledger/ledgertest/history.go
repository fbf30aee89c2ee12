package ledgertest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// historyEntry returns an entry for rec that read reads (with their
// pinned values) and contributes cs.
func historyEntry(rec *writ.Record, reads []ledger.HistoryRead, cs ...ledger.Contribution) *ledger.Entry {
	e := NewEntry(rec)
	e.HistoryReads, e.Contributions = reads, cs
	return e
}

func wantHistory(t *testing.T, st ledger.Store, tenant string, reads []ledger.HistoryRead, want ...float64) {
	t.Helper()
	got, err := st.HistoryValues(t.Context(), tenant, reads)
	if err != nil {
		t.Fatalf("HistoryValues(%s) = %v", tenant, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("HistoryValues(%s, %+v) = %v, want %v", tenant, reads, got, want)
	}
}

func testHistory(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	agg, other := "refunds:0123456789abcdef", "tokens:0123456789abcdef"
	c := func(group string, at time.Time, amount float64) ledger.Contribution {
		return ledger.Contribution{Aggregate: agg, Group: group, At: at, Amount: amount}
	}
	n := 0
	next := func(tenant string) *writ.Record { n++; return NewRecord(tenant, n) }

	// Contributions at t0, t0+1h and t0+2h to customer:a; one to
	// customer:b, one to another aggregate, one of another tenant.
	mustAppend(t, st,
		historyEntry(next("acme"), nil, c("customer:a", t0, 1)),
		historyEntry(next("acme"), nil, c("customer:a", t0.Add(time.Hour), 2), c("customer:b", t0.Add(time.Hour), 10)),
		historyEntry(next("acme"), nil, ledger.Contribution{Aggregate: other, Group: "customer:a", At: t0, Amount: 100}),
		historyEntry(next("globex"), nil, c("customer:a", t0, 1000)),
	)
	mustAppend(t, st, historyEntry(next("acme"), nil, c("customer:a", t0.Add(2*time.Hour), 4)))

	read := func(group string, since time.Time) ledger.HistoryRead {
		return ledger.HistoryRead{Aggregate: agg, Group: group, Since: since}
	}
	// The window slides: contributions strictly after Since count.
	wantHistory(t, st, "acme", []ledger.HistoryRead{
		read("customer:a", t0.Add(-time.Nanosecond)),
		read("customer:a", t0),
		read("customer:a", t0.Add(90*time.Minute)),
		read("customer:a", t0.Add(2*time.Hour)),
		read("customer:b", t0.Add(-time.Hour)),
		read("customer:c", t0.Add(-time.Hour)),
		{Aggregate: other, Group: "customer:a", Since: t0.Add(-time.Hour)},
	}, 7, 6, 4, 0, 10, 0, 100)
	// Tenants are isolated.
	wantHistory(t, st, "globex", []ledger.HistoryRead{read("customer:a", t0.Add(-time.Hour)), read("customer:b", t0.Add(-time.Hour))}, 1000, 0)
	wantHistory(t, st, "initech", []ledger.HistoryRead{read("customer:a", t0.Add(-time.Hour))}, 0)

	// As of a chain position: only the records before it count.
	for seq, want := range map[int64]float64{1: 0, 2: 1, 3: 3, 4: 3, 5: 7} {
		got, err := st.HistoryAsOf(ctx, "acme", read("customer:a", t0.Add(-time.Hour)), seq)
		if err != nil || got != want {
			t.Errorf("HistoryAsOf(acme, customer:a, seq %d) = %v, %v; want %v", seq, got, err, want)
		}
	}

	// A pinned value that is no longer current refuses the entry, and
	// nothing of it is written; a current one is appended.
	head, _ := st.Head(ctx, "acme")
	r := read("customer:a", t0.Add(-time.Hour))
	stale := r
	stale.Value = 6
	e := historyEntry(next("acme"), []ledger.HistoryRead{stale}, c("customer:a", t0.Add(3*time.Hour), 1))
	mustAppend(t, st, e)
	if e.Refused != ledger.RefusedHistory || e.Raw != nil {
		t.Errorf("entry pinning a stale value: Refused %q, Raw %d bytes; want refused %q", e.Refused, len(e.Raw), ledger.RefusedHistory)
	}
	if h, _ := st.Head(ctx, "acme"); h != head {
		t.Errorf("after a refused entry, head = %+v, want %+v", h, head)
	}
	wantHistory(t, st, "acme", []ledger.HistoryRead{r}, 7)

	// In one batch, each entry's values count the entries before it.
	fresh := r
	fresh.Value = 7
	then := r
	then.Value = 8
	e1 := historyEntry(next("acme"), []ledger.HistoryRead{fresh}, c("customer:a", t0.Add(3*time.Hour), 1))
	e2 := historyEntry(next("acme"), []ledger.HistoryRead{fresh}, c("customer:a", t0.Add(3*time.Hour), 1))
	e3 := historyEntry(next("acme"), []ledger.HistoryRead{then}, c("customer:a", t0.Add(3*time.Hour), 1))
	mustAppend(t, st, e1, e2, e3)
	if e1.Refused != "" || e2.Refused != ledger.RefusedHistory || e3.Refused != "" {
		t.Errorf("batch of entries reading 7, 7, 8: Refused %q, %q, %q; want \"\", %q, \"\"", e1.Refused, e2.Refused, e3.Refused, ledger.RefusedHistory)
	}
	wantHistory(t, st, "acme", []ledger.HistoryRead{r}, 9)

	// An entry pinning many values (more than a store may sum in one
	// statement) is refused when any one of them, the last included, is
	// stale, and appended when all are current.
	many := func(last float64) []ledger.HistoryRead {
		reads := make([]ledger.HistoryRead, 7)
		for i := range reads {
			reads[i] = r
			reads[i].Value = 9
		}
		reads[6] = read("customer:b", t0.Add(-time.Hour))
		reads[6].Value = last
		return reads
	}
	stale7 := historyEntry(next("acme"), many(11), c("customer:a", t0.Add(3*time.Hour), 1))
	mustAppend(t, st, stale7)
	fresh7 := historyEntry(next("acme"), many(10), c("customer:a", t0.Add(3*time.Hour), 1))
	mustAppend(t, st, fresh7)
	if stale7.Refused != ledger.RefusedHistory || fresh7.Refused != "" {
		t.Errorf("entries pinning seven values, the last stale then current: Refused %q, %q; want %q, \"\"", stale7.Refused, fresh7.Refused, ledger.RefusedHistory)
	}
	wantHistory(t, st, "acme", []ledger.HistoryRead{r}, 10)

	// An entry with many contributions (more than a store may insert in
	// one statement) adds every one of them, each to its own group.
	var six []ledger.Contribution
	for i := range 5 {
		six = append(six, c("customer:d", t0.Add(time.Duration(i)*time.Hour), float64(i+1)))
	}
	six = append(six, c("customer:e", t0, 100))
	mustAppend(t, st, historyEntry(next("acme"), nil, six...))
	wantHistory(t, st, "acme", []ledger.HistoryRead{read("customer:d", t0.Add(-time.Hour)), read("customer:d", t0.Add(150*time.Minute)), read("customer:e", t0.Add(-time.Hour)), r},
		15, 9, 100, 10)

	// A contribution a store could not keep is refused with the batch.
	for _, bad := range []ledger.Contribution{c("", t0, 1), c("customer:a", t0, math.NaN()), c("customer:a", t0, math.Inf(1))} {
		e := historyEntry(NewRecord("acme", 90000), nil, bad)
		wantCode(t, fmt.Sprintf("Append(contribution %+v)", bad), st.Append(ctx, []*ledger.Entry{e}, ledger.Seal), writ.EINVALID)
	}
	wantHistory(t, st, "acme", []ledger.HistoryRead{r, read("", t0.Add(-time.Hour))}, 10, 0)
	wantNoFindings(t, st, int64(n)-3) // every tenant; three were refused
}

// HistoryRace has writers (spread over stores, which may be several
// stores on one database, as several servers) race to append entries
// through group-committing Appenders, each deciding as the engine does:
// read the value of one aggregate, contribute 1 only while it is below
// limit, pin what it read, and decide again when the store refuses the
// entry as stale. Exactly limit entries contribute, and every writer's
// entry is appended in the end.
func HistoryRace(t *testing.T, stores []ledger.Store, writers, limit int) {
	ctx := context.Background()
	t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	read := ledger.HistoryRead{Aggregate: "refunds:race", Group: "customer:a", Since: t0.Add(-24 * time.Hour)}
	apps := make([]*ledger.Appender, len(stores))
	for i, st := range stores {
		apps[i] = ledger.NewAppender(st, ledger.AppenderConfig{})
	}
	var mu sync.Mutex
	allowed, rounds := 0, 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			st, app := stores[w%len(stores)], apps[w%len(stores)]
			for attempt := 1; ; attempt++ {
				vals, err := st.HistoryValues(ctx, "acme", []ledger.HistoryRead{read})
				if err != nil {
					t.Errorf("writer %d: HistoryValues = %v", w, err)
					return
				}
				r := read
				r.Value = vals[0]
				// A fresh record each attempt, as the engine decides afresh.
				e := historyEntry(NewRecord("acme", 100000+w*1000+attempt), []ledger.HistoryRead{r})
				if vals[0] < float64(limit) {
					e.Contributions = []ledger.Contribution{{Aggregate: read.Aggregate, Group: read.Group, At: t0, Amount: 1}}
				}
				if err := app.Append(ctx, e); err != nil {
					t.Errorf("writer %d: Append = %v", w, err)
					return
				}
				if e.Refused == ledger.RefusedHistory {
					if attempt > writers {
						t.Errorf("writer %d: refused %d times; every refusal means another writer was appended", w, attempt)
						return
					}
					continue
				}
				if e.Refused != "" || e.Raw == nil {
					t.Errorf("writer %d: Refused %q, Raw %d bytes", w, e.Refused, len(e.Raw))
					return
				}
				mu.Lock()
				rounds += attempt
				if len(e.Contributions) > 0 {
					allowed++
				}
				mu.Unlock()
				return
			}
		})
	}
	close(start)
	wg.Wait()
	for _, app := range apps {
		if err := app.Close(); err != nil {
			t.Errorf("Appender.Close() = %v", err)
		}
	}
	if allowed != limit {
		t.Errorf("%d of %d racing writers contributed, want exactly %d", allowed, writers, limit)
	}
	vals, err := stores[0].HistoryValues(ctx, "acme", []ledger.HistoryRead{read})
	if err != nil || vals[0] != float64(limit) {
		t.Errorf("HistoryValues after the race = %v, %v; want %d", vals, err, limit)
	}
	t.Logf("%d writers on %d stores: %d contributed, %d attempts in all", writers, len(stores), allowed, rounds)
}

func testHistoryRace(t *testing.T, st ledger.Store) {
	HistoryRace(t, []ledger.Store{st}, 16, 3)
}

// testHistoryExecuted: a decision's pending contributions count once an
// entry executes it, in that entry's transaction, timed at the decision;
// executing another tenant's decision, or an unknown one, adds nothing.
// Within a batch, an entry may execute a decision appended before it.
func testHistoryExecuted(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	agg := "executed:0123456789abcdef"
	pending := func(group string, amount float64) []ledger.Contribution {
		return []ledger.Contribution{{Aggregate: agg, Group: group, At: t0, Amount: amount}}
	}
	read := func(group string) ledger.HistoryRead {
		return ledger.HistoryRead{Aggregate: agg, Group: group, Since: t0.Add(-time.Hour)}
	}
	n := 0
	next := func(tenant string) *writ.Record { n++; return NewRecord(tenant, n) }

	check := next("acme")
	e := NewEntry(check)
	e.PendingContributions = pending("session:s", 250)
	mustAppend(t, st, e)
	wantHistory(t, st, "acme", []ledger.HistoryRead{read("session:s")}, 0)

	// Another tenant's entry naming acme's decision, and an unknown one.
	foreign, unknown := NewEntry(next("globex")), NewEntry(next("acme"))
	foreign.Executes, unknown.Executes = check.DecisionID, "dec_unknown"
	mustAppend(t, st, foreign, unknown)
	wantHistory(t, st, "acme", []ledger.HistoryRead{read("session:s")}, 0)
	wantHistory(t, st, "globex", []ledger.HistoryRead{read("session:s")}, 0)

	report := NewEntry(next("acme"))
	report.Executes = check.DecisionID
	mustAppend(t, st, report)
	wantHistory(t, st, "acme", []ledger.HistoryRead{read("session:s")}, 250)
	for seq, want := range map[int64]float64{report.Record.Audit.Seq: 0, report.Record.Audit.Seq + 1: 250} {
		got, err := st.HistoryAsOf(ctx, "acme", read("session:s"), seq)
		if err != nil || got != want {
			t.Errorf("HistoryAsOf(seq %d) = %v, %v; want %v", seq, got, err, want)
		}
	}

	// One batch: a check, its report, and an entry that read the value
	// the report made.
	check2 := NewEntry(next("acme"))
	check2.PendingContributions = pending("session:s", 50)
	report2 := NewEntry(next("acme"))
	report2.Executes = check2.Record.DecisionID
	r := read("session:s")
	r.Value = 300
	after := historyEntry(next("acme"), []ledger.HistoryRead{r})
	mustAppend(t, st, check2, report2, after)
	if after.Refused != "" {
		t.Errorf("entry reading 300 after a report in the same batch: refused %q", after.Refused)
	}
	wantHistory(t, st, "acme", []ledger.HistoryRead{read("session:s")}, 300)

	// A pending sum of a usage dimension adds the execution's own usage
	// when the executing entry reports it; the other pending sums keep
	// their amounts.
	check3 := NewEntry(next("acme"))
	check3.PendingContributions = []ledger.Contribution{
		{Aggregate: agg, Group: "session:t", At: t0, Amount: 4000, Usage: "tokens"},
		{Aggregate: agg, Group: "session:u", At: t0, Amount: 5},
	}
	mustAppend(t, st, check3)
	report3 := NewEntry(next("acme"))
	report3.Executes, report3.ExecutedUsage = check3.Record.DecisionID, &writ.Usage{Tokens: 777}
	mustAppend(t, st, report3)
	wantHistory(t, st, "acme", []ledger.HistoryRead{read("session:t"), read("session:u")}, 777, 5)
	wantNoFindings(t, st, int64(n))
}
