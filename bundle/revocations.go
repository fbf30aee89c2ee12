package bundle

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/verify"
)

// revocationsFile is the entry of a tenant's API key revocations:
// tenants/<tenant>/revocations.json (docs/ledger-format.md §6.7).
const revocationsFile = "revocations.json"

// Revocation is one API key revocation as a bundle carries it: what a
// tenant's checkpoints commit to in their revocations line.
type Revocation struct {
	// KeyID is the API key's id.
	KeyID string `json:"key_id"`
	// RevokedAt is when it was revoked.
	RevokedAt time.Time `json:"revoked_at"`
	// Position is the tenant's chain head when the revocation was stored
	// (api_key_revocations.head_seq): checkpoints of a size above it
	// commit to it.
	Position int64 `json:"position"`
}

var _ verify.RevocationSource = (*Bundle)(nil)

func revocationsName(tenant string) string { return tenantsDir + tenant + "/" + revocationsFile }

// exportRevocations returns the revocations of tenant t that a bundle of
// its chain up to head carries: those placed at or before head, by key
// id. A store that cannot list its API keys is refused, not taken to have
// revoked none: a bundle without a revocation its checkpoints state would
// fail verification, and one of a ledger whose checkpoints state none
// would hide them.
func exportRevocations(ctx context.Context, st ledger.Store, t string, head int64) ([]Revocation, error) {
	rs, ok := st.(verify.RevocationSource)
	if !ok {
		return nil, fmt.Errorf("bundle: the store (%T) cannot list its API keys, so the bundle could not carry %s's revocations", st, t)
	}
	keys, err := rs.APIKeys(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("bundle: API keys of %s: %w", t, err)
	}
	var out []Revocation
	for _, k := range keys {
		if k.TenantID != t || k.RevokedAt == nil || k.RevokedAfter == nil || *k.RevokedAfter > head {
			continue
		}
		out = append(out, Revocation{KeyID: k.ID, RevokedAt: k.RevokedAt.UTC(), Position: *k.RevokedAfter})
	}
	slices.SortFunc(out, func(a, b Revocation) int { return strings.Compare(a.KeyID, b.KeyID) })
	return out, nil
}

// readRevocations reads a revocations.json entry strictly: an array of
// revocations, no unknown or duplicate members, key ids once each in
// byte order, times set, positions not negative.
func readRevocations(data []byte, name string) ([]Revocation, error) {
	var rs []Revocation
	if err := jsonv2.Unmarshal(data, &rs, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, r := range rs {
		switch {
		case r.KeyID == "":
			return nil, fmt.Errorf("%s: revocation %d has no key_id", name, i+1)
		case r.RevokedAt.IsZero():
			return nil, fmt.Errorf("%s: revocation of %s has no revoked_at", name, r.KeyID)
		case r.Position < 0:
			return nil, fmt.Errorf("%s: revocation of %s has a negative position", name, r.KeyID)
		case i > 0 && r.KeyID <= rs[i-1].KeyID:
			return nil, fmt.Errorf("%s: key ids are not listed once each in byte order (%q after %q)", name, r.KeyID, rs[i-1].KeyID)
		}
	}
	return rs, nil
}

func revocationsJSON(rs []Revocation) ([]byte, error) {
	data, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// APIKeys returns the revoked API keys the bundle carries, of tenantID
// ("" for every tenant): only their ids, tenants, revocation times and
// positions, which is what a checkpoint's revocations line commits to.
// verify.Verify then checks every valid checkpoint's line against them
// (revocation_mismatch), as it checks a store's.
func (b *Bundle) APIKeys(_ context.Context, tenantID string) ([]*auth.Key, error) {
	var out []*auth.Key
	for _, t := range slices.Sorted(maps.Keys(b.tenants)) {
		if tenantID != "" && t != tenantID {
			continue
		}
		for _, r := range b.tenants[t].revocations {
			at, pos := r.RevokedAt, r.Position
			out = append(out, &auth.Key{ID: r.KeyID, TenantID: t, RevokedAt: &at, RevokedAfter: &pos})
		}
	}
	return out, nil
}
