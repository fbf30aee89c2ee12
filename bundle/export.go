package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
)

// Options configure ExportWith.
type Options struct {
	// Keys are the public keys that verify the ledger's signatures, with
	// their windows (keyring.Ring.Keys).
	Keys []keyring.Key
	// LedgerName is the ledger's name, the first part of its checkpoint
	// origins (default "writ").
	LedgerName string
	// CreatedAt is the bundle's creation time (default now). Archive
	// entries carry it too, so the same ledger exported with the same
	// CreatedAt gives the same bytes.
	CreatedAt time.Time
	// Cosigned exports each tenant only up to its newest checkpoint that
	// a witness cosigned (a tenant without one is left out), so that the
	// bundle's newest checkpoints carry cosignatures. The store must keep
	// cosignatures (ledger.CosignatureStore). It excludes Signer.
	Cosigned bool
	// Signer, when set, signs a checkpoint of each tenant's exported head
	// (unless one of that size is stored) and stores it before the
	// tenant is exported, so that a signed checkpoint covers every
	// record of the bundle.
	Signer note.Signer
}

// Summary says what ExportWith wrote.
type Summary struct {
	Tenants     int
	Records     int64
	Checkpoints int
	// Cosignatures counts the witnesses' cosignatures written.
	Cosignatures int
	Blobs        int
}

// Export writes a bundle of every tenant of st to w, with the given
// public keys and ledger name. See ExportWith.
func Export(ctx context.Context, st ledger.Store, keys []keyring.Key, ledgerName string, w io.Writer) error {
	_, err := ExportWith(ctx, st, w, Options{Keys: keys, LedgerName: ledgerName})
	return err
}

// chainPage is how many records Export reads from the store at a time.
const chainPage = 1024

// exportTenant is what the first pass over a tenant's chain learned.
type exportTenant struct {
	meta        TenantMeta
	n           int64 // records to write
	size        int64 // bytes of records.jsonl
	checkpoints []*ledger.Checkpoint
	// cosignatures are the witnesses' cosignatures of the exported
	// checkpoints, by size, in the store's order.
	cosignatures map[int64][]*ledger.Cosignature
	// revocations are the tenant's API key revocations placed at or
	// before the exported head.
	revocations []Revocation
}

// ExportWith writes a bundle of every tenant of st to w. It streams: it
// reads each chain twice through st.Chain (once to size records.jsonl,
// once to write it) and holds one page of records and one blob in memory
// at a time.
//
// Each tenant is exported up to the chain head it has when the export
// reaches it, with the checkpoints of at most that size; records appended
// meanwhile are left out, so a bundle of a live ledger is a consistent
// snapshot of each tenant. The blobs are the pinned packs the exported
// records name in lineage.pack_hash: each pack's manifest and every file
// it lists. A pack or file the store does not have is left out (and
// verification reports it), as is a record that cannot be read.
func ExportWith(ctx context.Context, st ledger.Store, w io.Writer, opts Options) (*Summary, error) {
	if opts.LedgerName == "" {
		opts.LedgerName = "writ"
	}
	if err := checkLedgerName(opts.LedgerName); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if opts.CreatedAt.IsZero() {
		opts.CreatedAt = time.Now()
	}
	if opts.Cosigned && opts.Signer != nil {
		return nil, errors.New("bundle: an export through cosigned checkpoints signs no checkpoint of its own")
	}
	if _, ok := st.(ledger.CosignatureStore); opts.Cosigned && !ok {
		return nil, fmt.Errorf("bundle: the store (%T) keeps no cosignatures", st)
	}
	created := opts.CreatedAt.UTC().Truncate(time.Second)
	keys := opts.Keys
	if keys == nil {
		keys = []keyring.Key{}
	}
	if _, err := keyring.NewPublic(keys); err != nil {
		return nil, fmt.Errorf("bundle: keys: %w", err)
	}
	keysJSON, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bundle: keys: %w", err)
	}
	keysJSON = append(keysJSON, '\n')

	tenants, err := st.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(tenants)
	tenants = slices.Compact(tenants)
	meta := Meta{Format: Format, Version: Version, LedgerName: opts.LedgerName, CreatedAt: created, Tenants: []TenantMeta{}}
	var plan []*exportTenant
	packs := map[string]bool{}
	for _, t := range tenants {
		if err := checkTenant(t); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		et, err := sizeTenant(ctx, st, t, packs, opts)
		if err != nil {
			return nil, err
		}
		if et == nil {
			continue
		}
		plan = append(plan, et)
		meta.Tenants = append(meta.Tenants, et.meta)
	}
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	metaJSON = append(metaJSON, '\n')

	sum := &Summary{Tenants: len(plan)}
	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		if err := writeHeader(tw, name, int64(len(data)), created); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := put(MetaFile, metaJSON); err != nil {
		return nil, err
	}
	if err := put(KeysFile, keysJSON); err != nil {
		return nil, err
	}
	for _, et := range plan {
		if err := writeHeader(tw, recordsName(et.meta.TenantID), et.size, created); err != nil {
			return nil, err
		}
		if err := writeRecords(ctx, st, tw, et); err != nil {
			return nil, err
		}
		sum.Records += et.n
		seen := map[int64]int{}
		for _, cp := range et.checkpoints {
			seen[cp.Size]++
			if err := put(noteName(et.meta.TenantID, cp.Size, seen[cp.Size]), cp.Note); err != nil {
				return nil, err
			}
			sum.Checkpoints++
		}
		for _, size := range slices.Sorted(maps.Keys(et.cosignatures)) {
			var lines []byte
			for _, c := range et.cosignatures[size] {
				lines = append(lines, c.Line...)
			}
			if err := put(cosignaturesName(et.meta.TenantID, size), lines); err != nil {
				return nil, err
			}
			sum.Cosignatures += len(et.cosignatures[size])
		}
		if len(et.revocations) > 0 {
			data, err := revocationsJSON(et.revocations)
			if err != nil {
				return nil, err
			}
			if err := put(revocationsName(et.meta.TenantID), data); err != nil {
				return nil, err
			}
		}
	}
	n, err := writeBlobs(ctx, st, packs, func(hash string, data []byte) error { return put(blobName(hash), data) })
	if err != nil {
		return nil, err
	}
	sum.Blobs = n
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return sum, nil
}

func writeHeader(tw *tar.Writer, name string, size int64, mtime time.Time) error {
	return tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     size,
		Mode:     0o644,
		ModTime:  mtime,
		Format:   tar.FormatUSTAR,
	})
}

// sizeTenant reads a tenant's head and checkpoints and makes the first
// pass over its chain. It returns nil for a tenant without records.
func sizeTenant(ctx context.Context, st ledger.Store, t string, packs map[string]bool, opts Options) (*exportTenant, error) {
	head, err := st.Head(ctx, t)
	if err != nil {
		return nil, err
	}
	if head.Seq < 1 {
		return nil, nil
	}
	if opts.Signer != nil {
		if err := checkpointHead(ctx, st, t, head.Seq, opts); err != nil {
			return nil, err
		}
	}
	// Read after the head: every checkpoint issued before it covers at
	// most head.Seq records; later ones are not part of this snapshot.
	cps, err := st.Checkpoints(ctx, t)
	if err != nil {
		return nil, err
	}
	var cos []*ledger.Cosignature
	if cs, ok := st.(ledger.CosignatureStore); ok {
		if cos, err = cs.Cosignatures(ctx, t); err != nil {
			return nil, err
		}
	}
	if opts.Cosigned {
		var newest int64
		for _, c := range cos {
			if c.Size <= head.Seq && c.Size > newest {
				newest = c.Size
			}
		}
		if newest == 0 {
			return nil, nil
		}
		if head, err = headAt(ctx, st, t, newest); err != nil {
			return nil, err
		}
	}
	et := &exportTenant{meta: TenantMeta{TenantID: t, Records: head.Seq, Head: head.Hash}, cosignatures: map[int64][]*ledger.Cosignature{}}
	exported := map[int64]bool{}
	for _, cp := range cps {
		if cp.Size >= 1 && cp.Size <= head.Seq {
			exported[cp.Size] = true
		}
	}
	for _, c := range cos {
		if exported[c.Size] {
			et.cosignatures[c.Size] = append(et.cosignatures[c.Size], c)
		}
	}
	for _, cp := range cps {
		if cp.Size >= 1 && cp.Size <= head.Seq {
			et.checkpoints = append(et.checkpoints, cp)
		}
	}
	slices.SortStableFunc(et.checkpoints, func(a, b *ledger.Checkpoint) int { return cmp.Compare(a.Size, b.Size) })
	if et.revocations, err = exportRevocations(ctx, st, t, head.Seq); err != nil {
		return nil, err
	}
	err = readChain(ctx, st, t, head.Seq, func(raw []byte) error {
		if len(raw) > MaxRecordBytes {
			return fmt.Errorf("bundle: a record of tenant %s has %d bytes; a bundle holds records of at most %d", t, len(raw), MaxRecordBytes)
		}
		if bytes.IndexByte(raw, '\n') >= 0 {
			return fmt.Errorf("bundle: a record of tenant %s holds a line feed; stored records are canonical JSON, which has none", t)
		}
		et.n++
		et.size += int64(len(raw)) + 1
		if h := packHash(raw); h != "" {
			packs[h] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return et, nil
}

// headAt is the tenant's chain head as it was at seq: seq and the
// record_hash of the record at seq.
func headAt(ctx context.Context, st ledger.Store, t string, seq int64) (ledger.Head, error) {
	page, err := st.Chain(ctx, t, seq-1, 1)
	if err != nil {
		return ledger.Head{}, err
	}
	if len(page) != 1 {
		return ledger.Head{}, fmt.Errorf("bundle: tenant %s has no record %d", t, seq)
	}
	link, err := record.ParseLink(page[0])
	if err != nil || link.Seq != seq {
		return ledger.Head{}, fmt.Errorf("bundle: tenant %s: record %d cannot be read (%v)", t, seq, err)
	}
	return ledger.Head{Seq: seq, Hash: link.RecordHash}, nil
}

// checkpointHead signs and stores a checkpoint of the tenant's tree at
// size, the head the export snapshots, unless the store has one of that
// size already.
func checkpointHead(ctx context.Context, st ledger.Store, t string, size int64, opts Options) error {
	if _, err := st.CheckpointAt(ctx, t, size); err == nil {
		return nil
	} else if writ.ErrorCode(err) != writ.ENOTFOUND {
		return err
	}
	// The checkpoint commits to the tenant's revocations: a store that
	// cannot list them gets no checkpoint, rather than one stating none.
	keys, ok := st.(ledger.APIKeyLister)
	if !ok {
		return fmt.Errorf("bundle: tenant %s: the store (%T) does not list API keys, so a checkpoint could not state its revocations", t, st)
	}
	cp, err := ledger.SignCheckpoint(ctx, st, keys, opts.Signer, opts.LedgerName, t, size, time.Now())
	if err != nil {
		return fmt.Errorf("bundle: tenant %s: %w", t, err)
	}
	// A concurrent checkpointer may have stored one of this size meanwhile:
	// the same root, and the export takes whichever is stored.
	if err := st.PutCheckpoint(ctx, cp); err != nil && writ.ErrorCode(err) != writ.ECONFLICT {
		return fmt.Errorf("bundle: tenant %s: store checkpoint: %w", t, err)
	}
	return nil
}

// readChain calls fn with the first n records of a tenant's chain, in seq
// order, or fewer if the chain holds fewer.
func readChain(ctx context.Context, st ledger.Store, t string, n int64, fn func(raw []byte) error) error {
	var after, read int64
	for read < n {
		page, err := st.Chain(ctx, t, after, int(min(chainPage, n-read)))
		if err != nil {
			return err
		}
		for _, raw := range page {
			if err := fn(raw); err != nil {
				return err
			}
		}
		read += int64(len(page))
		if len(page) == 0 || read >= n {
			return nil
		}
		seq, err := recordSeq(page[len(page)-1])
		if err != nil || seq <= after {
			return fmt.Errorf("bundle: cannot page past record %d of tenant %s: its audit.seq cannot be read; verify the store with writ ledger verify", read, t)
		}
		after = seq
	}
	return nil
}

func recordSeq(raw []byte) (int64, error) {
	var r struct {
		Audit struct {
			Seq int64 `json:"seq"`
		} `json:"audit"`
	}
	err := json.Unmarshal(raw, &r)
	return r.Audit.Seq, err
}

// packHash returns the lineage.pack_hash a record pins, or "".
func packHash(raw []byte) string {
	var r struct {
		Lineage struct {
			PackHash string `json:"pack_hash"`
		} `json:"lineage"`
	}
	if json.Unmarshal(raw, &r) != nil || !digestPattern.MatchString(r.Lineage.PackHash) {
		return ""
	}
	return r.Lineage.PackHash
}

// writeRecords makes the second pass over a tenant's chain, writing
// exactly the records (and bytes) the first pass counted.
func writeRecords(ctx context.Context, st ledger.Store, w io.Writer, et *exportTenant) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var n, size int64
	err := readChain(ctx, st, et.meta.TenantID, et.n, func(raw []byte) error {
		n++
		size += int64(len(raw)) + 1
		if n > et.n || size > et.size {
			return errChanged
		}
		bw.Write(raw)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	if n != et.n || size != et.size {
		return errChanged
	}
	return bw.Flush()
}

var errChanged = errors.New("bundle: a tenant's sealed records changed while they were exported; sealed records never change: verify the store with writ ledger verify")

// writeBlobs writes the pinned packs: each manifest, then the files it
// lists, each blob once, in hash order.
func writeBlobs(ctx context.Context, st ledger.Store, packs map[string]bool, put func(hash string, data []byte) error) (int, error) {
	files := map[string]bool{}
	for h := range packs {
		files[h] = true
		data, err := st.Blob(ctx, h)
		if writ.ErrorCode(err) == writ.ENOTFOUND {
			continue
		} else if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if fh, _, ok := strings.Cut(line, "  "); ok && digestPattern.MatchString(fh) {
				files[fh] = true
			}
		}
	}
	hashes := make([]string, 0, len(files))
	for h := range files {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	n := 0
	for _, h := range hashes {
		data, err := st.Blob(ctx, h)
		if writ.ErrorCode(err) == writ.ENOTFOUND {
			continue
		} else if err != nil {
			return n, err
		}
		if len(data) > MaxBlobBytes {
			return n, fmt.Errorf("bundle: blob %s has %d bytes; a bundle holds blobs of at most %d", h, len(data), MaxBlobBytes)
		}
		if err := put(h, data); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
