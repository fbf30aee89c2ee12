package keyring

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/writhq/writ"
)

// The trusted keys file: what an operator publishes of its signing keys
// (writ ledger keys publish), and what a verifier trusts instead of the
// keys a bundle carries (writ ledger verify-bundle --trusted-keys). Its
// format is docs/ledger-format.md §3.6; a change that older readers
// cannot read takes a new PublishedVersion.
const (
	PublishedFormat  = "writ-trusted-keys"
	PublishedVersion = 1
	// AllTenants is the tenant of a key that signs for every tenant of
	// the ledger: every key writ's ring holds.
	AllTenants = "*"
	// maxPublished bounds a trusted keys file.
	maxPublished = 16 << 20
)

// Published is a trusted keys file.
type Published struct {
	Format      string         `json:"format"`
	Version     int            `json:"version"`
	LedgerName  string         `json:"ledger_name"`
	PublishedAt time.Time      `json:"published_at"`
	Keys        []PublishedKey `json:"keys"`
}

// PublishedKey is one key of a trusted keys file: a Key and the tenant it
// signs for.
type PublishedKey struct {
	// Tenant is the tenant whose records and checkpoints the key may
	// sign, or AllTenants.
	Tenant        string     `json:"tenant"`
	KeyID         string     `json:"key_id"`
	VerifierKey   string     `json:"verifier_key"`
	ValidFrom     time.Time  `json:"valid_from"`
	ValidUntil    *time.Time `json:"valid_until,omitempty"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedReason string     `json:"revoked_reason,omitempty"`
}

// Key returns the key pk describes.
func (pk PublishedKey) Key() Key {
	name, _, _ := strings.Cut(pk.KeyID, "+")
	return Key{Name: name, ID: pk.KeyID, VerifierKey: pk.VerifierKey, ValidFrom: pk.ValidFrom,
		ValidUntil: pk.ValidUntil, RevokedAt: pk.RevokedAt, RevokedReason: pk.RevokedReason}.normalize()
}

// Publish returns the trusted keys file of a ledger whose ring holds keys:
// every key, for every tenant, with its window, indented JSON ending in a
// line feed.
func Publish(ledgerName string, keys []Key, now time.Time) ([]byte, error) {
	p := Published{Format: PublishedFormat, Version: PublishedVersion, LedgerName: ledgerName,
		PublishedAt: now.UTC().Truncate(time.Second), Keys: []PublishedKey{}}
	for _, k := range keys {
		k = k.normalize()
		p.Keys = append(p.Keys, PublishedKey{Tenant: AllTenants, KeyID: k.ID, VerifierKey: k.VerifierKey, ValidFrom: k.ValidFrom,
			ValidUntil: k.ValidUntil, RevokedAt: k.RevokedAt, RevokedReason: k.RevokedReason})
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	if _, err := ParsePublished(data); err != nil {
		return nil, err // never publish what a verifier would refuse
	}
	return data, nil
}

// ParsePublished reads a trusted keys file strictly: no unknown or
// duplicate members, nothing after the object, the format and version
// above, a ledger name, and every key well formed (its id and verifier
// key agree, its key data canonical base64, a valid_from) with a tenant.
// A key id appears once per tenant, and the windows of the keys that
// sign for one tenant (its own and AllTenants') never overlap.
func ParsePublished(data []byte) (*Published, error) {
	if len(data) > maxPublished {
		return nil, invalidf("trusted keys: larger than %d bytes", maxPublished)
	}
	var p Published
	if err := jsonv2.Unmarshal(data, &p, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, invalidf("trusted keys: %v", err)
	}
	switch {
	case p.Format != PublishedFormat:
		return nil, invalidf("trusted keys: format %q, want %q", p.Format, PublishedFormat)
	case p.Version != PublishedVersion:
		return nil, invalidf("trusted keys: version %d; this writ reads version %d", p.Version, PublishedVersion)
	case p.LedgerName == "":
		return nil, invalidf("trusted keys: no ledger_name")
	case len(p.Keys) == 0:
		return nil, invalidf("trusted keys: no keys")
	}
	seen := map[[2]string]bool{}
	for i, pk := range p.Keys {
		if pk.Tenant == "" {
			return nil, invalidf("trusted keys: key %d (%s) has no tenant (%q for every tenant)", i+1, pk.KeyID, AllTenants)
		}
		if seen[[2]string{pk.Tenant, pk.KeyID}] {
			return nil, invalidf("trusted keys: key %s is listed twice for tenant %s", pk.KeyID, pk.Tenant)
		}
		seen[[2]string{pk.Tenant, pk.KeyID}] = true
		if _, err := pk.Key().check(); err != nil {
			return nil, invalidf("trusted keys: %s", writ.ErrorMessage(err))
		}
		p.Keys[i] = pk.normalize()
	}
	for _, t := range p.tenants() {
		if o := Overlaps(p.keysFor(t)); len(o) > 0 {
			return nil, invalidf("trusted keys: the windows of %s and %s overlap (tenant %s): one tenant's keys never sign at the same time",
				o[0][0].ID, o[0][1].ID, t)
		}
	}
	return &p, nil
}

func (pk PublishedKey) normalize() PublishedKey {
	k := pk.Key()
	pk.ValidFrom, pk.ValidUntil, pk.RevokedAt = k.ValidFrom, k.ValidUntil, k.RevokedAt
	return pk
}

// tenants lists the tenants the file names, AllTenants included.
func (p *Published) tenants() []string {
	var ts []string
	for _, pk := range p.Keys {
		if !slices.Contains(ts, pk.Tenant) {
			ts = append(ts, pk.Tenant)
		}
	}
	return ts
}

// keysFor returns the keys that sign for tenant: its own and those for
// every tenant.
func (p *Published) keysFor(tenant string) []Key {
	var keys []Key
	for _, pk := range p.Keys {
		if pk.Tenant == tenant || pk.Tenant == AllTenants {
			keys = append(keys, pk.Key())
		}
	}
	return keys
}

// RingFor returns a verify-only ring of the keys trusted to sign for
// tenant. It holds no key at all when none is: every signature then
// verifies as signed by an unknown key.
func (p *Published) RingFor(tenant string) (*Ring, error) {
	keys := p.keysFor(tenant)
	// A key listed for the tenant and for every tenant is one key; its
	// windows agree (ParsePublished checked they do not overlap).
	uniq := keys[:0]
	for _, k := range keys {
		if !slices.ContainsFunc(uniq, func(u Key) bool { return u.ID == k.ID }) {
			uniq = append(uniq, k)
		}
	}
	r, err := NewPublic(uniq)
	if err != nil {
		return nil, fmt.Errorf("trusted keys for tenant %s: %w", tenant, err)
	}
	return r, nil
}

// Trusted returns the trusted entries of the key with the given id, for
// any tenant.
func (p *Published) Trusted(id string) []PublishedKey {
	var out []PublishedKey
	for _, pk := range p.Keys {
		if pk.KeyID == id {
			out = append(out, pk)
		}
	}
	return out
}

// windowEnd is when k stops signing: the earlier of its ValidUntil and
// RevokedAt, nil if neither is set.
func (k Key) windowEnd() *time.Time {
	end := k.ValidUntil
	if k.RevokedAt != nil && (end == nil || k.RevokedAt.Before(*end)) {
		end = k.RevokedAt
	}
	return end
}

// SameWindow reports whether k and o state the same window and
// revocation: valid_from, valid_until and revoked_at.
func (k Key) SameWindow(o Key) bool {
	eq := func(a, b *time.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(*b) }
	return k.ValidFrom.Equal(o.ValidFrom) && eq(k.ValidUntil, o.ValidUntil) && eq(k.RevokedAt, o.RevokedAt)
}

// Overlaps returns the pairs of keys whose windows overlap: two keys that
// could both sign at one instant. Windows are [valid_from, end), end being
// the earlier of valid_until and revoked_at, open when neither is set.
// Rotation never makes an overlap (it closes the old window at the
// instant the new one opens), so a pair here was written by hand, or
// by someone adding a key behind the operator's back.
func Overlaps(keys []Key) [][2]Key {
	keys = slices.Clone(keys)
	sortKeys(keys)
	var out [][2]Key
	for i, a := range keys {
		for _, b := range keys[i+1:] {
			if a.ID == b.ID {
				continue
			}
			// b.ValidFrom ≥ a.ValidFrom (sorted): they overlap when b
			// starts before a ends and b's window is not empty.
			aEnd, bEnd := a.windowEnd(), b.windowEnd()
			if (aEnd == nil || b.ValidFrom.Before(*aEnd)) && (bEnd == nil || b.ValidFrom.Before(*bEnd)) {
				out = append(out, [2]Key{a, b})
			}
		}
	}
	return out
}
