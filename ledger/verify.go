package ledger

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/record"
)

// Finding is one problem verification found.
type Finding struct {
	TenantID string `json:"tenant_id"`
	Seq      int64  `json:"seq,omitempty"`
	RecordID string `json:"record_id,omitempty"`
	// TreeSize names the checkpoint a checkpoint finding is about.
	TreeSize int64  `json:"tree_size,omitempty"`
	Kind     string `json:"kind"`
	Detail   string `json:"detail"`
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
)

// Source is what verification reads: a store, or an exported bundle.
type Source interface {
	Tenants(ctx context.Context) ([]string, error)
	Chain(ctx context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error)
	Checkpoints(ctx context.Context, tenantID string) ([]*Checkpoint, error)
}

// HeadSource is a Source that also knows each tenant's chain head (a store
// does; a bundle's head is its last record).
type HeadSource interface {
	Head(ctx context.Context, tenantID string) (Head, error)
}

// HashScanner is a Source that keeps tree hashes (a store): verification
// then compares them with the tree it recomputes from the records.
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
}

// Report is the outcome of Verify.
type Report struct {
	Tenants     int       `json:"tenants"`
	Records     int64     `json:"records"`
	Checkpoints int       `json:"checkpoints"`
	Findings    []Finding `json:"findings"`
}

// Intact reports whether verification found nothing.
func (r *Report) Intact() bool { return len(r.Findings) == 0 }

// Verify checks every tenant of src: each record's hash over its stored
// bytes, its link to the record before, its signature and key window,
// its validation rules; the Merkle tree recomputed from the records
// against stored tree hashes (when src keeps them) and against every
// checkpoint, each checkpoint's signature, and the checkpoints' mutual
// consistency. It reports one finding per problem and stops only on an
// error reading src.
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
	for _, t := range tenants {
		tv := &tenantVerifier{src: src, opts: opts, tenant: t}
		if err := tv.run(ctx); err != nil {
			return nil, err
		}
		rep.Records += tv.n
		rep.Checkpoints += tv.checkpoints
		rep.Findings = append(rep.Findings, tv.findings...)
	}
	return rep, nil
}

type tenantVerifier struct {
	src         Source
	opts        VerifyOptions
	tenant      string
	findings    []Finding
	n           int64       // records read
	hashes      []tlog.Hash // the tree recomputed from the records, at tlog storage indexes
	prev        Head
	checkpoints int
}

func (v *tenantVerifier) add(f Finding) {
	f.TenantID = v.tenant
	v.findings = append(v.findings, f)
}

// checked is what the parallel stage learns of one record.
type checked struct {
	raw      []byte
	audit    writ.Audit
	recordID string
	tenantID string
	problems []Finding
}

const pageSize = 2048

func (v *tenantVerifier) run(ctx context.Context) error {
	// Pages are read ahead, one at a time, while the page before is
	// checked: reading and checking overlap.
	type fetched struct {
		page []json.RawMessage
		err  error
	}
	pages := make(chan fetched, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(pages)
		var after int64
		for {
			page, err := v.src.Chain(ctx, v.tenant, after, pageSize)
			select {
			case pages <- fetched{page, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || len(page) < pageSize {
				return
			}
			// Page on by the last record's seq, but always forward: a
			// forged seq must neither loop verification nor make it
			// read backwards.
			_, last, _ := record.SplitSeal(page[len(page)-1])
			next := last.Seq
			if next <= after {
				next = after + int64(len(page))
			}
			after = next
		}
	}()
	for f := range pages {
		if f.err != nil {
			return f.err
		}
		for _, c := range v.checkPage(ctx, f.page) {
			v.link(c)
		}
	}
	if hs, ok := v.src.(HeadSource); ok {
		head, err := hs.Head(ctx, v.tenant)
		if err != nil {
			return err
		}
		if head.Seq != v.prev.Seq || head.Hash != v.prev.Hash {
			v.add(Finding{Seq: head.Seq, Kind: FindingMissingRecord,
				Detail: fmt.Sprintf("the chain head is seq %d (%s) but the last stored record is seq %d (%s)", head.Seq, head.Hash, v.prev.Seq, v.prev.Hash)})
		}
	}
	if sc, ok := v.src.(HashScanner); ok {
		if err := v.compareStoredHashes(ctx, sc); err != nil {
			return err
		}
	}
	return v.verifyCheckpoints(ctx)
}

// checkPage checks the records of one page in parallel: everything that
// does not depend on the record before.
func (v *tenantVerifier) checkPage(ctx context.Context, page []json.RawMessage) []checked {
	out := make([]checked, len(page))
	var wg sync.WaitGroup
	next := make(chan int, len(page))
	for i := range page {
		next <- i
	}
	close(next)
	for range min(v.opts.Workers, len(page)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = v.checkRecord(ctx, page[i])
			}
		}()
	}
	wg.Wait()
	return out
}

func (v *tenantVerifier) checkRecord(ctx context.Context, raw []byte) checked {
	c := checked{raw: raw}
	problem := func(kind, format string, args ...any) {
		c.problems = append(c.problems, Finding{Seq: c.audit.Seq, RecordID: c.recordID, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	// The hashes, the chain and the tree need only the seal; the record's
	// other members are read when signatures or rules need them, or to
	// name the record in a finding.
	full := v.opts.Keys != nil || v.opts.Rules != nil
	var timestamp time.Time
	if full {
		recordID, tenantID, ts, err := recordHead(raw)
		if err != nil {
			problem(FindingMalformed, "the record cannot be read: %v", err)
			return c
		}
		c.recordID, c.tenantID, timestamp = recordID, tenantID, ts
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
	input, audit, err := record.SplitSeal(raw)
	c.audit = audit
	if err != nil {
		problem(FindingMalformed, "%v", err)
		return c
	}
	if got := record.Digest(input); got != audit.RecordHash {
		problem(FindingHashMismatch, "record_hash %s does not match the record's bytes (%s)", audit.RecordHash, got)
	}
	if keys := v.opts.Keys; keys != nil {
		switch sig, err := base64.StdEncoding.DecodeString(audit.Signature); {
		case audit.SignedBy == "" || audit.Signature == "":
			problem(FindingUnsigned, "the record carries no signature")
		case err != nil:
			problem(FindingBadSignature, "the signature is not base64: %v", err)
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
	if r := v.opts.Rules; r != nil {
		for _, msg := range r.Check(ctx, raw) {
			problem(FindingRuleViolation, "%s", msg)
		}
	}
	return c
}

// link checks a record's place in the chain and adds it to the tree.
func (v *tenantVerifier) link(c checked) {
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
	v.prev = Head{Seq: a.Seq, Hash: a.RecordHash}
	// The tree has one leaf per record read, in the order read: a record
	// out of place changes the roots, which the checkpoints then expose.
	leaves := int64(len(v.hashes))
	n := tlog.StoredHashCount(v.n - 1)
	if leaves != n {
		v.hashes = v.hashes[:n]
	}
	hs, err := tlog.StoredHashes(v.n-1, c.raw, v.reader())
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

func (v *tenantVerifier) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, idx := range indexes {
			if idx < 0 || idx >= int64(len(v.hashes)) {
				return nil, fmt.Errorf("tree hash %d is beyond the %d records read", idx, v.n)
			}
			out[i] = v.hashes[idx]
		}
		return out, nil
	})
}

// compareStoredHashes compares the store's tree hashes with the tree
// recomputed from the records.
func (v *tenantVerifier) compareStoredHashes(ctx context.Context, sc HashScanner) error {
	const page = 1 << 14
	var idx int64
	for idx < int64(len(v.hashes)) {
		stored, err := sc.ScanHashes(ctx, v.tenant, idx, page)
		if err != nil {
			return err
		}
		for i, h := range stored {
			at := idx + int64(i)
			if at >= int64(len(v.hashes)) {
				break
			}
			if h != v.hashes[at] {
				level, n := tlog.SplitStoredHashIndex(at)
				v.add(Finding{Kind: FindingTreeHashMismatch, Seq: n<<level + 1, Detail: fmt.Sprintf("stored tree hash %d (level %d, node %d) differs from the records' tree", at, level, n)})
				return nil
			}
		}
		if len(stored) < page {
			if end := idx + int64(len(stored)); end < int64(len(v.hashes)) {
				v.add(Finding{Kind: FindingTreeHashMismatch, Detail: fmt.Sprintf("the store keeps %d tree hashes; the records' tree has %d (truncated)", end, len(v.hashes))})
			}
			return nil
		}
		idx += page
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
	origin := Origin(v.opts.LedgerName, v.tenant)
	roots := map[int64]tlog.Hash{}
	for _, cp := range cps {
		f := Finding{TreeSize: cp.Size}
		var text string
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
		o, size, root, err := ParseCheckpointText(text)
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
		want, err := tlog.TreeHash(size, v.reader())
		if err != nil {
			return err
		}
		if want != root {
			f.Kind, f.Detail = FindingRootMismatch, fmt.Sprintf("the checkpoint's root %x differs from the records' tree root %x", root, want)
			v.add(f)
		}
	}
	return nil
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
// each link. It is Verify without keys, rules or checkpoints' signatures.
func VerifyChains(ctx context.Context, st Store) ([]Finding, int64, error) {
	rep, err := Verify(ctx, st, VerifyOptions{})
	if err != nil {
		return nil, 0, err
	}
	return rep.Findings, rep.Records, nil
}
