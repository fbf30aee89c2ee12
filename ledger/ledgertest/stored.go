package ledgertest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/sqlkit"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/record"
)

// Tamperer edits what a store keeps beside its records behind writ's
// back, as someone with write access to the database would: the store's
// append-only guards (triggers) are dropped or bypassed first. Each store
// implements it over its own tables for RunTamper.
type Tamperer interface {
	// SetReceipt replaces the receipt stored with a record.
	SetReceipt(t *testing.T, tenantID, recordID string, receipt []byte)
	// SetBlob replaces a blob's bytes, keeping its hash.
	SetBlob(t *testing.T, hash string, data []byte)
	SetEnvelope(t *testing.T, tenantID string, seq int64, hash string, data []byte)
	// SetRunEventData replaces the data of a run event.
	SetRunEventData(t *testing.T, tenantID, runID string, seq int64, data []byte)
	// DeleteRunEvent deletes a run event.
	DeleteRunEvent(t *testing.T, tenantID, runID string, seq int64)
	// SetApprovalEventReason replaces the reason of an approval event.
	SetApprovalEventReason(t *testing.T, tenantID, approvalID string, seq int64, reason string)
	// SetApprovalRequest replaces the stored document of an approval
	// request (as sqlkit.ApprovalJSON encodes it).
	SetApprovalRequest(t *testing.T, tenantID, approvalID string, doc []byte)
	// SetShadowOutcome replaces the outcome of the shadow decision stored
	// beside a record.
	SetShadowOutcome(t *testing.T, tenantID, recordID, outcome string)
	// SetApprovalColumn sets one index column of an approval request
	// (allowance, expires_ns, binding_digest, …) to value.
	SetApprovalColumn(t *testing.T, tenantID, approvalID, column string, value any)
	// SetClaimColumn sets one column (record_id, args_digest, …) of the
	// row of table (idempotency, blocks, execution_reports) that points
	// at a record.
	SetClaimColumn(t *testing.T, table, tenantID, recordID, column string, value any)
	// DeleteClaim deletes the row of table that points at a record.
	DeleteClaim(t *testing.T, table, tenantID, recordID string)
}

// storedFixture is a ledger of one tenant whose records bind everything
// stored beside them (ledger.Bind): receipts, a run with its start and
// two attempts, an approval request decided and redeemed, and a blob.
type storedFixture struct {
	records  []*ledger.Entry // in chain order
	run      string
	approval string
	blob     ledger.Blob
	envelope *ledger.Entry // the entry whose envelope is kept with it
	decision *ledger.Entry // the record of the approval decision
}

func bindAll(t *testing.T, start *ledger.RunEvent, es ...*ledger.Entry) {
	t.Helper()
	for _, e := range es {
		var rs *ledger.RunEvent
		if e.RunEvent != nil {
			rs = start
		}
		if err := ledger.Bind(e, rs); err != nil {
			t.Fatalf("Bind(%s) = %v", e.Record.RecordID, err)
		}
	}
}

func newStoredFixture(t *testing.T, st ledger.Store) *storedFixture {
	ctx := t.Context()
	at := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	f := &storedFixture{run: "run_stored", approval: "apr_stored"}
	start := &ledger.RunEvent{TenantID: "acme", RunID: f.run, Kind: ledger.RunStarted, StepID: "s1", At: at, Data: json.RawMessage(`{"workflow_id":"w"}`)}
	if err := st.StartRun(ctx, start); err != nil {
		t.Fatalf("StartRun = %v", err)
	}
	recs := records("acme", 1, 5)
	f.blob = NewBlob("envelope", []byte(`{"tenant_id":"acme","tool":"refund"}`))
	envelope := []byte(`{"tenant_id":"acme","tool":"refund","arguments":{"order_id":"o-00002"}}`)
	recs[1].Replay.ReplayPacketID = record.Digest(envelope)
	es := entries(recs...)
	es[0].Blobs = []ledger.Blob{f.blob}
	es[1].Envelope = envelope
	f.envelope = es[1]
	es[0].NewApprovals = []ledger.NewApproval{NewApproval(recs[0], f.approval, "GATE_FINANCE", NewBinding(recs[0].DecisionKey, 1), at, 1)}
	es[1].Shadow = &ledger.ShadowDecision{TenantID: "acme", RecordID: recs[1].RecordID, DecisionKey: recs[1].DecisionKey, At: recs[1].Timestamp,
		Pack: "candidate@2", PackHash: "sha256:" + strings.Repeat("c", 64), EnforcedOutcome: writ.OutcomeAllow, Outcome: writ.OutcomeGoalFailTerminal,
		Status: writ.StatusRejected, PolicyDecisions: []writ.PolicyDecision{{PolicyDecisionID: "pd:R_NEW:deny", BundleID: "refunds@2", RuleIDs: []string{"R_NEW"}, Verdict: "deny"}},
		Reasons: []writ.Reason{{Code: "new_rule", Message: "the candidate pack denies it"}}}
	for i, e := range es[1:3] {
		e.RunEvent = &ledger.RunEvent{TenantID: "acme", RunID: f.run, Kind: ledger.StepAttempt, StepID: "s1", At: at.Add(time.Duration(i+1) * time.Second),
			Data: json.RawMessage(`{"verdict":{"state":"retry"}}`)}
	}
	es[3] = NewApprovalEntry(recs[3], f.approval, writ.ApprovalEvent{Kind: writ.ApprovalEventApproved, Actor: "usr_lead", Reason: "checked the invoice", At: at.Add(time.Minute)})
	es[4] = NewApprovalEntry(recs[4], f.approval, writ.ApprovalEvent{Kind: writ.ApprovalEventRedeemed, At: at.Add(2 * time.Minute)})
	// The claims through which answers are found again: an idempotency
	// key, a block of an action, an execution report.
	es[0].Idempotency = &ledger.IdempotencyClaim{Key: "k-stored", ArgsDigest: "sha256:" + strings.Repeat("a", 64)}
	es[1].Block = &ledger.BlockKey{DecisionKey: recs[1].DecisionKey, ArgsDigest: "sha256:" + strings.Repeat("b", 64), PackHash: recs[1].Lineage.PackHash}
	es[2].Report = &ledger.ReportClaim{DecisionID: recs[2].DecisionID, ReportDigest: "sha256:" + strings.Repeat("d", 64)}
	bindAll(t, start, es...)
	// One entry at a time: the approval decision must find its request.
	for _, e := range es {
		mustAppend(t, st, e)
		if e.Refused != "" {
			t.Fatalf("Append(%s) refused: %s", e.Record.RecordID, e.Refused)
		}
	}
	f.records, f.decision = es, es[3]
	return f
}

func verifyStored(t *testing.T, st ledger.Store) []verify.Finding {
	t.Helper()
	ss, ok := st.(verify.StoredSource)
	if !ok {
		t.Fatalf("%T is not a verify.StoredSource", st)
	}
	fs, err := verify.VerifyStored(t.Context(), ss, time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("VerifyStored = %v", err)
	}
	return fs
}

// testStored checks the scans VerifyStored reads (each row once, in
// order, page by page) and that a ledger whose records bind everything
// stored beside them verifies without findings.
func testStored(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	f := newStoredFixture(t, st)
	if fs := verifyStored(t, st); len(fs) != 0 {
		t.Fatalf("VerifyStored of an untouched ledger = %+v", fs)
	}
	ss := st.(verify.StoredSource)
	var seqs []int64
	for after := int64(0); ; {
		page, err := ss.ScanReceipts(ctx, "acme", after, 2)
		if err != nil {
			t.Fatalf("ScanReceipts = %v", err)
		}
		for _, r := range page {
			seqs = append(seqs, r.Seq)
			e := f.records[r.Seq-1]
			if string(r.Receipt) != string(e.Receipt) || string(r.Record) != string(e.Raw) {
				t.Errorf("ScanReceipts row %d = %s / %s, want the sealed record and its receipt", r.Seq, r.Record, r.Receipt)
			}
			after = r.Seq
		}
		if len(page) < 2 {
			break
		}
	}
	if !slices.Equal(seqs, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("ScanReceipts pages = seqs %v, want 1..5", seqs)
	}
	if page, err := ss.ScanReceipts(ctx, "globex", 0, 10); err != nil || len(page) != 0 {
		t.Errorf("ScanReceipts(another tenant) = %d rows, %v", len(page), err)
	}
	var evs []string
	for run, seq := "", int64(0); ; {
		page, err := ss.ScanRunEvents(ctx, "acme", run, seq, 2)
		if err != nil {
			t.Fatalf("ScanRunEvents = %v", err)
		}
		for _, ev := range page {
			evs = append(evs, ev.RunID+"/"+ev.Kind+"/"+ev.RecordID)
			run, seq = ev.RunID, ev.Seq
		}
		if len(page) < 2 {
			break
		}
	}
	want := []string{f.run + "/run_started/", f.run + "/step_attempt/" + f.records[1].Record.RecordID, f.run + "/step_attempt/" + f.records[2].Record.RecordID}
	if !slices.Equal(evs, want) {
		t.Errorf("ScanRunEvents pages = %v, want %v", evs, want)
	}
	blobs, err := ss.ScanBlobs(ctx, "", 10)
	if err != nil || !slices.ContainsFunc(blobs, func(b ledger.Blob) bool { return b.Hash == f.blob.Hash && string(b.Data) == string(f.blob.Data) }) {
		t.Errorf("ScanBlobs = %d blobs, %v; want the fixture's blob", len(blobs), err)
	}
	if more, err := ss.ScanBlobs(ctx, f.blob.Hash, 10); err != nil || slices.ContainsFunc(more, func(b ledger.Blob) bool { return b.Hash <= f.blob.Hash }) {
		t.Errorf("ScanBlobs(after %s) = %v, %v: want only later hashes", f.blob.Hash, more, err)
	}
}

// RunTamper edits each kind of thing a store keeps beside its records
// behind writ's back, one fresh store each, and checks that
// verify.VerifyStored names the edit, on the right record, and that a
// tampered receipt fails ledger.CheckStoredReceipt (so it is never
// answered again). open returns a fresh, empty store (closed by the
// suite) and its Tamperer.
func RunTamper(t *testing.T, open func(t *testing.T) (ledger.Store, Tamperer)) {
	cases := []struct {
		name   string
		edit   func(t *testing.T, tm Tamperer, f *storedFixture)
		kind   string
		record func(f *storedFixture) string // the record the finding names
		// badClaims is how many claim rows then lead to a record that
		// does not bind them (ledger.CheckStoredClaim fails).
		badClaims int
	}{
		{"Receipt", func(t *testing.T, tm Tamperer, f *storedFixture) {
			e := f.records[0]
			tm.SetReceipt(t, "acme", e.Record.RecordID, []byte(string(e.Receipt[:len(e.Receipt)-1])+`,"forged":true}`))
		}, verify.FindingReceiptMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 0},
		{"Blob", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetBlob(t, f.blob.Hash, []byte(`{"tenant_id":"acme","tool":"wire_transfer"}`))
		}, verify.FindingBlobMismatch, func(*storedFixture) string { return "" }, 0},
		{"Envelope", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetEnvelope(t, "acme", 2, f.envelope.Record.Replay.ReplayPacketID, []byte(`{"tenant_id":"acme","tool":"wire_transfer"}`))
		}, verify.FindingBlobMismatch, func(f *storedFixture) string { return f.envelope.Record.RecordID }, 0},
		{"EnvelopeReaddressed", func(t *testing.T, tm Tamperer, f *storedFixture) {
			// New bytes under their own address: they hash right, but
			// the record pins another.
			forged := []byte(`{"tenant_id":"acme","tool":"wire_transfer"}`)
			tm.SetEnvelope(t, "acme", 2, record.Digest(forged), forged)
		}, verify.FindingBlobMismatch, func(f *storedFixture) string { return f.envelope.Record.RecordID }, 0},
		{"RunEvent", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetRunEventData(t, "acme", f.run, 2, []byte(`{"verdict":{"state":"passed"}}`))
		}, verify.FindingRunEventMismatch, func(f *storedFixture) string { return f.records[1].Record.RecordID }, 0},
		{"RunStart", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetRunEventData(t, "acme", f.run, 1, []byte(`{"workflow_id":"other"}`))
		}, verify.FindingRunEventMismatch, func(f *storedFixture) string { return f.records[1].Record.RecordID }, 0},
		{"RunEventDeleted", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.DeleteRunEvent(t, "acme", f.run, 3)
		}, verify.FindingRunEventMismatch, func(f *storedFixture) string { return f.records[2].Record.RecordID }, 0},
		{"ApprovalEvent", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetApprovalEventReason(t, "acme", f.approval, 1, "no reason needed")
		}, verify.FindingApprovalMismatch, func(f *storedFixture) string { return f.decision.Record.RecordID }, 0},
		{"ApprovalRequest", func(t *testing.T, tm Tamperer, f *storedFixture) {
			r := *f.records[0].NewApprovals[0].Request
			r.Allowance = 100
			doc, err := sqlkit.ApprovalJSON(&r)
			if err != nil {
				t.Fatal(err)
			}
			tm.SetApprovalRequest(t, "acme", f.approval, doc)
		}, verify.FindingApprovalMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 0},
		{"ShadowDecision", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetShadowOutcome(t, "acme", f.records[1].Record.RecordID, string(writ.OutcomeAllow))
		}, verify.FindingShadowMismatch, func(f *storedFixture) string { return f.records[1].Record.RecordID }, 0},
		{"ApprovalAllowanceColumn", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetApprovalColumn(t, "acme", f.approval, "allowance", 100)
		}, verify.FindingApprovalMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 0},
		{"ApprovalExpiryColumn", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetApprovalColumn(t, "acme", f.approval, "expires_ns", f.records[0].NewApprovals[0].Request.ExpiresAt.Add(24*time.Hour).UnixNano())
		}, verify.FindingApprovalMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 0},
		{"ApprovalBindingColumn", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetApprovalColumn(t, "acme", f.approval, "binding_digest", "sha256:"+strings.Repeat("0", 64))
		}, verify.FindingApprovalMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 0},
		// An idempotency key pointed at another record: its retry would
		// be answered with that record's (genuine) receipt.
		{"IdempotencyRedirected", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetClaimColumn(t, "idempotency", "acme", f.records[0].Record.RecordID, "record_id", f.records[4].Record.RecordID)
		}, verify.FindingClaimMismatch, func(f *storedFixture) string { return f.records[4].Record.RecordID }, 1},
		{"IdempotencyArguments", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetClaimColumn(t, "idempotency", "acme", f.records[0].Record.RecordID, "args_digest", "sha256:"+strings.Repeat("e", 64))
		}, verify.FindingClaimMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 1},
		{"IdempotencyDeleted", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.DeleteClaim(t, "idempotency", "acme", f.records[0].Record.RecordID)
		}, verify.FindingClaimMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 0},
		{"BlockRedirected", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetClaimColumn(t, "blocks", "acme", f.records[1].Record.RecordID, "record_id", f.records[4].Record.RecordID)
		}, verify.FindingClaimMismatch, func(f *storedFixture) string { return f.records[4].Record.RecordID }, 1},
		{"BlockDeleted", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.DeleteClaim(t, "blocks", "acme", f.records[1].Record.RecordID)
		}, verify.FindingClaimMismatch, func(f *storedFixture) string { return f.records[1].Record.RecordID }, 0},
		{"ReportRedirected", func(t *testing.T, tm Tamperer, f *storedFixture) {
			tm.SetClaimColumn(t, "execution_reports", "acme", f.records[2].Record.RecordID, "record_id", f.records[0].Record.RecordID)
		}, verify.FindingClaimMismatch, func(f *storedFixture) string { return f.records[0].Record.RecordID }, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, tm := open(t)
			closeAtEnd(t, st)
			f := newStoredFixture(t, st)
			if fs := verifyStored(t, st); len(fs) != 0 {
				t.Fatalf("VerifyStored before the edit = %+v", fs)
			}
			tc.edit(t, tm, f)
			fs := verifyStored(t, st)
			found := slices.ContainsFunc(fs, func(fd verify.Finding) bool {
				return fd.Kind == tc.kind && fd.RecordID == tc.record(f)
			})
			if !found {
				t.Errorf("VerifyStored after the edit = %+v, want a %s finding on record %q", fs, tc.kind, tc.record(f))
			}
			// Every record's stored receipt is checked before it is
			// answered again: only the tampered one fails.
			for _, e := range f.records {
				id := e.Record.RecordID
				sr, err := st.Record(t.Context(), "acme", id)
				if err != nil {
					t.Fatalf("Record(%s) = %v", id, err)
				}
				rcpt, err := st.Receipt(t.Context(), "acme", id)
				if err != nil {
					t.Fatalf("Receipt(%s) = %v", id, err)
				}
				err = ledger.CheckStoredReceipt(sr.Raw, rcpt)
				if tampered := tc.kind == verify.FindingReceiptMismatch && id == tc.record(f); tampered != (err != nil) {
					t.Errorf("CheckStoredReceipt(%s) = %v, want an error: %v", id, err, tampered)
				}
			}
			// Every claim row is checked against the record it leads to
			// before that record's answer is served again.
			if bad := badClaims(t, st); bad != tc.badClaims {
				t.Errorf("%d claim rows lead to a record that does not bind them, want %d", bad, tc.badClaims)
			}
		})
	}
}

// badClaims counts the claim rows of acme whose record does not bind them
// (ledger.CheckStoredClaim fails): answers that would not be served.
func badClaims(t *testing.T, st ledger.Store) int {
	t.Helper()
	ss := st.(verify.StoredSource)
	bad := 0
	for _, kind := range []string{ledger.ClaimIdempotency, ledger.ClaimBlock, ledger.ClaimReport} {
		rows, err := ss.ScanClaims(t.Context(), "acme", kind, nil, 100)
		if err != nil {
			t.Fatalf("ScanClaims(%s) = %v", kind, err)
		}
		for _, row := range rows {
			d, err := row.Digest("acme")
			if err != nil {
				t.Fatal(err)
			}
			sr, err := st.Record(t.Context(), "acme", row.RecordID)
			if err != nil {
				t.Fatalf("Record(%s) = %v", row.RecordID, err)
			}
			if err := ledger.CheckStoredClaim(sr.Raw, kind, d); err != nil {
				if !errors.Is(err, ledger.ErrReceiptMismatch) {
					t.Errorf("CheckStoredClaim = %v, want ErrReceiptMismatch", err)
				}
				bad++
			}
		}
	}
	return bad
}
