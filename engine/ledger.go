package engine

import (
	"context"
	"encoding/base64"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

var _ writ.Ledger = (*Engine)(nil)

func checkpointView(cp *ledger.Checkpoint) writ.Checkpoint {
	return writ.Checkpoint{TenantID: cp.TenantID, TreeSize: cp.Size, RootHash: base64.StdEncoding.EncodeToString(cp.Root[:]), Note: string(cp.Note), IssuedAt: cp.IssuedAt}
}

func hashStrings(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

func needTenant(tenantID string) error {
	if tenantID == "" {
		return &writ.Error{Code: writ.EINVALID, Message: "tenant_id is required", Details: []writ.Detail{{Field: "tenant_id", Message: "required"}}}
	}
	return nil
}

// checkpoint finds the tenant's checkpoint of size, or the latest for 0.
func (e *Engine) checkpoint(ctx context.Context, tenantID string, size int64) (*ledger.Checkpoint, error) {
	if err := needTenant(tenantID); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, writ.Errorf(writ.EINVALID, "tree size must not be negative")
	}
	if size == 0 {
		cp, err := e.store.LatestCheckpoint(ctx, tenantID)
		if err != nil {
			return nil, err
		}
		if cp == nil {
			return nil, writ.Errorf(writ.ENOTFOUND, "no checkpoint yet")
		}
		return cp, nil
	}
	return e.store.CheckpointAt(ctx, tenantID, size)
}

// Checkpoint returns a tenant's checkpoint; see writ.Ledger.
func (e *Engine) Checkpoint(ctx context.Context, tenantID string, size int64) (*writ.Checkpoint, error) {
	cp, err := e.checkpoint(ctx, tenantID, size)
	if err != nil {
		return nil, err
	}
	v := checkpointView(cp)
	return &v, nil
}

// IssueCheckpoint signs a checkpoint now; see writ.Ledger.
func (e *Engine) IssueCheckpoint(ctx context.Context, tenantID string) (*writ.Checkpoint, error) {
	if err := needTenant(tenantID); err != nil {
		return nil, err
	}
	if e.checkpointer == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "this ledger has no signing key, so it issues no checkpoints")
	}
	cp, err := e.checkpointer.Issue(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	v := checkpointView(cp)
	return &v, nil
}

// InclusionProof proves a record against a checkpoint; see writ.Ledger.
func (e *Engine) InclusionProof(ctx context.Context, tenantID, recordID string, treeSize int64) (*writ.InclusionProof, error) {
	rec, err := e.Record(ctx, tenantID, recordID)
	if err != nil {
		return nil, err
	}
	cp, err := e.checkpoint(ctx, tenantID, treeSize)
	if err != nil {
		return nil, err
	}
	seq := rec.Record.Audit.Seq
	if seq > cp.Size {
		msg := fmt.Sprintf("record %s (seq %d) is not covered by the checkpoint of size %d", recordID, seq, cp.Size)
		if treeSize == 0 {
			msg = fmt.Sprintf("record %s (seq %d) is not yet covered by a checkpoint (the latest has size %d); issue one and retry", recordID, seq, cp.Size)
		}
		return nil, &writ.Error{Code: writ.ENOTFOUND, Message: msg}
	}
	p, err := ledger.ProveInclusion(ctx, e.store, tenantID, seq, cp.Size)
	if err != nil {
		return nil, err
	}
	return &writ.InclusionProof{
		TenantID: tenantID, RecordID: recordID, Seq: seq, TreeSize: cp.Size,
		LeafHash: base64.StdEncoding.EncodeToString(p.LeafHash[:]), Proof: hashStrings(p.Proof), Checkpoint: checkpointView(cp),
	}, nil
}

// ConsistencyProof proves two checkpoints consistent; see writ.Ledger.
func (e *Engine) ConsistencyProof(ctx context.Context, tenantID string, oldSize, newSize int64) (*writ.ConsistencyProof, error) {
	if oldSize < 1 {
		return nil, writ.Errorf(writ.EINVALID, "old tree size must be at least 1")
	}
	oldCP, err := e.checkpoint(ctx, tenantID, oldSize)
	if err != nil {
		return nil, err
	}
	newCP, err := e.checkpoint(ctx, tenantID, newSize)
	if err != nil {
		return nil, err
	}
	if oldCP.Size > newCP.Size {
		return nil, writ.Errorf(writ.EINVALID, "old tree size %d is larger than the new %d", oldCP.Size, newCP.Size)
	}
	p, err := ledger.ProveConsistency(ctx, e.store, tenantID, oldCP.Size, newCP.Size)
	if err != nil {
		return nil, err
	}
	return &writ.ConsistencyProof{TenantID: tenantID, OldSize: oldCP.Size, NewSize: newCP.Size, Proof: hashStrings(p), Old: checkpointView(oldCP), New: checkpointView(newCP)}, nil
}
