// Package ledger appends decision records to each tenant's hash chain and
// declares the storage operations it needs from a store.
//
// A record is sealed inside the store's append transaction: the store hands
// the tenant's current head to a SealFunc, which fills the record's audit
// block (seq, prev_hash, record_hash) and returns the exact bytes to keep.
// Sealing inside the transaction is what keeps a chain linear when several
// writers append at once. Stores never re-derive sealed bytes; they keep
// and serve them as they are.
//
// The Appender batches concurrent appends into one store transaction and
// one sync (group commit). ledger never answers a caller before the store
// reports the batch durable.
package ledger

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// Head is the last sealed position of a tenant's chain. The zero Head
// (Seq 0) stands before the first record; its Hash is writ.GenesisHash.
type Head struct {
	Seq  int64
	Hash string
}

// SealFunc seals the record of e as the record following prev: it sets
// e.Record.Audit and returns the exact bytes the store must keep. Its
// record_hash is the chain's (record.PresealedHash of the record at
// prev.Seq+1 after prev.Hash); only the signature is its own. It runs
// inside the store's transaction, so it must be cheap: the
// canonicalization is done beforehand (Entry.Presealed), and the only I/O
// it may do is what signing needs (a key source that notices a rotated
// key ring, a KMS). SealBatch calls it for several entries of a batch at
// once, so it must be safe for concurrent use.
type SealFunc func(prev Head, e *Entry) (raw []byte, err error)

// SealBatch seals entries[i], for each i of todo in order, as the next
// record of its tenant's chain, starting from heads (keyed by tenant),
// which it moves to the new heads. The chain is computed first, in order
// (each record_hash covers the hash before it; record.PresealedHash);
// the seals, whose Ed25519 signatures are most of their cost and are not
// part of the chain, then run in parallel on up to GOMAXPROCS
// goroutines, the caller's one of them. Each seal must give the record_hash the chain computed,
// else the batch fails. raws[i] is entry i's sealed bytes (nil for an
// entry not in todo). On an error, heads is left in an unspecified state:
// the store discards the batch.
func SealBatch(seal SealFunc, heads map[string]Head, entries []*Entry, todo []int) (raws [][]byte, err error) {
	raws = make([][]byte, len(entries))
	if len(todo) == 0 {
		return raws, nil
	}
	prevs := make([]Head, len(entries))
	hashes := make([]string, len(entries))
	for _, i := range todo {
		e := entries[i]
		if e.Presealed == nil {
			if e.Presealed, err = record.Preseal(e.Record); err != nil {
				return nil, fmt.Errorf("canonicalize record %s: %w", e.Record.RecordID, err)
			}
		}
		prev := heads[e.Record.TenantID]
		if prev.Seq == 0 {
			prev.Hash = writ.GenesisHash
		}
		hash, err := record.PresealedHash(e.Presealed, prev.Seq+1, prev.Hash)
		if err != nil {
			return nil, fmt.Errorf("hash record %s: %w", e.Record.RecordID, err)
		}
		prevs[i], hashes[i] = heads[e.Record.TenantID], hash
		heads[e.Record.TenantID] = Head{Seq: prev.Seq + 1, Hash: hash}
	}
	errs := make([]error, len(entries))
	sealOne := func(i int) {
		e := entries[i]
		raw, err := seal(prevs[i], e)
		if err == nil {
			// The seal must follow the chain computed above; one that
			// does not would fork it.
			if a := e.Record.Audit; a.Seq != prevs[i].Seq+1 || a.RecordHash != hashes[i] {
				err = fmt.Errorf("the SealFunc sealed record %s at seq %d with hash %q, not as the chain's record %d (%s)", e.Record.RecordID, a.Seq, a.RecordHash, prevs[i].Seq+1, hashes[i])
			}
		}
		raws[i], errs[i] = raw, err
	}
	// The caller (the store's single writer) seals too, beside
	// GOMAXPROCS-1 helpers: on a busy machine a helper may wait its turn
	// behind the request handlers, and the writer, which every check of
	// the batch waits for, must not stand idle meanwhile.
	var next atomic.Int64
	work := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(todo) {
				return
			}
			sealOne(todo[k])
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	for _, i := range todo {
		if errs[i] != nil {
			return nil, fmt.Errorf("seal record %s: %w", entries[i].Record.RecordID, errs[i])
		}
	}
	return raws, nil
}

// RecordSigner signs record hashes (a key of the signing key ring, or a
// KMS behind it).
type RecordSigner interface {
	// KeyID names the key, as the record's audit.signed_by.
	KeyID() string
	// SignMessage returns the Ed25519 signature of msg.
	SignMessage(msg []byte) ([]byte, error)
}

// Signer signs records and checkpoints with one key.
type Signer interface {
	RecordSigner
	note.Signer
}

// KeySource returns the key to sign with at a given time: the key whose
// validity window holds it. A record is signed with the key valid at the
// record's timestamp, which is what verification checks.
type KeySource func(at time.Time) (Signer, error)

// NewSeal returns the SealFunc of the chain: it links the record to prev,
// sets record_hash over the record's canonical bytes, and, with keys,
// signs record.SignatureMessage(record_hash) with the key valid at the
// record's timestamp, as audit.signature (standard base64), with
// audit.signed_by naming the key.
func NewSeal(keys KeySource) SealFunc {
	return func(prev Head, e *Entry) ([]byte, error) {
		if prev.Seq == 0 {
			prev.Hash = writ.GenesisHash
		}
		body := e.Presealed
		if body == nil {
			var err error
			if body, err = record.Preseal(e.Record); err != nil {
				return nil, fmt.Errorf("canonicalize record: %w", err)
			}
		}
		s := record.Seal{Seq: prev.Seq + 1, PrevHash: prev.Hash}
		// The signature as sealed: SealPresealed writes these values into
		// raw as they are (it refuses any that would need escaping), so
		// the record's audit block is set without reading raw back.
		var signed *struct{ by, sig string }
		if keys != nil {
			signed = new(struct{ by, sig string })
			signer, err := keys(e.Record.Timestamp)
			if err != nil {
				return nil, fmt.Errorf("no key to sign record %s: %w", e.Record.RecordID, err)
			}
			s.Sign = func(hash string) (string, string, error) {
				sig, err := signer.SignMessage(record.SignatureMessage(hash))
				if err != nil {
					return "", "", err
				}
				signed.by, signed.sig = signer.KeyID(), base64.StdEncoding.EncodeToString(sig)
				return signed.by, signed.sig, nil
			}
		}
		raw, hash, err := record.SealPresealed(body, s)
		if err != nil {
			return nil, err
		}
		e.Record.Audit = writ.Audit{Seq: s.Seq, PrevHash: s.PrevHash, RecordHash: hash}
		if signed != nil {
			e.Record.Audit.SignedBy, e.Record.Audit.Signature = signed.by, signed.sig
		}
		return raw, nil
	}
}

// Seal is the unsigned SealFunc of the chain (NewSeal(nil)).
var Seal SealFunc = NewSeal(nil)

// Blob is a content-addressed pinned input (a request envelope, a pack
// file, a pack manifest). Hash is record.Digest(Data).
type Blob struct {
	Hash string
	Kind string // "envelope", "pack_file", "pack_manifest"
	Data []byte
}

// IdempotencyClaim binds an idempotency key to an argument digest.
type IdempotencyClaim struct {
	Key        string
	ArgsDigest string
}

// MaxStoryRecords bounds the records Store.DecisionRecords returns for one
// decision: a decision's story is a handful of records, and a bound keeps
// a pathological one from being read whole.
const MaxStoryRecords = 1000

// ReportClaim binds a decision's execution report to the digest of what
// was reported: a decision has at most one report.
type ReportClaim struct {
	DecisionID   string
	ReportDigest string
}

// BlockKey identifies an action that must not be retried unchanged: the
// same decision key and arguments under the same pack.
type BlockKey struct {
	DecisionKey string
	ArgsDigest  string
	PackHash    string
}

// Prior is an earlier answer found in place of a new append.
type Prior struct {
	ArgsDigest string
	Receipt    []byte
	RecordID   string
}

// Priors are the earlier answers a check looks up before deciding: the
// answer under its idempotency key and the first answer for its action if
// that is blocked, each nil when there is none.
type Priors struct {
	Idempotent *Prior
	Blocked    *Prior
}

// Entry is one record to append and what travels with it in the same
// transaction.
type Entry struct {
	Record *writ.Record
	// Presealed is record.Preseal(Record), computed by the caller outside
	// the commit path; Seal computes it when it is nil.
	Presealed []byte
	// Receipt is the JSON receipt answered for this record.
	Receipt []byte
	// Envelope, when set, is the request envelope the record pins:
	// record.Digest(Envelope) is Record.Replay.ReplayPacketID. It is
	// stored with the record, keyed by the record's place in its chain,
	// and read back with Store.Envelope. Unlike a blob it has no
	// content-addressed index: a check's envelope is new bytes every
	// time, and a random key in an index costs a page of its own at every
	// commit.
	Envelope []byte
	// Blobs are stored content-addressed (insert if absent).
	Blobs []Blob
	// Idempotency, when set, is claimed in the same transaction.
	Idempotency *IdempotencyClaim
	// Block, when set, marks the action as blocked (first record wins).
	Block *BlockKey
	// RunEvent, when set, is appended to its run in the same transaction,
	// with RecordID set to the sealed record's id.
	RunEvent *RunEvent
	// NewApprovals are approval requests created by this entry's check,
	// inserted in the same transaction with RecordID set.
	NewApprovals []NewApproval
	// ApprovalEvent, when set, is appended in the same transaction under
	// its guard (see ApprovalEvent); when the guard fails, the entry is
	// skipped and Refused says why.
	ApprovalEvent *ApprovalEvent
	// Report, when set, claims the decision's one execution report in the
	// same transaction. When the decision already has a report (from an
	// earlier transaction or an earlier entry of the same batch), the
	// entry is skipped and Prior holds the first report's answer, with
	// ArgsDigest the first report's digest.
	Report *ReportClaim
	// Shadow, when set, is the shadow pack's decision of this entry's
	// check, stored with the record (never when the entry is skipped).
	Shadow *ShadowDecision
	// HistoryReads are the history values the entry's decision read (and
	// its record pins); Contributions are what the entry adds to the
	// history aggregates. When a read value changed before the entry could
	// be appended, the entry is skipped and Refused is RefusedHistory (see
	// history.go).
	HistoryReads  []HistoryRead
	Contributions []Contribution
	// PendingContributions are what the entry's decision adds to the
	// aggregates that count executed decisions, kept under its
	// decision_id until an entry Executes it. Executes, when set, names a
	// decision of the same tenant whose execution succeeded: its pending
	// contributions are added, in this entry's transaction (see
	// history.go).
	PendingContributions []Contribution
	Executes             string
	// ExecutedUsage, with Executes, is the execution's own usage: a
	// pending sum of a usage dimension adds it instead of the usage the
	// check declared (see Executed).
	ExecutedUsage *writ.Usage
	// Classified are the raw values behind the classified references of
	// Envelope, written to the classified store with the record.
	Classified []ClassifiedValue
	// Erasure, when set, deletes classified values in the same
	// transaction (an erasure's record).
	Erasure *Erasure

	// Set by Store.Append:
	// Raw is the sealed bytes (when the entry was appended).
	Raw []byte
	// Prior is set instead, when the idempotency key was already claimed
	// (by an earlier transaction or an earlier entry of the same batch):
	// the entry was not appended and Prior holds the first claim's answer.
	Prior *Prior
	// Refused is set instead, when the entry's approval event failed its
	// guard: one of the Refused* reasons. The entry was not appended.
	Refused string
}

// Store is what the ledger and the engine need from a store. Every method
// is scoped to one tenant; nothing reads across tenants.
type Store interface {
	// Append seals and writes entries in one transaction and returns only
	// once it is durable. For each entry, in order: if its idempotency key
	// is already claimed, set entry.Prior and skip it; if a history value
	// it read changed (HistoryBatch.Fresh), set entry.Refused to
	// RefusedHistory and skip it; if its approval
	// event fails its guard, set entry.Refused and skip it; otherwise call
	// seal with the tenant's head, insert the record with the returned
	// bytes, its receipt, blobs, idempotency claim, block, run event, new
	// approval requests, approval event, shadow decision and history
	// contributions, and advance
	// the head. Settle holds these rules (an execution report comes
	// first, see Entry.Report); a store runs it inside its transaction
	// and keeps only the SQL. If
	// Append returns an error, nothing of the batch is durable.
	Append(ctx context.Context, entries []*Entry, seal SealFunc) error
	// Record returns one record exactly as sealed, or an ENOTFOUND error.
	Record(ctx context.Context, tenantID, recordID string) (*writ.StoredRecord, error)
	// Records lists records matching q in chain order (oldest first).
	Records(ctx context.Context, q writ.RecordQuery) (*writ.RecordPage, error)
	// Receipt returns the receipt answered with a record, or ENOTFOUND.
	Receipt(ctx context.Context, tenantID, recordID string) ([]byte, error)
	// Priors returns what a check looks up before it decides, as one read
	// where the store can: the first answer under the tenant's
	// idempotency key (none when the key is empty) and the first answer
	// for the blocked action block.
	Priors(ctx context.Context, tenantID, idempotencyKey string, block BlockKey) (Priors, error)
	// DecisionRecords returns every record of the tenant whose decision_id
	// is decisionID, in chain order (none is not an error).
	DecisionRecords(ctx context.Context, tenantID, decisionID string) ([]writ.StoredRecord, error)
	// Report returns the answer of a decision's execution report (its
	// ArgsDigest is the report's digest), or nil when there is none.
	Report(ctx context.Context, tenantID, decisionID string) (*Prior, error)
	// InFlight returns up to limit of the tenant's IN_FLIGHT records with
	// seq > after whose decision has no execution report, in chain order.
	InFlight(ctx context.Context, tenantID string, after int64, limit int) ([]writ.StoredRecord, error)
	// PutBlobs stores blobs content-addressed (insert if absent), durably.
	PutBlobs(ctx context.Context, blobs []Blob) error
	// Blob returns a blob by hash, or ENOTFOUND.
	Blob(ctx context.Context, hash string) ([]byte, error)
	// Envelope returns the request envelope appended with the tenant's
	// record seq (Entry.Envelope) if its content address is hash, else
	// the blob hash (records appended before envelopes were kept with
	// their records stored them as blobs), else ENOTFOUND. The bytes are
	// as stored: callers that trust them check their digest.
	Envelope(ctx context.Context, tenantID string, seq int64, hash string) ([]byte, error)
	// Head returns a tenant's chain head (the zero Head for an empty chain).
	Head(ctx context.Context, tenantID string) (Head, error)
	// Tenants lists the tenants that have records.
	Tenants(ctx context.Context) ([]string, error)
	// Chain returns up to limit raw records of a tenant with seq > after,
	// in seq order.
	Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error)
	// ReadHashes returns the tenant's stored tree hashes at the given tlog
	// storage indexes, in order; an index not stored is an error. Append
	// stores, for each appended record, the hashes TreeHashes returns, in
	// the same transaction.
	ReadHashes(ctx context.Context, tenantID string, indexes []int64) ([]tlog.Hash, error)
	// PutCheckpoint stores a signed checkpoint. Storing the same
	// checkpoint again is a no-op; a different checkpoint of the same
	// tenant and size is an ECONFLICT error and is not stored.
	PutCheckpoint(ctx context.Context, cp *Checkpoint) error
	// Checkpoints lists a tenant's checkpoints by increasing size.
	Checkpoints(ctx context.Context, tenantID string) ([]*Checkpoint, error)
	// LatestCheckpoint returns the tenant's largest checkpoint, or nil.
	LatestCheckpoint(ctx context.Context, tenantID string) (*Checkpoint, error)
	// CheckpointAt returns the tenant's checkpoint of one size, or ENOTFOUND.
	CheckpointAt(ctx context.Context, tenantID string, size int64) (*Checkpoint, error)
	// StartRun appends a run's first event (seq 1). A run id that already
	// has events is an ECONFLICT error.
	StartRun(ctx context.Context, ev *RunEvent) error
	// RunEvents returns a run's events in seq order, or ENOTFOUND.
	RunEvents(ctx context.Context, tenantID, runID string) ([]RunEvent, error)
	// RunStart returns a run's first event (seq 1), or ENOTFOUND: one
	// indexed read, for a check that appends to the run.
	RunStart(ctx context.Context, tenantID, runID string) (*RunEvent, error)
	// RunIDs returns up to limit of the tenant's run ids greater than
	// after, in increasing (byte) order.
	RunIDs(ctx context.Context, tenantID, after string, limit int) ([]string, error)
	ApprovalStore
	ShadowStore
	HistoryStore
	EvidenceReader
	TranscriptReader
	// ScanHashes returns up to limit of the tenant's stored tree hashes
	// from storage index from on, in index order, stopping early at the
	// first index not stored.
	ScanHashes(ctx context.Context, tenantID string, from int64, limit int) ([]tlog.Hash, error)
	Close() error
}
