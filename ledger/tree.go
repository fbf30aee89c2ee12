package ledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/internal/strictb64"
)

// Each tenant's records are the leaves of an RFC 6962 Merkle tree, in seq
// order: the leaf of the record at seq is its stored (sealed) bytes, leaf
// index seq-1, leaf hash SHA-256(0x00 || bytes). Stores keep the tree as
// the hashes golang.org/x/mod/sumdb/tlog says to store, at tlog's storage
// indexes, so any inclusion or consistency proof is read from immutable
// hashes in O(log n).

// TreeHashes returns the tree hashes to store with the record sealed as
// raw at seq, and the storage index of the first; the others follow at
// consecutive indexes. r must read the tenant's hashes stored so far,
// including those of earlier records of the same transaction.
func TreeHashes(seq int64, raw []byte, r tlog.HashReader) (first int64, hashes []tlog.Hash, err error) {
	if seq < 1 {
		return 0, nil, fmt.Errorf("tree: seq %d is not a record position", seq)
	}
	hashes, err = tlog.StoredHashes(seq-1, raw, r)
	if err != nil {
		return 0, nil, fmt.Errorf("tree: hashes of record %d: %w", seq, err)
	}
	return tlog.StoredHashIndex(0, seq-1), hashes, nil
}

// HashStore reads a tenant's stored tree hashes, as Store.ReadHashes
// does: what proofs and checkpoints are computed from.
type HashStore interface {
	ReadHashes(ctx context.Context, tenantID string, indexes []int64) ([]tlog.Hash, error)
}

// HashReader reads one tenant's stored tree hashes from a store.
func HashReader(ctx context.Context, st HashStore, tenantID string) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		return st.ReadHashes(ctx, tenantID, indexes)
	})
}

// Checkpoint is a signed statement of a tenant's tree at one size, in the
// C2SP tlog-checkpoint format: the note text is
//
//	<origin>\n<size>\n<base64 root hash>\n
//
// then, when the tenant has revocations placed before that size, one
// extension line committing to them (Revocations.Line), followed by a
// blank line and note signature lines (C2SP signed-note).
type Checkpoint struct {
	TenantID string
	Size     int64
	Root     tlog.Hash
	// Note is the signed note, exactly as signed.
	Note []byte
	// IssuedAt is when writ signed it.
	IssuedAt time.Time
}

// Origin is the checkpoint origin line of a tenant's log: the ledger's
// name and the tenant, "<ledger>/<tenant>".
func Origin(ledgerName, tenantID string) string { return ledgerName + "/" + tenantID }

// CheckpointText is the body of a checkpoint note.
func CheckpointText(origin string, size int64, root tlog.Hash) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
}

// ParseCheckpointText reads the origin, size and root of a checkpoint
// body. Extension lines after the root must each be non-empty and end in
// LF (C2SP tlog-checkpoint); CheckpointRevocations reads writ's.
func ParseCheckpointText(text string) (origin string, size int64, root tlog.Hash, err error) {
	if _, err := checkpointExtensions(text); err != nil {
		return "", 0, root, err
	}
	lines := strings.SplitN(text, "\n", 4)
	origin = lines[0]
	if origin == "" {
		return "", 0, root, errors.New("checkpoint: empty origin")
	}
	size, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || lines[1] != strconv.FormatInt(size, 10) {
		return "", 0, root, fmt.Errorf("checkpoint: bad tree size %q", lines[1])
	}
	h, err := strictb64.DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize {
		return "", 0, root, fmt.Errorf("checkpoint: bad root hash %q", lines[2])
	}
	copy(root[:], h)
	return origin, size, root, nil
}

// checkpointExtensions returns the extension lines of a checkpoint body,
// those after its first three, without their LF.
func checkpointExtensions(text string) ([]string, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 {
		return nil, errors.New("checkpoint: want origin, size and root hash lines")
	}
	if lines[3] == "" {
		return nil, nil
	}
	if !strings.HasSuffix(lines[3], "\n") {
		return nil, errors.New("checkpoint: the last extension line does not end in a newline")
	}
	ext := strings.Split(strings.TrimSuffix(lines[3], "\n"), "\n")
	if slices.Contains(ext, "") {
		return nil, errors.New("checkpoint: empty extension line")
	}
	return ext, nil
}

// APIKeyLister lists a tenant's API keys, revoked ones included
// (auth.Store does; both writ stores are one): where a checkpoint's
// revocations come from.
type APIKeyLister interface {
	APIKeys(ctx context.Context, tenantID string) ([]*auth.Key, error)
}

// CheckpointStore is what signing and issuing a checkpoint read and
// write: the tenant's tree hashes and head, its checkpoints, and its API
// keys, whose revocations a checkpoint commits to. Both stores are one. A
// store that lists no API keys (a wrapper that embeds only Store) is not
// one and does not compile as one, so no checkpoint can state that a
// tenant has no revocations for want of a key store.
type CheckpointStore interface {
	HashStore
	APIKeyLister
	Tenants(ctx context.Context) ([]string, error)
	Head(ctx context.Context, tenantID string) (Head, error)
	PutCheckpoint(ctx context.Context, cp *Checkpoint) error
	LatestCheckpoint(ctx context.Context, tenantID string) (*Checkpoint, error)
}

// SignCheckpoint computes the tenant's tree root at size from its stored
// hashes and signs a checkpoint for it, which also commits to the
// tenant's revocations placed before size (RevocationsBefore over
// keys.APIKeys).
func SignCheckpoint(ctx context.Context, st HashStore, keys APIKeyLister, signer note.Signer, ledgerName, tenantID string, size int64, now time.Time) (*Checkpoint, error) {
	root, err := tlog.TreeHash(size, HashReader(ctx, st, tenantID))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: tree hash of %s at %d: %w", tenantID, size, err)
	}
	apiKeys, err := keys.APIKeys(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: revocations of %s: %w", tenantID, err)
	}
	text := CheckpointText(Origin(ledgerName, tenantID), size, root) + RevocationsBefore(apiKeys, size).Line()
	msg, err := note.Sign(&note.Note{Text: text}, signer)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: sign: %w", err)
	}
	return &Checkpoint{TenantID: tenantID, Size: size, Root: root, Note: msg, IssuedAt: now.UTC()}, nil
}

// OpenCheckpoint verifies a checkpoint's signatures with the given
// verifiers and returns what it states.
func OpenCheckpoint(msg []byte, verifiers note.Verifiers) (origin string, size int64, root tlog.Hash, err error) {
	n, err := note.Open(msg, verifiers)
	if err != nil {
		return "", 0, root, err
	}
	return ParseCheckpointText(n.Text)
}

// IssueCheckpoint signs and stores a checkpoint of the tenant's tree at
// its current size, unless the latest checkpoint already covers it. The
// store refuses a second, different checkpoint of the same size, so the
// log never signs two inconsistent checkpoints: every root is computed
// from the same immutable stored hashes.
func IssueCheckpoint(ctx context.Context, st CheckpointStore, signer note.Signer, ledgerName, tenantID string, now time.Time) (*Checkpoint, error) {
	head, err := st.Head(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if head.Seq == 0 {
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("tenant %s has no records to checkpoint", tenantID)}
	}
	latest, err := st.LatestCheckpoint(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if latest != nil && latest.Size >= head.Seq {
		return latest, nil
	}
	cp, err := SignCheckpoint(ctx, st, st, signer, ledgerName, tenantID, head.Seq, now)
	if err != nil {
		return nil, err
	}
	if err := st.PutCheckpoint(ctx, cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// InclusionProof proves the record at seq is in the tenant's tree of the
// given size.
type InclusionProof struct {
	TenantID string
	Seq      int64
	TreeSize int64
	LeafHash tlog.Hash
	Proof    tlog.RecordProof
}

// ProveInclusion builds the inclusion proof of the record at seq against
// the tenant's tree at size, from stored hashes.
func ProveInclusion(ctx context.Context, st HashStore, tenantID string, seq, size int64) (*InclusionProof, error) {
	if seq < 1 || seq > size {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("record %d is not in a tree of size %d", seq, size)}
	}
	r := HashReader(ctx, st, tenantID)
	p, err := tlog.ProveRecord(size, seq-1, r)
	if err != nil {
		return nil, fmt.Errorf("prove record %d in tree %d: %w", seq, size, err)
	}
	leaf, err := r.ReadHashes([]int64{tlog.StoredHashIndex(0, seq-1)})
	if err != nil {
		return nil, err
	}
	return &InclusionProof{TenantID: tenantID, Seq: seq, TreeSize: size, LeafHash: leaf[0], Proof: p}, nil
}

// ProveConsistency builds the proof that the tenant's tree at oldSize is a
// prefix of its tree at size.
func ProveConsistency(ctx context.Context, st HashStore, tenantID string, oldSize, size int64) (tlog.TreeProof, error) {
	if oldSize < 1 || oldSize > size {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("no consistency proof from size %d to %d", oldSize, size)}
	}
	return tlog.ProveTree(size, oldSize, HashReader(ctx, st, tenantID))
}

// LeafHash is the Merkle leaf hash of a stored record.
func LeafHash(raw []byte) tlog.Hash { return tlog.RecordHash(raw) }
