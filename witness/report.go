package witness

import (
	"context"
	"fmt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// ReportStore is what Report reads: the tenant's latest checkpoint and
// each witness's latest cosignature of it.
type ReportStore interface {
	LatestCheckpoint(ctx context.Context, tenantID string) (*ledger.Checkpoint, error)
	LatestCosignature(ctx context.Context, tenantID, witness string, keyHash uint32) (*ledger.Cosignature, error)
}

// Report says where the tenant's ledger stands with the witnesses ws
// (none: an empty list), from what the store holds: the latest
// checkpoint, and for each witness its largest cosigned checkpoint and
// its lag behind the latest (writ.WitnessLag).
func Report(ctx context.Context, st ReportStore, tenantID string, ws []Witness) (*writ.LedgerWitnesses, error) {
	out := &writ.LedgerWitnesses{TenantID: tenantID, Witnesses: []writ.WitnessLag{}}
	cp, err := st.LatestCheckpoint(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if cp != nil {
		out.Checkpoint = &writ.CheckpointHead{TreeSize: cp.Size, IssuedAt: cp.IssuedAt}
	}
	for _, w := range ws {
		lag := writ.WitnessLag{Name: w.Key.Name(), KeyID: fmt.Sprintf("%08x", w.Key.Hash())}
		co, err := st.LatestCosignature(ctx, tenantID, w.Key.Name(), w.Key.Hash())
		if err != nil {
			return nil, err
		}
		if cp != nil {
			lag.LagRecords = cp.Size
		}
		if co != nil {
			cosignedAt, receivedAt := co.CosignedAt, co.ReceivedAt
			lag.CosignedSize, lag.CosignedAt, lag.ReceivedAt = co.Size, &cosignedAt, &receivedAt
			secs := 0.0
			if cp != nil && cp.Size > co.Size {
				lag.LagRecords = cp.Size - co.Size
				secs = max(0, cp.IssuedAt.Sub(co.ReceivedAt).Seconds())
			} else {
				lag.LagRecords = 0
			}
			lag.LagSeconds = &secs
		}
		out.Witnesses = append(out.Witnesses, lag)
	}
	return out, nil
}

// Report says where the tenant's ledger stands with the client's
// witnesses (the package's Report), marking each witness that reported a
// conflict on the tenant.
func (c *Client) Report(ctx context.Context, tenantID string) (*writ.LedgerWitnesses, error) {
	out, err := Report(ctx, c.cfg.Store, tenantID, c.cfg.Witnesses)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.state {
		if k.tenant == tenantID && s.conflict != nil {
			out.Witnesses[k.witness].Conflict = true
		}
	}
	return out, nil
}
