package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// ChainFinding is one problem found in a tenant's chain.
type ChainFinding struct {
	TenantID string `json:"tenant_id"`
	Seq      int64  `json:"seq"`
	RecordID string `json:"record_id,omitempty"`
	Kind     string `json:"kind"` // hash_mismatch, chain_break, missing_record, malformed
	Detail   string `json:"detail"`
}

// Finding kinds.
const (
	FindingHashMismatch  = "hash_mismatch"
	FindingChainBreak    = "chain_break"
	FindingMissingRecord = "missing_record"
	FindingMalformed     = "malformed"
)

// ChainChecker checks records of one tenant in seq order, one at a time.
type ChainChecker struct {
	TenantID string
	prev     Head
	Findings []ChainFinding
	Checked  int64
}

// Next checks the next stored record of the chain.
func (c *ChainChecker) Next(raw []byte) {
	var id struct {
		RecordID string `json:"record_id"`
		TenantID string `json:"tenant_id"`
	}
	_ = json.Unmarshal(raw, &id)
	add := func(seq int64, kind, format string, args ...any) {
		c.Findings = append(c.Findings, ChainFinding{TenantID: c.TenantID, Seq: seq, RecordID: id.RecordID, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	c.Checked++
	link, err := record.CheckSealHash(raw)
	if err != nil {
		kind := FindingHashMismatch
		if link.RecordHash == "" {
			kind = FindingMalformed
		}
		add(link.Seq, kind, "%v", err)
	}
	if id.TenantID != c.TenantID {
		add(link.Seq, FindingMalformed, "record belongs to tenant %q, found in the chain of %q", id.TenantID, c.TenantID)
	}
	want := c.prev.Hash
	if c.prev.Seq == 0 {
		want = writ.GenesisHash
	}
	switch {
	case link.Seq > c.prev.Seq+1:
		add(link.Seq, FindingMissingRecord, "records %d..%d are missing", c.prev.Seq+1, link.Seq-1)
	case link.Seq <= c.prev.Seq:
		add(link.Seq, FindingChainBreak, "seq %d follows seq %d", link.Seq, c.prev.Seq)
	case link.PrevHash != want:
		add(link.Seq, FindingChainBreak, "prev_hash %s does not match the previous record's hash %s", link.PrevHash, want)
	}
	c.prev = Head{Seq: link.Seq, Hash: link.RecordHash}
}

// VerifyChains checks every tenant's chain in st: each record's hash over
// its canonical bytes, and each link to the record before it.
func VerifyChains(ctx context.Context, st Store) ([]ChainFinding, int64, error) {
	tenants, err := st.Tenants(ctx)
	if err != nil {
		return nil, 0, err
	}
	var findings []ChainFinding
	var total int64
	for _, t := range tenants {
		c := &ChainChecker{TenantID: t}
		var after int64
		for {
			page, err := st.Chain(ctx, t, after, 1000)
			if err != nil {
				return nil, 0, err
			}
			for _, raw := range page {
				c.Next(raw)
			}
			if len(page) < 1000 {
				break
			}
			l, _ := record.ParseLink(page[len(page)-1])
			after = l.Seq
		}
		head, err := st.Head(ctx, t)
		if err != nil {
			return nil, 0, err
		}
		if head.Seq != c.prev.Seq || head.Hash != c.prev.Hash {
			c.Findings = append(c.Findings, ChainFinding{TenantID: t, Seq: head.Seq, Kind: FindingMissingRecord,
				Detail: fmt.Sprintf("the chain head is seq %d (%s) but the last stored record is seq %d (%s)", head.Seq, head.Hash, c.prev.Seq, c.prev.Hash)})
		}
		findings = append(findings, c.Findings...)
		total += c.Checked
	}
	return findings, total, nil
}
