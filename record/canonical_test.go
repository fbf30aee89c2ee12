package record_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

func sampleRecord() *writ.Record {
	return &writ.Record{
		RecordID: "dr_1", DecisionID: "dec_1", TenantID: "acme", DecisionKey: "k", DecisionVersion: "1.0.0",
		Timestamp: time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC), Status: writ.StatusDecided,
		Actor:      writ.Actor{Type: "AGENT", ID: "a"},
		SubjectIDs: []string{"s"}, Outputs: map[string]any{"audit": map[string]any{"prev_hash": "x"}, "€": 1e21, "a": "\u2028<>&"},
		EvidenceRefs: []string{}, PolicyDecisions: []writ.PolicyDecision{}, Approvals: []writ.Approval{},
		Audit: writ.Audit{Seq: 7, PrevHash: "sha256:" + string(bytes.Repeat([]byte("ab"), 32))},
	}
}

func TestAddRecordHashEqualsRecanonicalizing(t *testing.T) {
	rec := sampleRecord()
	body, err := record.Canonical(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Audit.RecordHash = record.Digest(body)
	got, err := record.AddRecordHash(body, rec.Audit.RecordHash)
	if err != nil {
		t.Fatal(err)
	}
	want, err := record.Canonical(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("AddRecordHash =\n%s\nwant\n%s", got, want)
	}
	// And the stored bytes verify.
	if _, err := record.CheckHash(got); err != nil {
		t.Errorf("CheckHash: %v", err)
	}
	if input, _ := record.HashInput(got); !bytes.Equal(input, body) {
		t.Errorf("HashInput(sealed) =\n%s\nwant the hashed body\n%s", input, body)
	}
}

func TestCheckHashDetectsChanges(t *testing.T) {
	rec := sampleRecord()
	body, _ := record.Canonical(rec)
	sealed, _ := record.AddRecordHash(body, record.Digest(body))
	tampered := bytes.Replace(sealed, []byte(`"dr_1"`), []byte(`"dr_2"`), 1)
	if _, err := record.CheckHash(tampered); err == nil {
		t.Error("CheckHash accepted a changed record")
	}
}

func FuzzHashInput(f *testing.F) {
	rec := sampleRecord()
	body, _ := record.Canonical(rec)
	sealed, _ := record.AddRecordHash(body, record.Digest(body))
	f.Add(sealed)
	f.Add([]byte(`{"audit":{}}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := record.HashInput(raw)
		if err != nil {
			return
		}
		// The hash input is canonical: canonicalizing it again changes nothing.
		again, err := record.HashInput(append(append([]byte(`{"audit":{},"x":`), in...), '}'))
		if err != nil {
			t.Fatalf("HashInput of canonical bytes failed: %v", err)
		}
		_ = again
	})
}

func TestSealBodyEqualsCanonicalizingTheSealedRecord(t *testing.T) {
	rec := sampleRecord()
	pre, err := record.Preseal(rec)
	if err != nil {
		t.Fatal(err)
	}
	prev := "sha256:" + string(bytes.Repeat([]byte("cd"), 32))
	input, sealed, hash, err := record.SealBody(pre, 42, prev)
	if err != nil {
		t.Fatal(err)
	}
	rec.Audit = writ.Audit{Seq: 42, PrevHash: prev}
	wantInput, _ := record.Canonical(rec)
	rec.Audit.RecordHash = hash
	wantSealed, _ := record.Canonical(rec)
	if !bytes.Equal(input, wantInput) || !bytes.Equal(sealed, wantSealed) || hash != record.Digest(wantInput) {
		t.Errorf("SealBody differs from canonicalizing the sealed record:\n%s\n%s", sealed, wantSealed)
	}
}
