package bundle_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/writhq/writ"
	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/delegation"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/sqlite"
)

// evidenceFixture is a bundle of a refund ledger with evidence records: an
// item an issuer key submitted, an item an issuer signed (JWS) and carried
// in, a revocation of the first, and a refund check citing the signed
// item. It is deterministic (seeded keys, seeded random, a fixed clock);
// `go test ./bundle -run TestEvidenceFixture -update` regenerates it.
const evidenceFixture = "testdata/evidence.tar.gz"

// buildEvidenceBundle builds evidenceFixture's bundle.
func buildEvidenceBundle(t *testing.T) []byte {
	t.Helper()
	ctx := context.Background()
	ring := seededRing(t, "writ-fixture", 0x42, exampleClock.Add(-time.Hour))
	p, err := pack.Load(refundPack)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The IDV issuer's key, from a fixed seed: Ed25519 signatures are
	// deterministic, so the JWS is the same each time.
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x51}, ed25519.SeedSize))
	sk, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := jwk.Import(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []jwk.Key{sk, pk} {
		k.Set(jwk.KeyIDKey, "idv-1")
		k.Set(jwk.AlgorithmKey, jwa.EdDSA())
	}
	set := jwk.NewSet()
	set.AddKey(pk)
	eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bindingKey, Keys: keySource(ring), Random: newSeededReader(5),
		Now: func() time.Time { return exampleClock }, Logger: slog.New(slog.DiscardHandler),
		EvidenceIssuers: delegation.EvidenceIssuers{"acme": {{Issuer: "idv.acme.example", Keys: set}}}})
	if err != nil {
		t.Fatal(err)
	}
	idv := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example",
		Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	observed := exampleClock.Add(-20 * time.Minute)
	submitted, err := eng.AddEvidence(idv, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: "idv_771",
		SubjectIDs: []string{"customer:cus_77"}, Attributes: map[string]any{"method": "otp"}, ObservedAt: &observed})
	if err != nil {
		t.Fatal(err)
	}
	item := writ.EvidenceItem{TenantID: "acme", Kind: "identity_verification", ID: "idv_772", SubjectIDs: []string{"customer:cus_77"},
		Attributes: map[string]any{"method": "document"}, ObservedAt: observed, Issuer: "idv.acme.example"}
	canon, err := record.Canonical(&item)
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	hdr.Set(jws.KeyIDKey, "idv-1")
	tok, err := jws.Sign(canon, jws.WithKey(jwa.EdDSA(), sk, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := eng.AddEvidence(ctx, &writ.AddEvidenceRequest{TenantID: "acme", JWS: string(tok)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.RevokeEvidence(idv, &writ.RevokeEvidenceRequest{TenantID: "acme", ID: submitted.Item.ID, Reason: "the one-time code was phished"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(refundPack + "/requests/refund-allow.json")
	if err != nil {
		t.Fatal(err)
	}
	var req writ.CheckRequest
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	req.Evidence = append([]writ.Evidence{{Kind: "identity_verification", ID: signed.ContentAddress}},
		slices.DeleteFunc(req.Evidence, func(e writ.Evidence) bool { return e.Kind == "identity_verification" })...)
	rc, err := eng.Check(ctx, &req)
	if err != nil {
		t.Fatal(err)
	}
	if !rc.SafeToExecute {
		t.Fatalf("the refund citing the signed item: %s %+v, want allowed", rc.Outcome, rc.Reasons)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return export(t, st, ring.Keys())
}

// evidenceLine returns the index of the tenant's record line whose
// decision key has prefix and whose bytes contain marker.
func evidenceLine(t *testing.T, lines [][]byte, prefix, marker string) int {
	t.Helper()
	for i, l := range lines {
		var h struct {
			DecisionKey string `json:"decision_key"`
		}
		if err := json.Unmarshal(l, &h); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.DecisionKey, prefix) && bytes.Contains(l, []byte(marker)) {
			return i
		}
	}
	t.Fatalf("no %s… record holding %q", prefix, marker)
	return -1
}

// rechain re-seals lines[from:] after the tampering of lines[from]: each
// record re-hashed on the chain at its line's seq and re-signed with s,
// as an attacker holding the signing key could. What is left to catch the
// change is then the record rules and what records cite.
func rechain(t *testing.T, lines [][]byte, from int, s *keyring.Signer) {
	t.Helper()
	prev := writ.GenesisHash
	if from > 0 {
		prev = audit(t, lines[from-1]).RecordHash
	}
	for i := from; i < len(lines); i++ {
		raw := bytes.TrimSuffix(lines[i], []byte("\n"))
		start := bytes.Index(raw, []byte(`"audit":{"prev_hash":"`))
		end := start + bytes.IndexByte(raw[start:], '}') + 1
		pre := slices.Concat(raw[:start], []byte(`"audit":{"prev_hash":"","seq":0}`), raw[end:])
		sealed, hash, err := record.SealPresealed(pre, record.Seal{Seq: int64(i + 1), PrevHash: prev, Sign: func(h string) (string, string, error) {
			sig, err := s.SignMessage(record.SignatureMessage(h))
			return s.KeyID(), base64.StdEncoding.EncodeToString(sig), err
		}})
		if err != nil {
			t.Fatal(err)
		}
		lines[i], prev = sealed, hash
	}
}

// setHead sets the tenant's head in bundle.json, as an attacker who
// re-sealed the chain would.
func setHead(t *testing.T, a *archive, tenant, head string) {
	t.Helper()
	var meta map[string]any
	if err := json.Unmarshal(a.files[bundle.MetaFile], &meta); err != nil {
		t.Fatal(err)
	}
	for _, x := range meta["tenants"].([]any) {
		if tm := x.(map[string]any); tm["tenant_id"] == tenant {
			tm["head"] = head
		}
	}
	a.files[bundle.MetaFile], _ = json.Marshal(meta)
}

// TestEvidenceFixture: the checked-in bundle with evidence records (an
// item an issuer key submitted, an issuer-signed item, a revocation)
// verifies intact, and one byte changed in any of the three is caught
// with the finding docs/ledger-format.md gives: hash_mismatch for the
// bytes, and, where an attacker holding the signing key re-seals the
// chain and the checkpoints, a rule_violation of the evidence rule.
func TestEvidenceFixture(t *testing.T) {
	if *update {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(buildEvidenceBundle(t))
		zw.Close()
		if err := os.WriteFile(evidenceFixture, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bundle.OpenFile(evidenceFixture)
	if err != nil {
		t.Fatal(err)
	}
	rep := verifyBundle(t, b)
	b.Close()
	if !rep.Intact() {
		t.Fatalf("%s: findings %+v, want none", evidenceFixture, rep.Findings)
	}
	if rep.Records != 4 {
		t.Errorf("%s: %d records, want 4 (two items, a revocation, a refund)", evidenceFixture, rep.Records)
	}
	f, err := os.Open(evidenceFixture)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if _, err := plain.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	f.Close()
	base := readArchive(t, plain.Bytes())
	ring := seededRing(t, "writ-fixture", 0x42, exampleClock.Add(-time.Hour))
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}

	// flip changes one byte of the line at i: the first byte after marker.
	flip := func(lines [][]byte, i int, marker string) {
		t.Helper()
		j := bytes.Index(lines[i], []byte(marker))
		if j < 0 {
			t.Fatalf("line %d holds no %q", i, marker)
		}
		lines[i][j+len(marker)] ^= 0x01
	}
	const (
		submitted = `"id":"idv_771"`
		signedJWS = `"jws":"`
		revoked   = `"reason":"`
	)
	cases := []struct {
		name     string
		prefix   string // the tampered record's decision key prefix
		marker   string // what identifies it
		at       string // the byte after this changes
		resealed bool   // the chain and checkpoints re-sealed with the signing key
		want     []string
	}{
		{"a byte of the submitted item", ledger.EvidenceKeyPrefix, submitted, `"method":"`, false,
			[]string{verify.FindingHashMismatch, verify.FindingRootMismatch, verify.FindingRuleViolation, verify.FindingUncovered}},
		{"a byte of the signed item's jws", ledger.EvidenceKeyPrefix, signedJWS, signedJWS, false,
			[]string{verify.FindingHashMismatch, verify.FindingRootMismatch, verify.FindingRuleViolation, verify.FindingUncovered}},
		{"a byte of the revocation's reason", ledger.EvidenceRevocationKeyPrefix, revoked, revoked, false,
			[]string{verify.FindingHashMismatch, verify.FindingRootMismatch, verify.FindingUncovered}},
		{"the submitted item changed, the chain re-sealed", ledger.EvidenceKeyPrefix, submitted, `"method":"`, true,
			[]string{verify.FindingRuleViolation}},
		{"the signed item changed, the chain re-sealed", ledger.EvidenceKeyPrefix, signedJWS, `"method":"`, true,
			[]string{verify.FindingRuleViolation}},
		{"the signed item's jws payload changed, the chain re-sealed", ledger.EvidenceKeyPrefix, signedJWS, signedJWS + "eyJhbGciOiJFZERTQSIsImtpZCI6Imlkdi0xIn0.", true,
			[]string{verify.FindingRuleViolation}},
		{"the revocation's item id changed, the chain re-sealed", ledger.EvidenceRevocationKeyPrefix, revoked, `"revokes":"`, true,
			[]string{verify.FindingEvidenceRevocationMismatch, verify.FindingRuleViolation}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base.clone()
			lines := a.lines("acme")
			i := evidenceLine(t, lines, c.prefix, c.marker)
			flip(lines, i, c.at)
			if c.resealed {
				rechain(t, lines, i, signer)
				setHead(t, a, "acme", audit(t, lines[len(lines)-1]).RecordHash)
			}
			a.setLines("acme", lines)
			if c.resealed {
				a.reseal(t, "acme", signer)
			}
			rep := verifyBundle(t, openBytes(t, a.bytes(t)))
			if got := kinds(rep); !slices.Equal(got, c.want) {
				t.Errorf("findings %v, want %v:", got, c.want)
				for _, f := range rep.Findings {
					t.Logf("  %s seq %d: %s", f.Kind, f.Seq, f.Detail)
				}
			}
			for _, f := range rep.Findings {
				if f.Kind == verify.FindingRuleViolation && !strings.Contains(f.Detail, "evidence") {
					t.Errorf("rule_violation %q, want the evidence rule named", f.Detail)
				}
			}
		})
	}
}

// TestEvidenceRevocationCrossCheck: a revocation record whose item,
// content address or superseded record does not match the evidence
// record it supersedes, consistently within itself (so the record rules
// pass) and with the chain and checkpoints re-sealed and re-signed, is
// caught as evidence_revocation_mismatch, and only as that.
func TestEvidenceRevocationCrossCheck(t *testing.T) {
	base := readFixture(t, evidenceFixture)
	ring := seededRing(t, "writ-fixture", 0x42, exampleClock.Add(-time.Hour))
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	type evRecord struct {
		RecordID string         `json:"record_id"`
		Outputs  map[string]any `json:"outputs"`
	}
	read := func(t *testing.T, line []byte) evRecord {
		t.Helper()
		var r evRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// replace replaces every old in line i with repl, at least once.
	replace := func(t *testing.T, lines [][]byte, i int, old, repl string) {
		t.Helper()
		if !bytes.Contains(lines[i], []byte(old)) {
			t.Fatalf("line %d holds no %q", i, old)
		}
		lines[i] = bytes.ReplaceAll(lines[i], []byte(old), []byte(repl))
	}
	cases := []struct {
		name string
		// edit changes the revocation's line rev; revoked and other are
		// the lines of the revoked item's evidence record and of the
		// signed item's.
		edit   func(t *testing.T, lines [][]byte, rev, revoked, other int)
		want   []string
		detail string
	}{
		{"nothing changed, the chain re-sealed", func(t *testing.T, lines [][]byte, rev, revoked, other int) {}, nil, ""},
		{"the revocation cites another content address", func(t *testing.T, lines [][]byte, rev, revoked, other int) {
			// Every place the revocation states the address (outputs,
			// evidence_refs, replay): the record itself stays consistent.
			replace(t, lines, rev, read(t, lines[revoked]).Outputs["content_address"].(string), read(t, lines[other]).Outputs["content_address"].(string))
		}, []string{verify.FindingEvidenceRevocationMismatch}, "seals content address"},
		{"the revocation supersedes another item's record", func(t *testing.T, lines [][]byte, rev, revoked, other int) {
			from, to := read(t, lines[revoked]).RecordID, read(t, lines[other]).RecordID
			replace(t, lines, rev, `"supersedes":"`+from+`"`, `"supersedes":"`+to+`"`)
			replace(t, lines, rev, `"record:`+from+`"`, `"record:`+to+`"`)
		}, []string{verify.FindingEvidenceRevocationMismatch}, "seals item idv_772"},
		{"the revocation supersedes a record the bundle does not hold", func(t *testing.T, lines [][]byte, rev, revoked, other int) {
			from := read(t, lines[revoked]).RecordID
			to := from[:len(from)-1] + "z"
			replace(t, lines, rev, `"supersedes":"`+from+`"`, `"supersedes":"`+to+`"`)
			replace(t, lines, rev, `"record:`+from+`"`, `"record:`+to+`"`)
		}, []string{verify.FindingEvidenceRevocationMismatch}, "not an evidence record earlier in the tenant's chain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base.clone()
			lines := a.lines("acme")
			rev := evidenceLine(t, lines, ledger.EvidenceRevocationKeyPrefix, `"reason":"`)
			revoked := evidenceLine(t, lines, ledger.EvidenceKeyPrefix, `"id":"idv_771"`)
			other := evidenceLine(t, lines, ledger.EvidenceKeyPrefix, `"id":"idv_772"`)
			c.edit(t, lines, rev, revoked, other)
			wantOnly(t, resealed(t, a, "acme", lines, rev, signer), c.want, c.detail)
		})
	}
}

// idvIssuers returns the evidence issuers of tenant acme with the IDV
// issuer's public key made from seed (0x51 is the fixture's), as an
// auditor's issuers file would give them.
func idvIssuers(t *testing.T, seed byte) delegation.EvidenceIssuers {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	pk, err := jwk.Import(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	pk.Set(jwk.KeyIDKey, "idv-1")
	pk.Set(jwk.AlgorithmKey, jwa.EdDSA())
	set := jwk.NewSet()
	set.AddKey(pk)
	return delegation.EvidenceIssuers{"acme": {{Issuer: "idv.acme.example", Keys: set}}}
}

// TestEvidenceSignatures: verify-bundle given the issuer keys
// (bundle.VerifyConfig.EvidenceIssuers, --evidence-issuers) verifies each
// signed item's JWS: the fixture is intact with the IDV issuer's key, and
// a signature changed (payload and kid kept, so the evidence rule passes,
// the chain and checkpoints re-sealed) or checked against another key of
// the same kid is bad_evidence_signature. Without the keys, signatures are
// not checked and a notice says so.
func TestEvidenceSignatures(t *testing.T) {
	base := readFixture(t, evidenceFixture)
	ring := seededRing(t, "writ-fixture", 0x42, exampleClock.Add(-time.Hour))
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	published, err := keyring.Publish("writ", ring.Keys(), exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := keyring.ParsePublished(published)
	if err != nil {
		t.Fatal(err)
	}
	// forgeSignature changes the signed item's JWS signature (its third
	// part) and re-seals the chain.
	forgeSignature := func(t *testing.T) *archive {
		a := base.clone()
		lines := a.lines("acme")
		i := evidenceLine(t, lines, ledger.EvidenceKeyPrefix, `"jws":"`)
		j := bytes.Index(lines[i], []byte(`"jws":"`)) + len(`"jws":"`)
		end := j + bytes.IndexByte(lines[i][j:], '"')
		dot := j + bytes.LastIndexByte(lines[i][j:end], '.') + 1
		// The first character of the signature, to another base64url one.
		if lines[i][dot] == 'A' {
			lines[i][dot] = 'B'
		} else {
			lines[i][dot] = 'A'
		}
		rechain(t, lines, i, signer)
		setHead(t, a, "acme", audit(t, lines[len(lines)-1]).RecordHash)
		a.setLines("acme", lines)
		a.reseal(t, "acme", signer)
		return a
	}
	cases := []struct {
		name    string
		bundle  func(t *testing.T) *archive
		issuers delegation.EvidenceIssuers
		want    []string // finding kinds
		notice  bool     // unchecked_evidence_signatures
	}{
		{"the fixture, with the issuer's key", func(*testing.T) *archive { return base }, idvIssuers(t, 0x51), nil, false},
		{"the fixture, without issuer keys", func(*testing.T) *archive { return base }, nil, nil, true},
		{"the fixture, with another key of the same kid", func(*testing.T) *archive { return base }, idvIssuers(t, 0x52), []string{verify.FindingBadEvidenceSignature}, false},
		{"the fixture, with no key of the tenant", func(*testing.T) *archive { return base }, delegation.EvidenceIssuers{}, []string{verify.FindingBadEvidenceSignature}, false},
		{"a signature changed, re-sealed, with the issuer's key", forgeSignature, idvIssuers(t, 0x51), []string{verify.FindingBadEvidenceSignature}, false},
		{"a signature changed, re-sealed, without issuer keys", forgeSignature, nil, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := openBytes(t, c.bundle(t).bytes(t))
			defer b.Close()
			cfg := bundle.VerifyConfig{Trusted: trusted}
			if c.issuers != nil {
				cfg.EvidenceIssuers = c.issuers
			}
			rep, err := b.Verify(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(rep); !slices.Equal(got, c.want) {
				t.Errorf("Verify(%s) findings %v, want %v:", c.name, got, c.want)
				for _, f := range rep.Findings {
					t.Logf("  %s seq %d: %s", f.Kind, f.Seq, f.Detail)
				}
			}
			notice := slices.ContainsFunc(rep.Notices, func(f verify.Finding) bool {
				return f.Kind == verify.FindingUncheckedEvidenceSignatures && strings.Contains(f.Detail, "1 signed evidence items")
			})
			if notice != c.notice {
				t.Errorf("Verify(%s) notices %+v, want an unchecked_evidence_signatures notice: %v", c.name, rep.Notices, c.notice)
			}
		})
	}
}
