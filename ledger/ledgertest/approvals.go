package ledgertest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
)

// approvalIDs returns the ids of reqs, in order.
func approvalIDs(reqs []writ.ApprovalRequest) []string {
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.ApprovalID
	}
	return ids
}

// wantApprovals lists the approvals matching q (one page) and fails
// unless they are want, in order, with no page after them.
func wantApprovals(t *testing.T, st ledger.Store, q writ.ApprovalQuery, now time.Time, want ...string) {
	t.Helper()
	page, err := st.Approvals(t.Context(), q, now)
	if err != nil {
		t.Fatalf("Approvals(%+v) = %v", q, err)
	}
	if got := approvalIDs(page.Approvals); !slices.Equal(got, want) || page.NextCursor != "" {
		t.Errorf("Approvals(%+v) = %v (next cursor %q), want %v and no next page", q, got, page.NextCursor, want)
	}
}

// mustApproval returns one approval request, failing the test on error.
func mustApproval(t *testing.T, st ledger.Store, tenant, id string, now time.Time) *writ.ApprovalRequest {
	t.Helper()
	a, err := st.Approval(t.Context(), tenant, id, now)
	if err != nil {
		t.Fatalf("Approval(%s, %s) = %v", tenant, id, err)
	}
	return a
}

// wantOpen fails unless OpenApproval answers the request want ("" for
// none).
func wantOpen(t *testing.T, st ledger.Store, tenant, gate, digest string, now time.Time, want string) {
	t.Helper()
	a, err := st.OpenApproval(t.Context(), tenant, gate, digest, now)
	if err != nil {
		t.Fatalf("OpenApproval(%s, %s, %s, %s) = %v", tenant, gate, digest, now, err)
	}
	got := ""
	if a != nil {
		got = a.ApprovalID
		if a.State != writ.ApprovalPending {
			t.Errorf("OpenApproval(%s, %s, %s, %s) = %s in state %s, want pending", tenant, gate, digest, now, got, a.State)
		}
	}
	if got != want {
		t.Errorf("OpenApproval(%s, %s, %s, %s) = %q, want %q", tenant, gate, digest, now, got, want)
	}
}

// sameRequest fails unless got holds the immutable fields of want.
func sameRequest(t *testing.T, call string, got, want *writ.ApprovalRequest) {
	t.Helper()
	g, err := sqlkit.ApprovalJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sqlkit.ApprovalJSON(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s = %s, want %s", call, g, w)
	}
}

// wantEvents fails unless a's events are want (Seq and RecordID
// included), in order.
func wantEvents(t *testing.T, a *writ.ApprovalRequest, want ...writ.ApprovalEvent) {
	t.Helper()
	same := len(a.Events) == len(want)
	for i := 0; same && i < len(want); i++ {
		g, w := a.Events[i], want[i]
		same = g.Seq == w.Seq && g.Kind == w.Kind && g.Actor == w.Actor && g.Reason == w.Reason && g.RecordID == w.RecordID && g.At.Equal(w.At)
	}
	if !same {
		t.Errorf("approval %s has events %+v, want %+v", a.ApprovalID, a.Events, want)
	}
}

// appended returns the event of e as the store should have appended it.
func appended(e *ledger.Entry, seq int64) writ.ApprovalEvent {
	ev := e.ApprovalEvent.Event
	ev.Seq, ev.RecordID = seq, e.Record.RecordID
	return ev
}

// testApprovals creates approval requests with records, reads them back
// by id, by every filter and page by page, and by gate and binding; then
// decides and redeems them under the guard, within and across
// transactions, and checks that a refused entry leaves nothing behind.
func testApprovals(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, time.May, 9, 9, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Minute)

	refund1 := NewBinding("payments.refund", 1)
	refund2 := NewBinding("payments.refund", 2)
	update := NewBinding("workflow.update", 3)
	digest := func(b writ.ApprovalBinding) string {
		d, err := ledger.BindingDigest(b)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	r1, r2, r3 := NewRecord("acme", 1), NewRecord("acme", 2), NewRecord("acme", 3)
	a1 := NewApproval(r1, "apr_1", "GATE_FINANCE", refund1, t0.Add(1*time.Second), 1)
	a2 := NewApproval(r1, "apr_2", "GATE_FINANCE", refund1, t0.Add(2*time.Second), 2)
	a3 := NewApproval(r2, "apr_3", "GATE_FINANCE", refund2, t0.Add(3*time.Second), 1)
	a4 := NewApproval(r3, "apr_4", "GATE_LEGAL", update, t0.Add(4*time.Second), 1)
	// Created long before the others but stored after them: expired at now.
	a5 := NewApproval(r3, "apr_5", "GATE_LEGAL", update, t0.Add(-2*time.Hour), 1)
	rg := NewRecord("globex", 1)
	g1 := NewApproval(rg, "apr_g1", "GATE_FINANCE", refund1, t0.Add(time.Second), 1)

	e1, e2, e3, eg := NewEntry(r1), NewEntry(r2), NewEntry(r3), NewEntry(rg)
	e1.NewApprovals = []ledger.NewApproval{a1, a2}
	e2.NewApprovals = []ledger.NewApproval{a3}
	e3.NewApprovals = []ledger.NewApproval{a4, a5}
	eg.NewApprovals = []ledger.NewApproval{g1}
	mustAppend(t, st, e1, e2, eg)
	mustAppend(t, st, e3)
	records := int64(4) // appended so far, both tenants

	// Read back as created.
	for _, a := range []ledger.NewApproval{a1, a2, a3, a4, a5, g1} {
		got := mustApproval(t, st, a.Request.TenantID, a.Request.ApprovalID, now)
		call := fmt.Sprintf("Approval(%s, %s)", a.Request.TenantID, a.Request.ApprovalID)
		sameRequest(t, call, got, a.Request)
		wantState := writ.ApprovalPending
		if a.Request.ApprovalID == "apr_5" {
			wantState = writ.ApprovalExpired
		}
		if got.State != wantState || got.Decision != nil || got.Uses != 0 || got.Events == nil || len(got.Events) != 0 {
			t.Errorf("%s = state %q, decision %+v, uses %d, events %#v; want %s, none, 0, []", call, got.State, got.Decision, got.Uses, got.Events, wantState)
		}
	}

	// Another tenant's request is not found, and the error says no more
	// than for an id that exists nowhere.
	_, errOther := st.Approval(ctx, "acme", "apr_g1", now)
	wantCode(t, "Approval(acme, apr_g1 of globex)", errOther, writ.ENOTFOUND)
	_, errNone := st.Approval(ctx, "acme", "apr_nope", now)
	wantCode(t, "Approval(acme, apr_nope)", errNone, writ.ENOTFOUND)
	if errOther != nil && errNone != nil {
		if strings.Contains(errOther.Error(), "globex") {
			t.Errorf("Approval(acme, apr_g1) = %q, which names the other tenant", errOther)
		}
		if o, n := strings.ReplaceAll(errOther.Error(), "apr_g1", "ID"), strings.ReplaceAll(errNone.Error(), "apr_nope", "ID"); o != n {
			t.Errorf("Approval(acme, another tenant's id) = %q but Approval(acme, unknown id) = %q: they must not differ", errOther, errNone)
		}
	}
	_, err := st.Approval(ctx, "globex", "apr_1", now)
	wantCode(t, "Approval(globex, apr_1 of acme)", err, writ.ENOTFOUND)

	// Every filter, before any decision.
	acme := func(q writ.ApprovalQuery) writ.ApprovalQuery { q.TenantID = "acme"; return q }
	wantApprovals(t, st, acme(writ.ApprovalQuery{}), now, "apr_1", "apr_2", "apr_3", "apr_4", "apr_5")
	wantApprovals(t, st, writ.ApprovalQuery{TenantID: "globex"}, now, "apr_g1")
	wantApprovals(t, st, writ.ApprovalQuery{TenantID: "initech"}, now)
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalPending}), now, "apr_1", "apr_2", "apr_3", "apr_4")
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalExpired}), now, "apr_5")
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalApproved}), now)
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalDenied}), now)
	wantApprovals(t, st, acme(writ.ApprovalQuery{GateID: "GATE_LEGAL"}), now, "apr_4", "apr_5")
	wantApprovals(t, st, acme(writ.ApprovalQuery{DecisionKey: "payments.refund"}), now, "apr_1", "apr_2", "apr_3")
	wantApprovals(t, st, acme(writ.ApprovalQuery{CreatedBefore: t0.Add(2500 * time.Millisecond)}), now, "apr_1", "apr_2", "apr_5")
	wantApprovals(t, st, acme(writ.ApprovalQuery{CreatedBefore: a2.Request.CreatedAt}), now, "apr_1", "apr_5") // strictly before
	wantApprovals(t, st, acme(writ.ApprovalQuery{GateID: "GATE_LEGAL", State: writ.ApprovalPending}), now, "apr_4")
	// State is evaluated at now: later, the others have expired too.
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalExpired}), a4.Request.ExpiresAt, "apr_1", "apr_2", "apr_3", "apr_4", "apr_5")
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalPending}), a4.Request.ExpiresAt.Add(-time.Nanosecond), "apr_4")
	if got := mustApproval(t, st, "acme", "apr_4", a4.Request.ExpiresAt.Add(-time.Nanosecond)).State; got != writ.ApprovalPending {
		t.Errorf("Approval(acme, apr_4) a nanosecond before it expires: state %s, want pending", got)
	}
	if got := mustApproval(t, st, "acme", "apr_4", a4.Request.ExpiresAt).State; got != writ.ApprovalExpired {
		t.Errorf("Approval(acme, apr_4) when it expires: state %s, want expired", got)
	}

	// Bad queries.
	for _, q := range []writ.ApprovalQuery{
		{},
		{TenantID: "acme", State: "open"},
		{TenantID: "acme", Limit: -1},
		{TenantID: "acme", Cursor: "not-a-cursor"},
		{TenantID: "acme", Cursor: "eyJhZnRlciI6MH0"}, // {"after":0}
	} {
		_, err := st.Approvals(ctx, q, now)
		wantCode(t, fmt.Sprintf("Approvals(%+v)", q), err, writ.EINVALID)
	}

	// OpenApproval: the newest pending request of the gate and binding.
	wantOpen(t, st, "acme", "GATE_FINANCE", digest(refund1), now, "apr_2")
	wantOpen(t, st, "acme", "GATE_FINANCE", digest(refund2), now, "apr_3")
	wantOpen(t, st, "acme", "GATE_LEGAL", digest(update), now, "apr_4")
	wantOpen(t, st, "acme", "GATE_LEGAL", digest(refund1), now, "")              // another gate's binding
	wantOpen(t, st, "acme", "GATE_OTHER", digest(refund1), now, "")              // unknown gate
	wantOpen(t, st, "acme", "GATE_FINANCE", digest(NewBinding("x", 9)), now, "") // unknown binding
	wantOpen(t, st, "acme", "GATE_LEGAL", digest(update), a4.Request.ExpiresAt.Add(-time.Nanosecond), "apr_4")
	wantOpen(t, st, "acme", "GATE_LEGAL", digest(update), a4.Request.ExpiresAt, "") // apr_4 expired; apr_5 long before
	wantOpen(t, st, "globex", "GATE_FINANCE", digest(refund1), now, "apr_g1")
	wantOpen(t, st, "initech", "GATE_FINANCE", digest(refund1), now, "")

	// n numbers the records of the events below.
	n := 10
	event := func(id string, ev writ.ApprovalEvent) *ledger.Entry {
		n++
		return NewApprovalEntry(NewRecord("acme", n), id, ev)
	}
	approve := func(id, actor string, at time.Time) *ledger.Entry {
		return event(id, writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: actor, Reason: "within the quarter's budget", At: at})
	}
	deny := func(id, actor string, at time.Time) *ledger.Entry {
		return event(id, writ.ApprovalEvent{Kind: writ.ApprovalEventDenied, Actor: actor, Reason: "not this quarter", At: at})
	}
	redeem := func(id string, at time.Time) *ledger.Entry {
		return event(id, writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, At: at})
	}
	// wantAppended fails unless e was appended with its event at seq.
	wantAppended := func(e *ledger.Entry, seq int64) {
		t.Helper()
		ev := e.ApprovalEvent.Event
		if e.Raw == nil || e.Refused != "" || e.Prior != nil || ev.Seq != seq || ev.RecordID != e.Record.RecordID {
			t.Errorf("entry %s (%s of %s): Raw %d bytes, Refused %q, Prior %v, event seq %d, record %q; want appended at event seq %d with its record",
				e.Record.RecordID, ev.Kind, e.ApprovalEvent.ApprovalID, len(e.Raw), e.Refused, e.Prior, ev.Seq, ev.RecordID, seq)
		}
		records++
	}
	// wantRefused fails unless e was refused for reason and nothing of it
	// was written: no record, no head move.
	wantRefused := func(e *ledger.Entry, reason string, head ledger.Head) {
		t.Helper()
		ev := e.ApprovalEvent.Event
		if e.Refused != reason || e.Raw != nil || e.Prior != nil || ev.Seq != 0 || ev.RecordID != "" {
			t.Errorf("entry %s (%s of %s): Refused %q, Raw %d bytes, Prior %v, event seq %d, record %q; want refused %q and nothing set",
				e.Record.RecordID, ev.Kind, e.ApprovalEvent.ApprovalID, e.Refused, len(e.Raw), e.Prior, ev.Seq, ev.RecordID, reason)
		}
		_, err := st.Record(ctx, "acme", e.Record.RecordID)
		wantCode(t, fmt.Sprintf("Record(acme, %s) of a refused entry", e.Record.RecordID), err, writ.ENOTFOUND)
		if got, err := st.Head(ctx, "acme"); err != nil || got != head {
			t.Errorf("after refusing entry %s, Head(acme) = %+v, %v; want %+v", e.Record.RecordID, got, err, head)
		}
	}
	head := func() ledger.Head {
		t.Helper()
		h, err := st.Head(ctx, "acme")
		if err != nil {
			t.Fatalf("Head(acme) = %v", err)
		}
		return h
	}

	// A decision, visible at once.
	decidedAt := t0.Add(5 * time.Minute)
	ok1 := approve("apr_1", "user:fin-1", decidedAt)
	mustAppend(t, st, ok1)
	wantAppended(ok1, 1)
	got := mustApproval(t, st, "acme", "apr_1", now)
	wantDecision := writ.ApprovalDecision{Decision: writ.ApprovalApproved, Approver: "user:fin-1", Reason: "within the quarter's budget",
		At: decidedAt, ValidUntil: decidedAt.Add(ApprovalTTL), RecordID: ok1.Record.RecordID}
	if d := got.Decision; got.State != writ.ApprovalApproved || d == nil || d.Decision != wantDecision.Decision || d.Approver != wantDecision.Approver ||
		d.Reason != wantDecision.Reason || !d.At.Equal(wantDecision.At) || !d.ValidUntil.Equal(wantDecision.ValidUntil) || d.RecordID != wantDecision.RecordID {
		t.Errorf("Approval(acme, apr_1) after approval = state %s, decision %+v; want approved, %+v", got.State, got.Decision, wantDecision)
	}
	wantEvents(t, got, appended(ok1, 1))
	sameRequest(t, "Approval(acme, apr_1) after approval", got, a1.Request)
	// Decided, it stays decided once the request's own time is up.
	if got := mustApproval(t, st, "acme", "apr_1", t0.Add(3*ApprovalTTL)).State; got != writ.ApprovalApproved {
		t.Errorf("Approval(acme, apr_1) after its expiry time = state %s, want approved", got)
	}
	wantOpen(t, st, "acme", "GATE_FINANCE", digest(refund1), now, "apr_2")
	// DecidedApprovals names the decided ones among the ids, of the tenant only.
	if got, err := st.DecidedApprovals(ctx, "acme", []string{"apr_1", "apr_2", "apr_g1", "apr_nope"}); err != nil || !slices.Equal(got, []string{"apr_1"}) {
		t.Errorf("DecidedApprovals(acme, apr_1 apr_2 apr_g1 apr_nope) = %q, %v; want [apr_1]", got, err)
	}
	if got, err := st.DecidedApprovals(ctx, "globex", []string{"apr_1"}); err != nil || len(got) != 0 {
		t.Errorf("DecidedApprovals(globex, acme's apr_1) = %q, %v; want none", got, err)
	}

	// A second decision is refused, and its record is not appended.
	h := head()
	second := deny("apr_1", "user:fin-2", decidedAt.Add(time.Minute))
	mustAppend(t, st, second)
	wantRefused(second, ledger.RefusedDecided, h)
	got = mustApproval(t, st, "acme", "apr_1", now)
	wantEvents(t, got, appended(ok1, 1))
	if got.State != writ.ApprovalApproved || got.Decision == nil || got.Decision.Approver != "user:fin-1" {
		t.Errorf("Approval(acme, apr_1) after a refused denial = state %s, decision %+v; want approved by user:fin-1", got.State, got.Decision)
	}

	// A denial.
	no3 := deny("apr_3", "user:fin-2", decidedAt)
	mustAppend(t, st, no3)
	wantAppended(no3, 1)
	got = mustApproval(t, st, "acme", "apr_3", now)
	if d := got.Decision; got.State != writ.ApprovalDenied || d == nil || d.Decision != writ.ApprovalDenied || d.Approver != "user:fin-2" ||
		!d.At.Equal(decidedAt) || !d.ValidUntil.IsZero() || d.RecordID != no3.Record.RecordID {
		t.Errorf("Approval(acme, apr_3) after denial = state %s, decision %+v; want denied by user:fin-2 at %s, no valid_until", got.State, got.Decision, decidedAt)
	}

	// No redemption before an approval, nor after a denial.
	h = head()
	early := redeem("apr_2", now)
	mustAppend(t, st, early)
	wantRefused(early, ledger.RefusedNotGiven, h)
	denied := redeem("apr_3", now)
	mustAppend(t, st, denied)
	wantRefused(denied, ledger.RefusedNotGiven, h)

	// An allowance of 2: two redemptions, then no more.
	ok2 := approve("apr_2", "user:fin-1", decidedAt)
	mustAppend(t, st, ok2)
	wantAppended(ok2, 1)
	wantOpen(t, st, "acme", "GATE_FINANCE", digest(refund1), now, "") // apr_1 and apr_2 decided
	use1, use2 := redeem("apr_2", now), redeem("apr_2", now.Add(time.Second))
	mustAppend(t, st, use1)
	wantAppended(use1, 2)
	mustAppend(t, st, use2)
	wantAppended(use2, 3)
	h = head()
	use3 := redeem("apr_2", now.Add(2*time.Second))
	mustAppend(t, st, use3)
	wantRefused(use3, ledger.RefusedExhausted, h)
	got = mustApproval(t, st, "acme", "apr_2", now)
	if got.State != writ.ApprovalApproved || got.Uses != 2 {
		t.Errorf("Approval(acme, apr_2) = state %s, uses %d; want approved, 2", got.State, got.Uses)
	}
	wantEvents(t, got, appended(ok2, 1), appended(use1, 2), appended(use2, 3))

	// Two redemptions of an allowance of 1 in one transaction: the first
	// counts against the second.
	h = head()
	both := []*ledger.Entry{redeem("apr_1", now), redeem("apr_1", now)}
	mustAppend(t, st, both...)
	wantAppended(both[0], 2)
	if both[1].Refused != ledger.RefusedExhausted || both[1].Raw != nil || both[1].ApprovalEvent.Event.Seq != 0 {
		t.Errorf("second redemption of apr_1 in the batch: Refused %q, Raw %d bytes, event seq %d; want %q and nothing appended",
			both[1].Refused, len(both[1].Raw), both[1].ApprovalEvent.Event.Seq, ledger.RefusedExhausted)
	}
	if _, err := st.Record(ctx, "acme", both[1].Record.RecordID); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Record(acme, %s) of the refused redemption = %v, want ENOTFOUND", both[1].Record.RecordID, err)
	}
	if got := head(); got.Seq != h.Seq+1 || got.Hash != both[0].Record.Audit.RecordHash {
		t.Errorf("after the batch, Head(acme) = %+v, want seq %d with hash %s (one record)", got, h.Seq+1, both[0].Record.Audit.RecordHash)
	}
	if got := mustApproval(t, st, "acme", "apr_1", now); got.Uses != 1 || len(got.Events) != 2 {
		t.Errorf("Approval(acme, apr_1) = uses %d, %d events; want 1 use, 2 events", got.Uses, len(got.Events))
	}

	// Unknown requests, and another tenant's, are refused.
	h = head()
	unknown := redeem("apr_nope", now)
	mustAppend(t, st, unknown)
	wantRefused(unknown, ledger.RefusedUnknown, h)
	theirs := approve("apr_g1", "user:fin-1", now)
	mustAppend(t, st, theirs)
	wantRefused(theirs, ledger.RefusedUnknown, h)
	if got := mustApproval(t, st, "globex", "apr_g1", now); got.State != writ.ApprovalPending || len(got.Events) != 0 {
		t.Errorf("Approval(globex, apr_g1) after acme's attempt = state %s, %d events; want pending, none", got.State, len(got.Events))
	}

	// An idempotency claim is settled before the guard: a repeat is
	// answered with the first record, whatever its event would say.
	first := NewEntry(NewRecord("acme", 100))
	first.Idempotency = &ledger.IdempotencyClaim{Key: "idem-1", ArgsDigest: "sha256:aa"}
	mustAppend(t, st, first)
	records++
	repeat := redeem("apr_nope", now)
	repeat.Idempotency = &ledger.IdempotencyClaim{Key: "idem-1", ArgsDigest: "sha256:aa"}
	mustAppend(t, st, repeat)
	if repeat.Refused != "" || repeat.Prior == nil || repeat.Prior.RecordID != first.Record.RecordID {
		t.Errorf("repeat of idem-1 with an unknown approval: Refused %q, Prior %s; want no refusal and the prior record %s",
			repeat.Refused, fmtPrior(repeat.Prior), first.Record.RecordID)
	}
	// A refused entry claims nothing: a later entry of the same batch with
	// the same key is appended.
	refusedClaim := redeem("apr_nope", now)
	refusedClaim.Idempotency = &ledger.IdempotencyClaim{Key: "idem-2", ArgsDigest: "sha256:bb"}
	after := NewEntry(NewRecord("acme", 101))
	after.Idempotency = &ledger.IdempotencyClaim{Key: "idem-2", ArgsDigest: "sha256:cc"}
	mustAppend(t, st, refusedClaim, after)
	if refusedClaim.Refused != ledger.RefusedUnknown || refusedClaim.Raw != nil || after.Raw == nil || after.Prior != nil {
		t.Errorf("refused claim then claim of idem-2: Refused %q, Raw %d bytes; then Raw %d bytes, Prior %s; want refused, then appended",
			refusedClaim.Refused, len(refusedClaim.Raw), len(after.Raw), fmtPrior(after.Prior))
	}
	records++
	if p, err := idempotent(ctx, st, "acme", "idem-2"); err != nil || p == nil || p.RecordID != after.Record.RecordID || p.ArgsDigest != "sha256:cc" {
		t.Errorf("Idempotent(acme, idem-2) = %s, %v; want the claim of %s", fmtPrior(p), err, after.Record.RecordID)
	}

	// Every filter, after the decisions.
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalPending}), now, "apr_4")
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalApproved}), now, "apr_1", "apr_2")
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalDenied}), now, "apr_3")
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalExpired}), now, "apr_5")
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalApproved, GateID: "GATE_LEGAL"}), now)
	wantApprovals(t, st, acme(writ.ApprovalQuery{State: writ.ApprovalApproved, CreatedBefore: a2.Request.CreatedAt}), now, "apr_1")
	wantApprovals(t, st, writ.ApprovalQuery{TenantID: "globex", State: writ.ApprovalPending}, now, "apr_g1")

	// Pages of 2, each request with its events.
	var pages [][]string
	q := acme(writ.ApprovalQuery{Limit: 2})
	for {
		page, err := st.Approvals(ctx, q, now)
		if err != nil {
			t.Fatalf("Approvals(%+v) = %v", q, err)
		}
		pages = append(pages, approvalIDs(page.Approvals))
		for _, a := range page.Approvals {
			one := mustApproval(t, st, "acme", a.ApprovalID, now)
			if a.State != one.State || a.Uses != one.Uses || len(a.Events) != len(one.Events) {
				t.Errorf("Approvals page: %s in state %s with %d uses and %d events; Approval says %s, %d, %d",
					a.ApprovalID, a.State, a.Uses, len(a.Events), one.State, one.Uses, len(one.Events))
			}
		}
		if page.NextCursor == "" || len(pages) > 5 {
			break
		}
		q.Cursor = page.NextCursor
	}
	if want := [][]string{{"apr_1", "apr_2"}, {"apr_3", "apr_4"}, {"apr_5"}}; !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("Approvals(acme, limit 2) pages = %v, want %v", pages, want)
	}
	pages = nil
	q = acme(writ.ApprovalQuery{Limit: 2, GateID: "GATE_FINANCE"})
	for {
		page, err := st.Approvals(ctx, q, now)
		if err != nil {
			t.Fatalf("Approvals(%+v) = %v", q, err)
		}
		pages = append(pages, approvalIDs(page.Approvals))
		if page.NextCursor == "" || len(pages) > 5 {
			break
		}
		q.Cursor = page.NextCursor
	}
	if want := [][]string{{"apr_1", "apr_2"}, {"apr_3"}}; !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("Approvals(acme, GATE_FINANCE, limit 2) pages = %v, want %v", pages, want)
	}
	page, err := st.Approvals(ctx, acme(writ.ApprovalQuery{Limit: 2}), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Approvals) == 2 {
		wantEvents(t, &page.Approvals[1], appended(ok2, 1), appended(use1, 2), appended(use2, 3))
		if page.Approvals[1].Uses != 2 || page.Approvals[1].Decision == nil || page.Approvals[1].Decision.RecordID != ok2.Record.RecordID {
			t.Errorf("Approvals page: apr_2 with uses %d, decision %+v; want 2 uses and the decision of %s",
				page.Approvals[1].Uses, page.Approvals[1].Decision, ok2.Record.RecordID)
		}
	}

	// Refused entries left no gap in the chains.
	if records != 12 {
		t.Fatalf("the test appended %d records, want 12", records)
	}
	wantNoFindings(t, st, records)
}

// testApprovalValidation appends entries a store must refuse before
// writing anything: approvals it could not answer for, and events that
// would escape their tenant's guard.
func testApprovalValidation(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, time.May, 9, 9, 0, 0, 0, time.UTC)
	b := NewBinding("payments.refund", 1)
	tests := []struct {
		name string
		make func() []*ledger.Entry
	}{
		{"wrong binding digest", func() []*ledger.Entry {
			e := NewEntry(NewRecord("acme", 1))
			a := NewApproval(e.Record, "apr_1", "G", b, t0, 1)
			a.BindingDigest = "sha256:" + strings.Repeat("0", 64)
			e.NewApprovals = []ledger.NewApproval{a}
			return []*ledger.Entry{e}
		}},
		{"zero allowance", func() []*ledger.Entry {
			e := NewEntry(NewRecord("acme", 1))
			e.NewApprovals = []ledger.NewApproval{NewApproval(e.Record, "apr_1", "G", b, t0, 0)}
			return []*ledger.Entry{e}
		}},
		{"another tenant's request", func() []*ledger.Entry {
			e := NewEntry(NewRecord("acme", 1))
			e.NewApprovals = []ledger.NewApproval{NewApproval(NewRecord("globex", 1), "apr_1", "G", b, t0, 1)}
			return []*ledger.Entry{e}
		}},
		{"no expiry", func() []*ledger.Entry {
			e := NewEntry(NewRecord("acme", 1))
			a := NewApproval(e.Record, "apr_1", "G", b, t0, 1)
			a.Request.ExpiresAt = a.Request.CreatedAt
			e.NewApprovals = []ledger.NewApproval{a}
			return []*ledger.Entry{e}
		}},
		{"approval id twice in the batch", func() []*ledger.Entry {
			e1, e2 := NewEntry(NewRecord("acme", 1)), NewEntry(NewRecord("acme", 2))
			e1.NewApprovals = []ledger.NewApproval{NewApproval(e1.Record, "apr_1", "G", b, t0, 1)}
			e2.NewApprovals = []ledger.NewApproval{NewApproval(e2.Record, "apr_1", "G", b, t0, 1)}
			return []*ledger.Entry{e1, e2}
		}},
		{"event of another tenant", func() []*ledger.Entry {
			e := NewApprovalEntry(NewRecord("acme", 1), "apr_1", writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, At: t0})
			e.ApprovalEvent.TenantID = "globex"
			return []*ledger.Entry{e}
		}},
		{"event of unknown kind", func() []*ledger.Entry {
			return []*ledger.Entry{NewApprovalEntry(NewRecord("acme", 1), "apr_1", writ.ApprovalEvent{Kind: "revoked", At: t0})}
		}},
	}
	for _, tc := range tests {
		err := st.Append(ctx, tc.make(), ledger.Seal)
		wantCode(t, fmt.Sprintf("Append(%s)", tc.name), err, writ.EINVALID)
	}
	if h, err := st.Head(ctx, "acme"); err != nil || h.Seq != 0 {
		t.Errorf("after invalid appends, Head(acme) = %+v, %v; want the empty chain", h, err)
	}
	page, err := st.Approvals(ctx, writ.ApprovalQuery{TenantID: "acme"}, t0)
	if err != nil || len(page.Approvals) != 0 {
		t.Errorf("after invalid appends, Approvals(acme) = %+v, %v; want none", page, err)
	}
}

// testPendingPastDecided decides and expires a tenant's requests in an
// order that is not theirs, one append at a time, and checks after each
// that the pending list, at times before, at and after each decision and
// expiry, is what the states of all the requests say, one page and
// paged: a store that skips decided requests to reach the pending ones
// (issue 38) must never skip a pending one.
func testPendingPastDecided(t *testing.T, st ledger.Store) {
	t0 := time.Date(2026, time.June, 1, 9, 0, 0, 0, time.UTC)
	const tenant = "floors"
	n := 0
	record := func() *writ.Record {
		n++
		r := NewRecord(tenant, n)
		r.Timestamp = t0.Add(time.Duration(n) * time.Second)
		return r
	}
	// Nine requests; apr_3 is created long before the others (expired an
	// hour later), apr_7 half an hour before them.
	created := map[int]time.Time{3: t0.Add(-50 * time.Minute), 7: t0.Add(-30 * time.Minute)}
	var ids []string
	for i := 1; i <= 9; i++ {
		r := record()
		at, ok := created[i]
		if !ok {
			at = t0.Add(time.Duration(i) * time.Second)
		}
		id := fmt.Sprintf("apr_f%d", i)
		ids = append(ids, id)
		e := NewEntry(r)
		e.NewApprovals = []ledger.NewApproval{NewApproval(r, id, "GATE_FINANCE", NewBinding("payments.refund", i), at, 1)}
		mustAppend(t, st, e)
	}
	check := func(step string) {
		t.Helper()
		for _, now := range []time.Time{t0, t0.Add(10*time.Minute + time.Second), t0.Add(30*time.Minute + time.Second), t0.Add(2 * time.Hour)} {
			all, err := st.Approvals(t.Context(), writ.ApprovalQuery{TenantID: tenant, Limit: 100}, now)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, a := range all.Approvals {
				if a.State == writ.ApprovalPending {
					want = append(want, a.ApprovalID)
				}
			}
			q := writ.ApprovalQuery{TenantID: tenant, State: writ.ApprovalPending, Limit: 100}
			page, err := st.Approvals(t.Context(), q, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := approvalIDs(page.Approvals); !slices.Equal(got, want) {
				t.Errorf("%s: pending at %s = %v, want %v", step, now.Format(time.TimeOnly), got, want)
			}
			var paged []string
			q.Limit = 2
			for range 10 {
				page, err := st.Approvals(t.Context(), q, now)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, approvalIDs(page.Approvals)...)
				if page.NextCursor == "" {
					break
				}
				q.Cursor = page.NextCursor
			}
			if !slices.Equal(paged, want) {
				t.Errorf("%s: pending at %s in pages of 2 = %v, want %v", step, now.Format(time.TimeOnly), paged, want)
			}
		}
	}
	check("none decided")
	// Decisions at t0+10 min (apr_3 still open then), in this order.
	for _, d := range []struct {
		i    int
		kind string
	}{{2, writ.ApprovalEventApproved}, {1, writ.ApprovalEventDenied}, {5, writ.ApprovalEventApproved}, {4, writ.ApprovalEventWithdrawn}, {9, writ.ApprovalEventApproved}, {6, writ.ApprovalEventApproved}, {8, writ.ApprovalEventDenied}} {
		ev := writ.ApprovalEvent{Kind: d.kind, Actor: "user:ops-lead", Reason: "checked", At: t0.Add(10 * time.Minute)}
		mustAppend(t, st, NewApprovalEntry(record(), ids[d.i-1], ev))
		check(fmt.Sprintf("%s decided", ids[d.i-1]))
	}
	// A decision two hours on, after apr_3 and apr_7 expired.
	ev := writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "user:ops-lead", Reason: "late", At: t0.Add(2 * time.Hour)}
	r := record()
	e := NewEntry(r)
	e.NewApprovals = []ledger.NewApproval{NewApproval(r, "apr_f10", "GATE_FINANCE", NewBinding("payments.refund", 10), t0.Add(2*time.Hour-time.Minute), 1)}
	mustAppend(t, st, e)
	mustAppend(t, st, NewApprovalEntry(record(), "apr_f10", ev))
	check("apr_f10 decided after the others expired")
}
