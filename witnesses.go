package writ

import "time"

// LedgerWitnesses is where a tenant's ledger stands with its witnesses
// (GET /v1/ledger/witnesses): the tenant's latest signed checkpoint, if
// any, and for each witness the server submits checkpoints to, the
// largest checkpoint of the tenant it has cosigned and how far that is
// behind the latest.
type LedgerWitnesses struct {
	TenantID string `json:"tenant_id"`
	// Checkpoint is the tenant's latest checkpoint; nil until the first
	// one, which follows the tenant's first record within the server's
	// checkpoint interval.
	Checkpoint *CheckpointHead `json:"checkpoint"`
	// Witnesses are the configured witnesses, in the order of the
	// server's witnesses file; empty when none is configured.
	Witnesses []WitnessLag `json:"witnesses"`
}

// CheckpointHead names a checkpoint by its tree size and the time writ
// signed it.
type CheckpointHead struct {
	TreeSize int64     `json:"tree_size"`
	IssuedAt time.Time `json:"issued_at"`
}

// WitnessLag is one witness's view of a tenant's ledger.
type WitnessLag struct {
	// Name is the witness key's name, KeyID its key ID (the key hash) as
	// eight hex digits: the first two fields of its cosignature lines.
	Name  string `json:"name"`
	KeyID string `json:"key_id"`
	// CosignedSize is the tree size of the largest checkpoint of the
	// tenant the witness cosigned, 0 if none; CosignedAt the time its
	// cosignature states (the witness's clock) and ReceivedAt when writ
	// stored it (writ's clock), both absent if none.
	CosignedSize int64      `json:"cosigned_size"`
	CosignedAt   *time.Time `json:"cosigned_at,omitempty"`
	ReceivedAt   *time.Time `json:"received_at,omitempty"`
	// LagRecords is how many records the latest checkpoint holds beyond
	// the cosigned one (the latest checkpoint's size, if the witness
	// cosigned none).
	LagRecords int64 `json:"lag_records"`
	// LagSeconds is how far behind the witness is in time: 0 when it
	// cosigned the latest checkpoint, else the time from the receipt of
	// its latest cosignature to the signing of the latest checkpoint.
	// Absent when it cosigned no checkpoint of the tenant.
	LagSeconds *float64 `json:"lag_seconds,omitempty"`
	// Conflict is set when the witness refused a checkpoint of the tenant
	// as another history of the log (a witness conflict; see
	// docs/operations.md): the server has seen two histories.
	Conflict bool `json:"conflict,omitempty"`
}
