package verify

import (
	"context"
	"errors"
	"time"

	"github.com/writhq/writ/keyring"
)

// Store is what a full verification of a store reads: its records and
// checkpoints with their heads, its tree hashes, its API keys (their
// signatures, and the revocations checkpoints commit to), and what it
// keeps beside the records (receipts, run events, approval requests and
// events, shadow decisions, index rows, blobs). Both stores implement it;
// a store that lacks one of these does not compile as one, so nothing is
// skipped because a store could not be asked.
type Store interface {
	Source
	HeadSource
	HashScanner
	APIKeySource
	StoredSource
}

// Ring is the signing key ring a store is verified with: it verifies
// record, checkpoint and API key signatures, and its keys' windows are
// checked themselves (a keyring.Ring).
type Ring interface {
	KeyVerifier
	Keys() []keyring.Key
}

// StoreOptions configure VerifyStore.
type StoreOptions struct {
	// LedgerName is the expected checkpoint origin prefix (default "writ").
	LedgerName string
	// RequireCheckpoints makes uncovered records a finding (see
	// VerifyOptions).
	RequireCheckpoints bool
	// HashOnly checks only hashes, the chain, the tree and checkpoint
	// roots: no signatures, rules, API keys or what is kept beside the
	// records. Ring and Rules are then unused.
	HashOnly bool
	// Ring verifies signatures; required unless HashOnly.
	Ring Ring
	// Rules checks each record's validation rules; required unless
	// HashOnly.
	Rules RecordRules
	// Now is the time approval requests' expiry is read at (default
	// time.Now).
	Now time.Time
	// Workers is the number of records checked in parallel (default
	// GOMAXPROCS).
	Workers int
	// EvidenceIssuers verifies signed evidence items' signatures (see
	// VerifyOptions); unused with HashOnly.
	EvidenceIssuers EvidenceSignatures
}

// VerifyStore verifies everything a store keeps, as `writ ledger verify`
// does: the records and checkpoints (Verify), and, unless HashOnly, the
// approval requests and events against the records that state them
// (VerifyApprovals), what is stored beside the records against the
// digests they bind (VerifyStored), the API keys against their
// signatures (VerifyAPIKeys) and the ring's key windows
// (VerifySigningKeys). What is kept beside the records is read while the
// records are: the two read the store independently. The report holds
// the findings of all of them; an error reading the store is an error,
// never a shorter report.
func VerifyStore(ctx context.Context, st Store, opts StoreOptions) (*Report, error) {
	vopts := VerifyOptions{LedgerName: opts.LedgerName, RequireCheckpoints: opts.RequireCheckpoints, Workers: opts.Workers,
		Hashes: st, Revocations: st}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var keyFindings []Finding
	if !opts.HashOnly {
		if opts.Ring == nil {
			return nil, errors.New("verify: a full verification needs a key ring (or HashOnly)")
		}
		if opts.Rules == nil {
			return nil, errors.New("verify: a full verification needs the record rules (or HashOnly)")
		}
		vopts.Keys, vopts.Rules, vopts.EvidenceIssuers = opts.Ring, opts.Rules, opts.EvidenceIssuers
		// Two keys valid at once are a finding whatever signed.
		keyFindings = VerifySigningKeys(opts.Ring.Keys(), nil)
	}
	var (
		companions    []Finding
		companionsErr error
		done          = make(chan struct{})
	)
	go func() {
		defer close(done)
		if opts.HashOnly {
			return
		}
		companions, companionsErr = verifyCompanions(ctx, st, opts.Ring, opts.Now)
	}()
	rep, err := Verify(ctx, st, vopts)
	<-done
	if err != nil {
		return nil, err
	}
	if companionsErr != nil {
		return nil, companionsErr
	}
	rep.Findings = append(rep.Findings, companions...)
	rep.Findings = append(rep.Findings, keyFindings...)
	return rep, nil
}

// verifyCompanions checks what a store keeps beside its records: approval
// requests and events (not sealed; the records written with them are,
// and must bear them out), receipts, run events and index rows against
// the digests their records bind, blobs against their addresses, and API
// keys against their signatures, by the same ring.
func verifyCompanions(ctx context.Context, st Store, ring Ring, now time.Time) ([]Finding, error) {
	out, err := VerifyApprovals(ctx, st, now)
	if err != nil {
		return nil, err
	}
	fs, err := VerifyStored(ctx, st, now)
	if err != nil {
		return nil, err
	}
	out = append(out, fs...)
	if fs, err = VerifyAPIKeys(ctx, st, ring); err != nil {
		return nil, err
	}
	return append(out, fs...), nil
}
