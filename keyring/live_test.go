package keyring

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Live ring sees what another process does to the directory: a
// rotation signs the next record with the new key, and a record signed
// with it verifies, without opening the ring again.
func TestLiveFollowsTheDirectory(t *testing.T) {
	dir := ringDir(t)
	other := mustOpen(t, dir) // the `writ ledger keys` process
	first, err := other.Generate(seeded(1), t0, "first")
	if err != nil {
		t.Fatal(err)
	}
	live, err := OpenLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := live.Signer(at(time.Hour))
	if err != nil || s.KeyID() != first.ID {
		t.Fatalf("signer before rotation = %v, %v; want %s", s, err, first.ID)
	}
	if again, _ := live.Signer(at(2 * time.Hour)); again != s {
		t.Fatal("an unchanged ring read its key again")
	}

	rot := at(48 * time.Hour)
	second, err := other.Rotate(seeded(2), rot, "second")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(live.Keys()); n != 2 {
		t.Fatalf("live ring after rotation has %d keys, want 2", n)
	}
	s2, err := live.Signer(rot)
	if err != nil || s2.KeyID() != second.ID {
		t.Fatalf("signer after rotation = %v, %v; want %s", s2, err, second.ID)
	}
	if old, err := live.Signer(at(time.Hour)); err != nil || old.KeyID() != first.ID {
		t.Fatalf("signer inside the first key's window = %v, %v; want %s", old, err, first.ID)
	}
	msg := recordMsg("sha256:abcd")
	if err := live.VerifyRecordSignature(second.ID, msg, signMsg(t, s2, msg), rot); err != nil {
		t.Fatalf("a record signed with the rotated-in key: %v", err)
	}
	if err := live.VerifyRecordSignature(second.ID, msg, signMsg(t, s2, msg), at(time.Hour)); !errors.Is(err, ErrOutsideWindow) {
		t.Fatalf("the new key before its window: err = %v, want ErrOutsideWindow", err)
	}

	// A ring.json that can no longer be read is an error for signing,
	// while the keys last loaded are still listed.
	if err := os.WriteFile(filepath.Join(dir, ringFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Signer(rot); err == nil {
		t.Fatal("signed with a ring whose ring.json is broken")
	}
	if n := len(live.Keys()); n != 2 {
		t.Fatalf("keys after a failed reload = %d, want the 2 last loaded", n)
	}
}
