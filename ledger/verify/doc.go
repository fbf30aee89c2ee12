// Package verify checks a ledger: each record's hash, chain link,
// signature and validation rules, the Merkle tree against stored tree
// hashes and signed checkpoints, the revocations checkpoints commit to,
// and what a store keeps beside its records (receipts, run events,
// approval requests and events, shadow decisions, index rows, blobs, API
// keys) against the digests the sealed records bind. It reads a store or
// an export bundle through the interfaces it declares; VerifyStore runs
// every check over a store, as `writ ledger verify` does.
package verify
