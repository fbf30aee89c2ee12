package keyring

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/strictb64"
)

// Key statuses, as returned by Key.Status.
const (
	StatusActive  = "active"  // inside its window: the key signs now
	StatusPending = "pending" // its window has not started yet
	StatusRetired = "retired" // its window has ended; it verifies history only
	StatusRevoked = "revoked" // revoked; it verifies history before RevokedAt only
)

// Sentinel errors, usable with errors.Is. The errors this package returns
// are *writ.Error values (with a code for adapters and a message safe to
// show) that wrap one of these where it applies.
var (
	// ErrUnknownKey: no key of the ring has the id.
	ErrUnknownKey = errors.New("unknown signing key")
	// ErrOutsideWindow: the signature verifies, but its signing time lies
	// outside the key's validity window (before it, after its retirement,
	// or at or after its revocation).
	ErrOutsideWindow = errors.New("signed outside the key's validity window")
	// ErrBadSignature: the signature does not verify under the key.
	ErrBadSignature = errors.New("bad signature")
	// ErrNoActiveKey: no key of the ring can sign at the given time.
	ErrNoActiveKey = errors.New("no active signing key")
)

// Key is the public description of a signing key. It holds no private
// material; it is what ring.json stores and what verifiers need.
type Key struct {
	// Name is the note key name (the "name" of a note signature line).
	Name string `json:"name"`
	// ID is "name+hash", hash being the 8-hex-digit note key hash. It is
	// the record's audit.signed_by and the prefix of VerifierKey.
	ID string `json:"id"`
	// VerifierKey is the note verifier key text, "name+hash+keydata".
	VerifierKey string `json:"verifier_key"`
	// ValidFrom is when the key's window starts (inclusive).
	ValidFrom time.Time `json:"valid_from"`
	// ValidUntil is when the window ends (exclusive); nil while it is open.
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	// RevokedAt is when the key was declared revoked: signatures dated at
	// or after it are invalid. Revoke also ends the window there.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// RevokedReason says why, for operators.
	RevokedReason string `json:"revoked_reason,omitempty"`
}

// ValidAt reports whether t lies inside the key's window: t ≥ ValidFrom,
// t < ValidUntil if the window is closed, and t < RevokedAt if the key is
// revoked.
func (k Key) ValidAt(t time.Time) bool {
	if t.Before(k.ValidFrom) {
		return false
	}
	if k.ValidUntil != nil && !t.Before(*k.ValidUntil) {
		return false
	}
	if k.RevokedAt != nil && !t.Before(*k.RevokedAt) {
		return false
	}
	return true
}

// Status returns the key's status at now: "revoked" once now has reached
// RevokedAt, else "pending" before ValidFrom, "retired" from ValidUntil
// on, and "active" inside the window.
func (k Key) Status(now time.Time) string {
	switch {
	case k.RevokedAt != nil && !now.Before(*k.RevokedAt):
		return StatusRevoked
	case now.Before(k.ValidFrom):
		return StatusPending
	case k.ValidUntil != nil && !now.Before(*k.ValidUntil):
		return StatusRetired
	}
	return StatusActive
}

// window renders the key's window for messages, as [from, until).
func (k Key) window() string {
	end := "open"
	if k.ValidUntil != nil {
		end = k.ValidUntil.UTC().Format(time.RFC3339Nano)
	}
	s := "[" + k.ValidFrom.UTC().Format(time.RFC3339Nano) + ", " + end + ")"
	if k.RevokedAt != nil {
		s += ", revoked at " + k.RevokedAt.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// clone returns a copy of k that shares no pointers with it.
func (k Key) clone() Key {
	if k.ValidUntil != nil {
		t := *k.ValidUntil
		k.ValidUntil = &t
	}
	if k.RevokedAt != nil {
		t := *k.RevokedAt
		k.RevokedAt = &t
	}
	return k
}

// KeyID returns the id of the key with the given note name and key hash,
// "name+hash": the id of the key that made a note signature with that
// name and hash.
func KeyID(name string, hash uint32) string {
	return fmt.Sprintf("%s+%08x", name, hash)
}

// check validates k's public fields and returns the note verifier of its
// verifier key.
func (k Key) check() (note.Verifier, error) {
	v, err := note.NewVerifier(k.VerifierKey)
	if err != nil {
		return nil, invalidf("key %q: verifier key %q is not a note Ed25519 verifier key: %v", k.ID, k.VerifierKey, err)
	}
	// name+hash+data: names hold no '+', base64 data may.
	if parts := strings.SplitN(k.VerifierKey, "+", 3); len(parts) != 3 {
		return nil, invalidf("key %q: verifier key %q has no key data", k.ID, k.VerifierKey)
	} else if _, err := strictb64.DecodeString(parts[2]); err != nil {
		// One key, one text: the lenient decoder of note would accept
		// other spellings of the same key data.
		return nil, invalidf("key %q: verifier key %q: key data is %v", k.ID, k.VerifierKey, err)
	}
	if v.Name() != k.Name {
		return nil, invalidf("key %q: name %q does not match its verifier key, which is named %q", k.ID, k.Name, v.Name())
	}
	if id := KeyID(v.Name(), v.KeyHash()); k.ID != id || !strings.HasPrefix(k.VerifierKey, id+"+") {
		return nil, invalidf("key %q: id does not match its verifier key, whose id is %q", k.ID, id)
	}
	if k.ValidFrom.IsZero() {
		return nil, invalidf("key %q: valid_from is missing", k.ID)
	}
	if k.RevokedAt == nil && k.RevokedReason != "" {
		return nil, invalidf("key %q: revoked_reason without revoked_at", k.ID)
	}
	return v, nil
}

// normalize returns k with its times in UTC and without monotonic clock
// readings, so that it round-trips through JSON unchanged.
func (k Key) normalize() Key {
	k = k.clone()
	k.ValidFrom = k.ValidFrom.UTC()
	if k.ValidUntil != nil {
		*k.ValidUntil = k.ValidUntil.UTC()
	}
	if k.RevokedAt != nil {
		*k.RevokedAt = k.RevokedAt.UTC()
	}
	return k
}

func invalidf(format string, args ...any) error {
	return writ.Errorf(writ.EINVALID, format, args...)
}

func conflictf(format string, args ...any) error {
	return writ.Errorf(writ.ECONFLICT, format, args...)
}

// wrapf returns an application error with the given code that wraps
// sentinel (for errors.Is).
func wrapf(code string, sentinel error, format string, args ...any) error {
	return &writ.Error{Code: code, Message: fmt.Sprintf(format, args...), Err: sentinel}
}
