package bundle_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/record"
)

// trustDir holds the tamper fixtures of the trust classes (issue 33) and
// the trusted keys they are verified against; cmd/writ runs
// writ ledger verify-bundle --trusted-keys over the same files.
const trustDir = "testdata/trusted"

// TrustTamperClasses names each fixture of trustDir and the finding that
// must name it when the fixture is verified with the trusted keys.
var trustTamperClasses = []struct {
	name string
	want []string // finding kinds that must be among the findings
}{
	// (1) a tenant rewritten and re-sealed with an attacker's key, which
	// replaces the operator's in keys.json.
	{"tenant-resealed-attacker-key", []string{verify.FindingUntrustedKey, verify.FindingUnknownKey, verify.FindingBadCheckpoint}},
	// (2) an attacker's key added to keys.json with a window overlapping
	// the real key's, signing a forged record and a checkpoint over it.
	{"overlapping-attacker-key", []string{verify.FindingKeyWindowOverlap, verify.FindingUntrustedKey, verify.FindingUnknownKey}},
	// (3) a stolen retired key whose valid_until was removed, signing an
	// appended record and a checkpoint.
	{"retired-key-reopened", []string{verify.FindingKeyWindowMismatch, verify.FindingKeyOutsideWindow}},
	// (4) a record citing an approval that no approval record grants,
	// re-sealed and checkpointed with the operator's own key.
	{"approval-not-granted", []string{verify.FindingApprovalNotGranted}},
	// (5) a signature whose base64 has non-zero padding bits (one stored
	// value, two encodings), checkpoints re-signed over it.
	{"signature-padding-bits", []string{verify.FindingBadSignature}},
	// (6) a checkpoint re-signed without the revocations line an earlier
	// checkpoint had.
	{"revocations-line-dropped", []string{verify.FindingRevocationsDropped}},
}

// TestTrustTamper verifies each trust fixture with the trusted keys, as
// writ ledger verify-bundle --trusted-keys does: each is caught, by name.
// Run with -update to build the fixtures again.
func TestTrustTamper(t *testing.T) {
	if *update {
		writeTrustFixtures(t)
	}
	data, err := os.ReadFile(filepath.Join(trustDir, "trusted-keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := keyring.ParsePublished(data)
	if err != nil {
		t.Fatal(err)
	}
	// The untampered bundle is intact with the trusted keys.
	clean := verifyTrusted(t, filepath.Join(trustDir, "intact.tar.gz"), trusted)
	if !clean.Intact() || clean.KeySource != bundle.KeysTrusted {
		t.Fatalf("intact.tar.gz with the trusted keys: %+v", clean)
	}
	for _, tc := range trustTamperClasses {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(trustDir, tc.name+".tar.gz")
			rep := verifyTrusted(t, path, trusted)
			got := kinds(rep)
			for _, k := range tc.want {
				if !slices.Contains(got, k) {
					t.Errorf("Verify(%s, trusted keys) findings %v, want %s among them: %+v", path, got, k, rep.Findings)
				}
			}
			if slices.Contains(got, verify.FindingRuleViolation) && tc.name != "approval-not-granted" {
				t.Errorf("Verify(%s): rule_violation, the fixture should break only what it is about: %+v", path, rep.Findings)
			}
		})
	}
	// What the issue found: trusting keys.json, the attacker's rewrite
	// verifies intact. Only the trusted keys tell.
	b, err := bundle.OpenFile(filepath.Join(trustDir, "tenant-resealed-attacker-key.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Verify(context.Background(), bundle.VerifyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.KeySource != bundle.KeysFromBundle {
		t.Errorf("the attacker's rewrite against its own keys.json: intact %v (%s), want intact from %q: %+v", rep.Intact(), rep.KeySource, bundle.KeysFromBundle, rep.Findings)
	}
}

func verifyTrusted(t *testing.T, path string, trusted *keyring.Published) *verify.Report {
	t.Helper()
	b, err := bundle.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Verify(context.Background(), bundle.VerifyConfig{Trusted: trusted})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// writeTrustFixtures builds the refund ledger of two requests signed by
// a ring whose first key retired an hour before the requests, exports
// it, and writes each tampered copy and the ring's published keys.
func writeTrustFixtures(t *testing.T) {
	t.Helper()
	ring, err := keyring.Open(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	rnd := newSeededReader(33)
	if _, err := ring.Generate(rnd, exampleClock.Add(-48*time.Hour), "writ-old"); err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Rotate(rnd, exampleClock.Add(-time.Hour), "writ-new"); err != nil {
		t.Fatal(err)
	}
	reqs := []string{filepath.Join(refundPack, "requests", "refund-allow.json"), filepath.Join(refundPack, "requests", "refund-high-value-human-review.json")}
	st := buildRefundLedger(t, ring, newSeededReader(34), reqs)
	base := readArchive(t, export(t, st, ring.Keys()))
	const tenant = "acme"
	if len(base.lines(tenant)) != 2 {
		t.Fatalf("the fixture ledger has %d records of %s, want 2", len(base.lines(tenant)), tenant)
	}
	signer := func(at time.Time) *keyring.Signer {
		s, err := ring.Signer(at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	newKey, oldKey := signer(exampleClock), signer(exampleClock.Add(-2*time.Hour))
	attacker := seededRing(t, "writ-new-2", 0x66, exampleClock.Add(-2*time.Hour))
	attackerSigner, err := attacker.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	attackerKey := attacker.Keys()[0]

	if err := os.MkdirAll(trustDir, 0o755); err != nil {
		t.Fatal(err)
	}
	published, err := keyring.Publish("writ", ring.Keys(), exampleClock.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(trustDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("trusted-keys.json", published)
	writeGz := func(name string, a *archive) {
		// The attacker edits the unsigned bundle.json to match.
		a.setHead(t, tenant)
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(a.bytes(t))
		zw.Close()
		write(name+".tar.gz", buf.Bytes())
	}
	writeGz("intact", base)

	// (1) Every record re-sealed by the attacker, whose key alone is in
	// keys.json; the checkpoints re-signed by it.
	a := base.clone()
	a.setLines(tenant, resealFrom(t, a.lines(tenant), 0, attackerSigner, nil))
	a.reseal(t, tenant, attackerSigner)
	a.set("keys.json", keysJSON(t, []keyring.Key{attackerKey}))
	writeGz("tenant-resealed-attacker-key", a)

	// (2) The attacker's key beside the operator's, its window open two
	// hours before the requests (the real key's opened one hour before);
	// a forged record appended and a checkpoint of it, both its.
	a = base.clone()
	a.set("keys.json", keysJSON(t, append(ring.Keys(), attackerKey)))
	lines := appendForged(t, a.lines(tenant), attackerSigner, exampleClock.Add(time.Minute))
	a.setLines(tenant, lines)
	addCheckpoint(t, a, tenant, lines, attackerSigner, "")
	writeGz("overlapping-attacker-key", a)

	// (3) The retired key's valid_until removed from keys.json; a record
	// appended an hour after the requests, and a checkpoint, signed by it.
	a = base.clone()
	keys := ring.Keys()
	for i := range keys {
		if keys[i].ID == oldKey.KeyID() {
			keys[i].ValidUntil = nil
		}
	}
	a.set("keys.json", keysJSON(t, keys))
	lines = appendForged(t, a.lines(tenant), oldKey, exampleClock.Add(time.Hour))
	a.setLines(tenant, lines)
	addCheckpoint(t, a, tenant, lines, oldKey, "")
	writeGz("retired-key-reopened", a)

	// (4) The allowed record made to cite an approval that no approval
	// record grants, re-sealed with the operator's key, checkpoints too.
	a = base.clone()
	a.setLines(tenant, resealFrom(t, a.lines(tenant), 0, newKey, func(rec *writ.Record) {
		if rec.Audit.Seq != 1 { // the refund allowed
			return
		}
		rec.Approvals = append(rec.Approvals, writ.Approval{GateID: "GATE_FINANCE_APPROVAL", Approver: "mallory@acme.example",
			ApprovalModeEffective: rec.ApprovalModeEffective, EvidenceSnapshotHash: rec.Replay.EvidenceSnapshotHash, DecidedAt: rec.Timestamp.Add(-time.Minute)})
	}))
	a.reseal(t, tenant, newKey)
	writeGz("approval-not-granted", a)

	// (5) A signature's last base64 character given non-zero padding
	// bits: it decodes to the same bytes leniently. The checkpoints are
	// re-signed over the changed line.
	a = base.clone()
	lines = a.lines(tenant)
	sig := audit(t, lines[0]).Signature
	if len(sig) != 88 || sig[86:] != "==" {
		t.Fatalf("signature %q is not 64 bytes of padded base64", sig)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	alt := []byte(sig)
	// The last data character carries 2 bits of the last byte and 4
	// padding bits: flip the lowest padding bit.
	alt[85] = alphabet[strings.IndexByte(alphabet, alt[85])^1]
	lines[0] = bytes.Replace(lines[0], []byte(`"signature":"`+sig+`"`), []byte(`"signature":"`+string(alt)+`"`), 1)
	a.setLines(tenant, lines)
	a.reseal(t, tenant, newKey)
	writeGz("signature-padding-bits", a)

	// (6) A checkpoint of size 1 committing to a revocation, as the
	// operator signed it; the head's checkpoint re-signed without it.
	a = base.clone()
	addCheckpoint(t, a, tenant, a.lines(tenant)[:1], newKey,
		"writ-revocations 1 sha256:80c6eaa466c143a937198a918ccc77ecab1102608baab1aab9d3a198ca6a2cac\n")
	writeGz("revocations-line-dropped", a)
}

func keysJSON(t *testing.T, keys []keyring.Key) []byte {
	t.Helper()
	data, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// resealFrom seals lines[from:] again after lines[from-1], each changed by
// edit first (if given), signed by s: a rewrite of the chain's tail.
func resealFrom(t *testing.T, lines [][]byte, from int, s *keyring.Signer, edit func(*writ.Record)) [][]byte {
	t.Helper()
	out := slices.Clone(lines)
	prev := writ.GenesisHash
	if from > 0 {
		prev = audit(t, out[from-1]).RecordHash
	}
	for i := from; i < len(out); i++ {
		var rec writ.Record
		if err := json.Unmarshal(bytes.TrimSuffix(out[i], []byte("\n")), &rec); err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(&rec)
		}
		out[i], prev = seal(t, &rec, int64(i+1), prev, s)
	}
	return out
}

// appendForged appends a copy of the last record, as a new record at at
// signed by s.
func appendForged(t *testing.T, lines [][]byte, s *keyring.Signer, at time.Time) [][]byte {
	t.Helper()
	var rec writ.Record
	if err := json.Unmarshal(bytes.TrimSuffix(lines[len(lines)-1], []byte("\n")), &rec); err != nil {
		t.Fatal(err)
	}
	rec.RecordID, rec.DecisionID, rec.Timestamp = rec.RecordID+"_forged", rec.DecisionID+"_forged", at
	line, _ := seal(t, &rec, int64(len(lines)+1), audit(t, lines[len(lines)-1]).RecordHash, s)
	return append(slices.Clone(lines), line)
}

func seal(t *testing.T, rec *writ.Record, seq int64, prev string, s *keyring.Signer) ([]byte, string) {
	t.Helper()
	pre, err := record.Preseal(rec)
	if err != nil {
		t.Fatal(err)
	}
	sealed, hash, err := record.SealPresealed(pre, record.Seal{Seq: seq, PrevHash: prev, Sign: func(h string) (string, string, error) {
		sig, err := s.SignMessage(record.SignatureMessage(h))
		if err != nil {
			return "", "", err
		}
		return s.KeyID(), encodeSig(sig), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return append(sealed, '\n'), hash
}

// addCheckpoint adds a checkpoint of lines (the first len(lines) records)
// signed by s, with the extension lines ext.
func addCheckpoint(t *testing.T, a *archive, tenant string, lines [][]byte, s *keyring.Signer, ext string) {
	t.Helper()
	size := int64(len(lines))
	text := ledger.CheckpointText(ledger.Origin("writ", tenant), size, treeRoot(t, lines, size)) + ext
	msg, err := noteSign(text, s)
	if err != nil {
		t.Fatal(err)
	}
	a.set("tenants/"+tenant+"/checkpoints/"+itoa(size)+".note", msg)
}

func encodeSig(sig []byte) string { return base64.StdEncoding.EncodeToString(sig) }

func noteSign(text string, s note.Signer) ([]byte, error) {
	return note.Sign(&note.Note{Text: text}, s)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// setHead sets the tenant's records and head in bundle.json to its last
// record.
func (a *archive) setHead(t *testing.T, tenant string) {
	t.Helper()
	var m bundle.Meta
	if err := json.Unmarshal(a.files["bundle.json"], &m); err != nil {
		t.Fatal(err)
	}
	lines := a.lines(tenant)
	for i := range m.Tenants {
		if m.Tenants[i].TenantID == tenant {
			m.Tenants[i].Records, m.Tenants[i].Head = int64(len(lines)), audit(t, lines[len(lines)-1]).RecordHash
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	a.files["bundle.json"] = append(data, '\n')
}
