package keyring

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
)

// Ring is a set of signing keys: every key ever used, for verification,
// and where it has them, the means to sign with the active one. A Ring is
// safe for concurrent use. It formats as a summary without key material.
//
// A Ring read by Open does not see changes that another process (the
// writ ledger keys commands) makes to the directory later; open it again
// to pick them up.
type Ring struct {
	mu        sync.RWMutex
	keys      []Key                     // sorted by ValidFrom, then ID
	verifiers map[string]note.Verifier  // for checkpoint notes
	records   map[string]recordVerifier // for record signatures

	// Where private keys come from; at most one is set.
	dir string         // a key directory (Open)
	mem *signerKey     // one key held in memory (FromEnv)
	ext ExternalSigner // one key held elsewhere (NewExternal)
}

// Open reads the key ring in dir. A missing dir is an empty ring; it is
// created (mode 0700) by the first Generate. Open refuses a ring directory
// or ring.json that group or others can write, and any private key file
// (*.key) in dir that group or others can read, write or execute. Private
// keys are read only when a Signer needs them.
func Open(dir string) (*Ring, error) {
	if dir == "" {
		return nil, invalidf("no key ring directory given")
	}
	r := &Ring{dir: dir}
	keys, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := checkName(k.Name); err != nil {
			return nil, invalidf("%s: key %q: %v", filepath.Join(dir, ringFile), k.ID, err)
		}
	}
	if err := r.setKeys(keys); err != nil {
		return nil, invalidf("%s: %s", filepath.Join(dir, ringFile), writ.ErrorMessage(err))
	}
	return r, nil
}

// NewPublic returns a verify-only ring of the given public keys, for
// example from an exported bundle. Each key's VerifierKey must parse and
// match its Name and ID. Its Signer always fails.
func NewPublic(keys []Key) (*Ring, error) {
	r := &Ring{}
	if err := r.setKeys(keys); err != nil {
		return nil, err
	}
	return r, nil
}

// FromEnv returns a ring of the one key given as a note signer key text
// (the WRIT_SIGNING_KEY environment variable), valid from validFrom with
// an open window. Errors never include the key text.
func FromEnv(skey string, validFrom time.Time) (*Ring, error) {
	sk, err := parseSignerKey(skey)
	if err != nil {
		return nil, invalidf("signing key from the environment: %v", err)
	}
	if validFrom.IsZero() {
		return nil, invalidf("signing key from the environment: no valid_from time given")
	}
	r := &Ring{mem: sk}
	k := Key{Name: sk.name, ID: KeyID(sk.name, sk.hash), VerifierKey: sk.vkey, ValidFrom: validFrom}
	if err := r.setKeys([]Key{k}); err != nil {
		return nil, err
	}
	return r, nil
}

// NewExternal returns a ring of the one key key, signed with by s (a KMS,
// say) so that writ never holds its private key. s must name the same key
// (KeyID, Name, KeyHash). Signatures from s are checked against key's
// public key before they are used.
func NewExternal(key Key, s ExternalSigner) (*Ring, error) {
	if s == nil {
		return nil, invalidf("external signer for %q: no signer given", key.ID)
	}
	v, err := key.check()
	if err != nil {
		return nil, err
	}
	if s.KeyID() != key.ID || s.Name() != key.Name || s.KeyHash() != v.KeyHash() {
		return nil, invalidf("external signer names key %q (%s, %08x), not %q", s.KeyID(), s.Name(), s.KeyHash(), key.ID)
	}
	r := &Ring{ext: s}
	if err := r.setKeys([]Key{key}); err != nil {
		return nil, err
	}
	return r, nil
}

// setKeys validates, normalizes and sorts keys and installs them.
func (r *Ring) setKeys(keys []Key) error {
	sorted := make([]Key, 0, len(keys))
	verifiers := make(map[string]note.Verifier, len(keys))
	records := make(map[string]recordVerifier, len(keys))
	names := make(map[string]string, len(keys))
	for _, k := range keys {
		k = k.normalize()
		v, err := k.check()
		if err != nil {
			return err
		}
		if _, dup := verifiers[k.ID]; dup {
			return invalidf("key %q is listed twice", k.ID)
		}
		if other, dup := names[k.Name]; dup {
			return invalidf("keys %q and %q have the same name", other, k.ID)
		}
		verifiers[k.ID] = v
		records[k.ID] = newRecordVerifier(k.VerifierKey)
		names[k.Name] = k.ID
		sorted = append(sorted, k)
	}
	sortKeys(sorted)
	r.keys, r.verifiers, r.records = sorted, verifiers, records
	return nil
}

func sortKeys(keys []Key) {
	slices.SortStableFunc(keys, func(a, b Key) int {
		if c := a.ValidFrom.Compare(b.ValidFrom); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Keys returns the public description of every key, oldest first.
func (r *Ring) Keys() []Key {
	r.mu.RLock()
	defer r.mu.RUnlock()
	keys := make([]Key, len(r.keys))
	for i, k := range r.keys {
		keys[i] = k.clone()
	}
	return keys
}

// Key returns the key with the given id.
func (r *Ring) Key(id string) (Key, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if i := r.index(id); i >= 0 {
		return r.keys[i].clone(), true
	}
	return Key{}, false
}

func (r *Ring) index(id string) int {
	return slices.IndexFunc(r.keys, func(k Key) bool { return k.ID == id })
}

// Dir returns the ring's directory, or "" for a ring that has none.
func (r *Ring) Dir() string { return r.dir }

// Verifiers returns the note verifiers of every key, retired and revoked
// ones included, so that history stays verifiable. They do not check
// windows: see Key.ValidAt.
func (r *Ring) Verifiers() note.Verifiers {
	r.mu.RLock()
	defer r.mu.RUnlock()
	list := make([]note.Verifier, 0, len(r.keys))
	for _, k := range r.keys {
		list = append(list, r.verifiers[k.ID])
	}
	return note.VerifierList(list...)
}

// VerifyRecordSignature checks that sig is the Ed25519 signature of msg by
// the key with the given id (a record's audit.signed_by), and that
// signedAt (the record's time) lies inside the key's window. It returns
// an error wrapping ErrUnknownKey, ErrBadSignature or ErrOutsideWindow.
// The signature is checked first: signedAt comes from the signed bytes and
// means nothing unless they verify.
func (r *Ring) VerifyRecordSignature(id string, msg, sig []byte, signedAt time.Time) error {
	r.mu.RLock()
	i := r.index(id)
	var k Key
	var v recordVerifier
	if i >= 0 {
		k, v = r.keys[i], r.records[id]
	}
	r.mu.RUnlock()
	if i < 0 {
		return wrapf(writ.ENOTFOUND, ErrUnknownKey, "signed by unknown key %q", id)
	}
	if !v.verify(msg, sig) {
		return wrapf(writ.EINVALID, ErrBadSignature, "signature by %s does not verify", id)
	}
	if !k.ValidAt(signedAt) {
		return wrapf(writ.EINVALID, ErrOutsideWindow, "signed by %s at %s, outside its validity window %s",
			id, signedAt.UTC().Format(time.RFC3339Nano), k.window())
	}
	return nil
}

// Signer returns a signer for the key active at now (the key whose
// window holds now). It fails with an error wrapping ErrNoActiveKey if
// there is none, or if the ring does not have its private key.
func (r *Ring) Signer(now time.Time) (*Signer, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var k *Key
	for i := range r.keys {
		if r.keys[i].ValidAt(now) && (k == nil || !r.keys[i].ValidFrom.Before(k.ValidFrom)) {
			k = &r.keys[i]
		}
	}
	if k == nil {
		return nil, wrapf(writ.ENOTFOUND, ErrNoActiveKey, "no active signing key; run writ ledger keys generate")
	}
	s := &Signer{key: k.clone(), hash: r.verifiers[k.ID].KeyHash(), verify: r.verifiers[k.ID]}
	switch {
	case r.mem != nil && KeyID(r.mem.name, r.mem.hash) == k.ID:
		s.note, s.sign = r.mem.note, r.mem.sign
	case r.ext != nil && r.ext.KeyID() == k.ID:
		s.ext = r.ext
	case r.dir != "":
		sk, err := readKeyFile(r.dir, *k)
		if err != nil {
			return nil, err
		}
		s.note, s.sign = sk.note, sk.sign
	default:
		return nil, wrapf(writ.ENOTFOUND, ErrNoActiveKey, "signing key %s is active but this ring holds only its public key", k.ID)
	}
	return s, nil
}

// Generate creates the ring's first active key, valid from now with an
// open window, writes its private key to <name>.key and records it in
// ring.json. name is the key's note name; "" names it from the clock
// ("writ-2026-11-22T031500Z"). It fails if a key is already active (use
// Rotate). rand is the source of randomness; nil means crypto/rand.
func (r *Ring) Generate(rand io.Reader, now time.Time, name string) (Key, error) {
	return r.create(rand, now, name, false)
}

// Rotate retires the active key (its window ends at now) and creates a
// new key valid from now, as Generate does. It fails if no key is active
// (use Generate).
func (r *Ring) Rotate(rand io.Reader, now time.Time, name string) (Key, error) {
	return r.create(rand, now, name, true)
}

func (r *Ring) create(rnd io.Reader, now time.Time, name string, rotate bool) (Key, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	now = now.UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == "" {
		return Key{}, invalidf("keys can only be created in a key ring directory")
	}
	open := -1 // the key with an open window
	for i, k := range r.keys {
		if k.ValidUntil == nil && k.RevokedAt == nil {
			open = i
		}
	}
	switch {
	case !rotate && open >= 0:
		return Key{}, conflictf("key %s is already %s; use writ ledger keys rotate to replace it", r.keys[open].ID, r.keys[open].Status(now))
	case rotate && open < 0:
		return Key{}, conflictf("no active key to rotate; run writ ledger keys generate")
	case rotate && !now.After(r.keys[open].ValidFrom):
		return Key{}, conflictf("key %s became valid at %s; it cannot be rotated at %s",
			r.keys[open].ID, r.keys[open].ValidFrom.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	// Windows never overlap: the new one starts after every other starts
	// and after every closed one ends.
	for _, k := range r.keys {
		if k.ValidFrom.After(now) || (k.ValidUntil != nil && k.ValidUntil.After(now)) {
			return Key{}, conflictf("key %s has the window %s, which does not end by %s; is the clock behind?",
				k.ID, k.window(), now.Format(time.RFC3339Nano))
		}
	}
	if err := ensureDir(r.dir); err != nil {
		return Key{}, err
	}
	name, err := r.newName(name, now)
	if err != nil {
		return Key{}, err
	}
	skey, vkey, err := note.GenerateKey(rnd, name)
	if err != nil {
		return Key{}, fmt.Errorf("generate key: %w", err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Key{}, fmt.Errorf("generate key: %w", err)
	}
	k := Key{Name: name, ID: KeyID(v.Name(), v.KeyHash()), VerifierKey: vkey, ValidFrom: now}

	keys := make([]Key, 0, len(r.keys)+1)
	for _, old := range r.keys {
		keys = append(keys, old.clone())
	}
	if rotate {
		keys[open].ValidUntil = &now
	}
	keys = append(keys, k)
	sortKeys(keys)

	// The private key first, so that ring.json never names a key whose
	// private key was not written.
	keyPath, err := writeKeyFile(r.dir, name, skey)
	if err != nil {
		return Key{}, err
	}
	if err := writeRing(r.dir, keys); err != nil {
		os.Remove(keyPath)
		return Key{}, err
	}
	if err := r.setKeys(keys); err != nil {
		return Key{}, err
	}
	return k.clone(), nil
}

// newName returns the given name, checked, or a name made from the clock
// that no key (and no file) of the ring has.
func (r *Ring) newName(name string, now time.Time) (string, error) {
	taken := func(n string) bool {
		if slices.ContainsFunc(r.keys, func(k Key) bool { return k.Name == n }) {
			return true
		}
		_, err := os.Lstat(keyPath(r.dir, n))
		return err == nil
	}
	if name != "" {
		if err := checkName(name); err != nil {
			return "", invalidf("key name %q: %v", name, err)
		}
		if taken(name) {
			return "", conflictf("key name %q is already used in %s", name, r.dir)
		}
		return name, nil
	}
	base := "writ-" + now.Format("2006-01-02T150405Z")
	name = base
	for i := 2; taken(name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name, nil
}

// checkName reports whether name can name a key: a note key name that is
// also a safe file name. It allows ASCII letters, digits, '.', '_' and
// '-', at most 128 of them, not starting with '.' or '-'.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty key name")
	}
	if len(name) > 128 {
		return fmt.Errorf("longer than 128 characters")
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("starts with %q", name[0])
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("only ASCII letters, digits, '.', '_' and '-' are allowed")
		}
	}
	return nil
}

// Revoke revokes the key with the given id as of at: signatures dated at
// or after at fail verification, and the key's window ends at at if it
// ended later or was open. Signatures dated before at stay valid, so at
// must be at or before the earliest moment the key may have been
// compromised. at must not be after now. A key already revoked can only
// have its revocation moved earlier. reason is kept for operators.
func (r *Ring) Revoke(id string, at time.Time, reason string, now time.Time) (Key, error) {
	at, now = at.UTC(), now.UTC()
	reason = strings.TrimSpace(reason)
	if len(reason) > 1024 {
		return Key{}, invalidf("revocation reason is longer than 1024 bytes")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == "" {
		return Key{}, invalidf("keys can only be revoked in a key ring directory")
	}
	i := r.index(id)
	if i < 0 {
		return Key{}, wrapf(writ.ENOTFOUND, ErrUnknownKey, "no key %q in %s", id, r.dir)
	}
	if at.IsZero() {
		return Key{}, invalidf("no revocation time given")
	}
	if at.After(now) {
		return Key{}, invalidf("revocation time %s is after now (%s); revocations cannot be scheduled",
			at.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	keys := make([]Key, len(r.keys))
	for j, k := range r.keys {
		keys[j] = k.clone()
	}
	k := &keys[i]
	if k.RevokedAt != nil && !at.Before(*k.RevokedAt) {
		return Key{}, conflictf("key %s is already revoked at %s; a revocation can only be moved earlier",
			id, k.RevokedAt.Format(time.RFC3339Nano))
	}
	k.RevokedAt = &at
	if reason != "" || k.RevokedReason == "" {
		k.RevokedReason = reason
	}
	if k.ValidUntil == nil || k.ValidUntil.After(at) {
		until := at
		k.ValidUntil = &until
	}
	if err := ensureDir(r.dir); err != nil {
		return Key{}, err
	}
	if err := writeRing(r.dir, keys); err != nil {
		return Key{}, err
	}
	if err := r.setKeys(keys); err != nil {
		return Key{}, err
	}
	return keys[i].clone(), nil
}

// String summarizes the ring without key material.
func (r *Ring) String() string {
	if r == nil {
		return "keyring.Ring(nil)"
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.ID
	}
	src := "public"
	switch {
	case r.dir != "":
		src = "dir " + r.dir
	case r.mem != nil:
		src = "env"
	case r.ext != nil:
		src = "external"
	}
	return fmt.Sprintf("keyring.Ring(%s: %s)", src, strings.Join(ids, ", "))
}

// GoString is String.
func (r *Ring) GoString() string { return r.String() }

// Format prints String for every verb.
func (r *Ring) Format(f fmt.State, verb rune) { io.WriteString(f, r.String()) }
