package ledger

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/writhq/writ"
)

// Cosignature is a witness's cosignature on one of a tenant's
// checkpoints (C2SP tlog-cosignature): the note signature line the
// witness returned from add-checkpoint (C2SP tlog-witness), which
// verifies over the body of the tenant's checkpoint of Size with the
// witness's cosignature/v1 key.
type Cosignature struct {
	TenantID string
	// Size is the tree size of the checkpoint it cosigns.
	Size int64
	// Witness is the witness key's name, KeyHash its key ID (the first
	// two fields of the signature line).
	Witness string
	KeyHash uint32
	// Line is the signature line as the witness sent it: "— <name>
	// <base64>" and a line feed.
	Line []byte
	// CosignedAt is the timestamp the cosignature states (the witness's
	// clock), ReceivedAt when writ stored it (writ's clock).
	CosignedAt time.Time
	ReceivedAt time.Time
}

// CosignatureStore keeps witnesses' cosignatures, append-only. Both writ
// stores implement it, held to it by ledgertest.
type CosignatureStore interface {
	// PutCosignature stores a cosignature. A store keeps one per
	// (tenant, size, witness, key hash): the first stored; storing
	// another for the same four is a no-op, since a witness asked again
	// about the same checkpoint signs it again with a new timestamp.
	PutCosignature(ctx context.Context, c *Cosignature) error
	// Cosignatures lists a tenant's cosignatures by increasing size, then
	// witness name and key hash.
	Cosignatures(ctx context.Context, tenantID string) ([]*Cosignature, error)
	// LatestCosignature returns the cosignature of the largest checkpoint
	// of the tenant that the named witness key cosigned, or nil.
	LatestCosignature(ctx context.Context, tenantID, witness string, keyHash uint32) (*Cosignature, error)
}

// CheckCosignature checks what a store requires of a cosignature before
// storing it: a tenant, a positive size, a witness name, and a signature
// line that names that witness and ends in a line feed. Whether the
// signature verifies is the witness client's check (witness.Client).
func CheckCosignature(c *Cosignature) error {
	switch {
	case c == nil || c.TenantID == "" || c.Size < 1 || c.Witness == "":
		return &writ.Error{Code: writ.EINVALID, Message: "a cosignature needs a tenant, a positive size and a witness"}
	case !bytes.HasPrefix(c.Line, []byte("— "+c.Witness+" ")) || !bytes.HasSuffix(c.Line, []byte("\n")) || bytes.Count(c.Line, []byte("\n")) != 1:
		return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("a cosignature of %s is one note signature line of witness %s", c.TenantID, c.Witness)}
	case c.CosignedAt.IsZero() || c.ReceivedAt.IsZero():
		return &writ.Error{Code: writ.EINVALID, Message: "a cosignature needs its timestamp and the time it was received"}
	}
	return nil
}
