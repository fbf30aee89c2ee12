package ledgertest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/record"
)

// classifiedValue is a value classified under rule, committed to with a
// salt derived from n (a real salt is random; the store only keeps it).
func classifiedValue(tenant string, n int, value string, subjects []string) ledger.ClassifiedValue {
	salt := bytes.Repeat([]byte{byte(n)}, record.ClassifiedSaltLen)
	v := []byte(fmt.Sprintf("%q", value))
	return ledger.ClassifiedValue{
		TenantID:   tenant,
		Sealed:     record.Sealed{Ref: record.Commit(salt, v), Rule: "card_number", Classification: "pci", Salt: salt, Value: v},
		SubjectIDs: subjects,
	}
}

// testClassified holds the classified store (ledger.ClassifiedStore):
// values written with their record, linked to its subjects, read back
// per tenant only; an erasure deletes exactly the values it names, of its
// own tenant, in the transaction of its record; values that do not hash
// to their reference, or an erasure of another tenant, are refused with
// nothing written; and the chain verifies after an erasure.
func testClassified(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	cs, ok := st.(ledger.ClassifiedStore)
	if !ok {
		t.Fatalf("%T is not a ledger.ClassifiedStore", st)
	}
	a1, a2, g1 := NewRecord("acme", 1), NewRecord("acme", 2), NewRecord("globex", 1)
	// a1's subjects are customer:c-001 and order:o-00001; a2's
	// customer:c-002 and order:o-00002; globex's g1 shares a1's customer id.
	v1 := classifiedValue("acme", 1, "4111 1111 1111 1111", a1.SubjectIDs)
	v2 := classifiedValue("acme", 2, "a1's second value", a1.SubjectIDs)
	v3 := classifiedValue("acme", 3, "5500 0000 0000 0004", a2.SubjectIDs)
	v4 := classifiedValue("globex", 4, "globex's value", g1.SubjectIDs)
	e1, e2, eg := NewEntry(a1), NewEntry(a2), NewEntry(g1)
	e1.Classified = []ledger.ClassifiedValue{v1, v2}
	e2.Classified = []ledger.ClassifiedValue{v3}
	eg.Classified = []ledger.ClassifiedValue{v4}
	mustAppend(t, st, e1, e2)
	mustAppend(t, st, eg)

	refs := func(tenant, subject string, want ...string) {
		t.Helper()
		got, err := cs.ClassifiedRefs(ctx, tenant, subject)
		if err != nil || !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("ClassifiedRefs(%s, %s) = %v, %v; want %v", tenant, subject, got, err, want)
		}
	}
	values := func(tenant string, ask []string, want ...ledger.ClassifiedValue) {
		t.Helper()
		got, err := cs.ClassifiedValues(ctx, tenant, ask)
		if err != nil || len(got) != len(want) {
			t.Errorf("ClassifiedValues(%s, %d refs) = %d values, %v; want %d", tenant, len(ask), len(got), err, len(want))
			return
		}
		for _, w := range want {
			g, ok := got[w.Ref]
			if !ok || g.TenantID != tenant || g.Rule != w.Rule || g.Classification != w.Classification ||
				!bytes.Equal(g.Salt, w.Salt) || !bytes.Equal(g.Value, w.Value) || g.RecordID != w.RecordID {
				t.Errorf("ClassifiedValues(%s)[%s] = %+v, want %+v", tenant, w.Ref, g, w)
			}
		}
	}
	v1.RecordID, v2.RecordID, v3.RecordID, v4.RecordID = a1.RecordID, a1.RecordID, a2.RecordID, g1.RecordID
	all := []string{v1.Ref, v2.Ref, v3.Ref, v4.Ref}
	refs("acme", "customer:c-001", v1.Ref, v2.Ref)
	refs("acme", "order:o-00002", v3.Ref)
	refs("acme", "customer:c-999")
	refs("globex", "customer:c-001", v4.Ref)
	values("acme", all, v1, v2, v3)
	values("globex", all, v4)
	values("acme", nil)

	// Refused, with nothing written: a value that does not hash to its
	// reference, and an erasure of another tenant's values.
	head, err := st.Head(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	bad := classifiedValue("acme", 5, "x", nil)
	bad.Value = []byte(`"y"`)
	eb := NewEntry(NewRecord("acme", 3))
	eb.Classified = []ledger.ClassifiedValue{bad}
	ex := NewEntry(NewRecord("acme", 3))
	ex.Erasure = &ledger.Erasure{TenantID: "globex", Refs: []string{v4.Ref}}
	for name, e := range map[string]*ledger.Entry{"a value that does not hash to its reference": eb, "an erasure of another tenant": ex} {
		if err := st.Append(ctx, []*ledger.Entry{e}, ledger.Seal); err == nil {
			t.Errorf("Append(%s) = nil, want an error", name)
		}
		if h, err := st.Head(ctx, "acme"); err != nil || h != head {
			t.Errorf("after refusing %s, acme's head = %+v, %v; want %+v", name, h, err, head)
		}
	}
	values("globex", all, v4)

	// An erasure deletes what it names, of its tenant, with its record.
	er := NewEntry(NewRecord("acme", 3))
	er.Erasure = &ledger.Erasure{TenantID: "acme", Refs: []string{v1.Ref, v2.Ref, v4.Ref}}
	mustAppend(t, st, er)
	refs("acme", "customer:c-001")
	refs("acme", "order:o-00002", v3.Ref)
	refs("globex", "customer:c-001", v4.Ref)
	values("acme", all, v3)
	values("globex", all, v4)
	// Erasing again, or what was never stored, deletes nothing more.
	again := NewEntry(NewRecord("acme", 4))
	again.Erasure = &ledger.Erasure{TenantID: "acme", Refs: []string{v1.Ref}}
	mustAppend(t, st, again)
	values("acme", all, v3)

	if findings, n, err := verify.VerifyChains(ctx, st); err != nil || len(findings) != 0 || n != 5 {
		t.Errorf("VerifyChains() = %v, %d, %v; want no findings over 5 records", findings, n, err)
	}
}
