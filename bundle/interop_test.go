package bundle_test

// Interoperability: writ's Merkle trees, proofs and checkpoints checked
// with independent implementations, and its canonical JSON against the
// examples of RFC 8785.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/sqlite"
)

// proofLedger appends n records of one tenant to a fresh SQLite store, in
// batches of varying size, and returns the store and the stored bytes.
func proofLedger(t *testing.T, n int) (*sqlite.Store, [][]byte) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	var raws [][]byte
	for i, batch := 0, 1; i < n; batch = batch%5 + 1 {
		var entries []*ledger.Entry
		for j := 0; j < batch && i < n; j, i = j+1, i+1 {
			entries = append(entries, ledgertest.NewEntry(ledgertest.NewRecord("acme", i)))
		}
		if err := st.Append(ctx, entries, ledger.Seal); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			raws = append(raws, e.Raw)
		}
	}
	return st, raws
}

// independentRoots computes the root of every prefix of the leaves with
// transparency-dev/merkle's compact ranges, from the records' bytes.
func independentRoots(t *testing.T, raws [][]byte) [][]byte {
	t.Helper()
	h := rfc6962.DefaultHasher
	rf := &compact.RangeFactory{Hash: h.HashChildren}
	cr := rf.NewEmptyRange(0)
	roots := [][]byte{h.EmptyRoot()}
	for _, raw := range raws {
		if err := cr.Append(h.HashLeaf(raw), nil); err != nil {
			t.Fatal(err)
		}
		root, err := cr.GetRootHash(nil)
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, root)
	}
	return roots
}

func proofBytes(p []tlog.Hash) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

// TestInclusionProofsInterop checks every inclusion proof writ builds
// (ledger.ProveInclusion, from a SQLite store's stored hashes) with
// transparency-dev/merkle's verifier, against roots it computes itself.
func TestInclusionProofsInterop(t *testing.T) {
	ctx := context.Background()
	const n = 37
	st, raws := proofLedger(t, n)
	roots := independentRoots(t, raws)
	h := rfc6962.DefaultHasher
	for size := int64(1); size <= n; size++ {
		writRoot, err := tlog.TreeHash(size, ledger.HashReader(ctx, st, "acme"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(writRoot[:], roots[size]) {
			t.Fatalf("size %d: writ's root %x, transparency-dev's %x", size, writRoot, roots[size])
		}
		for seq := int64(1); seq <= size; seq++ {
			p, err := ledger.ProveInclusion(ctx, st, "acme", seq, size)
			if err != nil {
				t.Fatal(err)
			}
			leaf := h.HashLeaf(raws[seq-1])
			if !bytes.Equal(p.LeafHash[:], leaf) || ledger.LeafHash(raws[seq-1]) != p.LeafHash {
				t.Fatalf("seq %d: leaf hash %x, want SHA-256(0x00 || record) %x", seq, p.LeafHash, leaf)
			}
			if err := proof.VerifyInclusion(h, uint64(seq-1), uint64(size), leaf, proofBytes(p.Proof), roots[size]); err != nil {
				t.Fatalf("inclusion of %d in %d: %v", seq, size, err)
			}
			// The proof is bound to its leaf.
			other := h.HashLeaf(append(bytes.Clone(raws[seq-1]), ' '))
			if proof.VerifyInclusion(h, uint64(seq-1), uint64(size), other, proofBytes(p.Proof), roots[size]) == nil {
				t.Fatalf("inclusion of %d in %d verified for another leaf", seq, size)
			}
		}
	}
}

// TestConsistencyProofsInterop checks every consistency proof writ builds
// with transparency-dev/merkle's verifier.
func TestConsistencyProofsInterop(t *testing.T) {
	ctx := context.Background()
	const n = 37
	st, raws := proofLedger(t, n)
	roots := independentRoots(t, raws)
	h := rfc6962.DefaultHasher
	for size := int64(1); size <= n; size++ {
		for old := int64(1); old <= size; old++ {
			p, err := ledger.ProveConsistency(ctx, st, "acme", old, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(h, uint64(old), uint64(size), proofBytes(p), roots[old], roots[size]); err != nil {
				t.Fatalf("consistency %d → %d: %v", old, size, err)
			}
			if old < size {
				bad := bytes.Clone(roots[old])
				bad[0] ^= 1
				if proof.VerifyConsistency(h, uint64(old), uint64(size), proofBytes(p), bad, roots[size]) == nil {
					t.Fatalf("consistency %d → %d verified from another root", old, size)
				}
			}
		}
	}
}

// TestCheckpointInterop checks a checkpoint writ signs with sumdb/note
// and, byte by byte, with nothing but crypto/ed25519 as
// docs/ledger-format.md describes it.
func TestCheckpointInterop(t *testing.T) {
	ctx := context.Background()
	st, raws := proofLedger(t, 5)
	ring := seededRing(t, "writ-interop", 0x11, exampleClock)
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ledger.IssueCheckpoint(ctx, st, signer, "writ", "acme", exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	key := ring.Keys()[0]
	v, err := note.NewVerifier(key.VerifierKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(cp.Note, note.VerifierList(v))
	if err != nil {
		t.Fatal(err)
	}
	root := independentRoots(t, raws)[5]
	wantText := "writ/acme\n5\n" + base64.StdEncoding.EncodeToString(root) + "\n"
	if n.Text != wantText {
		t.Fatalf("note text %q, want %q", n.Text, wantText)
	}

	// By hand: the verifier key is name+hash+base64(0x01 || public key);
	// the key hash is the first 4 bytes of SHA-256(name || "\n" || 0x01 ||
	// public key); the note is text, a blank line, and one line
	// "— name base64(key hash || Ed25519 signature of text)" per signature.
	parts := strings.Split(key.VerifierKey, "+")
	if len(parts) != 3 {
		t.Fatalf("verifier key %q", key.VerifierKey)
	}
	keyData, _ := base64.StdEncoding.DecodeString(parts[2])
	if len(keyData) != 33 || keyData[0] != 0x01 {
		t.Fatalf("verifier key data %x is not 0x01 and 32 bytes", keyData)
	}
	sum := sha256.Sum256(append([]byte(parts[0]+"\n"), keyData...))
	if hex.EncodeToString(sum[:4]) != parts[1] || key.ID != parts[0]+"+"+parts[1] {
		t.Fatalf("key hash %x, verifier key says %s, key id %s", sum[:4], parts[1], key.ID)
	}
	text, sigs, ok := strings.Cut(string(cp.Note), "\n\n")
	if !ok || text+"\n" != wantText {
		t.Fatalf("note %q does not start with its text and a blank line", cp.Note)
	}
	line, ok := strings.CutPrefix(strings.TrimSuffix(sigs, "\n"), "\u2014 "+parts[0]+" ")
	if !ok || strings.Contains(line, "\n") {
		t.Fatalf("signature lines %q", sigs)
	}
	sig, err := base64.StdEncoding.DecodeString(line)
	if err != nil || len(sig) != 4+ed25519.SignatureSize {
		t.Fatalf("signature %q", line)
	}
	if !bytes.Equal(sig[:4], sum[:4]) || binary.BigEndian.Uint32(sig[:4]) != v.KeyHash() {
		t.Fatalf("signature key hash %x, want %x", sig[:4], sum[:4])
	}
	if !ed25519.Verify(ed25519.PublicKey(keyData[1:]), []byte(wantText), sig[4:]) {
		t.Fatal("the checkpoint signature does not verify with crypto/ed25519")
	}
}

// TestRecordSignatureInterop checks a sealed record's hash and signature
// with nothing but crypto/sha256 and crypto/ed25519, as
// docs/ledger-format.md describes them.
func TestRecordSignatureInterop(t *testing.T) {
	ring := seededRing(t, "writ-interop", 0x11, exampleClock)
	rec := ledgertest.NewRecord("acme", 1)
	rec.Timestamp = exampleClock
	e := &ledger.Entry{Record: rec}
	raw, err := ledger.NewSeal(keySource(ring))(ledger.Head{}, e)
	if err != nil {
		t.Fatal(err)
	}
	// The hash input is the canonical record with only prev_hash and seq
	// in its audit block: recanonicalize from scratch to get it.
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	a := m["audit"].(map[string]any)
	sig, _ := base64.StdEncoding.DecodeString(a["signature"].(string))
	hash, keyID := a["record_hash"].(string), a["signed_by"].(string)
	delete(a, "record_hash")
	delete(a, "signature")
	delete(a, "signed_by")
	if a["prev_hash"] != writ.GenesisHash || a["seq"] != 1.0 {
		t.Fatalf("first record's audit %v", a)
	}
	in, err := record.Canonical(m)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(in)
	if want := "sha256:" + hex.EncodeToString(sum[:]); hash != want {
		t.Fatalf("record_hash %s, want %s", hash, want)
	}
	// The stored bytes are canonical too.
	if again, _ := record.Canonical(json.RawMessage(raw)); !bytes.Equal(again, raw) {
		t.Fatalf("stored bytes are not canonical:\n%s\n%s", raw, again)
	}
	key := ring.Keys()[0]
	if keyID != key.ID {
		t.Fatalf("signed_by %s, want %s", keyID, key.ID)
	}
	pub, _ := base64.StdEncoding.DecodeString(strings.Split(key.VerifierKey, "+")[2])
	msg := []byte("writ-record-signature-v1\n" + hash + "\n")
	if !ed25519.Verify(ed25519.PublicKey(pub[1:]), msg, sig) {
		t.Fatal("the record signature does not verify with crypto/ed25519")
	}
}

// TestRFC8785 checks record.Canonical, which every record hash rests on,
// against the examples of RFC 8785 (the expected bytes typed from the
// RFC's text) and further cases.
func TestRFC8785(t *testing.T) {
	canon := func(t *testing.T, in string) string {
		t.Helper()
		out, err := record.Canonical(json.RawMessage(in))
		if err != nil {
			t.Fatalf("Canonical(%s): %v", in, err)
		}
		return string(out)
	}

	// Appendix B: IEEE-754 doubles and their JSON numbers.
	t.Run("appendix B numbers", func(t *testing.T) {
		for _, c := range []struct{ bits, want string }{
			{"0000000000000000", "0"},
			{"8000000000000000", "0"}, // minus zero
			{"0000000000000001", "5e-324"},
			{"8000000000000001", "-5e-324"},
			{"7fefffffffffffff", "1.7976931348623157e+308"},
			{"ffefffffffffffff", "-1.7976931348623157e+308"},
			{"4340000000000000", "9007199254740992"},
			{"c340000000000000", "-9007199254740992"},
			{"4430000000000000", "295147905179352830000"},
			{"44b52d02c7e14af5", "9.999999999999997e+22"},
			{"44b52d02c7e14af6", "1e+23"},
			{"44b52d02c7e14af7", "1.0000000000000001e+23"},
			{"444b1ae4d6e2ef4e", "999999999999999700000"},
			{"444b1ae4d6e2ef4f", "999999999999999900000"},
			{"444b1ae4d6e2ef50", "1e+21"},
			{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
			{"3eb0c6f7a0b5ed8d", "0.000001"},
			{"41b3de4355555553", "333333333.3333332"},
			{"41b3de4355555554", "333333333.33333325"},
			{"41b3de4355555555", "333333333.3333333"},
			{"41b3de4355555556", "333333333.3333334"},
			{"41b3de4355555557", "333333333.33333343"},
			{"becbf647612f3696", "-0.0000033333333333333333"},
			{"43143ff3c1cb0959", "1424953923781206.2"},
		} {
			u, err := strconv.ParseUint(c.bits, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			f := math.Float64frombits(u)
			// The number written with more digits than it needs, so the
			// output cannot simply echo the input.
			in := strconv.FormatFloat(f, 'e', 24, 64)
			if math.Signbit(f) && f == 0 {
				in = "-0.000e0"
			}
			if got := canon(t, "["+in+"]"); got != "["+c.want+"]" {
				t.Errorf("%s (%s): %s, want [%s]", c.bits, in, got, c.want)
			}
			// And from a Go value, as records are canonicalized.
			got, err := record.Canonical(map[string]any{"n": f})
			if err != nil || string(got) != `{"n":`+c.want+`}` {
				t.Errorf("%s as a float64: %s %v, want %s", c.bits, got, err, c.want)
			}
		}
		// NaN and Infinity (7fffffffffffffff, 7ff0000000000000) are not JSON.
		for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			if _, err := record.Canonical(map[string]any{"n": f}); err == nil {
				t.Errorf("%v canonicalized", f)
			}
		}
	})

	// Section 3.2.2: the sample with literals, numbers and string escapes.
	t.Run("section 3.2.2 sample", func(t *testing.T) {
		in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
		want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
		if got := canon(t, in); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})

	// Section 3.2.3: properties sorted by their UTF-16 code units, so the
	// emoji (U+1F600, D83D DE00) sorts before U+FB33.
	t.Run("section 3.2.3 sorting", func(t *testing.T) {
		in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
		want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
			"\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
		if got := canon(t, in); got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})

	// Section 3.2.4: UTF-8 output, without Unicode normalization.
	t.Run("section 3.2.4 UTF-8", func(t *testing.T) {
		got := canon(t, `{
  "Unnormalized Unicode":"A\u030a"
}`)
		want := "7b 22 55 6e 6e 6f 72 6d 61 6c 69 7a 65 64 20 55 6e 69 63 6f 64 65 22 3a 22 41 cc 8a 22 7d"
		if h := spacedHex([]byte(got)); h != want {
			t.Errorf("got  %s\nwant %s", h, want)
		}
	})

	t.Run("own cases", func(t *testing.T) {
		for _, c := range []struct{ in, want string }{
			// Whitespace goes; nested objects sort at every level; arrays keep order.
			{" { \"b\" : [ 3 , 1 , { \"z\" : 1 , \"a\" : 2 } ] , \"a\" : { } } ", `{"a":{},"b":[3,1,{"a":2,"z":1}]}`},
			// Short escapes for \b \f \n \r \t, \u00xx (lowercase) for other controls.
			{`"\b\f\n\r\t\u0000\u001F\u000B"`, `"\b\f\n\r\t\u0000\u001f\u000b"`},
			// '/', DEL, HTML characters, U+2028/U+2029 and non-ASCII go out as they are.
			{`"\/\u007f<>&\u2028\u2029\u00e9\ud83d\ude00"`, "\"/\u007f<>&\u2028\u2029\u00e9\U0001F600\""},
			// Only '"' and '\' are escaped among printable ASCII.
			{`"\"\\'"`, `"\"\\'"`},
			// Integers and exponents in ECMAScript form.
			{`[1.0,-0.0,10,1e1,1E+2,0.1e1,123e-2,100000000000000000000,1e-7,0.0000001,5e-7,1.5e300]`, `[1,0,10,10,100,1,1.23,100000000000000000000,1e-7,1e-7,5e-7,1.5e+300]`},
			// Beyond 2^53 integers are doubles too.
			{`[9007199254740993,18446744073709551615]`, `[9007199254740992,18446744073709552000]`},
			// Sorting compares UTF-16 code units, not UTF-8 bytes or code
			// points: U+1F600 (D83D DE00) sorts before U+FF61, and
			// "e" + U+0301 before U+00E9 (no normalization).
			{`{"\uff61":1,"\ud83d\ude00":2,"\u00e9":3,"e\u0301":4}`, "{\"e\u0301\":4,\"\u00e9\":3,\"\U0001F600\":2,\"\uff61\":1}"},
			// Keys that are prefixes of each other.
			{`{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
			{`[true,false,null,[],{}]`, `[true,false,null,[],{}]`},
		} {
			if got := canon(t, c.in); got != c.want {
				t.Errorf("Canonical(%s)\n got  %q\n want %q", c.in, got, c.want)
			}
		}
		// What I-JSON forbids is an error, not a guess.
		for _, in := range []string{`{"a":1,"a":2}`, `"\ud800"`, `"\udc00x"`, `1e400`, `-1e400`} {
			if out, err := record.Canonical(json.RawMessage(in)); err == nil {
				t.Errorf("Canonical(%s) = %s, want an error", in, out)
			}
		}
	})

	// A record: canonicalizing it is what Preseal does, and sealing it
	// only splices the audit block, so the stored bytes stay canonical.
	t.Run("records", func(t *testing.T) {
		rec := ledgertest.NewRecord("acme", 3)
		rec.Outputs = map[string]any{"amount": 12.50, "note": "rembours\u00e9 <ok>", "big": 1e21, "small": 1e-7}
		pre, err := record.Preseal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(pre), `"outputs":{"amount":12.5,"big":1e+21,"note":"remboursé <ok>","small":1e-7}`) {
			t.Errorf("outputs not canonical in %s", pre)
		}
		sealed, _, err := record.SealPresealed(pre, record.Seal{Seq: 1, PrevHash: writ.GenesisHash})
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := record.Canonical(json.RawMessage(sealed)); !bytes.Equal(again, sealed) {
			t.Errorf("sealed bytes are not canonical")
		}
	})
}

func spacedHex(b []byte) string {
	var s []string
	for _, c := range b {
		s = append(s, hex.EncodeToString([]byte{c}))
	}
	return strings.Join(s, " ")
}
