// Package bundle reads and writes writ's ledger export bundle: a single
// file that holds a ledger's records exactly as they were sealed, its
// signed checkpoints, the public signing keys with their validity
// windows, and the pinned packs the records name, so that the ledger can
// be verified offline with nothing else (writ ledger verify-bundle, or an
// independent verifier written from docs/ledger-format.md).
//
// # Layout
//
// A bundle is a POSIX ustar archive. writ ledger export gzip-compresses it
// when the output file name ends in ".gz" or ".tgz"; OpenFile accepts
// both forms. The archive holds regular files only, in this order:
//
//	bundle.json                                   format, ledger name, creation time, tenants
//	keys.json                                     the public keys: a JSON array of keyring.Key
//	tenants/<tenant>/records.jsonl                the tenant's records, one per line, in seq order
//	tenants/<tenant>/checkpoints/<size>.note      each signed checkpoint note, as stored
//	tenants/<tenant>/cosignatures/<size>.sigs     witnesses' cosignature lines of that checkpoint, as received
//	blobs/<hex>                                   pinned pack manifests and files, by SHA-256
//
// Each records.jsonl line is a stored record's exact bytes followed by a
// line feed (0x0A); the bytes never contain a line feed, since canonical
// JSON has no raw control characters. Line i (1-based) is the record at
// seq i. A checkpoint note is named by the tree size it states; a second
// note of a size already present (writ never issues one, but a bundle may
// carry one received from elsewhere, as evidence) is named
// <size>.<k>.note with k = 2, 3, ... A blob's name is the lowercase hex
// SHA-256 of its content, the part after "sha256:" of its content address.
//
// bundle.json and keys.json are read strictly: unknown members, duplicate
// names and trailing data are errors. What a bundle's records and notes
// say is not checked by Open: a tampered record or note is a verification
// finding (see verify.Verify), not a malformed bundle. A malformed bundle
// (an unexpected, duplicate or oversized entry, a bad name, a missing
// file, a truncated records file) is an error, never a panic.
package bundle
