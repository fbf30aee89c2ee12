package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/internal/strictb64"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/transcript"
)

// Finding is one problem verification found.
type Finding struct {
	TenantID string `json:"tenant_id"`
	Seq      int64  `json:"seq,omitempty"`
	RecordID string `json:"record_id,omitempty"`
	// TreeSize names the checkpoint a checkpoint finding is about.
	TreeSize int64 `json:"tree_size,omitempty"`
	// KeyID names the API key an API key finding is about.
	KeyID string `json:"key_id,omitempty"`
	// SigningKeyID names the signing key a key finding is about.
	SigningKeyID string `json:"signing_key_id,omitempty"`
	Kind         string `json:"kind"`
	Detail       string `json:"detail"`
}

// Finding kinds.
const (
	FindingHashMismatch           = "hash_mismatch"            // a record's bytes do not match its record_hash
	FindingChainBreak             = "chain_break"              // seq or prev_hash does not follow the record before
	FindingMissingRecord          = "missing_record"           // records absent from the chain
	FindingMalformed              = "malformed"                // a record that cannot be read as a sealed record
	FindingUnsigned               = "unsigned"                 // a record without a signature where keys are known
	FindingBadSignature           = "bad_signature"            // a signature that does not verify
	FindingUnknownKey             = "unknown_key"              // signed by a key the key ring does not know
	FindingKeyOutsideWindow       = "key_outside_window"       // signed by a key outside its validity window
	FindingTreeHashMismatch       = "tree_hash_mismatch"       // stored tree hashes differ from the records' tree
	FindingRootMismatch           = "root_mismatch"            // a checkpoint's root differs from the records' tree
	FindingInconsistentCheckpoint = "inconsistent_checkpoint"  // two checkpoints that cannot both describe one log
	FindingBadCheckpoint          = "bad_checkpoint_signature" // a checkpoint whose signature does not verify
	FindingRuleViolation          = "rule_violation"           // a record breaks a validation rule (Detail names it)
	FindingUncovered              = "uncovered_records"        // records that no valid signed checkpoint covers
	FindingRevocationMismatch     = "revocation_mismatch"      // a checkpoint's revocations line differs from the stored revocations it commits to
	FindingUncoveredRevocations   = "uncovered_revocations"    // API key revocations that no valid signed checkpoint commits to yet
)

// Source is what verification reads: a store, or an exported bundle. Its
// chain head is required: verification holds the chain to the head read
// before it and the one read after it.
type Source interface {
	Tenants(ctx context.Context) ([]string, error)
	Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error)
	Checkpoints(ctx context.Context, tenantID string) ([]*ledger.Checkpoint, error)
	HeadSource
}

// HeadSource knows each tenant's chain head (a store does; a bundle's
// head is its last record).
type HeadSource interface {
	Head(ctx context.Context, tenantID string) (ledger.Head, error)
}

// HashScanner keeps tree hashes (a store): verification given one
// (VerifyOptions.Hashes) compares them with the tree it recomputes from
// the records.
type HashScanner interface {
	ScanHashes(ctx context.Context, tenantID string, from int64, limit int) ([]tlog.Hash, error)
}

// KeyVerifier checks record signatures and checkpoint signatures: a
// keyring.Ring.
type KeyVerifier interface {
	VerifyRecordSignature(id string, msg, sig []byte, signedAt time.Time) error
	Verifiers() note.Verifiers
}

// RecordRules checks the validation rules of one record (schema,
// evidence, policy, approval, controls, lineage, trace) and returns the
// rules it breaks, one message each.
type RecordRules interface {
	Check(ctx context.Context, raw []byte) []string
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Keys verifies signatures; nil skips signature checks.
	Keys KeyVerifier
	// LedgerName is the expected checkpoint origin prefix (default "writ").
	LedgerName string
	// Rules checks each record's validation rules; nil skips them.
	Rules RecordRules
	// Workers is the number of records checked in parallel (default GOMAXPROCS).
	Workers int
	// KeysFor, when set, returns the keys that verify one tenant's
	// signatures in place of Keys (trusted keys may be published per
	// tenant). It must not return nil.
	KeysFor func(tenant string) (KeyVerifier, error)
	// Hashes, when set, are the source's stored tree hashes, compared with
	// the tree recomputed from the records (a store's; VerifyStore sets
	// it). Nil skips the comparison: it is the caller's statement, never
	// a capability looked for on the source.
	Hashes HashScanner
	// Revocations, when set, are the source's API keys, against which the
	// revocations each valid checkpoint commits to are checked (a store's;
	// VerifyStore sets it). Nil skips the check.
	Revocations RevocationSource
	// RequireCheckpoints makes records that no valid signed checkpoint
	// covers (those after the tenant's largest checkpoint that verifies)
	// a finding, uncovered_records. Without it they are a notice: nothing
	// signed anchors them yet, so cutting them off the end of the chain
	// would go unseen, but a live ledger always has some.
	RequireCheckpoints bool
	// EvidenceIssuers, when set, verifies the JWS of every signed
	// evidence item with the issuer keys the auditor trusts for its
	// tenant (bad_evidence_signature). Without it the signatures are not
	// checked, and each tenant with signed items has a notice saying so
	// (unchecked_evidence_signatures).
	EvidenceIssuers EvidenceSignatures
}

// Report is the outcome of Verify.
type Report struct {
	Tenants     int       `json:"tenants"`
	Records     int64     `json:"records"`
	Checkpoints int       `json:"checkpoints"`
	Findings    []Finding `json:"findings"`
	// Uncovered counts the records that no valid signed checkpoint
	// covers, over all tenants.
	Uncovered int64 `json:"uncovered"`
	// Notices are what verification reports without failing: the
	// uncovered records of each tenant, unless RequireCheckpoints makes
	// them findings.
	Notices []Finding `json:"notices,omitempty"`
	// KeySource says where the keys that verified signatures came from,
	// when the caller sets it (a bundle: "trusted_keys" or "bundle").
	KeySource string `json:"key_source,omitempty"`
}

// Intact reports whether verification found nothing.
func (r *Report) Intact() bool { return len(r.Findings) == 0 }

// Verify checks every tenant of src: each record's hash over its stored
// bytes, its link to the record before, its signature and key window,
// its validation rules; the Merkle tree recomputed from the records
// against stored tree hashes (when src keeps them) and against every
// checkpoint, each checkpoint's signature, and the checkpoints' mutual
// consistency; and, with opts.Revocations, the revocations each valid
// checkpoint commits to against those stored. It
// reports one finding per problem and stops only on an error reading src.
func Verify(ctx context.Context, src Source, opts VerifyOptions) (*Report, error) {
	if opts.LedgerName == "" {
		opts.LedgerName = "writ"
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	tenants, err := src.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	rep := &Report{Tenants: len(tenants), Findings: []Finding{}}
	valid := map[string][]validCheckpoint{} // by tenant
	for _, t := range tenants {
		topts := opts
		if opts.KeysFor != nil {
			if topts.Keys, err = opts.KeysFor(t); err != nil {
				return nil, err
			}
		}
		tv := &tenantVerifier{src: src, opts: topts, tenant: t}
		if err := tv.run(ctx); err != nil {
			return nil, err
		}
		valid[t] = tv.valid
		rep.Records += tv.n
		rep.Checkpoints += tv.checkpoints
		rep.Findings = append(rep.Findings, tv.findings...)
		rep.Findings = append(rep.Findings, checkRevocationGrowth(t, tv.valid)...)
		if tv.unsigned > 0 {
			rep.Notices = append(rep.Notices, uncheckedSignatures(t, tv.unsigned))
		}
		if tv.n > tv.covered {
			rep.Uncovered += tv.n - tv.covered
			f := Finding{TenantID: t, Seq: tv.covered + 1, Kind: FindingUncovered,
				Detail: fmt.Sprintf("records %d..%d are covered by no signed checkpoint", tv.covered+1, tv.n)}
			if tv.covered == 0 {
				f.Detail = fmt.Sprintf("no signed checkpoint covers the tenant's %d records", tv.n)
			}
			if opts.RequireCheckpoints {
				rep.Findings = append(rep.Findings, f)
			} else {
				rep.Notices = append(rep.Notices, f)
			}
		}
	}
	if rs := opts.Revocations; rs != nil {
		if err := verifyRevocations(ctx, rs, valid, opts, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// RevocationSource keeps API keys (a store): Verify given one
// (VerifyOptions.Revocations) checks what each valid checkpoint states of the tenant's revocations
// against the stored revocations placed before its size.
type RevocationSource interface {
	APIKeySource
}

// verifyRevocations compares every valid checkpoint's revocations
// (ledger.CheckpointRevocations) with ledger.RevocationsBefore its size over the
// stored keys: a revocation deleted, moved later or earlier, or whose
// time was changed, after a checkpoint committed to it, is a
// revocation_mismatch. Revocations that no valid checkpoint commits to
// yet (placed at or after the tenant's largest one; every revocation of
// a tenant without records) are uncovered_revocations: a notice, or a
// finding with RequireCheckpoints.
func verifyRevocations(ctx context.Context, rs RevocationSource, valid map[string][]validCheckpoint, opts VerifyOptions, rep *Report) error {
	keys, err := rs.APIKeys(ctx, "")
	if err != nil {
		return fmt.Errorf("verify revocations: %w", err)
	}
	byTenant := map[string][]*auth.Key{}
	for _, k := range keys {
		byTenant[k.TenantID] = append(byTenant[k.TenantID], k)
	}
	// Every tenant with keys or with checkpoints: a checkpoint that commits
	// to revocations of a tenant whose keys are all gone is checked too.
	tenants := slices.Collect(maps.Keys(byTenant))
	for t := range valid {
		if _, ok := byTenant[t]; !ok {
			tenants = append(tenants, t)
		}
	}
	slices.Sort(tenants)
	for _, t := range tenants {
		ks := byTenant[t]
		var covered int64
		for _, cp := range valid[t] {
			f := Finding{TenantID: t, TreeSize: cp.size, Kind: FindingRevocationMismatch}
			stated, err := ledger.CheckpointRevocations(cp.text)
			if err != nil {
				f.Detail = err.Error()
				rep.Findings = append(rep.Findings, f)
				continue
			}
			if stored := ledger.RevocationsBefore(ks, cp.size); stored != stated {
				f.Detail = fmt.Sprintf("of the API key revocations before record %d, the checkpoint commits to %s; the store holds %s",
					cp.size, stated, stored)
				rep.Findings = append(rep.Findings, f)
				continue
			}
			covered = max(covered, cp.size)
		}
		var ids []string
		for _, k := range ks {
			if k.RevokedAt != nil && (k.RevokedAfter == nil || *k.RevokedAfter >= covered) {
				ids = append(ids, k.ID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		f := Finding{TenantID: t, Kind: FindingUncoveredRevocations,
			Detail: fmt.Sprintf("no signed checkpoint commits yet to the revocation of %s (a checkpoint does once the tenant has a record after it)", strings.Join(ids, ", "))}
		if opts.RequireCheckpoints {
			rep.Findings = append(rep.Findings, f)
		} else {
			rep.Notices = append(rep.Notices, f)
		}
	}
	return nil
}

type tenantVerifier struct {
	src         Source
	opts        VerifyOptions
	tenant      string
	findings    []Finding
	n           int64       // records read
	hashes      []tlog.Hash // the tree recomputed from the records, at tlog storage indexes
	read        tlog.HashReader
	prev        ledger.Head
	checkpoints int
	covered     int64 // the size of the largest checkpoint that verifies
	valid       []validCheckpoint
	stored      *storedHashes            // the store's tree hashes, compared as the tree grows
	grants      map[grantKey]grant       // the approvals granted by the records linked so far
	evidence    map[string]*evidenceFact // the evidence records linked so far, by record id
	transcripts transcript.Chains        // the tool transcripts of the records linked so far
	unsigned    int64                    // signed evidence items whose signatures were not checked
}

func (v *tenantVerifier) add(f Finding) {
	f.TenantID = v.tenant
	v.findings = append(v.findings, f)
}

// checked is what the parallel stage learns of one record.
type checked struct {
	raw      []byte
	leaf     tlog.Hash // the record's Merkle leaf hash
	audit    writ.Audit
	recordID string
	problems []Finding
	cite     citation // the approvals the record grants or cites
	// unverified: the record seals a signed evidence item whose
	// signature was not checked (no issuer keys were given).
	unverified bool
}

// pageSize is how many records verification asks the source for at once.
const pageSize = 2048

// chunkSize is how many records one worker checks at a time: small enough
// that the workers share a page evenly, large enough that handing chunks
// around costs nothing next to checking them.
const chunkSize = 64

// chunk is a run of consecutive records, checked by one worker and then
// linked in order.
type chunk struct {
	raws []json.RawMessage
	out  []checked
	err  error         // reading the source failed here
	done chan struct{} // closed when out is filled
}

// run verifies the tenant's records in a pipeline: one goroutine reads
// pages from the source, the workers check chunks of them in parallel for
// everything that does not depend on the record before (hashes,
// signatures, rules, leaf hashes), and this goroutine links the checked
// chunks in chain order (chain, tree) while the next ones are read and
// checked. Findings come out in chain order whatever the workers' timing.
func (v *tenantVerifier) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v.read = tlog.HashReaderFunc(v.readHashes)
	// The head is read before the chain and again after it. A record and
	// the head it moves are committed together, so every record up to
	// the first head is stored, and none is stored beyond the second;
	// records appended while the chain is read (a commit that lands after
	// its server was killed, on PostgreSQL) fall between the two.
	before, err := v.src.Head(ctx, v.tenant)
	if err != nil {
		return err
	}
	var atBefore ledger.Head // the linked record at before.Seq, once reached
	if sc := v.opts.Hashes; sc != nil {
		v.stored = &storedHashes{src: sc, tenant: v.tenant}
		defer v.stored.stop()
	}
	// Enough chunks in flight to keep every worker busy while a page is
	// read, and no more: memory stays a few pages whatever the ledger.
	inFlight := 2*pageSize/chunkSize + 2*v.opts.Workers
	ordered := make(chan *chunk, inFlight)
	work := make(chan *chunk, inFlight)
	var workers sync.WaitGroup
	for range v.opts.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for c := range work {
				if ctx.Err() == nil {
					for i, raw := range c.raws {
						c.out[i] = v.checkRecord(ctx, raw)
					}
				}
				close(c.done)
			}
		}()
	}
	defer func() {
		cancel() // stops the reader, which stops the workers
		workers.Wait()
	}()
	go func() {
		defer close(work)
		defer close(ordered)
		v.readChain(ctx, ordered, work)
	}()
	for c := range ordered {
		if c.err != nil {
			return c.err
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i := range c.out {
			v.link(&c.out[i])
			if v.prev.Seq == before.Seq {
				atBefore = v.prev
			}
		}
		if v.stored != nil {
			if err := v.stored.compare(ctx, v.hashes, false); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	after, err := v.src.Head(ctx, v.tenant)
	if err != nil {
		return err
	}
	switch {
	case v.prev.Seq < before.Seq || (before.Seq > 0 && atBefore.Hash != before.Hash):
		// Records the head already covered are gone, or not these.
		v.add(Finding{Seq: before.Seq, Kind: FindingMissingRecord,
			Detail: fmt.Sprintf("the chain head is seq %d (%s) but the last stored record is seq %d (%s)", before.Seq, before.Hash, v.prev.Seq, v.prev.Hash)})
	case v.prev.Seq > after.Seq || (v.prev.Seq == after.Seq && v.prev.Hash != after.Hash):
		// Records beyond the head, or a head that names another record.
		v.add(Finding{Seq: after.Seq, Kind: FindingMissingRecord,
			Detail: fmt.Sprintf("the chain head is seq %d (%s) but the last stored record is seq %d (%s)", after.Seq, after.Hash, v.prev.Seq, v.prev.Hash)})
	}
	if v.stored != nil {
		if err := v.stored.compare(ctx, v.hashes, true); err != nil {
			return err
		}
		if f := v.stored.finding; f != nil {
			v.add(*f)
		}
	}
	return v.verifyCheckpoints(ctx)
}

// readChain reads the tenant's records page by page and hands them out in
// chunks: to the workers, and in order to the linker. It stops at the
// first error, which it passes on in place of a chunk.
func (v *tenantVerifier) readChain(ctx context.Context, ordered, work chan<- *chunk) {
	send := func(c *chunk) bool {
		select {
		case ordered <- c:
		case <-ctx.Done():
			return false
		}
		if c.err != nil {
			return false
		}
		select {
		case work <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var after int64
	for {
		page, err := v.src.Chain(ctx, v.tenant, after, pageSize)
		if err != nil {
			send(&chunk{err: err})
			return
		}
		for i := 0; i < len(page); i += chunkSize {
			raws := page[i:min(i+chunkSize, len(page))]
			if !send(&chunk{raws: raws, out: make([]checked, len(raws)), done: make(chan struct{})}) {
				return
			}
		}
		if len(page) < pageSize {
			return
		}
		after = NextAfter(after, page)
	}
}

// NextAfter is where reading a tenant's chain goes on after page, a page
// of Chain(…, after, …): the seq of its last record, but always forward,
// so that a forged seq can neither loop a reader nor make it read
// backwards.
func NextAfter(after int64, page []json.RawMessage) int64 {
	if len(page) == 0 {
		return after
	}
	if _, last, _ := record.SplitSeal(page[len(page)-1]); last.Seq > after {
		return last.Seq
	}
	return after + int64(len(page))
}

// decodingRules is RecordRules that also returns the record it decoded (a
// *Rules), so that verification reads the record's id, tenant and
// timestamp from it instead of reading the record a second time.
type decodingRules interface {
	checkDecoded(ctx context.Context, raw []byte) (*writ.Record, []string)
}

func (v *tenantVerifier) checkRecord(ctx context.Context, raw []byte) (c checked) {
	c.raw = raw
	c.leaf = tlog.RecordHash(raw)
	problem := func(kind, format string, args ...any) {
		c.problems = append(c.problems, Finding{Seq: c.audit.Seq, RecordID: c.recordID, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	// The hashes, the chain and the tree need only the seal; the record's
	// other members are read when signatures or rules need them, or to
	// name the record in a finding.
	var (
		timestamp time.Time
		broken    []string // the rules the record breaks
	)
	if v.opts.Keys != nil || v.opts.Rules != nil {
		var rec *writ.Record
		switch r := v.opts.Rules.(type) {
		case nil:
		case decodingRules:
			rec, broken = r.checkDecoded(ctx, raw)
		default:
			broken = r.Check(ctx, raw)
		}
		var (
			recordID, tenantID string
			err                error
		)
		if rec != nil {
			c.cite = citationOf(rec)
		} else {
			c.cite = citationOfRaw(raw)
		}
		if rec != nil && rec.RecordID != "" && rec.TenantID != "" && !rec.Timestamp.IsZero() {
			// The record decoded without error, so it is a JSON object
			// without duplicate names whose three members are strings,
			// the timestamp an RFC 3339 time: recordHead would read the
			// same.
			recordID, tenantID, timestamp = rec.RecordID, rec.TenantID, rec.Timestamp
		} else {
			recordID, tenantID, timestamp, err = recordHead(raw)
		}
		if err != nil {
			problem(FindingMalformed, "the record cannot be read: %v", err)
			return c
		}
		c.recordID = recordID
		if tenantID != v.tenant {
			problem(FindingMalformed, "the record belongs to tenant %q, found in the chain of %q", tenantID, v.tenant)
		}
	}
	defer func() {
		if len(c.problems) > 0 && c.recordID == "" {
			c.recordID, _, _, _ = recordHead(raw)
			for i := range c.problems {
				c.problems[i].RecordID = c.recordID
			}
		}
	}()
	digest, audit, err := record.SealDigest(raw)
	c.audit = audit
	if err != nil {
		problem(FindingMalformed, "%v", err)
		return c
	}
	if digest != audit.RecordHash {
		problem(FindingHashMismatch, "record_hash %s does not match the record's bytes (%s)", audit.RecordHash, digest)
	}
	if keys := v.opts.Keys; keys != nil {
		switch sig, err := strictb64.DecodeString(audit.Signature); {
		case audit.SignedBy == "" || audit.Signature == "":
			problem(FindingUnsigned, "the record carries no signature")
		case err != nil:
			problem(FindingBadSignature, "the signature is not canonical base64: %v", err)
		default:
			if err := keys.VerifyRecordSignature(audit.SignedBy, record.SignatureMessage(audit.RecordHash), sig, timestamp); err != nil {
				kind := FindingBadSignature
				switch {
				case errors.Is(err, keyring.ErrUnknownKey):
					kind = FindingUnknownKey
				case errors.Is(err, keyring.ErrOutsideWindow):
					kind = FindingKeyOutsideWindow
				}
				problem(kind, "signed_by %s: %v", audit.SignedBy, err)
			}
		}
	}
	for _, msg := range broken {
		problem(FindingRuleViolation, "%s", msg)
	}
	if ev := c.cite.evidence; ev != nil && ev.jws != "" && !v.checkEvidenceSignature(&c, problem) {
		c.unverified = true
	}
	return c
}

// link checks a record's place in the chain and adds its leaf to the tree.
func (v *tenantVerifier) link(c *checked) {
	v.n++
	if c.recordID == "" {
		// Read lazily on the hash-only path: only a finding needs it.
		defer func(before int) {
			if len(v.findings) > before {
				id, _, _, _ := recordHead(c.raw)
				for i := before; i < len(v.findings); i++ {
					v.findings[i].RecordID = id
				}
			}
		}(len(v.findings))
	}
	v.findings = append(v.findings, withTenant(c.problems, v.tenant)...)
	a := c.audit
	want := v.prev.Hash
	if v.prev.Seq == 0 {
		want = writ.GenesisHash
	}
	f := Finding{Seq: a.Seq, RecordID: c.recordID}
	switch {
	case a.Seq > v.prev.Seq+1:
		f.Kind, f.Detail = FindingMissingRecord, fmt.Sprintf("records %d..%d are missing", v.prev.Seq+1, a.Seq-1)
		v.add(f)
	case a.Seq <= v.prev.Seq:
		f.Kind, f.Detail = FindingChainBreak, fmt.Sprintf("seq %d follows seq %d", a.Seq, v.prev.Seq)
		v.add(f)
	case a.PrevHash != want:
		f.Kind, f.Detail = FindingChainBreak, fmt.Sprintf("prev_hash %s does not match the previous record's hash %s", a.PrevHash, want)
		v.add(f)
	}
	v.prev = ledger.Head{Seq: a.Seq, Hash: a.RecordHash}
	v.checkCitations(c)
	if c.unverified {
		v.unsigned++
	}
	v.checkEvidenceRevocation(c)
	v.checkTranscript(c)
	// The tree has one leaf per record read, in the order read: a record
	// out of place changes the roots, which the checkpoints then expose.
	leaves := int64(len(v.hashes))
	n := tlog.StoredHashCount(v.n - 1)
	if leaves != n {
		v.hashes = v.hashes[:n]
	}
	hs, err := tlog.StoredHashesForRecordHash(v.n-1, c.leaf, v.read)
	if err != nil {
		v.add(Finding{Seq: a.Seq, RecordID: c.recordID, Kind: FindingMalformed, Detail: err.Error()})
		return
	}
	v.hashes = append(v.hashes, hs...)
}

func withTenant(fs []Finding, tenant string) []Finding {
	for i := range fs {
		fs[i].TenantID = tenant
	}
	return fs
}

// readHashes reads the recomputed tree (a tlog.HashReader).
func (v *tenantVerifier) readHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		if idx < 0 || idx >= int64(len(v.hashes)) {
			return nil, fmt.Errorf("tree hash %d is beyond the %d records read", idx, v.n)
		}
		out[i] = v.hashes[idx]
	}
	return out, nil
}

// storedHashes compares the store's tree hashes with the tree recomputed
// from the records, as the tree grows: a goroutine reads the stored
// hashes ahead, page by page, while the records are checked. The first
// hash that differs, or a store that keeps fewer hashes than the records'
// tree has (truncated), is the finding; comparing stops there.
type storedHashes struct {
	src    HashScanner
	tenant string
	pages  chan storedPage // nil until the first compare
	cancel context.CancelFunc
	done   chan struct{}

	page    storedPage // the page being compared
	at      int64      // the next index to compare
	end     bool       // the page is the store's last
	finding *Finding
	over    bool // nothing more to compare
}

type storedPage struct {
	from   int64
	hashes []tlog.Hash
	err    error
}

// storedPageSize is how many stored hashes one ScanHashes reads.
const storedPageSize = 1 << 14

func (s *storedHashes) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.pages, s.done = make(chan storedPage, 2), make(chan struct{})
	go func() {
		defer close(s.done)
		defer close(s.pages)
		for from := int64(0); ; from += storedPageSize {
			hs, err := s.src.ScanHashes(ctx, s.tenant, from, storedPageSize)
			select {
			case s.pages <- storedPage{from: from, hashes: hs, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil || len(hs) < storedPageSize {
				return
			}
		}
	}()
}

func (s *storedHashes) stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}

// compare compares the stored hashes with the computed ones so far. Until
// final, it only takes pages already read; when final, tree is the whole
// recomputed tree, and it reads what it needs.
func (s *storedHashes) compare(ctx context.Context, tree []tlog.Hash, final bool) error {
	for !s.over {
		if s.at >= int64(len(tree)) {
			if final {
				s.over = true
			}
			return nil
		}
		if s.at >= s.page.from+int64(len(s.page.hashes)) {
			if s.end {
				if final {
					end := s.page.from + int64(len(s.page.hashes))
					s.finding = &Finding{Kind: FindingTreeHashMismatch, Detail: fmt.Sprintf("the store keeps %d tree hashes; the records' tree has %d (truncated)", end, len(tree))}
					s.over = true
				}
				return nil
			}
			if s.pages == nil {
				s.start(ctx)
			}
			var p storedPage
			var ok bool
			if final {
				p, ok = <-s.pages
			} else {
				select {
				case p, ok = <-s.pages:
				default:
					return nil
				}
			}
			switch {
			case !ok:
				return cmp.Or(ctx.Err(), errors.New("reading the stored tree hashes stopped"))
			case p.err != nil:
				return p.err
			}
			s.page, s.end = p, len(p.hashes) < storedPageSize
			continue
		}
		for ; s.at < min(int64(len(tree)), s.page.from+int64(len(s.page.hashes))); s.at++ {
			if s.page.hashes[s.at-s.page.from] != tree[s.at] {
				level, n := tlog.SplitStoredHashIndex(s.at)
				s.finding = &Finding{Kind: FindingTreeHashMismatch, Seq: n<<level + 1, Detail: fmt.Sprintf("stored tree hash %d (level %d, node %d) differs from the records' tree", s.at, level, n)}
				s.over = true
				return nil
			}
		}
	}
	return nil
}

// verifyCheckpoints checks every checkpoint of the tenant: its signature,
// its origin, that its tree is within the records, its root against the
// records' tree, and that no two checkpoints disagree.
func (v *tenantVerifier) verifyCheckpoints(ctx context.Context) error {
	cps, err := v.src.Checkpoints(ctx, v.tenant)
	if err != nil {
		return err
	}
	v.checkpoints = len(cps)
	origin := ledger.Origin(v.opts.LedgerName, v.tenant)
	roots := map[int64]tlog.Hash{}
	for _, cp := range cps {
		f := Finding{TreeSize: cp.Size}
		var text string
		if err := ledger.CheckNoteEncoding(cp.Note); err != nil {
			f.Kind, f.Detail = FindingBadCheckpoint, err.Error()
			v.add(f)
			continue
		}
		if v.opts.Keys != nil {
			n, err := note.Open(cp.Note, v.opts.Keys.Verifiers())
			if err != nil {
				f.Kind, f.Detail = FindingBadCheckpoint, err.Error()
				v.add(f)
				continue
			}
			text = n.Text
		} else {
			text = noteText(cp.Note)
		}
		o, size, root, err := ledger.ParseCheckpointText(text)
		if err != nil {
			f.Kind, f.Detail = FindingBadCheckpoint, err.Error()
			v.add(f)
			continue
		}
		if o != origin || size != cp.Size || root != cp.Root {
			f.Kind, f.Detail = FindingBadCheckpoint, fmt.Sprintf("the note states %s size %d, stored as %s size %d", o, size, origin, cp.Size)
			v.add(f)
			continue
		}
		if prev, ok := roots[size]; ok && prev != root {
			f.Kind, f.Detail = FindingInconsistentCheckpoint, fmt.Sprintf("two checkpoints of size %d state different roots", size)
			v.add(f)
			continue
		}
		roots[size] = root
		if size > v.n {
			f.Kind, f.Detail = FindingMissingRecord, fmt.Sprintf("the checkpoint covers %d records; %d are present", size, v.n)
			v.add(f)
			continue
		}
		want, err := tlog.TreeHash(size, v.read)
		if err != nil {
			return err
		}
		if want != root {
			f.Kind, f.Detail = FindingRootMismatch, fmt.Sprintf("the checkpoint's root %x differs from the records' tree root %x", root, want)
			v.add(f)
			continue
		}
		v.covered = max(v.covered, size)
		v.valid = append(v.valid, validCheckpoint{size, text})
	}
	return nil
}

// validCheckpoint is a checkpoint that verified: its size and note text.
type validCheckpoint struct {
	size int64
	text string
}

// noteText returns the text of a signed note without checking signatures.
func noteText(msg []byte) string {
	n, err := note.Open(msg, note.VerifierList())
	var u *note.UnverifiedNoteError
	if errors.As(err, &u) {
		return u.Note.Text
	}
	if err == nil {
		return n.Text
	}
	return ""
}

// VerifyChains checks every tenant's chain in st: each record's hash and
// each link, and its stored tree hashes. It is Verify without keys,
// rules, checkpoints' signatures or revocations (VerifyStore checks
// them).
func VerifyChains(ctx context.Context, st ledger.Store) ([]Finding, int64, error) {
	rep, err := Verify(ctx, st, VerifyOptions{Hashes: st})
	if err != nil {
		return nil, 0, err
	}
	return rep.Findings, rep.Records, nil
}
