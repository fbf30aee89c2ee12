package ledger_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
)

// TestCheckStoredReceipt: a receipt is answered again only if its record
// is intact and binds it; a record sealed before receipts were bound has
// nothing to check its receipt against, and it passes.
func TestCheckStoredReceipt(t *testing.T) {
	seal := func(bind bool) (*ledger.Entry, []byte) {
		e := ledgertest.NewEntry(ledgertest.NewRecord("acme", 1))
		if bind {
			if err := ledger.Bind(e, nil); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := ledger.Seal(ledger.Head{}, e)
		if err != nil {
			t.Fatal(err)
		}
		return e, raw
	}
	e, raw := seal(true)
	forged := []byte(`{"safe_to_execute":true}`)
	tests := []struct {
		name     string
		raw, rcp []byte
		bad      bool
	}{
		{"bound and matching", raw, e.Receipt, false},
		{"bound, receipt changed", raw, forged, true},
		{"record changed", []byte(string(raw[:len(raw)-2]) + ` }`), e.Receipt, true},
		{"not a record", []byte(`{}`), e.Receipt, true},
	}
	old, oldRaw := seal(false)
	tests = append(tests, struct {
		name     string
		raw, rcp []byte
		bad      bool
	}{"sealed before bound", oldRaw, forged, false})
	if old.Record.Bound != nil {
		t.Fatal("an unbound entry has bound digests")
	}
	for _, tc := range tests {
		err := ledger.CheckStoredReceipt(tc.raw, tc.rcp)
		if (err != nil) != tc.bad || (err != nil && !errors.Is(err, ledger.ErrReceiptMismatch)) {
			t.Errorf("%s: CheckStoredReceipt = %v, want a mismatch: %v", tc.name, err, tc.bad)
		}
	}
}

// TestBindDigests: the digests Bind sets are the documented ones, and an
// event's seq (assigned by the store after sealing) is not part of them.
func TestBindDigests(t *testing.T) {
	rec := ledgertest.NewRecord("acme", 1)
	at := time.Date(2026, 5, 9, 9, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	ev := &ledger.RunEvent{TenantID: "acme", RunID: "run_1", Seq: 7, Kind: ledger.StepAttempt, StepID: "s", At: at, Data: json.RawMessage(`{"b":1, "a":2}`)}
	start := &ledger.RunEvent{TenantID: "acme", RunID: "run_1", Seq: 1, Kind: ledger.RunStarted, At: at}
	e := &ledger.Entry{Record: rec, Receipt: []byte(`{"x":1}`), RunEvent: ev,
		ApprovalEvent: &ledger.ApprovalEvent{TenantID: "acme", ApprovalID: "apr_1", Event: writ.ApprovalEvent{Seq: 3, Kind: writ.ApprovalEventRedeemed, At: at}}}
	if err := ledger.Bind(e, start); err != nil {
		t.Fatal(err)
	}
	b := rec.Bound
	want := map[string]string{
		// sha256 of {"x":1}
		"receipt": "sha256:5041bf1f713df204784353e82f6a4a535931cb64f1f4b4a5aeaffcb720918b22",
	}
	if b.Receipt != want["receipt"] {
		t.Errorf("bound.receipt = %s, want %s", b.Receipt, want["receipt"])
	}
	ev2 := *ev
	ev2.Seq, ev2.At, ev2.Data = 99, at.UTC(), json.RawMessage(`{"a":2,"b":1}`)
	if d, _ := ledger.RunEventDigest(&ev2, rec.RecordID); d != b.RunEvent {
		t.Errorf("the run event's digest depends on its seq, its time zone or its data's formatting: %s, bound %s", d, b.RunEvent)
	}
	if d, _ := ledger.RunEventDigest(start, ""); d != b.RunStart {
		t.Errorf("bound.run_start = %s, want the start event's digest %s", b.RunStart, d)
	}
	if b.ApprovalEvent == "" || b.ApprovalRequests != nil {
		t.Errorf("bound = %+v, want an approval event and no approval requests", b)
	}
}
