package keyring

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// The record verifier must accept exactly the signatures crypto/ed25519
// accepts: "verified" must not change meaning with the library. These
// tests feed both the same inputs, valid and malformed, and compare.

// sameDecision fails t unless ed25519.Verify and the record verifier of
// pub decide alike on sig over msg, and returns that decision.
func sameDecision(t *testing.T, what string, pub ed25519.PublicKey, msg, sig []byte) bool {
	t.Helper()
	want := ed25519.Verify(pub, msg, sig)
	if got := newRecordVerifierOf(pub).verify(msg, sig); got != want {
		t.Errorf("%s: recordVerifier(%x).verify(%x, %x) = %v, ed25519.Verify = %v", what, pub, msg, sig, got, want)
	}
	return want
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecordVerifierRFC8032(t *testing.T) {
	// RFC 8032, section 7.1, tests 1 to 3.
	for i, tc := range []struct{ pub, msg, sig string }{
		{"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
	} {
		pub, msg, sig := unhex(t, tc.pub), unhex(t, tc.msg), unhex(t, tc.sig)
		if !sameDecision(t, fmt.Sprintf("RFC 8032 test %d", i+1), pub, msg, sig) {
			t.Errorf("RFC 8032 test %d does not verify", i+1)
		}
		// Every one-bit change of the signature, the message or the key.
		for bit := range 8 * len(sig) {
			bad := append([]byte(nil), sig...)
			bad[bit/8] ^= 1 << (bit % 8)
			sameDecision(t, fmt.Sprintf("RFC 8032 test %d, signature bit %d", i+1, bit), pub, msg, bad)
		}
		for bit := range 8 * len(msg) {
			bad := append([]byte(nil), msg...)
			bad[bit/8] ^= 1 << (bit % 8)
			sameDecision(t, fmt.Sprintf("RFC 8032 test %d, message bit %d", i+1, bit), pub, bad, sig)
		}
		for bit := range 8 * len(pub) {
			bad := append([]byte(nil), pub...)
			bad[bit/8] ^= 1 << (bit % 8)
			sameDecision(t, fmt.Sprintf("RFC 8032 test %d, key bit %d", i+1, bit), bad, msg, sig)
		}
	}
}

// groupOrder is L, the order of the prime-order subgroup, little-endian.
const groupOrder = "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"

// smallOrder are encodings of points of order 1, 2, 4 and 8, canonical
// and not (y at or above p, and x = 0 with its sign bit set).
var smallOrder = []string{
	"0100000000000000000000000000000000000000000000000000000000000000",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0000000000000000000000000000000000000000000000000000000000000080",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
	"0100000000000000000000000000000000000000000000000000000000000080",
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
}

func TestRecordVerifierEdgeCases(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("writ record signature edge cases")
	sig := ed25519.Sign(priv, msg)
	if !sameDecision(t, "valid", pub, msg, sig) {
		t.Fatal("a fresh signature does not verify")
	}

	t.Run("lengths", func(t *testing.T) {
		for _, n := range []int{0, 1, 63, 65, 128} {
			bad := make([]byte, n)
			copy(bad, sig)
			if sameDecision(t, fmt.Sprintf("signature of %d bytes", n), pub, msg, bad) {
				t.Errorf("a signature of %d bytes verifies", n)
			}
		}
		// ed25519.Verify panics on a key of another length; a note
		// verifier key never holds one, and the record verifier rejects it.
		for _, n := range []int{0, 31, 33, 64} {
			bad := make([]byte, n)
			copy(bad, pub)
			if newRecordVerifierOf(bad).verify(msg, sig) {
				t.Errorf("recordVerifier of a %d-byte key accepts a signature", n)
			}
		}
	})

	t.Run("non-canonical S", func(t *testing.T) {
		// S+L, S+2L... encode the same scalar mod L; S >= L is refused.
		var s, l scalarInt
		s.set(sig[32:])
		l.set(unhex(t, groupOrder))
		for k := 1; ; k++ {
			if !s.add(&l) {
				break
			}
			bad := append(append([]byte(nil), sig[:32]...), s.bytes()...)
			if sameDecision(t, fmt.Sprintf("S + %d·L", k), pub, msg, bad) {
				t.Errorf("S + %d·L verifies", k)
			}
		}
		for _, s := range []string{groupOrder, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
			"0000000000000000000000000000000000000000000000000000000000000080"} {
			bad := append(append([]byte(nil), sig[:32]...), unhex(t, s)...)
			sameDecision(t, "S = "+s, pub, msg, bad)
		}
	})

	t.Run("small-order and non-canonical A and R", func(t *testing.T) {
		// With A and R of small order and S = 0, the equation holds for
		// some messages: ed25519.Verify accepts those, so must we.
		accepted := 0
		for _, a := range smallOrder {
			for _, r := range smallOrder {
				for _, s := range []string{
					"0000000000000000000000000000000000000000000000000000000000000000",
					"0100000000000000000000000000000000000000000000000000000000000000",
				} {
					for m := range 8 {
						msg := []byte{byte(m)}
						sig := unhex(t, r+s)
						if sameDecision(t, fmt.Sprintf("A=%s R=%s S=%s m=%x", a, r, s, msg), unhex(t, a), msg, sig) {
							accepted++
						}
					}
				}
			}
		}
		if accepted == 0 {
			t.Error("no small-order signature verifies: the cases test nothing")
		}
		t.Logf("%d small-order signatures verify", accepted)

		// A real key with a small-order R.
		for _, r := range smallOrder {
			bad := append(unhex(t, r), sig[32:]...)
			sameDecision(t, "R="+r, pub, msg, bad)
		}
	})

	t.Run("mixed-order A", func(t *testing.T) {
		// A' = aB + T, T of order 8, signed with a: [S]B - [k]A' = R - [k]T.
		// Cofactorless verification (crypto/ed25519) accepts only when
		// [k]T is the identity, cofactored verification always.
		var a, r, k, s scalar.Scalar
		if _, err := a.SetRandom(rand.Reader); err != nil {
			t.Fatal(err)
		}
		var tc curve.CompressedEdwardsY
		if _, err := tc.SetBytes(unhex(t, smallOrder[4])); err != nil {
			t.Fatal(err)
		}
		var tp, ap curve.EdwardsPoint
		if _, err := tp.SetCompressedY(&tc); err != nil {
			t.Fatal(err)
		}
		ap.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &a)
		ap.Add(&ap, &tp)
		var apc curve.CompressedEdwardsY
		apc.SetEdwardsPoint(&ap)
		pub := ed25519.PublicKey(apc[:])

		var accepted, rejected int
		for m := range 256 {
			msg := []byte(fmt.Sprintf("message %d", m))
			if _, err := r.SetRandom(rand.Reader); err != nil {
				t.Fatal(err)
			}
			var rp curve.EdwardsPoint
			rp.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &r)
			var rc curve.CompressedEdwardsY
			rc.SetEdwardsPoint(&rp)
			h := sha512.New()
			h.Write(rc[:])
			h.Write(pub)
			h.Write(msg)
			if _, err := k.SetBytesModOrderWide(h.Sum(nil)); err != nil {
				t.Fatal(err)
			}
			s.Mul(&k, &a)
			s.Add(&s, &r)
			sig := make([]byte, 64)
			copy(sig, rc[:])
			if err := s.ToBytes(sig[32:]); err != nil {
				t.Fatal(err)
			}
			if sameDecision(t, fmt.Sprintf("mixed-order key, %q", msg), pub, msg, sig) {
				accepted++
			} else {
				rejected++
			}
			// The control: RFC 8032's cofactored equation accepts them all.
			if !voi.VerifyWithOptions(voi.PublicKey(pub), msg, sig, &voi.Options{Verify: voi.VerifyOptionsFIPS_186_5}) {
				t.Fatalf("mixed-order key, %q: the signature is not valid under the cofactored equation", msg)
			}
		}
		if accepted == 0 || rejected == 0 {
			t.Errorf("mixed-order key: %d signatures accepted and %d rejected; want some of each", accepted, rejected)
		}
	})
}

// scalarInt is a 256-bit little-endian integer, for making S >= L.
type scalarInt [32]byte

func (x *scalarInt) set(b []byte) { copy(x[:], b) }

// add sets x to x+y and reports whether it did not overflow 256 bits.
func (x *scalarInt) add(y *scalarInt) bool {
	var carry uint16
	for i := range x {
		carry += uint16(x[i]) + uint16(y[i])
		x[i] = byte(carry)
		carry >>= 8
	}
	return carry == 0
}

func (x *scalarInt) bytes() []byte { return append([]byte(nil), x[:]...) }
