package keyring

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
)

// seeded returns a deterministic randomness source.
func seeded(seed byte) io.Reader {
	var s [32]byte
	s[0] = seed
	return rand.NewChaCha8(s)
}

var t0 = time.Date(2026, 11, 22, 3, 15, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ringDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "keys")
}

func mustOpen(t *testing.T, dir string) *Ring {
	t.Helper()
	r, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r
}

func mustSigner(t *testing.T, r *Ring, now time.Time) *Signer {
	t.Helper()
	s, err := r.Signer(now)
	if err != nil {
		t.Fatalf("Signer(%s): %v", now, err)
	}
	return s
}

func signMsg(t *testing.T, s *Signer, msg []byte) []byte {
	t.Helper()
	sig, err := s.SignMessage(msg)
	if err != nil {
		t.Fatalf("SignMessage: %v", err)
	}
	return sig
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// recordMsg is a record signature message as the ledger builds it.
func recordMsg(hash string) []byte {
	return []byte("writ-record-signature-v1\n" + hash + "\n")
}

const checkpoint = "writ.example/tenant-a\n42\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBzxBkGwGQlVlVcs=\n"

func TestGenerateSignVerify(t *testing.T) {
	dir := ringDir(t)
	r := mustOpen(t, dir)
	if len(r.Keys()) != 0 {
		t.Fatalf("new ring has keys: %v", r.Keys())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created the directory: %v", err)
	}
	_, err := r.Signer(t0)
	if !errors.Is(err, ErrNoActiveKey) || err.Error() != "no active signing key; run writ ledger keys generate" {
		t.Fatalf("Signer on an empty ring: %v", err)
	}

	k, err := r.Generate(seeded(1), t0, "")
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "writ-2026-11-22T031500Z" {
		t.Errorf("name = %q", k.Name)
	}
	if !regexp.MustCompile(`^writ-2026-11-22T031500Z\+[0-9a-f]{8}$`).MatchString(k.ID) {
		t.Errorf("id = %q", k.ID)
	}
	if !strings.HasPrefix(k.VerifierKey, k.ID+"+") {
		t.Errorf("verifier key %q does not start with the id %q", k.VerifierKey, k.ID)
	}
	if !k.ValidFrom.Equal(t0) || k.ValidUntil != nil || k.RevokedAt != nil {
		t.Errorf("window of new key: %+v", k)
	}
	if got := k.Status(t0); got != StatusActive {
		t.Errorf("status = %q", got)
	}
	if got := mode(t, dir); got != 0o700 {
		t.Errorf("dir mode = %04o", got)
	}
	if got := mode(t, filepath.Join(dir, k.Name+".key")); got != 0o600 {
		t.Errorf("key file mode = %04o", got)
	}

	s := mustSigner(t, r, at(time.Hour))
	if s.KeyID() != k.ID || s.Name() != k.Name || s.Key().VerifierKey != k.VerifierKey {
		t.Fatalf("signer is %s, want %s", s.KeyID(), k.ID)
	}

	// A checkpoint signed as a note opens with the ring's verifiers.
	signed, err := note.Sign(&note.Note{Text: checkpoint}, s)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(signed, r.Verifiers())
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	if n.Text != checkpoint || len(n.Sigs) != 1 || KeyID(n.Sigs[0].Name, n.Sigs[0].Hash) != k.ID {
		t.Fatalf("opened note: %+v", n)
	}
	// And with the published verifier key alone.
	v, err := note.NewVerifier(k.VerifierKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
		t.Fatalf("note.Open with the verifier key: %v", err)
	}

	// A record signature verifies, and is the same Ed25519 signature note
	// makes over the same bytes.
	msg := recordMsg("sha256:0123")
	sig := signMsg(t, s, msg)
	if err := r.VerifyRecordSignature(k.ID, msg, sig, at(time.Hour)); err != nil {
		t.Fatalf("VerifyRecordSignature: %v", err)
	}
	noteSig, err := s.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sig, noteSig) || !v.Verify(msg, sig) {
		t.Fatal("SignMessage and the note signature differ")
	}

	// The ring reads back from disk the same.
	r2 := mustOpen(t, dir)
	if got, want := fmt.Sprint(r2.Keys()), fmt.Sprint(r.Keys()); got != want {
		t.Fatalf("reopened keys = %s, want %s", got, want)
	}
	if err := r2.VerifyRecordSignature(k.ID, msg, signMsg(t, mustSigner(t, r2, at(2*time.Hour)), msg), at(2*time.Hour)); err != nil {
		t.Fatalf("reopened ring: %v", err)
	}
	if got, ok := r2.Key(k.ID); !ok || got.VerifierKey != k.VerifierKey {
		t.Fatalf("Key(%q) = %+v, %v", k.ID, got, ok)
	}
	if _, ok := r2.Key("nope+00000000"); ok {
		t.Fatal("Key found an unknown id")
	}
}

func TestRotateKeepsHistory(t *testing.T) {
	dir := ringDir(t)
	r := mustOpen(t, dir)
	old, err := r.Generate(seeded(1), t0, "old")
	if err != nil {
		t.Fatal(err)
	}
	oldSigner := mustSigner(t, r, at(time.Hour))
	oldCheckpoint, err := note.Sign(&note.Note{Text: checkpoint}, oldSigner)
	if err != nil {
		t.Fatal(err)
	}

	rot := at(48 * time.Hour)
	cur, err := r.Rotate(seeded(2), rot, "new")
	if err != nil {
		t.Fatal(err)
	}
	old, _ = r.Key(old.ID)
	if old.ValidUntil == nil || !old.ValidUntil.Equal(rot) {
		t.Fatalf("old key after rotation: %+v", old)
	}
	if !cur.ValidFrom.Equal(rot) || cur.ValidUntil != nil {
		t.Fatalf("new key: %+v", cur)
	}
	if old.Status(rot) != StatusRetired || cur.Status(rot) != StatusActive || old.Status(at(time.Hour)) != StatusActive {
		t.Fatalf("statuses: old %s, new %s", old.Status(rot), cur.Status(rot))
	}
	if got := mustSigner(t, r, rot).KeyID(); got != cur.ID {
		t.Fatalf("signer at rotation = %s, want %s", got, cur.ID)
	}
	if got := mustSigner(t, r, rot.Add(-time.Nanosecond)).KeyID(); got != old.ID {
		t.Fatalf("signer just before rotation = %s, want %s", got, old.ID)
	}
	newSigner := mustSigner(t, r, rot)

	// History signed with the old key still opens.
	if _, err := note.Open(oldCheckpoint, r.Verifiers()); err != nil {
		t.Fatalf("old checkpoint after rotation: %v", err)
	}
	msg := recordMsg("sha256:abcd")
	oldSig, newSig := signMsg(t, oldSigner, msg), signMsg(t, newSigner, msg)
	r2 := mustOpen(t, dir) // and from disk
	tests := []struct {
		name     string
		id       string
		sig      []byte
		signedAt time.Time
		want     error
	}{
		{"old key inside its window", old.ID, oldSig, at(time.Hour), nil},
		{"old key at its start", old.ID, oldSig, t0, nil},
		{"old key just before rotation", old.ID, oldSig, rot.Add(-time.Nanosecond), nil},
		{"old key at rotation", old.ID, oldSig, rot, ErrOutsideWindow},
		{"old key after rotation", old.ID, oldSig, at(72 * time.Hour), ErrOutsideWindow},
		{"old key before its start", old.ID, oldSig, t0.Add(-time.Second), ErrOutsideWindow},
		{"new key at rotation", cur.ID, newSig, rot, nil},
		{"new key later", cur.ID, newSig, at(1000 * time.Hour), nil},
		{"new key before rotation", cur.ID, newSig, at(time.Hour), ErrOutsideWindow},
		{"old signature named as the new key", cur.ID, oldSig, rot, ErrBadSignature},
	}
	for _, tt := range tests {
		for _, ring := range []*Ring{r, r2} {
			err := ring.VerifyRecordSignature(tt.id, msg, tt.sig, tt.signedAt)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
			}
		}
	}
	if got := len(mustOpen(t, dir).Keys()); got != 2 {
		t.Fatalf("reopened ring has %d keys", got)
	}
}

func TestGenerateRotateRefusals(t *testing.T) {
	r := mustOpen(t, ringDir(t))
	if _, err := r.Rotate(seeded(1), t0, ""); writ.ErrorCode(err) != writ.ECONFLICT || !strings.Contains(err.Error(), "generate") {
		t.Fatalf("Rotate on an empty ring: %v", err)
	}
	k, err := r.Generate(seeded(1), t0, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		code string
		text string
	}{
		{"generate twice", func() error { _, err := r.Generate(seeded(2), at(time.Hour), ""); return err }, writ.ECONFLICT, "rotate"},
		{"rotate at the key's start", func() error { _, err := r.Rotate(seeded(2), t0, ""); return err }, writ.ECONFLICT, "cannot be rotated"},
		{"rotate before the key's start", func() error { _, err := r.Rotate(seeded(2), at(-time.Hour), ""); return err }, writ.ECONFLICT, "cannot be rotated"},
		{"name in use", func() error { _, err := r.Rotate(seeded(2), at(time.Hour), k.Name); return err }, writ.ECONFLICT, "already used"},
		{"name with plus", func() error { _, err := r.Rotate(seeded(2), at(time.Hour), "a+b"); return err }, writ.EINVALID, "key name"},
		{"name with slash", func() error { _, err := r.Rotate(seeded(2), at(time.Hour), "../evil"); return err }, writ.EINVALID, "key name"},
		{"name with space", func() error { _, err := r.Rotate(seeded(2), at(time.Hour), "a b"); return err }, writ.EINVALID, "key name"},
		{"hidden name", func() error { _, err := r.Rotate(seeded(2), at(time.Hour), ".hidden"); return err }, writ.EINVALID, "key name"},
		{"long name", func() error { _, err := r.Rotate(seeded(2), at(time.Hour), strings.Repeat("a", 129)); return err }, writ.EINVALID, "key name"},
	}
	for _, tt := range tests {
		err := tt.do()
		if writ.ErrorCode(err) != tt.code || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: err = %v (code %s), want code %s mentioning %q", tt.name, err, writ.ErrorCode(err), tt.code, tt.text)
		}
	}
	if got := r.Keys(); len(got) != 1 || got[0].ValidUntil != nil {
		t.Fatalf("refused operations changed the ring: %+v", got)
	}

	// Two rotations in the same second get distinct generated names.
	a, err := r.Rotate(seeded(3), at(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Rotate(seeded(4), at(time.Hour+time.Millisecond), "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "writ-2026-11-22T041500Z" || b.Name != "writ-2026-11-22T041500Z-2" {
		t.Fatalf("generated names %q, %q", a.Name, b.Name)
	}
	// A clock behind the ring is refused: windows never overlap.
	if _, err := r.Rotate(seeded(5), at(time.Hour), ""); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Fatalf("rotate with the clock behind: %v", err)
	}

	// Rings without a directory cannot create keys.
	pub, err := NewPublic(r.Keys())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Generate(seeded(1), at(100*time.Hour), ""); writ.ErrorCode(err) != writ.EINVALID {
		t.Fatalf("Generate on a public ring: %v", err)
	}
}

func TestRevoke(t *testing.T) {
	dir := ringDir(t)
	r := mustOpen(t, dir)
	a, err := r.Generate(seeded(1), t0, "a")
	if err != nil {
		t.Fatal(err)
	}
	sa := mustSigner(t, r, t0)
	b, err := r.Rotate(seeded(2), at(10*time.Hour), "b")
	if err != nil {
		t.Fatal(err)
	}
	sb := mustSigner(t, r, at(10*time.Hour))
	msg := recordMsg("sha256:feed")
	sigA, sigB := signMsg(t, sa, msg), signMsg(t, sb, msg)

	// a (retired at +10h) was compromised at +4h.
	now := at(20 * time.Hour)
	ra, err := r.Revoke(a.ID, at(4*time.Hour), "laptop stolen", now)
	if err != nil {
		t.Fatal(err)
	}
	if !ra.RevokedAt.Equal(at(4*time.Hour)) || !ra.ValidUntil.Equal(at(4*time.Hour)) || ra.RevokedReason != "laptop stolen" {
		t.Fatalf("revoked key: %+v", ra)
	}
	if ra.Status(now) != StatusRevoked || ra.Status(at(time.Hour)) != StatusActive {
		t.Fatalf("status after revocation: %s", ra.Status(now))
	}
	checks := []struct {
		name     string
		id       string
		sig      []byte
		signedAt time.Time
		want     error
	}{
		{"before revocation", a.ID, sigA, at(4*time.Hour - time.Nanosecond), nil},
		{"at revocation", a.ID, sigA, at(4 * time.Hour), ErrOutsideWindow},
		{"after revocation, before retirement", a.ID, sigA, at(9 * time.Hour), ErrOutsideWindow},
		{"other key unaffected", b.ID, sigB, at(11 * time.Hour), nil},
	}
	for _, ring := range []*Ring{r, mustOpen(t, dir)} {
		for _, tt := range checks {
			err := ring.VerifyRecordSignature(tt.id, msg, tt.sig, tt.signedAt)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
			}
		}
	}

	// Revocations can move earlier, never later.
	if _, err := r.Revoke(a.ID, at(5*time.Hour), "", now); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("moving a revocation later: %v", err)
	}
	if k, err := r.Revoke(a.ID, at(3*time.Hour), "", now); err != nil || !k.RevokedAt.Equal(at(3*time.Hour)) || k.RevokedReason != "laptop stolen" {
		t.Errorf("moving a revocation earlier: %+v, %v", k, err)
	}
	if _, err := r.Revoke(b.ID, now.Add(time.Second), "", now); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("revocation in the future: %v", err)
	}
	if _, err := r.Revoke("nope+01234567", now, "", now); !errors.Is(err, ErrUnknownKey) || writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("revoking an unknown key: %v", err)
	}

	// Revoking the active key leaves nothing to sign with until a new key
	// is generated.
	if _, err := r.Revoke(b.ID, now, "rotation drill", now); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Signer(now); !errors.Is(err, ErrNoActiveKey) {
		t.Fatalf("Signer after revoking the active key: %v", err)
	}
	if _, err := r.Rotate(seeded(3), now, ""); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Fatalf("Rotate with no active key: %v", err)
	}
	c, err := r.Generate(seeded(3), now, "c")
	if err != nil {
		t.Fatalf("Generate after revoking the active key: %v", err)
	}
	if got := mustSigner(t, r, now).KeyID(); got != c.ID {
		t.Fatalf("signer = %s, want %s", got, c.ID)
	}
	r2 := mustOpen(t, dir)
	if got := len(r2.Keys()); got != 3 {
		t.Fatalf("reopened ring has %d keys", got)
	}
	if k, _ := r2.Key(b.ID); k.RevokedAt == nil || k.RevokedReason != "rotation drill" {
		t.Fatalf("revocation not persisted: %+v", k)
	}
}

func TestVerifyRecordSignatureErrors(t *testing.T) {
	r := mustOpen(t, ringDir(t))
	k, err := r.Generate(seeded(1), t0, "k")
	if err != nil {
		t.Fatal(err)
	}
	msg := recordMsg("sha256:1111")
	sig := signMsg(t, mustSigner(t, r, t0), msg)
	flipped := bytes.Clone(sig)
	flipped[10] ^= 1
	tests := []struct {
		name string
		id   string
		msg  []byte
		sig  []byte
		want error
		code string
	}{
		{"valid", k.ID, msg, sig, nil, ""},
		{"unknown key", "other+01234567", msg, sig, ErrUnknownKey, writ.ENOTFOUND},
		{"same name, other hash", KeyID(k.Name, 0), msg, sig, ErrUnknownKey, writ.ENOTFOUND},
		{"flipped bit", k.ID, msg, flipped, ErrBadSignature, writ.EINVALID},
		{"other message", k.ID, recordMsg("sha256:2222"), sig, ErrBadSignature, writ.EINVALID},
		{"short signature", k.ID, msg, sig[:63], ErrBadSignature, writ.EINVALID},
		{"empty signature", k.ID, msg, nil, ErrBadSignature, writ.EINVALID},
		{"note-style signature with key hash prefix", k.ID, msg, append([]byte{1, 2, 3, 4}, sig...), ErrBadSignature, writ.EINVALID},
	}
	for _, tt := range tests {
		err := r.VerifyRecordSignature(tt.id, tt.msg, tt.sig, at(time.Minute))
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) || (err != nil && writ.ErrorCode(err) != tt.code) {
			t.Errorf("%s: err = %v (code %s), want %v (code %s)", tt.name, err, writ.ErrorCode(err), tt.want, tt.code)
		}
	}
	// A bad signature is reported as such even when its date is also
	// outside the window: the date means nothing unless the bytes verify.
	if err := r.VerifyRecordSignature(k.ID, msg, flipped, t0.Add(-time.Hour)); !errors.Is(err, ErrBadSignature) {
		t.Errorf("bad signature outside the window: %v", err)
	}
}

func TestKeyWindowAndStatus(t *testing.T) {
	until, revoked := at(10*time.Hour), at(5*time.Hour)
	open := Key{ValidFrom: t0}
	closed := Key{ValidFrom: t0, ValidUntil: &until}
	rev := Key{ValidFrom: t0, ValidUntil: &revoked, RevokedAt: &revoked}
	tests := []struct {
		key    Key
		t      time.Time
		valid  bool
		status string
	}{
		{open, t0.Add(-1), false, StatusPending},
		{open, t0, true, StatusActive},
		{open, at(1e6 * time.Hour), true, StatusActive},
		{closed, at(10*time.Hour - 1), true, StatusActive},
		{closed, until, false, StatusRetired},
		{rev, at(5*time.Hour - 1), true, StatusActive},
		{rev, revoked, false, StatusRevoked},
		{rev, at(20 * time.Hour), false, StatusRevoked},
	}
	for i, tt := range tests {
		if got := tt.key.ValidAt(tt.t); got != tt.valid {
			t.Errorf("%d: ValidAt(%s) = %v", i, tt.t, got)
		}
		if got := tt.key.Status(tt.t); got != tt.status {
			t.Errorf("%d: Status(%s) = %q, want %q", i, tt.t, got, tt.status)
		}
	}
	// RevokedAt bounds the window even if ValidUntil was not moved.
	late := at(30 * time.Hour)
	if (Key{ValidFrom: t0, ValidUntil: &late, RevokedAt: &revoked}).ValidAt(at(6 * time.Hour)) {
		t.Error("ValidAt ignores RevokedAt")
	}
	if got := KeyID("writ", 0xab); got != "writ+000000ab" {
		t.Errorf("KeyID = %q", got)
	}
}

func TestPermissionsRefused(t *testing.T) {
	if !checkModes {
		t.Skip("permission bits are not checked on " + runtime.GOOS)
	}
	setup := func(t *testing.T) (string, Key) {
		dir := ringDir(t)
		r := mustOpen(t, dir)
		k, err := r.Generate(seeded(1), t0, "k")
		if err != nil {
			t.Fatal(err)
		}
		return dir, k
	}
	tests := []struct {
		name  string
		chmod func(dir string) string // returns the path it loosened
		mode  os.FileMode
		ok    bool
	}{
		{"key 0600", func(d string) string { return filepath.Join(d, "k.key") }, 0o600, true},
		{"key 0400", func(d string) string { return filepath.Join(d, "k.key") }, 0o400, true},
		{"key 0644", func(d string) string { return filepath.Join(d, "k.key") }, 0o644, false},
		{"key 0640", func(d string) string { return filepath.Join(d, "k.key") }, 0o640, false},
		{"key 0604", func(d string) string { return filepath.Join(d, "k.key") }, 0o604, false},
		{"key 0601", func(d string) string { return filepath.Join(d, "k.key") }, 0o601, false},
		{"dir 0755", func(d string) string { return d }, 0o755, true},
		{"dir 0770", func(d string) string { return d }, 0o770, false},
		{"dir 0777", func(d string) string { return d }, 0o777, false},
		{"ring.json 0666", func(d string) string { return filepath.Join(d, "ring.json") }, 0o666, false},
		{"stray key file 0644", func(d string) string {
			p := filepath.Join(d, "old.key")
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				panic(err)
			}
			return p
		}, 0o644, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, _ := setup(t)
			path := tt.chmod(dir)
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir)
			if tt.ok {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			want := fmt.Sprintf("%s has mode %04o", path, tt.mode)
			if err == nil || !strings.Contains(err.Error(), want) || writ.ErrorCode(err) != writ.EINVALID {
				t.Fatalf("Open: err = %v, want it to say %q", err, want)
			}
		})
	}

	// A key file loosened after Open is refused when the signer reads it.
	dir, _ := setup(t)
	r := mustOpen(t, dir)
	if err := os.Chmod(filepath.Join(dir, "k.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Signer(t0); err == nil || !strings.Contains(err.Error(), "has mode 0644") {
		t.Fatalf("Signer with a loosened key file: %v", err)
	}
}

func TestPrivateKeyFileProblems(t *testing.T) {
	dir := ringDir(t)
	r := mustOpen(t, dir)
	k, err := r.Generate(seeded(1), t0, "k")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "k.key")
	skey, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _, err := note.GenerateKey(seeded(9), "k")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		content string // "" removes the file
		want    string
	}{
		{"missing", "", "private key file " + path + " is missing"},
		{"another key of the same name", otherKey + "\n", "does not hold the private key of " + k.ID},
		{"garbage", "PRIVATE+KEY+k+00000000+AAAA\n", "not a note Ed25519 signer key"},
	}
	for _, tt := range tests {
		if tt.content == "" {
			os.Remove(path)
		} else if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := mustOpen(t, dir)
		_, err := r.Signer(t0)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to say %q", tt.name, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), tt.content) && tt.content != "" || strings.Contains(err.Error(), string(skey))) {
			t.Errorf("%s: error shows key material: %v", tt.name, err)
		}
	}
	// Verification never needs the private key.
	if err := os.WriteFile(path, skey, 0o600); err != nil {
		t.Fatal(err)
	}
	msg := recordMsg("sha256:77")
	sig := signMsg(t, mustSigner(t, mustOpen(t, dir), t0), msg)
	os.Remove(path)
	if err := mustOpen(t, dir).VerifyRecordSignature(k.ID, msg, sig, t0); err != nil {
		t.Fatalf("verify without the private key: %v", err)
	}
}

// keyMaterial returns renderings of the private key in skey that must
// never appear in output.
func keyMaterial(t *testing.T, skey string) []string {
	t.Helper()
	skey = strings.TrimSpace(skey)
	parts := strings.Split(skey, "+")
	data, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil {
		t.Fatal(err)
	}
	seed := data[1:]
	priv := ed25519.NewKeyFromSeed(seed)
	return []string{
		skey,
		parts[4],
		base64.StdEncoding.EncodeToString(seed),
		hex.EncodeToString(seed),
		hex.EncodeToString(priv),
		fmt.Sprint(seed),
		fmt.Sprint([]byte(priv)),
		fmt.Sprintf("%#v", seed),
		strings.Trim(fmt.Sprint(seed[:8]), "[]"),
		fmt.Sprintf("%#v", seed[:8])[len("[]byte{"):],
	}
}

func TestRingJSONHoldsNoPrivateMaterial(t *testing.T) {
	dir := ringDir(t)
	r := mustOpen(t, dir)
	a, err := r.Generate(seeded(1), t0, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Rotate(seeded(2), at(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke(a.ID, at(30*time.Minute), "test", at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	ringJSON, err := os.ReadFile(filepath.Join(dir, "ring.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ringJSON, []byte("PRIVATE")) {
		t.Error("ring.json mentions PRIVATE")
	}
	for _, k := range []Key{a, b} {
		skey, err := os.ReadFile(filepath.Join(dir, k.Name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(skey), "PRIVATE+KEY+"+k.ID+"+") {
			t.Fatalf("key file of %s does not hold its signer key", k.ID)
		}
		for _, m := range keyMaterial(t, string(skey)) {
			if bytes.Contains(ringJSON, []byte(m)) {
				t.Errorf("ring.json contains private material of %s (%q)", k.ID, m)
			}
		}
	}
	// ring.json is the public metadata, in a stable order, and nothing else.
	var got struct {
		Version int              `json:"version"`
		Keys    []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(ringJSON, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || len(got.Keys) != 2 || got.Keys[0]["id"] != a.ID || got.Keys[1]["id"] != b.ID {
		t.Fatalf("ring.json = %s", ringJSON)
	}
	allowed := map[string]bool{"name": true, "id": true, "verifier_key": true, "valid_from": true, "valid_until": true, "revoked_at": true, "revoked_reason": true}
	for _, k := range got.Keys {
		for f := range k {
			if !allowed[f] {
				t.Errorf("ring.json has field %q", f)
			}
		}
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"ring.json", a.Name + ".key", b.Name + ".key"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("ring directory holds %v, want %v", names, want)
	}
	// Writing again gives the same bytes (stable order, normalized times).
	r2 := mustOpen(t, dir)
	if err := writeRing(dir, r2.Keys()); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "ring.json"))
	if !bytes.Equal(again, ringJSON) {
		t.Errorf("ring.json is not stable:\n%s\n%s", ringJSON, again)
	}
}

func TestFormattingHidesKeyMaterial(t *testing.T) {
	dir := ringDir(t)
	r := mustOpen(t, dir)
	k, err := r.Generate(seeded(1), t0, "k")
	if err != nil {
		t.Fatal(err)
	}
	skey, err := os.ReadFile(filepath.Join(dir, "k.key"))
	if err != nil {
		t.Fatal(err)
	}
	env, err := FromEnv(string(skey), t0)
	if err != nil {
		t.Fatal(err)
	}
	fromDir, fromEnv := mustSigner(t, r, t0), mustSigner(t, env, t0)
	type holder struct {
		s Signer // unexported: fmt prints its fields without calling methods
		p *Signer
	}
	values := map[string]any{
		"dir signer":          fromDir,
		"env signer":          fromEnv,
		"signer value":        *fromEnv,
		"holder":              holder{*fromEnv, fromEnv},
		"holder pointer":      &holder{*fromEnv, fromEnv},
		"parsed key":          env.mem,
		"parsed key value":    *env.mem,
		"dir ring":            r,
		"env ring":            env,
		"signer in an error":  fmt.Errorf("wrapped: %v", fromEnv),
		"slice of signers":    []*Signer{fromDir, fromEnv},
		"map of signers":      map[string]*Signer{"a": fromEnv},
		"interface to signer": note.Signer(fromEnv),
	}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"}
	material := keyMaterial(t, string(skey))
	for name, v := range values {
		for _, verb := range verbs {
			out := fmt.Sprintf(verb, v)
			for _, m := range material {
				if strings.Contains(out, m) {
					t.Errorf("%s with %s shows key material %q: %s", name, verb, m, out)
				}
			}
		}
	}
	if got := fmt.Sprintf("%+v", fromEnv); got != "keyring.Signer("+k.ID+")" {
		t.Errorf("%%+v of a signer = %q", got)
	}
	// Encoding does not export the key either.
	for name, v := range map[string]any{"signer": fromEnv, "ring": env, "holder": holder{*fromEnv, fromEnv}, "parsed key": env.mem} {
		out, _ := json.Marshal(v)
		for _, m := range material {
			if strings.Contains(string(out), m) {
				t.Errorf("json of %s shows key material: %s", name, out)
			}
		}
	}
}

func TestNewPublic(t *testing.T) {
	r := mustOpen(t, ringDir(t))
	a, err := r.Generate(seeded(1), t0, "a")
	if err != nil {
		t.Fatal(err)
	}
	s := mustSigner(t, r, t0)
	if _, err := r.Rotate(seeded(2), at(time.Hour), "b"); err != nil {
		t.Fatal(err)
	}
	msg := recordMsg("sha256:99")
	sig := signMsg(t, s, msg)
	signed, err := note.Sign(&note.Note{Text: checkpoint}, s)
	if err != nil {
		t.Fatal(err)
	}

	// Keys in any order, in any time zone: the ring sorts and normalizes.
	keys := r.Keys()
	keys[0], keys[1] = keys[1], keys[0]
	keys[0].ValidFrom = keys[0].ValidFrom.In(time.FixedZone("X", 3600))
	pub, err := NewPublic(keys)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pub.Keys()) != fmt.Sprint(r.Keys()) {
		t.Fatalf("public keys = %v, want %v", pub.Keys(), r.Keys())
	}
	if err := pub.VerifyRecordSignature(a.ID, msg, sig, t0); err != nil {
		t.Fatalf("verify with a public ring: %v", err)
	}
	if err := pub.VerifyRecordSignature(a.ID, msg, sig, at(2*time.Hour)); !errors.Is(err, ErrOutsideWindow) {
		t.Fatalf("window in a public ring: %v", err)
	}
	if _, err := note.Open(signed, pub.Verifiers()); err != nil {
		t.Fatalf("note.Open with a public ring: %v", err)
	}
	if _, err := pub.Signer(at(2 * time.Hour)); !errors.Is(err, ErrNoActiveKey) || !strings.Contains(err.Error(), "only its public key") {
		t.Fatalf("Signer of a public ring: %v", err)
	}
	if _, err := pub.Revoke(a.ID, t0, "", t0); err == nil {
		t.Fatal("Revoke on a public ring succeeded")
	}

	good := r.Keys()[0]
	_, otherVkey, err := note.GenerateKey(seeded(7), "a")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(k *Key)
		want string
	}{
		{"garbage verifier key", func(k *Key) { k.VerifierKey = "garbage" }, "not a note Ed25519 verifier key"},
		{"corrupted verifier key", func(k *Key) { k.VerifierKey = k.VerifierKey[:len(k.VerifierKey)-4] + "AAAA" }, "not a note Ed25519 verifier key"},
		{"wrong name", func(k *Key) { k.Name = "b" }, "does not match its verifier key"},
		{"wrong id", func(k *Key) { k.ID = "a+00000000" }, "id does not match"},
		{"another key of the same name", func(k *Key) { k.VerifierKey = otherVkey }, "id does not match"},
		{"no valid_from", func(k *Key) { k.ValidFrom = time.Time{} }, "valid_from is missing"},
	}
	for _, tt := range tests {
		k := good.clone()
		tt.edit(&k)
		_, err := NewPublic([]Key{k})
		if err == nil || !strings.Contains(err.Error(), tt.want) || writ.ErrorCode(err) != writ.EINVALID {
			t.Errorf("%s: err = %v, want it to say %q", tt.name, err, tt.want)
		}
	}
	if _, err := NewPublic([]Key{good, good}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate key: %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	skey, vkey, err := note.GenerateKey(seeded(3), "writ-env")
	if err != nil {
		t.Fatal(err)
	}
	r, err := FromEnv(skey+"\n", t0)
	if err != nil {
		t.Fatal(err)
	}
	keys := r.Keys()
	if len(keys) != 1 || keys[0].VerifierKey != vkey || !strings.HasPrefix(vkey, keys[0].ID+"+") || keys[0].Name != "writ-env" {
		t.Fatalf("keys = %+v", keys)
	}
	if _, err := r.Signer(t0.Add(-time.Second)); !errors.Is(err, ErrNoActiveKey) {
		t.Fatalf("Signer before valid_from: %v", err)
	}
	s := mustSigner(t, r, t0)
	msg := recordMsg("sha256:42")
	sig := signMsg(t, s, msg)
	if err := r.VerifyRecordSignature(keys[0].ID, msg, sig, t0); err != nil {
		t.Fatal(err)
	}
	// The same signature note's own signer makes.
	ns, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := ns.Sign(msg); !bytes.Equal(sig, want) {
		t.Fatal("SignMessage differs from note's signature")
	}
	signed, err := note.Sign(&note.Note{Text: checkpoint}, s)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := note.NewVerifier(vkey)
	if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Rotate(seeded(1), at(time.Hour), ""); err == nil {
		t.Fatal("Rotate on an environment ring succeeded")
	}

	bad := []struct{ name, skey string }{
		{"empty", ""},
		{"verifier key", vkey},
		{"wrong hash", strings.Replace(skey, strings.Split(skey, "+")[3], "00000000", 1)},
		{"truncated", skey[:len(skey)-8]},
	}
	for _, tt := range bad {
		_, err := FromEnv(tt.skey, t0)
		if err == nil || writ.ErrorCode(err) != writ.EINVALID {
			t.Errorf("%s: err = %v", tt.name, err)
			continue
		}
		if tt.skey != "" && strings.Contains(err.Error(), strings.Split(tt.skey, "+")[len(strings.Split(tt.skey, "+"))-1]) {
			t.Errorf("%s: error shows the key: %v", tt.name, err)
		}
	}
	if _, err := FromEnv(skey, time.Time{}); err == nil {
		t.Error("FromEnv without valid_from succeeded")
	}
}

// kms is an ExternalSigner holding its key itself.
type kms struct {
	name string
	hash uint32
	priv ed25519.PrivateKey
	bad  bool // return signatures by another key
}

func (k *kms) KeyID() string   { return KeyID(k.name, k.hash) }
func (k *kms) Name() string    { return k.name }
func (k *kms) KeyHash() uint32 { return k.hash }
func (k *kms) Sign(msg []byte) ([]byte, error) {
	if k.bad {
		_, other, _ := ed25519.GenerateKey(seeded(99))
		return ed25519.Sign(other, msg), nil
	}
	return ed25519.Sign(k.priv, msg), nil
}

func TestExternal(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(seeded(5))
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := note.NewEd25519VerifierKey("writ-kms", pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	key := Key{Name: "writ-kms", ID: KeyID(v.Name(), v.KeyHash()), VerifierKey: vkey, ValidFrom: t0}
	ext := &kms{name: "writ-kms", hash: v.KeyHash(), priv: priv}
	r, err := NewExternal(key, ext)
	if err != nil {
		t.Fatal(err)
	}
	s := mustSigner(t, r, t0)
	if s.KeyID() != key.ID || s.KeyHash() != v.KeyHash() {
		t.Fatalf("signer %s", s)
	}
	msg := recordMsg("sha256:5")
	sig := signMsg(t, s, msg)
	if err := r.VerifyRecordSignature(key.ID, msg, sig, t0); err != nil {
		t.Fatal(err)
	}
	signed, err := note.Sign(&note.Note{Text: checkpoint}, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(signed, r.Verifiers()); err != nil {
		t.Fatal(err)
	}

	// A KMS signing with another key is caught at signing time.
	ext.bad = true
	if _, err := s.SignMessage(msg); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("SignMessage with a wrong KMS key: %v", err)
	}
	if _, err := note.Sign(&note.Note{Text: checkpoint}, s); err == nil {
		t.Fatal("note.Sign with a wrong KMS key succeeded")
	}

	if _, err := NewExternal(key, &kms{name: "other", hash: v.KeyHash()}); err == nil {
		t.Error("NewExternal with a signer of another name succeeded")
	}
	if _, err := NewExternal(key, &kms{name: "writ-kms", hash: v.KeyHash() + 1}); err == nil {
		t.Error("NewExternal with a signer of another hash succeeded")
	}
	if _, err := NewExternal(key, nil); err == nil {
		t.Error("NewExternal without a signer succeeded")
	}
}

func TestOpenRejectsBadRingJSON(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"not json", "{", "ring.json"},
		{"unknown field", `{"version":1,"keys":[],"private_keys":[]}`, "unknown field"},
		{"future version", `{"version":2,"keys":[]}`, "format version 2"},
		{"bad key", `{"version":1,"keys":[{"name":"a","id":"a+00000000","verifier_key":"x","valid_from":"2026-01-01T00:00:00Z"}]}`, "not a note Ed25519 verifier key"},
	}
	for _, tt := range tests {
		dir := ringDir(t)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ring.json"), []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to say %q", tt.name, err, tt.want)
		}
	}
	// A key whose name is not a safe file name is refused.
	_, vkey, _ := note.GenerateKey(seeded(1), "a/b")
	v, _ := note.NewVerifier(vkey)
	data, _ := json.Marshal(map[string]any{"version": 1, "keys": []Key{{Name: "a/b", ID: KeyID(v.Name(), v.KeyHash()), VerifierKey: vkey, ValidFrom: t0}}})
	dir := ringDir(t)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "ring.json"), data, 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "only ASCII letters") {
		t.Errorf("unsafe key name: %v", err)
	}
	// A file where the directory should be.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Open(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open of a file: %v", err)
	}
	if _, err := Open(""); err == nil {
		t.Error("Open of no directory succeeded")
	}
}

func TestConcurrentUse(t *testing.T) {
	r := mustOpen(t, ringDir(t))
	if _, err := r.Generate(seeded(1), t0, "a"); err != nil {
		t.Fatal(err)
	}
	msg := recordMsg("sha256:c")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				now := at(time.Duration(j) * time.Minute)
				s, err := r.Signer(now)
				if err != nil {
					t.Error(err)
					return
				}
				sig, _ := s.SignMessage(msg)
				if err := r.VerifyRecordSignature(s.KeyID(), msg, sig, now); err != nil {
					t.Error(err)
				}
				_ = r.Keys()
				_ = fmt.Sprint(r)
				_ = i
			}
		}()
	}
	for j := 1; j <= 3; j++ {
		if _, err := r.Rotate(seeded(byte(j+1)), at(time.Duration(j)*24*time.Hour), ""); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
