// Package keyring holds writ's signing keys: the Ed25519 keys that sign
// decision records (audit.signature, named by audit.signed_by) and the
// C2SP signed-note checkpoints of each tenant's chain. One key does both,
// because keys are kept in the golang.org/x/mod/sumdb/note formats: a key
// is named by a note key name, identified by "name+hash" (the note key
// hash, 8 hex digits) and published as a note verifier key.
//
// # Keys and windows
//
// Every key has a validity window [ValidFrom, ValidUntil). Generate makes
// the first key, Rotate retires the active key (its window ends now) and
// makes a new one that starts now, and Revoke ends a key's window at the
// revocation time. At most one key is open (has no end) at a time, and a
// new window never starts before an existing one ends.
//
// A signature is valid only if it verifies and its signing time (the
// record's timestamp) lies inside the key's window: a record signed by a
// retired key after its retirement, or by a revoked key at or after its
// revocation, fails verification with ErrOutsideWindow. Retired and
// revoked keys stay in the ring so that history keeps verifying. When a key
// is compromised, revoke it with an "at" time at or before the earliest
// moment it may have been compromised: signatures dated before "at" stay
// valid, so a late "at" would keep accepting what an attacker signed.
//
// Verification never needs a private key. Verifiers returns every key of
// the ring, retired and revoked ones included, for note.Open; note.Open
// does not know windows, so a caller that knows when a note was signed
// checks Key.ValidAt itself. VerifyRecordSignature checks both.
//
// # Where keys live
//
// Open reads a ring from a directory (mode 0700):
//
//	ring.json     public metadata only: each key's name, id, verifier key,
//	              window and revocation; written atomically
//	<name>.key    one private key per file (mode 0600): the note signer
//	              key text, "PRIVATE+KEY+<name>+<hash>+<keydata>"
//
// Open refuses a private key file that group or others can access, and a
// ring directory or ring.json that group or others can write. A retired or
// revoked key's .key file is never read again and may be deleted.
//
// A ring can also come from elsewhere: FromEnv builds a one-key ring from
// a signer key text (the WRIT_SIGNING_KEY environment variable),
// NewExternal wraps a signer that keeps its key outside writ (a KMS), and
// NewPublic builds a verify-only ring from public keys (offline bundle
// verification).
//
// # What this package must never do
//
// Private keys never go into the ledger database, never appear in a log,
// an error message or formatted output, and are never exported: no
// function of this package returns private key material, and Signer and
// Ring print only public identifiers (key ids, the ring's directory),
// whatever the fmt verb. The package does not log at all.
//
// Signatures over records are over messages the caller chooses
// (SignMessage). They are plain Ed25519 signatures by the same key that
// signs notes, so a message must never be a text that could be taken for a
// note or checkpoint with another meaning: callers domain-separate their
// messages with a fixed first line naming the purpose (as
// record.SignatureMessage does), which no checkpoint origin may use.
package keyring
