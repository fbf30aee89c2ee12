package record_test

import (
	"bytes"
	"encoding/json"
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

func FuzzSplitSeal(f *testing.F) {
	pre, _ := record.Preseal(sampleRecord())
	sealed, _, _ := record.SealPresealed(pre, record.Seal{Seq: 3, PrevHash: writ.GenesisHash})
	f.Add(sealed)
	f.Add([]byte(`{"audit":{"prev_hash":"x","seq":1}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		input, audit, err := record.SplitSeal(raw)
		// SealDigest reads the same seal and hashes the same input.
		digest, audit2, err2 := record.SealDigest(raw)
		if (err == nil) != (err2 == nil) || audit != audit2 || (err == nil && digest != record.Digest(input)) {
			t.Fatalf("SealDigest = %s %+v %v, want the digest of SplitSeal's input, %+v %v", digest, audit2, err2, audit, err)
		}
		if err != nil {
			return
		}
		// What a split yields re-seals to bytes that split the same way.
		again, _, err := record.SplitSeal(append([]byte{}, input...))
		if err == nil && audit.RecordHash == "" && !bytes.Equal(again, input) {
			t.Fatalf("splitting an unsealed input changed it")
		}
	})
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
		// The hash input is canonical and has no seal fields, so taking
		// it again changes nothing,
		again, err := record.HashInput(in)
		if err != nil {
			t.Fatalf("HashInput of its own output %s: %v", in, err)
		}
		if !bytes.Equal(again, in) {
			t.Fatalf("HashInput is not idempotent:\n%s\n%s", in, again)
		}
		// and nested as a member of a canonical record it stays as it is.
		nested := append(append([]byte(`{"audit":{},"x":`), in...), '}')
		out, err := record.HashInput(nested)
		if err != nil {
			t.Fatalf("HashInput of %s: %v", nested, err)
		}
		if !bytes.Equal(out, nested) {
			t.Fatalf("canonical bytes changed:\n%s\n%s", nested, out)
		}
		var m struct {
			Audit map[string]json.RawMessage `json:"audit"`
		}
		if err := json.Unmarshal(in, &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"record_hash", "signed_by", "signature"} {
			if _, ok := m.Audit[f]; ok {
				t.Fatalf("the hash input keeps audit.%s: %s", f, in)
			}
		}
	})
}

func TestSealPresealedEqualsCanonicalizingTheSealedRecord(t *testing.T) {
	for _, signed := range []bool{false, true} {
		rec := sampleRecord()
		pre, err := record.Preseal(rec)
		if err != nil {
			t.Fatal(err)
		}
		prev := "sha256:" + string(bytes.Repeat([]byte("cd"), 32))
		s := record.Seal{Seq: 42, PrevHash: prev}
		if signed {
			s.Sign = func(h string) (string, string, error) { return "writ-test+0a1b2c3d", "c2lnbmF0dXJl+/==", nil }
		}
		sealed, hash, err := record.SealPresealed(pre, s)
		if err != nil {
			t.Fatal(err)
		}
		rec.Audit = writ.Audit{Seq: 42, PrevHash: prev}
		wantInput, _ := record.Canonical(rec)
		rec.Audit.RecordHash = hash
		if signed {
			rec.Audit.SignedBy, rec.Audit.Signature = "writ-test+0a1b2c3d", "c2lnbmF0dXJl+/=="
		}
		wantSealed, _ := record.Canonical(rec)
		if !bytes.Equal(sealed, wantSealed) || hash != record.Digest(wantInput) {
			t.Errorf("signed=%v: SealPresealed differs from canonicalizing the sealed record:\n%s\n%s", signed, sealed, wantSealed)
		}
		input, audit, err := record.SplitSeal(sealed)
		if err != nil || !bytes.Equal(input, wantInput) || audit.RecordHash != hash {
			t.Errorf("signed=%v: SplitSeal = %s %+v %v, want the hash input back", signed, input, audit, err)
		}
		if digest, daudit, err := record.SealDigest(sealed); err != nil || digest != hash || daudit != audit {
			t.Errorf("signed=%v: SealDigest = %s %+v %v, want %s %+v", signed, digest, daudit, err, hash, audit)
		}
		jcsInput, err := record.HashInput(sealed)
		if err != nil || !bytes.Equal(jcsInput, input) {
			t.Errorf("signed=%v: HashInput (canonicalizing) differs from SplitSeal (splicing)", signed)
		}
		if _, err := record.CheckSealHash(sealed); err != nil {
			t.Errorf("CheckSealHash: %v", err)
		}
		if _, err := record.CheckSealHash(bytes.Replace(sealed, []byte("dr_1"), []byte("dr_9"), 1)); err == nil {
			t.Errorf("CheckSealHash accepted a changed record")
		}
	}
}

func TestSealRefusesUnsafeKeyIDs(t *testing.T) {
	pre, _ := record.Preseal(sampleRecord())
	_, _, err := record.SealPresealed(pre, record.Seal{Seq: 1, PrevHash: writ.GenesisHash, Sign: func(string) (string, string, error) { return `bad"id`, "x", nil }})
	if err == nil {
		t.Error("a key id with a quote was spliced into a seal")
	}
}

func TestSplitSealRefusesANonCanonicalSeal(t *testing.T) {
	pre, _ := record.Preseal(sampleRecord())
	sealed, _, err := record.SealPresealed(pre, record.Seal{Seq: 2, PrevHash: writ.GenesisHash, Sign: func(string) (string, string, error) { return "k+01020304", "c2ln", nil }})
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func([]byte) []byte{
		"whitespace":   func(b []byte) []byte { return bytes.Replace(b, []byte(`,"seq":2`), []byte(`, "seq":2`), 1) },
		"extra member": func(b []byte) []byte { return bytes.Replace(b, []byte(`,"seq":2`), []byte(`,"seq":2,"x":1`), 1) },
		"member order": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"signature":"c2ln","signed_by":"k+01020304"`), []byte(`"signed_by":"k+01020304","signature":"c2ln"`), 1)
		},
	} {
		if _, _, err := record.SplitSeal(edit(append([]byte{}, sealed...))); err == nil {
			t.Errorf("SplitSeal accepted a seal with %s", name)
		}
	}
	if _, _, err := record.SplitSeal(sealed); err != nil {
		t.Errorf("SplitSeal(canonical) = %v", err)
	}
}
