package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/record"
)

// Bundle is an opened bundle. It is a verify.Source (with the chain heads
// bundle.json states, a verify.HeadSource) and a verify.BlobSource, so
// verify.Verify checks it as it checks a store. A Bundle reads records,
// notes and blobs from the underlying file when asked; it is safe for
// concurrent use.
type Bundle struct {
	r       io.ReaderAt
	closers []func() error
	meta    Meta
	keys    []keyring.Key
	tenants map[string]*tenantData
	blobs   map[string]section // by content address
}

var (
	_ verify.Source     = (*Bundle)(nil)
	_ verify.HeadSource = (*Bundle)(nil)
	_ verify.BlobSource = (*Bundle)(nil)
)

// section is where an entry's data lies in the archive.
type section struct{ off, size int64 }

type tenantData struct {
	listed     bool // in bundle.json
	meta       TenantMeta
	hasRecords bool
	records    section
	lines      []int64 // where each line starts, relative to records.off
	notes      []noteEntry
	cosigs     map[int64]section // cosignatures/<size>.sigs
	// revocations are the tenant's API key revocations
	// (revocations.json), nil if the bundle carries none.
	revocations []Revocation

	// The last page Chain returned: the line after it, and the audit.seq
	// of its last record (see Chain).
	mu      sync.Mutex
	next    int64
	lastSeq int64
}

type noteEntry struct {
	size int64
	k    int
	sec  section
}

// OpenFile opens the bundle in the file at path, gzip-compressed or not.
// A compressed bundle is decompressed to a temporary file first (at most
// MaxUncompressedBytes). Close the Bundle when done.
func OpenFile(path string) (*Bundle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var magic [2]byte
	if n, _ := f.ReadAt(magic[:], 0); !isGzip(magic[:n]) {
		b, err := Open(f, fi.Size())
		if err != nil {
			f.Close()
			return nil, err
		}
		b.closers = append(b.closers, f.Close)
		return b, nil
	}
	defer f.Close()
	tmp, size, err := gunzip(f)
	if err != nil {
		return nil, fmt.Errorf("bundle: %s: %w", path, err)
	}
	closers := []func() error{tmp.Close}
	if os.Remove(tmp.Name()) != nil {
		// Not on this system while it is open (Windows): remove it on Close.
		name := tmp.Name()
		closers = append(closers, func() error { return os.Remove(name) })
	}
	b, err := Open(tmp, size)
	if err != nil {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	b.closers = append(b.closers, closers...)
	return b, nil
}

// gunzip decompresses r into a temporary file.
func gunzip(r io.Reader) (*os.File, int64, error) {
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, 0, fmt.Errorf("not a gzip stream: %w", err)
	}
	tmp, err := os.CreateTemp("", "writ-bundle-*.tar")
	if err != nil {
		return nil, 0, err
	}
	n, err := io.Copy(tmp, io.LimitReader(zr, MaxUncompressedBytes+1))
	if err == nil && n > MaxUncompressedBytes {
		err = fmt.Errorf("decompresses to more than %d bytes", int64(MaxUncompressedBytes))
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, 0, fmt.Errorf("decompress: %w", err)
	}
	return tmp, n, nil
}

// Close releases the file behind the bundle.
func (b *Bundle) Close() error {
	var errs []error
	for _, c := range b.closers {
		errs = append(errs, c())
	}
	b.closers = nil
	return errors.Join(errs...)
}

// countingReader counts the bytes read through it: after tar.Reader.Next,
// the count is where the entry's data starts.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Open reads the uncompressed bundle of size bytes in r: it reads the
// archive once, checking its structure and indexing records, notes and
// blobs, which it reads from r again when asked. r must stay readable and
// unchanged while the Bundle is used.
func Open(r io.ReaderAt, size int64) (*Bundle, error) {
	b, err := open(r, size)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return b, nil
}

func open(r io.ReaderAt, size int64) (*Bundle, error) {
	if size < 0 {
		return nil, errors.New("negative size")
	}
	cr := &countingReader{r: io.NewSectionReader(r, 0, size)}
	tr := tar.NewReader(cr)
	b := &Bundle{r: r, tenants: map[string]*tenantData{}, blobs: map[string]section{}}
	seen := map[string]bool{}
	var metaJSON, keysJSON []byte
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			if entries == 0 {
				return nil, errors.New("empty archive: not a bundle")
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a readable tar archive (after %d entries): %w", entries, err)
		}
		if entries >= MaxEntries {
			return nil, fmt.Errorf("more than %d archive entries", MaxEntries)
		}
		name := hdr.Name
		switch hdr.Typeflag {
		case tar.TypeDir:
			if !validDir(name) {
				return nil, fmt.Errorf("unexpected directory %q", name)
			}
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("entry %q is not a regular file (type %q)", name, hdr.Typeflag)
		}
		if seen[name] {
			return nil, fmt.Errorf("entry %q appears twice", name)
		}
		seen[name] = true
		sec := section{off: cr.n, size: hdr.Size}
		if err := b.entry(tr, name, sec, &metaJSON, &keysJSON); err != nil {
			return nil, err
		}
		if cr.n-sec.off != hdr.Size {
			return nil, fmt.Errorf("entry %q: its %d bytes are not stored as they are (sparse files are not allowed)", name, hdr.Size)
		}
	}
	if metaJSON == nil {
		return nil, fmt.Errorf("no %s", MetaFile)
	}
	if keysJSON == nil {
		return nil, fmt.Errorf("no %s", KeysFile)
	}
	if err := b.readMeta(metaJSON); err != nil {
		return nil, err
	}
	if err := b.readKeys(keysJSON); err != nil {
		return nil, err
	}
	return b, b.checkTenants()
}

// validDir reports whether a directory entry names one of the layout's
// directories (archives made by other tools list them).
func validDir(name string) bool {
	name = strings.TrimSuffix(name, "/")
	switch name {
	case "tenants", "blobs":
		return true
	}
	rest, ok := strings.CutPrefix(name, tenantsDir)
	if !ok {
		return false
	}
	t, sub, _ := strings.Cut(rest, "/")
	return checkTenant(t) == nil && (sub == "" || sub == strings.TrimSuffix(cpDir, "/") || sub == strings.TrimSuffix(cosigDir, "/"))
}

// entry reads one regular file of the archive.
func (b *Bundle) entry(tr io.Reader, name string, sec section, metaJSON, keysJSON *[]byte) error {
	var err error
	switch {
	case name == MetaFile:
		*metaJSON, err = readSmall(tr, name, sec.size, MaxMetaBytes)
		return err
	case name == KeysFile:
		*keysJSON, err = readSmall(tr, name, sec.size, MaxMetaBytes)
		return err
	case strings.HasPrefix(name, blobsDir):
		hash := "sha256:" + name[len(blobsDir):]
		if blobName(hash) != name {
			return fmt.Errorf("blob %q is not named by a lowercase hex SHA-256", name)
		}
		if sec.size > MaxBlobBytes {
			return fmt.Errorf("blob %q has %d bytes; the limit is %d", name, sec.size, MaxBlobBytes)
		}
		b.blobs[hash] = sec
		return skip(tr, sec.size)
	case strings.HasPrefix(name, tenantsDir):
		tenant, file, _ := strings.Cut(name[len(tenantsDir):], "/")
		if err := checkTenant(tenant); err != nil {
			return fmt.Errorf("entry %q: %w", name, err)
		}
		td := b.tenant(tenant)
		if file == recordsFile {
			td.hasRecords, td.records = true, sec
			td.lines, err = indexLines(tr, name, sec.size)
			return err
		}
		if file == revocationsFile {
			data, err := readSmall(tr, name, sec.size, MaxMetaBytes)
			if err != nil {
				return err
			}
			td.revocations, err = readRevocations(data, name)
			return err
		}
		if base, ok := strings.CutPrefix(file, cpDir); ok {
			size, k, ok := parseNoteName(base)
			if !ok {
				return fmt.Errorf("entry %q: a checkpoint is named <size>.note or <size>.<k>.note (decimal, size ≥ 1, k ≥ 2)", name)
			}
			if sec.size > MaxNoteBytes {
				return fmt.Errorf("checkpoint %q has %d bytes; the limit is %d", name, sec.size, MaxNoteBytes)
			}
			td.notes = append(td.notes, noteEntry{size: size, k: k, sec: sec})
			return skip(tr, sec.size)
		}
		if base, ok := strings.CutPrefix(file, cosigDir); ok {
			stem, _ := strings.CutSuffix(base, cosigSuffix)
			size, ok := parseDecimal(stem)
			if !ok || size < 1 || !strings.HasSuffix(base, cosigSuffix) {
				return fmt.Errorf("entry %q: cosignatures are named <size>.sigs (decimal, size ≥ 1)", name)
			}
			if sec.size > MaxNoteBytes {
				return fmt.Errorf("cosignatures %q have %d bytes; the limit is %d", name, sec.size, MaxNoteBytes)
			}
			if td.cosigs == nil {
				td.cosigs = map[int64]section{}
			}
			td.cosigs[size] = sec
			return skip(tr, sec.size)
		}
	}
	return fmt.Errorf("unexpected entry %q", name)
}

func (b *Bundle) tenant(t string) *tenantData {
	td := b.tenants[t]
	if td == nil {
		td = &tenantData{}
		b.tenants[t] = td
	}
	return td
}

func readSmall(r io.Reader, name string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("%s has %d bytes; the limit is %d", name, size, limit)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

func skip(r io.Reader, size int64) error {
	n, err := io.CopyN(io.Discard, r, size)
	if err != nil || n != size {
		return fmt.Errorf("archive ends inside an entry: %w", cmp.Or(err, io.ErrUnexpectedEOF))
	}
	return nil
}

// indexLines reads a records.jsonl entry and returns where each line
// starts. Every line must end with a line feed and hold MinRecordBytes to
// MaxRecordBytes.
func indexLines(r io.Reader, name string, size int64) ([]int64, error) {
	var lines []int64
	buf := make([]byte, 64<<10)
	var pos, start int64
	for pos < size {
		n, err := r.Read(buf[:min(int64(len(buf)), size-pos)])
		for i := 0; i < n; i++ {
			if buf[i] == '\n' {
				end := pos + int64(i)
				if end-start > MaxRecordBytes || end-start < MinRecordBytes {
					return nil, fmt.Errorf("%s: line %d has %d bytes; a sealed record has %d to %d", name, len(lines)+1, end-start, MinRecordBytes, MaxRecordBytes)
				}
				lines = append(lines, start)
				start = end + 1
			}
		}
		pos += int64(n)
		if pos-start > MaxRecordBytes {
			return nil, fmt.Errorf("%s: line %d has more than %d bytes", name, len(lines)+1, MaxRecordBytes)
		}
		if err == io.EOF && pos < size {
			return nil, fmt.Errorf("%s: archive ends inside the entry", name)
		} else if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if start != size {
		return nil, fmt.Errorf("%s does not end with a line feed (truncated?)", name)
	}
	return lines, nil
}

func (b *Bundle) readMeta(data []byte) error {
	var m Meta
	if err := jsonv2.Unmarshal(data, &m, jsonv2.RejectUnknownMembers(true)); err != nil {
		return fmt.Errorf("%s: %w", MetaFile, err)
	}
	switch {
	case m.Format != Format:
		return fmt.Errorf("%s: format %q, want %q", MetaFile, m.Format, Format)
	case m.Version != Version:
		return fmt.Errorf("%s: format version %d; this writ reads version %d", MetaFile, m.Version, Version)
	case m.CreatedAt.IsZero():
		return fmt.Errorf("%s: created_at is missing", MetaFile)
	}
	if err := checkLedgerName(m.LedgerName); err != nil {
		return fmt.Errorf("%s: %w", MetaFile, err)
	}
	for i, t := range m.Tenants {
		if err := checkTenant(t.TenantID); err != nil {
			return fmt.Errorf("%s: %w", MetaFile, err)
		}
		if i > 0 && t.TenantID <= m.Tenants[i-1].TenantID {
			return fmt.Errorf("%s: tenants are not listed once each in byte order (%q after %q)", MetaFile, t.TenantID, m.Tenants[i-1].TenantID)
		}
		if t.Records < 1 || !digestPattern.MatchString(t.Head) {
			return fmt.Errorf("%s: tenant %s needs records ≥ 1 and a head record hash (sha256:<64 hex>)", MetaFile, t.TenantID)
		}
		td := b.tenant(t.TenantID)
		td.listed, td.meta = true, t
	}
	if m.Tenants == nil {
		m.Tenants = []TenantMeta{}
	}
	b.meta = m
	return nil
}

func (b *Bundle) readKeys(data []byte) error {
	var keys []keyring.Key
	if err := jsonv2.Unmarshal(data, &keys, jsonv2.RejectUnknownMembers(true)); err != nil {
		return fmt.Errorf("%s: %w", KeysFile, err)
	}
	if _, err := keyring.NewPublic(keys); err != nil {
		return fmt.Errorf("%s: %s", KeysFile, writ.ErrorMessage(err))
	}
	if keys == nil {
		keys = []keyring.Key{}
	}
	b.keys = keys
	return nil
}

// checkTenants checks that the tenants bundle.json lists are exactly
// those with files, each with its records, and orders checkpoints.
func (b *Bundle) checkTenants() error {
	for t, td := range b.tenants {
		switch {
		case !td.listed:
			return fmt.Errorf("tenant %s has files but is not listed in %s", t, MetaFile)
		case !td.hasRecords:
			return fmt.Errorf("tenant %s has no %s", t, recordsName(t))
		}
		slices.SortFunc(td.notes, func(a, b noteEntry) int {
			return cmp.Or(cmp.Compare(a.size, b.size), cmp.Compare(a.k, b.k))
		})
		for i, n := range td.notes {
			want := 1
			if i > 0 && td.notes[i-1].size == n.size {
				want = td.notes[i-1].k + 1
			}
			if n.k != want {
				return fmt.Errorf("%s without %s", noteName(t, n.size, n.k), noteName(t, n.size, want))
			}
		}
	}
	return nil
}

// Meta returns the content of bundle.json.
func (b *Bundle) Meta() Meta {
	m := b.meta
	m.Tenants = slices.Clone(m.Tenants)
	return m
}

// LedgerName returns the ledger's name, as bundle.json states it.
func (b *Bundle) LedgerName() string { return b.meta.LedgerName }

// Keys returns the public keys of keys.json.
func (b *Bundle) Keys() []keyring.Key {
	out := slices.Clone(b.keys)
	for i := range out {
		out[i].ValidUntil = cloneTime(out[i].ValidUntil)
		out[i].RevokedAt = cloneTime(out[i].RevokedAt)
	}
	return out
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// VerifyOptions returns what verifies the bundle with nothing else: its
// keys, its ledger name, and the record rules checked against the pinned
// packs it carries. Records that no signed checkpoint of the bundle
// covers are a finding (RequireCheckpoints): nothing signed anchors them,
// so records cut off the end, with bundle.json edited to match, would
// otherwise go unseen.
func (b *Bundle) VerifyOptions() (verify.VerifyOptions, error) {
	ring, err := keyring.NewPublic(b.Keys())
	if err != nil {
		return verify.VerifyOptions{}, err
	}
	return verify.VerifyOptions{Keys: ring, LedgerName: b.LedgerName(), Rules: verify.NewRules(pinned.NewPacks(b)), Revocations: b, RequireCheckpoints: true}, nil
}

// Tenants lists the bundle's tenants in byte order.
func (b *Bundle) Tenants(context.Context) ([]string, error) {
	out := make([]string, len(b.meta.Tenants))
	for i, t := range b.meta.Tenants {
		out[i] = t.TenantID
	}
	return out, nil
}

// Head returns a tenant's chain head as bundle.json states it.
func (b *Bundle) Head(_ context.Context, tenantID string) (ledger.Head, error) {
	td := b.tenants[tenantID]
	if td == nil {
		return ledger.Head{}, nil
	}
	return ledger.Head{Seq: td.meta.Records, Hash: td.meta.Head}, nil
}

// maxRead bounds one read of several records.
const maxRead = 4 << 20

// Chain returns up to limit records of a tenant from line after+1 on: the
// bytes of each line without its line feed. In a bundle line i holds the
// record at seq i, so this is a store's "seq > after".
//
// Callers page by the audit.seq of the last record of the page before (as
// verify.Verify does), which a tampered bundle can make disagree with the
// line numbers: a deleted line shifts every later seq, and a forged seq
// could send a reader back to an earlier line again and again. So when
// after is the audit.seq of the last record the previous call returned,
// Chain continues from the line after that record, whatever its seq says:
// every line is read once, in order, and paging always ends.
func (b *Bundle) Chain(_ context.Context, tenantID string, after int64, limit int) ([]json.RawMessage, error) {
	if limit <= 0 {
		return nil, writ.Errorf(writ.EINVALID, "invalid limit %d", limit)
	}
	td := b.tenants[tenantID]
	if td == nil {
		return nil, nil
	}
	n := int64(len(td.lines))
	start := max(after, 0)
	td.mu.Lock()
	if after > 0 && td.next > 0 && after == td.lastSeq {
		start = td.next
	}
	td.mu.Unlock()
	if start >= n {
		return nil, nil
	}
	end := min(start+int64(limit), n)
	// next is where line i's successor starts: line i spans
	// [lines[i], next(i)-1), then its line feed.
	next := func(i int64) int64 {
		if i+1 < n {
			return td.lines[i+1]
		}
		return td.records.size
	}
	out := make([]json.RawMessage, 0, end-start)
	for i := start; i < end; {
		j := i + 1
		for j < end && next(j)-td.lines[i] <= maxRead {
			j++
		}
		buf, err := b.read(td.records.off+td.lines[i], next(j-1)-td.lines[i])
		if err != nil {
			return nil, fmt.Errorf("bundle: read %s: %w", recordsName(tenantID), err)
		}
		for k := i; k < j; k++ {
			s, e := td.lines[k]-td.lines[i], next(k)-1-td.lines[i]
			out = append(out, buf[s:e:e])
		}
		i = j
	}
	// Remember where this page ended, under the seq its last record
	// states (read as verification reads it).
	_, last, _ := record.SplitSeal(out[len(out)-1])
	td.mu.Lock()
	td.next, td.lastSeq = end, last.Seq
	td.mu.Unlock()
	return out, nil
}

// Checkpoints returns a tenant's checkpoints by size (notes of the same
// size in the order of their names). Size is the size the file name
// states and Root the root the note states, read without checking its
// signatures; verification checks them.
func (b *Bundle) Checkpoints(_ context.Context, tenantID string) ([]*ledger.Checkpoint, error) {
	td := b.tenants[tenantID]
	if td == nil {
		return nil, nil
	}
	out := make([]*ledger.Checkpoint, 0, len(td.notes))
	for _, n := range td.notes {
		msg, err := b.read(n.sec.off, n.sec.size)
		if err != nil {
			return nil, fmt.Errorf("bundle: read %s: %w", noteName(tenantID, n.size, n.k), err)
		}
		cp := &ledger.Checkpoint{TenantID: tenantID, Size: n.size, Note: msg}
		if _, _, root, err := ledger.ParseCheckpointText(unverifiedText(msg)); err == nil {
			cp.Root = root
		}
		out = append(out, cp)
	}
	return out, nil
}

// CosignatureLines returns the witnesses' cosignature lines a bundle
// carries for a tenant's checkpoint of size (the member
// tenants/<tenant>/cosignatures/<size>.sigs), or nil if it carries none.
// They are returned as stored, unchecked: witness.CheckQuorum checks
// them.
func (b *Bundle) CosignatureLines(_ context.Context, tenantID string, size int64) ([]byte, error) {
	td := b.tenants[tenantID]
	if td == nil {
		return nil, nil
	}
	sec, ok := td.cosigs[size]
	if !ok {
		return nil, nil
	}
	data, err := b.read(sec.off, sec.size)
	if err != nil {
		return nil, fmt.Errorf("bundle: read %s: %w", cosignaturesName(tenantID, size), err)
	}
	return data, nil
}

// unverifiedText returns the text of a signed note without checking its
// signatures, or "" if it is not a signed note.
func unverifiedText(msg []byte) string {
	_, err := note.Open(msg, note.VerifierList())
	var u *note.UnverifiedNoteError
	if errors.As(err, &u) {
		return u.Note.Text
	}
	return ""
}

// Blob returns a blob by its content address, checking that its content
// hashes to it.
func (b *Bundle) Blob(_ context.Context, hash string) ([]byte, error) {
	sec, ok := b.blobs[hash]
	if !ok {
		return nil, writ.Errorf(writ.ENOTFOUND, "blob %s is not in the bundle", hash)
	}
	data, err := b.read(sec.off, sec.size)
	if err != nil {
		return nil, fmt.Errorf("bundle: read blob %s: %w", hash, err)
	}
	if got := record.Digest(data); got != hash {
		return nil, writ.Errorf(writ.EINVALID, "blob %s in the bundle hashes to %s", hash, got)
	}
	return data, nil
}

// read reads size bytes at off.
func (b *Bundle) read(off, size int64) ([]byte, error) {
	buf := make([]byte, size)
	n, err := b.r.ReadAt(buf, off)
	if n == len(buf) {
		return buf, nil
	}
	return nil, cmp.Or(err, io.ErrUnexpectedEOF)
}

// isGzip reports whether data starts like a gzip stream.
func isGzip(data []byte) bool { return bytes.HasPrefix(data, []byte{0x1f, 0x8b}) }
