package ledgertest

import (
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// testParams holds what tenant parameters need of a store: a tenant's
// values are the outputs of its newest record of the key params:<pack>,
// read with one query (DecisionKey, Newest, Limit 1), so that query
// must answer the newest such record of the tenant, whatever else the
// chain holds, across and within batches, and never another tenant's;
// and a record's params pin must read back as sealed.
func testParams(t *testing.T, st ledger.Store) {
	const key = "params:messaging"
	change := func(tenant string, n int, domain string) *writ.Record {
		r := NewRecord(tenant, n)
		r.DecisionKey = key
		r.Outputs = map[string]any{"values": map[string]any{"own_domain": domain}, "reason": "r"}
		return r
	}
	check := func(tenant string, n int, set string) *writ.Record {
		r := NewRecord(tenant, n)
		r.Params = &writ.ParamsPin{Digest: "sha256:00", Values: map[string]any{"own_domain": "x.example", "limit": 20.0}, Set: set}
		return r
	}
	newest := func(tenant string) *writ.Record {
		t.Helper()
		page, err := st.Records(t.Context(), writ.RecordQuery{TenantID: tenant, DecisionKey: key, Newest: true, Limit: 1})
		if err != nil {
			t.Fatalf("Records(newest %s of %s) = %v", key, tenant, err)
		}
		if len(page.Records) == 0 {
			return nil
		}
		return &page.Records[0].Record
	}
	if r := newest("acme"); r != nil {
		t.Fatalf("an empty ledger's newest %s = %s, want none", key, r.RecordID)
	}
	a1 := change("acme", 1, "a1.example")
	mustAppend(t, st, NewEntry(a1), NewEntry(check("acme", 2, a1.RecordID)))
	g1 := change("globex", 1, "g1.example")
	mustAppend(t, st, NewEntry(g1))
	// Two changes in one batch, then checks after them: the later change
	// is the newest.
	a3, a4 := change("acme", 3, "a3.example"), change("acme", 4, "a4.example")
	mustAppend(t, st, NewEntry(a3), NewEntry(a4), NewEntry(check("acme", 5, a4.RecordID)), NewEntry(check("acme", 6, a4.RecordID)))
	mustAppend(t, st, NewEntry(check("globex", 2, g1.RecordID)))

	for tenant, want := range map[string]*writ.Record{"acme": a4, "globex": g1} {
		got := newest(tenant)
		if got == nil || got.RecordID != want.RecordID {
			t.Errorf("newest %s of %s = %v, want %s", key, tenant, got, want.RecordID)
			continue
		}
		if v, _ := got.Outputs["values"].(map[string]any); v["own_domain"] != want.Outputs["values"].(map[string]any)["own_domain"] {
			t.Errorf("newest %s of %s has values %v, want %v", key, tenant, got.Outputs["values"], want.Outputs["values"])
		}
	}
	if r := newest("initech"); r != nil {
		t.Errorf("a tenant without changes has newest %s = %s, want none", key, r.RecordID)
	}
	sr, err := st.Record(t.Context(), "acme", check("acme", 5, "").RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if p := sr.Record.Params; p == nil || p.Set != a4.RecordID || p.Values["own_domain"] != "x.example" || p.Values["limit"] != 20.0 {
		t.Errorf("a check's params pin reads back as %+v", p)
	}
}
