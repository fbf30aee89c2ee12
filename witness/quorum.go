package witness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
)

// Finding kinds of CheckQuorum.
const (
	// FindingWitnessQuorum: a tenant's newest checkpoint lacks valid
	// cosignatures of the required number of trusted witnesses.
	FindingWitnessQuorum = "witness_quorum"
	// FindingBadCosignature: a signature line in the name and key ID of a
	// trusted witness that does not verify over its checkpoint, or a
	// cosignatures member that is not signature lines.
	FindingBadCosignature = "bad_cosignature"
)

// QuorumSource is what CheckQuorum reads (a bundle.Bundle).
type QuorumSource interface {
	Tenants(ctx context.Context) ([]string, error)
	Checkpoints(ctx context.Context, tenantID string) ([]*ledger.Checkpoint, error)
	CosignatureLines(ctx context.Context, tenantID string, size int64) ([]byte, error)
}

// CheckQuorum checks that each tenant's newest checkpoint (its largest
// size; of two notes of that size, the first) carries valid cosignatures
// of at least min of the trusted witnesses' keys, a witness counted once
// however many of its keys signed. Cosignature lines of keys not in keys
// are ignored; a line in the name and key ID of a trusted key that does
// not verify, on any checkpoint, is a FindingBadCosignature.
//
// A cosignature is a witness's statement that, when it signed, the
// checkpoint was the largest tree of the log it had seen and consistent
// with every earlier one: a ledger cut and re-grown from a checkpoint
// gets none for the re-grown part.
func CheckQuorum(ctx context.Context, src QuorumSource, keys []Key, min int) ([]verify.Finding, error) {
	if min < 1 || min > len(keys) {
		return nil, fmt.Errorf("witness: a quorum of %d of %d witness keys", min, len(keys))
	}
	tenants, err := src.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	var out []verify.Finding
	for _, t := range tenants {
		cps, err := src.Checkpoints(ctx, t)
		if err != nil {
			return nil, err
		}
		if len(cps) == 0 {
			out = append(out, verify.Finding{TenantID: t, Kind: FindingWitnessQuorum,
				Detail: fmt.Sprintf("the tenant has no checkpoint, so no witness cosigned its log; %d witnesses are required", min)})
			continue
		}
		var newest *ledger.Checkpoint
		seen := map[int64]bool{}
		newestCosigned := int64(0)
		var newestWitnesses []string
		for _, cp := range cps {
			if seen[cp.Size] {
				continue // the cosignatures are of the first note of a size
			}
			seen[cp.Size] = true
			if newest == nil || cp.Size > newest.Size {
				newest, newestWitnesses = cp, nil
			}
			data, err := src.CosignatureLines(ctx, t, cp.Size)
			if err != nil {
				return nil, err
			}
			if data == nil {
				continue
			}
			witnesses, fs := checkLines(t, cp, data, keys)
			out = append(out, fs...)
			if len(witnesses) > 0 && cp.Size > newestCosigned {
				newestCosigned = cp.Size
			}
			if cp == newest {
				newestWitnesses = witnesses
			}
		}
		if len(newestWitnesses) >= min {
			continue
		}
		detail := fmt.Sprintf("the newest checkpoint (tree size %d) has valid cosignatures of %d trusted witnesses", newest.Size, len(newestWitnesses))
		if len(newestWitnesses) > 0 {
			detail += " (" + strings.Join(newestWitnesses, ", ") + ")"
		}
		detail += fmt.Sprintf("; %d are required", min)
		if newestCosigned > 0 && newestCosigned < newest.Size {
			detail += fmt.Sprintf("; the newest checkpoint any trusted witness cosigned is of tree size %d, so records %d to %d were never witnessed (a log cut and re-grown after that checkpoint shows this way)", newestCosigned, newestCosigned+1, newest.Size)
		}
		out = append(out, verify.Finding{TenantID: t, TreeSize: newest.Size, Kind: FindingWitnessQuorum, Detail: detail})
	}
	return out, nil
}

// checkLines verifies the cosignature lines of one checkpoint and
// returns the names of the trusted witnesses with a valid one.
func checkLines(tenant string, cp *ledger.Checkpoint, data []byte, keys []Key) ([]string, []verify.Finding) {
	lines, err := SplitLines(data)
	if err != nil {
		return nil, []verify.Finding{{TenantID: tenant, TreeSize: cp.Size, Kind: FindingBadCosignature,
			Detail: "the cosignatures member is not note signature lines: " + err.Error()}}
	}
	var names []string
	var fs []verify.Finding
	for _, line := range lines {
		if _, _, err := lineKey(line); err != nil {
			fs = append(fs, verify.Finding{TenantID: tenant, TreeSize: cp.Size, Kind: FindingBadCosignature, Detail: err.Error()})
			continue
		}
		for _, k := range keys {
			_, err := Verify(cp.Note, line, k)
			if errors.Is(err, ErrOtherKey) {
				continue
			}
			if err != nil {
				fs = append(fs, verify.Finding{TenantID: tenant, TreeSize: cp.Size, Kind: FindingBadCosignature,
					Detail: fmt.Sprintf("a cosignature in the name and key ID of trusted witness %s does not verify over the checkpoint: %v", k.Name(), err)})
				continue
			}
			if !slices.Contains(names, k.Name()) {
				names = append(names, k.Name())
			}
		}
	}
	slices.Sort(names)
	return names, fs
}
