package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/writhq/writ/auth"
)

// An API key revocation is not a record, but its tenant's checkpoints
// commit to it. A store places each revocation after the tenant's chain
// head as it stood when the revocation was stored (auth.Key.RevokedAfter),
// so the revocations before a tree size never change once that size is
// reached, and a checkpoint of a tree of size N states, in an extension
// line of its note text, how many of the tenant's revocations stand
// before record N and a digest of them:
//
//	writ-revocations <count> sha256:<64 hex digits>
//
// The line is left out when there are none; a checkpoint without it
// states that there are none (docs/ledger-format.md §5.1).

// revocationsPrefix starts the checkpoint extension line.
const revocationsPrefix = "writ-revocations "

// Revocations is what a checkpoint of a tree of one size commits to: the
// tenant's revocations placed before that size.
type Revocations struct {
	Count  int64
	Digest string // "sha256:" and 64 hex digits
}

// RevocationsBefore is the revocations among keys (one tenant's API keys)
// placed before a tree of the given size: their count, and the SHA-256
// of one line per revocation in key id order,
//
//	<key id> SP <revoked_at, RFC 3339 in UTC as RFC3339Nano writes it> LF
func RevocationsBefore(keys []*auth.Key, size int64) Revocations {
	var in []*auth.Key
	for _, k := range keys {
		if k.RevokedAt != nil && k.RevokedAfter != nil && *k.RevokedAfter < size {
			in = append(in, k)
		}
	}
	slices.SortFunc(in, func(a, b *auth.Key) int { return strings.Compare(a.ID, b.ID) })
	h := sha256.New()
	for _, k := range in {
		fmt.Fprintf(h, "%s %s\n", k.ID, k.RevokedAt.UTC().Format(time.RFC3339Nano))
	}
	return Revocations{Count: int64(len(in)), Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}
}

// Line is the checkpoint extension line, with its LF, or "" when there
// are no revocations.
func (r Revocations) Line() string {
	if r.Count == 0 {
		return ""
	}
	return revocationsPrefix + strconv.FormatInt(r.Count, 10) + " " + r.Digest + "\n"
}

// String says what r counts, for people: "none", "1 revocation
// (sha256:…)", "2 revocations (sha256:…)".
func (r Revocations) String() string {
	switch r.Count {
	case 0:
		return "none"
	case 1:
		return "1 revocation (" + r.Digest + ")"
	}
	return strconv.FormatInt(r.Count, 10) + " revocations (" + r.Digest + ")"
}

// CheckpointRevocations reads what a checkpoint's note text states of the
// tenant's revocations: its revocations line, or none (count 0, the
// digest of nothing) when it has no such line.
func CheckpointRevocations(text string) (Revocations, error) {
	ext, err := checkpointExtensions(text)
	if err != nil {
		return Revocations{}, err
	}
	var found []string
	for _, l := range ext {
		if strings.HasPrefix(l, revocationsPrefix) {
			found = append(found, l)
		}
	}
	switch len(found) {
	case 0:
		return RevocationsBefore(nil, 0), nil
	case 1:
	default:
		return Revocations{}, fmt.Errorf("checkpoint: %d revocations lines", len(found))
	}
	f := strings.Split(strings.TrimPrefix(found[0], revocationsPrefix), " ")
	if len(f) != 2 {
		return Revocations{}, fmt.Errorf("checkpoint: bad revocations line %q", found[0])
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 1 || f[0] != strconv.FormatInt(n, 10) {
		return Revocations{}, fmt.Errorf("checkpoint: bad revocation count %q", f[0])
	}
	d, ok := strings.CutPrefix(f[1], "sha256:")
	if _, err := hex.DecodeString(d); !ok || err != nil || len(d) != 64 || strings.ToLower(d) != d {
		return Revocations{}, fmt.Errorf("checkpoint: bad revocations digest %q", f[1])
	}
	return Revocations{Count: n, Digest: f[1]}, nil
}
