package writ

import (
	"context"
	"time"
)

// Checkpoint is a signed statement of a tenant's Merkle tree at one size
// (a C2SP tlog-checkpoint in a signed note).
type Checkpoint struct {
	TenantID string `json:"tenant_id"`
	// TreeSize is the number of records the tree holds.
	TreeSize int64 `json:"tree_size"`
	// RootHash is the tree's RFC 6962 root hash, standard base64.
	RootHash string `json:"root_hash"`
	// Note is the signed note, exactly as signed.
	Note     string    `json:"note"`
	IssuedAt time.Time `json:"issued_at"`
}

// InclusionProof proves one record is in a tenant's tree at TreeSize
// (RFC 6962 audit path, leaf index Seq-1).
type InclusionProof struct {
	TenantID string `json:"tenant_id"`
	RecordID string `json:"record_id"`
	Seq      int64  `json:"seq"`
	TreeSize int64  `json:"tree_size"`
	// LeafHash is SHA-256(0x00 || the record's stored bytes), base64.
	LeafHash string `json:"leaf_hash"`
	// Proof lists the audit path hashes, base64, leaf to root.
	Proof []string `json:"proof"`
	// Checkpoint is the signed checkpoint of TreeSize the proof is against.
	Checkpoint Checkpoint `json:"checkpoint"`
}

// ConsistencyProof proves a tenant's tree at OldSize is a prefix of its
// tree at NewSize (RFC 6962 consistency proof).
type ConsistencyProof struct {
	TenantID string   `json:"tenant_id"`
	OldSize  int64    `json:"old_size"`
	NewSize  int64    `json:"new_size"`
	Proof    []string `json:"proof"`
	// Old and New are the signed checkpoints of the two sizes.
	Old Checkpoint `json:"old"`
	New Checkpoint `json:"new"`
}

// Ledger is what an auditor uses to prove records: checkpoints and
// proofs. The in-process engine and the HTTP client both satisfy it.
type Ledger interface {
	// Checkpoint returns the tenant's checkpoint of the given size, or the
	// latest when size is 0; ENOTFOUND when there is none.
	Checkpoint(ctx context.Context, tenantID string, size int64) (*Checkpoint, error)
	// IssueCheckpoint signs a checkpoint of the tenant's tree now (or
	// returns the latest if it already covers every record).
	IssueCheckpoint(ctx context.Context, tenantID string) (*Checkpoint, error)
	// InclusionProof proves a record against the checkpoint of treeSize
	// (the latest checkpoint when treeSize is 0).
	InclusionProof(ctx context.Context, tenantID, recordID string, treeSize int64) (*InclusionProof, error)
	// ConsistencyProof proves the checkpoint of oldSize is consistent with
	// the checkpoint of newSize (the latest when newSize is 0).
	ConsistencyProof(ctx context.Context, tenantID string, oldSize, newSize int64) (*ConsistencyProof, error)
}
