package bundle

import (
	"context"
	"fmt"

	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger/verify"
)

// Where the keys that verified a bundle came from (verify.Report.KeySource).
const (
	// KeysTrusted: the operator's published keys, given to the verifier
	// from outside the bundle.
	KeysTrusted = "trusted_keys"
	// KeysFromBundle: the bundle's own keys.json, which whoever wrote the
	// bundle chose. A bundle rewritten and re-signed by an attacker, with
	// the attacker's key in keys.json, verifies against them.
	KeysFromBundle = "bundle"
)

// VerifyConfig configures Bundle.Verify.
type VerifyConfig struct {
	// Trusted are the operator's published keys (keyring.ParsePublished).
	// Signatures are checked against them, per tenant, and keys.json is
	// checked against them (verify.VerifySigningKeys). Nil verifies with
	// keys.json, and the report says so (KeySource KeysFromBundle).
	Trusted *keyring.Published
	// AllowUncovered reports records that no signed checkpoint covers as
	// a notice instead of a finding.
	AllowUncovered bool
	// EvidenceIssuers are the issuer keys the auditor trusts for signed
	// evidence items (delegation.LoadEvidenceIssuers): each signed item's
	// JWS is verified with them. A bundle does not carry them (the
	// tenant registered them with the server, outside the ledger); nil
	// leaves the signatures unchecked, with a notice per tenant.
	EvidenceIssuers verify.EvidenceSignatures
}

// Verify checks the bundle (verify.Verify with the bundle's ledger name
// and the record rules against its pinned packs), with the trusted keys
// if given, and the signing keys keys.json states: no two windows
// overlap, and with trusted keys each one is trusted, with its window.
func (b *Bundle) Verify(ctx context.Context, cfg VerifyConfig) (*verify.Report, error) {
	opts, err := b.VerifyOptions()
	if err != nil {
		return nil, err
	}
	opts.RequireCheckpoints = !cfg.AllowUncovered
	opts.EvidenceIssuers = cfg.EvidenceIssuers
	source := KeysFromBundle
	if t := cfg.Trusted; t != nil {
		if t.LedgerName != b.LedgerName() {
			return nil, fmt.Errorf("the trusted keys are those of ledger %q; the bundle is of ledger %q", t.LedgerName, b.LedgerName())
		}
		source = KeysTrusted
		opts.Keys = nil
		opts.KeysFor = func(tenant string) (verify.KeyVerifier, error) { return t.RingFor(tenant) }
	}
	rep, err := verify.Verify(ctx, b, opts)
	if err != nil {
		return nil, err
	}
	rep.KeySource = source
	// A revocation placed at the exported head (none of the bundle's
	// checkpoints can commit to it yet) is a notice, as a store's is:
	// an export right after a revocation is not a failure.
	kept := rep.Findings[:0]
	for _, f := range rep.Findings {
		if f.Kind == verify.FindingUncoveredRevocations {
			rep.Notices = append(rep.Notices, f)
			continue
		}
		kept = append(kept, f)
	}
	rep.Findings = kept
	rep.Findings = append(rep.Findings, verify.VerifySigningKeys(b.Keys(), cfg.Trusted)...)
	return rep, nil
}
