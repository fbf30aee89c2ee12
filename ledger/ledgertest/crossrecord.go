package ledgertest

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/transcript"
)

// noRules is record rules that find nothing: the records of the suite pin
// no pack, and what is tested here is what records state of each other.
type noRules struct{}

func (noRules) Check(context.Context, []byte) []string { return nil }

// reportEntry returns an entry of an execution report's record of rec's
// tenant carrying te, as the engine writes one: its chain hash te's head,
// reporting for te's permit.
func reportEntry(rec *writ.Record, te *writ.TranscriptEntry) *ledger.Entry {
	rec.Execution = &writ.Execution{Status: writ.ExecutionSucceeded, ReportedFor: te.Call.Permit, Transcript: te}
	rec.Replay.ToolTranscriptChainHash = te.Head
	return NewEntry(rec)
}

// evidenceEntry returns an evidence record of kind sealing the item id,
// and evidenceRevocation one revoking it (ca the content address it
// names; supersedes the record it supersedes).
func evidenceEntry(rec *writ.Record, kind, id, ca string) *ledger.Entry {
	rec.DecisionKey = ledger.EvidenceKeyPrefix + kind
	rec.DecisionID = rec.RecordID
	rec.Outputs = map[string]any{"item": map[string]any{"id": id, "kind": kind, "tenant_id": rec.TenantID}, "content_address": ca, "provenance": "issued"}
	rec.EvidenceRefs = []string{kind + ":" + id + "#" + ca}
	return NewEntry(rec)
}

func evidenceRevocation(rec *writ.Record, kind, id, ca, supersedes, decisionID string) *ledger.Entry {
	rec.DecisionKey = ledger.EvidenceRevocationKeyPrefix + kind
	rec.DecisionID = decisionID
	rec.Status = writ.StatusClosed
	rec.Supersedes = supersedes
	rec.Outputs = map[string]any{"revokes": id, "content_address": ca, "reason": "revoked"}
	rec.EvidenceRefs = []string{kind + ":" + id + "#" + ca, "record:" + supersedes}
	return NewEntry(rec)
}

// issuerStub verifies every JWS as signed by key k1 over the item it is
// given, except the token "forged".
type issuerStub struct{ item map[string]any }

func (s issuerStub) Verify(tenantID, token string) (*writ.EvidenceItem, string, error) {
	if token == "forged" {
		return nil, "", writ.Errorf(writ.EFORBIDDEN, "signed evidence refused: the signature does not verify")
	}
	return &writ.EvidenceItem{TenantID: tenantID, Kind: s.item["kind"].(string), ID: s.item["id"].(string), SubjectIDs: []string{}, Attributes: map[string]any{}}, "k1", nil
}

// testCrossRecordFindings: what records state of each other, in chain
// order, is verified over a store as `writ ledger verify` does
// (verify.VerifyStore, records signed with the ring): every tool
// transcript chains (transcript_broken names the record, the transcript,
// the entry and what broke), and every evidence revocation supersedes the
// evidence record of the item it names (evidence_revocation_mismatch).
// Each broken record is appended as writ never would, through the store's
// own Append: the store seals what it is given, verification catches it.
func testCrossRecordFindings(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	skey, _, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), "writ-test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keyring.FromEnv(skey, baseTime.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	seal := ledger.NewSeal(func(at time.Time) (ledger.Signer, error) { return ring.Signer(at) })
	next := func(run string, last *writ.TranscriptEntry, permit string) *writ.TranscriptEntry {
		e, err := transcript.Next(run, last, writ.TranscriptCall{ToolCallID: "call_" + permit, DecisionID: "dec_" + permit, Permit: permit, Status: writ.ExecutionSucceeded})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	rehead := func(e *writ.TranscriptEntry) *writ.TranscriptEntry {
		h, err := transcript.Head(e)
		if err != nil {
			t.Fatal(err)
		}
		e.Head = h
		return e
	}
	const runA, runB = "session:mcp:a", "session:mcp:b"
	a1 := next(runA, nil, "p1")
	a2 := next(runA, a1, "p2")
	gap := next(runA, a2, "p3") // entry 3, stated as entry 4
	gap.Seq = 4
	rehead(gap)
	b1 := next(runB, nil, "p4")
	badHash := reportEntry(NewRecord("acme", 4), b1)
	badHash.Record.Replay.ToolTranscriptChainHash = a1.Head
	moved := next(runB, b1, "p5") // entry 2 of b, moved to a
	moved.Run = runA
	rehead(moved)
	wrongPermit := next(runB, b1, "p6")
	ca := record.Digest([]byte("item idv_1"))
	other := record.Digest([]byte("item idv_2"))
	ev := evidenceEntry(NewRecord("acme", 7), "identity_verification", "idv_1", ca)
	evID := ev.Record.RecordID
	entries := []*ledger.Entry{
		reportEntry(NewRecord("acme", 1), a1),          // seq 1
		reportEntry(NewRecord("acme", 2), a2),          // seq 2
		reportEntry(NewRecord("acme", 3), gap),         // seq 3: a seq gap
		badHash,                                        // seq 4: its chain hash is not its head
		reportEntry(NewRecord("acme", 5), moved),       // seq 5: moved to another transcript
		reportEntry(NewRecord("acme", 6), wrongPermit), // seq 6: reports for another permit
		ev, // seq 7
		evidenceRevocation(NewRecord("acme", 8), "identity_verification", "idv_1", other, evID, evID),       // seq 8: another content address
		evidenceRevocation(NewRecord("acme", 9), "identity_verification", "idv_1", ca, evID, evID),          // seq 9: as writ writes one
		evidenceRevocation(NewRecord("acme", 10), "identity_verification", "idv_1", ca, "rec_absent", evID), // seq 10: supersedes no record
		evidenceRevocation(NewRecord("acme", 11), "identity_verification", "idv_2", ca, evID, evID),         // seq 11: another item
		evidenceRevocation(NewRecord("acme", 12), "fraud_assessment", "idv_1", ca, evID, evID),              // seq 12: another kind
	}
	// Signed items (seq 13, 14): their JWS verified with the issuer keys
	// given, or counted in a notice.
	signedItem := map[string]any{"attributes": map[string]any{}, "id": "idv_3", "issuer": "", "kind": "identity_verification",
		"observed_at": "0001-01-01T00:00:00Z", "subject_ids": []any{}, "tenant_id": "acme"}
	signedCA, err := record.CanonicalDigest(signedItem)
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range []string{"good", "forged"} {
		e := evidenceEntry(NewRecord("acme", 13+i), "identity_verification", "idv_3", signedCA)
		e.Record.Outputs["jws"], e.Record.Outputs["signed_by"] = tok, "k1"
		entries = append(entries, e)
	}
	entries[5].Record.Execution.ReportedFor = "p_other"
	if err := st.Append(ctx, entries, seal); err != nil {
		t.Fatalf("Append = %v", err)
	}
	rep, err := verify.VerifyStore(ctx, st.(verify.Store), verify.StoreOptions{Ring: ring, Rules: noRules{}, Now: baseTime.Add(time.Hour),
		EvidenceIssuers: issuerStub{signedItem}})
	if err != nil {
		t.Fatalf("VerifyStore = %v", err)
	}
	type finding struct {
		seq    int64
		kind   string
		detail string
	}
	want := []finding{
		{3, verify.FindingTranscriptBroken, "transcript session:mcp:a entry 4: seq 4 follows seq 2"},
		{4, verify.FindingTranscriptBroken, "replay.tool_transcript_chain_hash"},
		{5, verify.FindingTranscriptBroken, "transcript session:mcp:a entry 2: seq 2 follows seq 4"},
		{6, verify.FindingTranscriptBroken, "the call's permit is p6, but the record reports for p_other"},
		{8, verify.FindingEvidenceRevocationMismatch, "seals content address " + ca + "; the revocation names " + other},
		{10, verify.FindingEvidenceRevocationMismatch, "not an evidence record earlier in the tenant's chain"},
		{11, verify.FindingEvidenceRevocationMismatch, "seals item idv_1"},
		{12, verify.FindingEvidenceRevocationMismatch, "an evidence record of kind identity_verification"},
		{14, verify.FindingBadEvidenceSignature, "the JWS of identity_verification item idv_3: signed evidence refused"},
	}
	var got []finding
	for _, f := range rep.Findings {
		got = append(got, finding{f.Seq, f.Kind, f.Detail})
		if f.TenantID != "acme" || f.RecordID == "" {
			t.Errorf("VerifyStore finding %+v names no tenant or record", f)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("VerifyStore findings = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].seq != want[i].seq || got[i].kind != want[i].kind || !strings.Contains(got[i].detail, want[i].detail) {
			t.Errorf("VerifyStore finding %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, n := range rep.Notices {
		if n.Kind == verify.FindingUncheckedEvidenceSignatures {
			t.Errorf("VerifyStore with issuer keys: notice %+v", n)
		}
	}
	// Without issuer keys, the two signed items are a notice.
	rep, err = verify.VerifyStore(ctx, st.(verify.Store), verify.StoreOptions{Ring: ring, Rules: noRules{}, Now: baseTime.Add(time.Hour)})
	if err != nil {
		t.Fatalf("VerifyStore = %v", err)
	}
	if len(rep.Findings) != len(want)-1 || !slices.ContainsFunc(rep.Notices, func(n verify.Finding) bool {
		return n.Kind == verify.FindingUncheckedEvidenceSignatures && n.TenantID == "acme" && strings.Contains(n.Detail, "of 2 signed evidence items")
	}) {
		t.Errorf("VerifyStore without issuer keys: findings %+v, notices %+v; want the %d others and a notice of 2 unchecked signatures", rep.Findings, rep.Notices, len(want)-1)
	}
	// Hash-only verification reads no record's members: none of these.
	hashOnly, err := verify.VerifyStore(ctx, st.(verify.Store), verify.StoreOptions{HashOnly: true})
	if err != nil {
		t.Fatalf("VerifyStore(HashOnly) = %v", err)
	}
	if len(hashOnly.Findings) != 0 {
		t.Errorf("VerifyStore(HashOnly) findings = %+v, want none", hashOnly.Findings)
	}
}
