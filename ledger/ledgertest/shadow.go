package ledgertest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// Shadow packs of the shadow tests.
var (
	shadowPackA = "sha256:" + strings.Repeat("a1", 32)
	shadowPackB = "sha256:" + strings.Repeat("b2", 32)
)

// shadowRecords returns the record ids of ds, in order.
func shadowRecords(ds []ledger.ShadowDecision) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.RecordID
	}
	return ids
}

// sameShadow reports whether got is want: every field, times compared as
// instants, lists compared exactly (nil and empty apart).
func sameShadow(got, want ledger.ShadowDecision) bool {
	if !got.At.Equal(want.At) {
		return false
	}
	got.At, want.At = time.Time{}, time.Time{}
	return reflect.DeepEqual(got, want)
}

// wantShadows lists the shadow decisions matching q (one page) and fails
// unless they are want, in order and field for field, with no page after
// them.
func wantShadows(t *testing.T, st ledger.Store, q ledger.ShadowQuery, want ...ledger.ShadowDecision) {
	t.Helper()
	page, err := st.ShadowDecisions(t.Context(), q)
	if err != nil {
		t.Fatalf("ShadowDecisions(%+v) = %v", q, err)
	}
	if !slices.EqualFunc(page.Decisions, want, sameShadow) || page.NextCursor != "" {
		t.Errorf("ShadowDecisions(%+v) = %+v (next cursor %q),\nwant %+v and no next page", q, page.Decisions, page.NextCursor, want)
	}
}

// shadowPages reads every page of q and returns the record ids of each.
func shadowPages(t *testing.T, st ledger.Store, q ledger.ShadowQuery) [][]string {
	t.Helper()
	var pages [][]string
	for {
		page, err := st.ShadowDecisions(t.Context(), q)
		if err != nil {
			t.Fatalf("ShadowDecisions(%+v) = %v", q, err)
		}
		pages = append(pages, shadowRecords(page.Decisions))
		if page.NextCursor == "" || len(pages) > 200 {
			return pages
		}
		q.Cursor = page.NextCursor
	}
}

// testShadow appends entries with shadow decisions, reads them back
// field for field, by every filter and page by page; then checks that a
// skipped entry (idempotency prior, refused approval event) writes no
// shadow decision, that a batch with a shadow decision a store must
// refuse writes nothing, and that tenants never see each other's.
func testShadow(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	records := int64(0)

	// acme: three checks with shadow decisions (two packs) and one
	// without; globex: one, under pack A too. The second decision is a
	// nanosecond after the first, so the time filters must keep
	// nanoseconds.
	r1, r2, r3, r4 := NewRecord("acme", 1), NewRecord("acme", 2), NewRecord("acme", 3), NewRecord("acme", 4)
	r4.DecisionKey = "workflow.update"
	rg := NewRecord("globex", 1)
	e1, e2, e3, e4, eg := NewEntry(r1), NewEntry(r2), NewEntry(r3), NewEntry(r4), NewEntry(rg)
	e1.Shadow = NewShadow(r1, shadowPackA, writ.OutcomeReplanRequired)
	e2.Shadow = NewShadow(r2, shadowPackA, writ.OutcomeAllow)
	e2.Shadow.At = e1.Shadow.At.Add(time.Nanosecond)
	// Lists round-trip as they were: empty stays empty, nil stays nil, and
	// any string (U+0000 included) stays as it was.
	e2.Shadow.PolicyDecisions = []writ.PolicyDecision{{PolicyDecisionID: "pd_x", BundleID: "refunds", RuleIDs: []string{}, Verdict: "allow"}}
	e2.Shadow.Reasons = []writ.Reason{}
	e4.Shadow = NewShadow(r4, shadowPackB, writ.OutcomeGoalFailTerminal)
	e4.Shadow.EnforcedOutcome = writ.OutcomeAllowWithWarning
	e4.Shadow.PolicyDecisions = nil
	e4.Shadow.Reasons = []writ.Reason{{Code: "nul\x00byte", Message: "Ünïcödé \"quoted\" <tag> \u2028"}}
	eg.Shadow = NewShadow(rg, shadowPackA, writ.OutcomeReplanRequired)
	// The store stores the shadow decision as its record's, whatever
	// record id it names.
	eg.Shadow.RecordID = "rec_somewhere_else"
	a1, a2, a4, g1 := *e1.Shadow, *e2.Shadow, *e4.Shadow, *eg.Shadow
	g1.RecordID = rg.RecordID
	mustAppend(t, st, e1, e2, eg)
	mustAppend(t, st, e3, e4)
	records += 5

	// Read back, field for field.
	acme := func(q ledger.ShadowQuery) ledger.ShadowQuery { q.TenantID = "acme"; return q }
	wantShadows(t, st, acme(ledger.ShadowQuery{}), a1, a2, a4)
	wantShadows(t, st, ledger.ShadowQuery{TenantID: "globex"}, g1)
	wantShadows(t, st, ledger.ShadowQuery{TenantID: "initech"})

	// Every filter.
	wantShadows(t, st, acme(ledger.ShadowQuery{PackHash: shadowPackA}), a1, a2)
	wantShadows(t, st, acme(ledger.ShadowQuery{PackHash: shadowPackB}), a4)
	wantShadows(t, st, acme(ledger.ShadowQuery{PackHash: "sha256:" + strings.Repeat("0", 64)}))
	wantShadows(t, st, acme(ledger.ShadowQuery{DecisionKey: "payments.refund"}), a1, a2)
	wantShadows(t, st, acme(ledger.ShadowQuery{DecisionKey: "workflow.update"}), a4)
	wantShadows(t, st, acme(ledger.ShadowQuery{DecisionKey: "workflow.none"}))
	wantShadows(t, st, acme(ledger.ShadowQuery{From: a2.At}), a2, a4) // inclusive
	wantShadows(t, st, acme(ledger.ShadowQuery{To: a2.At}), a1)       // exclusive
	wantShadows(t, st, acme(ledger.ShadowQuery{From: a1.At, To: a4.At}), a1, a2)
	wantShadows(t, st, acme(ledger.ShadowQuery{From: a1.At.Add(time.Nanosecond), To: a4.At.Add(time.Nanosecond)}), a2, a4)
	wantShadows(t, st, acme(ledger.ShadowQuery{From: a4.At.Add(time.Nanosecond)}))
	wantShadows(t, st, acme(ledger.ShadowQuery{From: a2.At, To: a2.At})) // an empty window
	wantShadows(t, st, acme(ledger.ShadowQuery{From: time.Unix(0, 0).Add(-100 * 365 * 24 * time.Hour), To: ledger.MaxTime.Add(time.Hour)}), a1, a2, a4)
	wantShadows(t, st, acme(ledger.ShadowQuery{PackHash: shadowPackA, DecisionKey: "payments.refund", From: a2.At}), a2)
	wantShadows(t, st, acme(ledger.ShadowQuery{PackHash: shadowPackB, DecisionKey: "payments.refund"}))
	wantShadows(t, st, ledger.ShadowQuery{TenantID: "globex", PackHash: shadowPackA}, g1)

	// Bad queries.
	for _, q := range []ledger.ShadowQuery{
		{},
		{PackHash: shadowPackA},
		{TenantID: "acme", Limit: -1},
		{TenantID: "acme", Cursor: "not-a-cursor"},
		{TenantID: "acme", Cursor: "eyJhZnRlciI6MH0"}, // {"after":0}
	} {
		_, err := st.ShadowDecisions(ctx, q)
		wantCode(t, fmt.Sprintf("ShadowDecisions(%+v)", q), err, writ.EINVALID)
	}

	// More than a page: 105 checks of initech, alternating packs, in one
	// batch.
	var many []*ledger.Entry
	var all, packA []string
	for n := 1; n <= 105; n++ {
		e := NewEntry(NewRecord("initech", n))
		pack := shadowPackA
		if n%2 == 0 {
			pack = shadowPackB
		}
		e.Shadow = NewShadow(e.Record, pack, writ.OutcomeAllowWithWarning)
		many = append(many, e)
		all = append(all, e.Record.RecordID)
		if pack == shadowPackA {
			packA = append(packA, e.Record.RecordID)
		}
	}
	mustAppend(t, st, many...)
	records += int64(len(many))
	if got, want := shadowPages(t, st, ledger.ShadowQuery{TenantID: "initech"}), [][]string{all[:100], all[100:]}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ShadowDecisions(initech) pages = %v, want %v (the default page of %d)", got, want, ledger.DefaultPageSize)
	}
	if got, want := shadowPages(t, st, ledger.ShadowQuery{TenantID: "initech", Limit: 5 * ledger.MaxPageSize}), [][]string{all}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ShadowDecisions(initech, limit %d) pages = %v, want %v", 5*ledger.MaxPageSize, got, want)
	}
	var want [][]string
	for c := range slices.Chunk(packA, 10) {
		want = append(want, c)
	}
	if got := shadowPages(t, st, ledger.ShadowQuery{TenantID: "initech", PackHash: shadowPackA, Limit: 10}); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ShadowDecisions(initech, pack A, limit 10) pages = %v, want %v", got, want)
	}
	window := ledger.ShadowQuery{TenantID: "initech", From: many[10].Shadow.At, To: many[30].Shadow.At, Limit: 7}
	want = nil
	for c := range slices.Chunk(all[10:30], 7) {
		want = append(want, c)
	}
	if got := shadowPages(t, st, window); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ShadowDecisions(%+v) pages = %v, want %v", window, got, want)
	}

	// A skipped entry writes no shadow decision: one answered with an
	// idempotency prior, in a later transaction or later in the batch,
	// and one whose approval event is refused.
	first := NewEntry(NewRecord("acme", 100))
	first.Idempotency = &ledger.IdempotencyClaim{Key: "idem-1", ArgsDigest: "sha256:aa"}
	mustAppend(t, st, first)
	records++
	repeat := NewEntry(NewRecord("acme", 101))
	repeat.Idempotency = &ledger.IdempotencyClaim{Key: "idem-1", ArgsDigest: "sha256:aa"}
	repeat.Shadow = NewShadow(repeat.Record, shadowPackA, writ.OutcomeReplanRequired)
	claim, again := NewEntry(NewRecord("acme", 102)), NewEntry(NewRecord("acme", 103))
	claim.Idempotency = &ledger.IdempotencyClaim{Key: "idem-2", ArgsDigest: "sha256:bb"}
	again.Idempotency = &ledger.IdempotencyClaim{Key: "idem-2", ArgsDigest: "sha256:bb"}
	again.Shadow = NewShadow(again.Record, shadowPackA, writ.OutcomeReplanRequired)
	refused := NewApprovalEntry(NewRecord("acme", 104), "apr_nope", writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, At: r1.Timestamp})
	refused.Shadow = NewShadow(refused.Record, shadowPackA, writ.OutcomeReplanRequired)
	mustAppend(t, st, repeat, claim, again, refused)
	records++
	if repeat.Prior == nil || repeat.Raw != nil || again.Prior == nil || again.Raw != nil || claim.Raw == nil || refused.Refused == "" || refused.Raw != nil {
		t.Fatalf("repeat: Prior %s, Raw %d bytes; claim: Raw %d bytes; again: Prior %s, Raw %d bytes; refused: Refused %q, Raw %d bytes; "+
			"want priors for repeat and again, claim appended, refused refused",
			fmtPrior(repeat.Prior), len(repeat.Raw), len(claim.Raw), fmtPrior(again.Prior), len(again.Raw), refused.Refused, len(refused.Raw))
	}
	wantShadows(t, st, acme(ledger.ShadowQuery{}), a1, a2, a4)

	// A batch with a shadow decision a store must refuse is refused
	// whole: nothing of it is written.
	h, err := st.Head(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name   string
		modify func(d *ledger.ShadowDecision)
	}{
		{"another tenant's", func(d *ledger.ShadowDecision) { d.TenantID = "globex" }},
		{"no tenant", func(d *ledger.ShadowDecision) { d.TenantID = "" }},
		{"no pack hash", func(d *ledger.ShadowDecision) { d.PackHash = "" }},
		{"an unknown outcome", func(d *ledger.ShadowDecision) { d.Outcome = "deny" }},
		{"no outcome", func(d *ledger.ShadowDecision) { d.Outcome = "" }},
		{"an unknown enforced outcome", func(d *ledger.ShadowDecision) { d.EnforcedOutcome = "block" }},
	}
	for k, tc := range bad {
		good := NewEntry(NewRecord("acme", 200+2*k))
		good.Shadow = NewShadow(good.Record, shadowPackA, writ.OutcomeAllow)
		wrong := NewEntry(NewRecord("acme", 201+2*k))
		wrong.Shadow = NewShadow(wrong.Record, shadowPackA, writ.OutcomeAllow)
		tc.modify(wrong.Shadow)
		err := st.Append(ctx, []*ledger.Entry{good, wrong}, ledger.Seal)
		wantCode(t, fmt.Sprintf("Append(a good entry, an entry with a shadow decision of %s)", tc.name), err, writ.EINVALID)
		for _, e := range []*ledger.Entry{good, wrong} {
			if _, err := st.Record(ctx, "acme", e.Record.RecordID); writ.ErrorCode(err) != writ.ENOTFOUND {
				t.Errorf("after the refused batch (%s), Record(acme, %s) = %v, want ENOTFOUND", tc.name, e.Record.RecordID, err)
			}
		}
	}
	if got, err := st.Head(ctx, "acme"); err != nil || got != h {
		t.Errorf("after the refused batches, Head(acme) = %+v, %v; want %+v", got, err, h)
	}
	wantShadows(t, st, acme(ledger.ShadowQuery{}), a1, a2, a4)
	wantShadows(t, st, ledger.ShadowQuery{TenantID: "globex"}, g1)

	wantNoFindings(t, st, records)
}
