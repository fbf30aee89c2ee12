package bundle

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Format and Version identify the bundle format in bundle.json.
const (
	Format  = "writ-ledger-bundle"
	Version = 1
)

// Entry names.
const (
	MetaFile    = "bundle.json"
	KeysFile    = "keys.json"
	tenantsDir  = "tenants/"
	blobsDir    = "blobs/"
	recordsFile = "records.jsonl"
	cpDir       = "checkpoints/"
	noteSuffix  = ".note"
	cosigDir    = "cosignatures/"
	cosigSuffix = ".sigs"
)

// Size bounds of a bundle's entries. Open refuses a bundle that exceeds
// any of them.
const (
	// MaxMetaBytes bounds bundle.json and keys.json.
	MaxMetaBytes = 16 << 20
	// MaxRecordBytes bounds one record (one records.jsonl line, without
	// its line feed).
	MaxRecordBytes = 16 << 20
	// MinRecordBytes is the least a record line can hold: a sealed
	// record's audit block alone is longer. (It also bounds the memory of
	// the line index to a sixteenth of the records' size.)
	MinRecordBytes = 128
	// MaxNoteBytes bounds one checkpoint note.
	MaxNoteBytes = 64 << 10
	// MaxBlobBytes bounds one blob.
	MaxBlobBytes = 256 << 20
	// MaxEntries bounds the number of archive entries.
	MaxEntries = 1 << 22
	// MaxUncompressedBytes bounds what OpenFile decompresses a gzipped
	// bundle to.
	MaxUncompressedBytes = 1 << 40
	// maxLedgerName bounds the ledger name.
	maxLedgerName = 1024
)

// Meta is the content of bundle.json.
type Meta struct {
	// Format is "writ-ledger-bundle".
	Format string `json:"format"`
	// Version is the bundle format version, 1.
	Version int `json:"version"`
	// LedgerName is the ledger's name: its tenants' checkpoint origins are
	// "<ledger name>/<tenant>".
	LedgerName string `json:"ledger_name"`
	// CreatedAt is when the bundle was written (RFC 3339, UTC).
	CreatedAt time.Time `json:"created_at"`
	// Tenants lists the tenants in the bundle, by tenant id in byte order.
	Tenants []TenantMeta `json:"tenants"`
}

// TenantMeta describes one tenant's chain in bundle.json: the exporting
// store's chain head when the bundle was written. records.jsonl holds
// Records lines, the last one sealed with record_hash Head, unless the
// store itself had lost records (which verification then reports).
type TenantMeta struct {
	TenantID string `json:"tenant_id"`
	Records  int64  `json:"records"`
	Head     string `json:"head"`
}

// tenantPattern is what a tenant id may be: the engine's rule, which also
// keeps tenant directory names safe (no separators, no "." or "..").
var tenantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$`)

// digestPattern is a content address.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func checkTenant(t string) error {
	if !tenantPattern.MatchString(t) {
		return fmt.Errorf("tenant id %q is not 1-128 letters, digits, '_', '.', ':' or '-' starting with a letter or digit", t)
	}
	return nil
}

func checkLedgerName(name string) error {
	if name == "" || len(name) > maxLedgerName || !utf8.ValidString(name) {
		return fmt.Errorf("ledger name %q is not 1-%d bytes of UTF-8", name, maxLedgerName)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("ledger name %q holds a control character", name)
		}
	}
	return nil
}

// blobName returns the entry name of a content address, or "" if hash is
// not one.
func blobName(hash string) string {
	if !digestPattern.MatchString(hash) {
		return ""
	}
	return blobsDir + strings.TrimPrefix(hash, "sha256:")
}

func recordsName(tenant string) string { return tenantsDir + tenant + "/" + recordsFile }

// noteName is the entry name of the k-th (1-based) checkpoint of a size.
func noteName(tenant string, size int64, k int) string {
	name := strconv.FormatInt(size, 10)
	if k > 1 {
		name += "." + strconv.Itoa(k)
	}
	return tenantsDir + tenant + "/" + cpDir + name + noteSuffix
}

// cosignaturesName is the entry name of the witnesses' cosignatures of
// a tenant's checkpoint of a size.
func cosignaturesName(tenant string, size int64) string {
	return tenantsDir + tenant + "/" + cosigDir + strconv.FormatInt(size, 10) + cosigSuffix
}

// parseNoteName reads the size and ordinal of a checkpoint file name
// ("<size>.note" or "<size>.<k>.note", decimal without leading zeros,
// size ≥ 1, k ≥ 2).
func parseNoteName(base string) (size int64, k int, ok bool) {
	stem, found := strings.CutSuffix(base, noteSuffix)
	if !found {
		return 0, 0, false
	}
	sizeText, kText, hasK := strings.Cut(stem, ".")
	size, ok = parseDecimal(sizeText)
	if !ok || size < 1 {
		return 0, 0, false
	}
	if !hasK {
		return size, 1, true
	}
	n, ok := parseDecimal(kText)
	if !ok || n < 2 || n > 1<<20 {
		return 0, 0, false
	}
	return size, int(n), true
}

// parseDecimal parses a non-negative decimal integer written without
// leading zeros or signs.
func parseDecimal(s string) (int64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
