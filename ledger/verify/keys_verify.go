package verify

import (
	"fmt"
	"time"

	"github.com/writhq/writ/keyring"
)

// Finding kinds of the signing keys themselves (docs/ledger-format.md
// §7.4). They name the key in SigningKeyID and no tenant.
const (
	// FindingKeyWindowOverlap: two keys whose windows overlap, so that
	// either could have signed at one instant (an attacker's key added
	// beside the operator's).
	FindingKeyWindowOverlap = "key_window_overlap"
	// FindingUntrustedKey: a key the bundle carries that the trusted keys
	// do not list.
	FindingUntrustedKey = "untrusted_key"
	// FindingKeyWindowMismatch: a key the bundle carries with another
	// window or revocation than the trusted keys state (a retired key
	// reopened, say).
	FindingKeyWindowMismatch = "key_window_mismatch"
)

// VerifySigningKeys checks the signing keys a bundle or a ring states:
// no two windows overlap, and, when trusted is given, every key is one
// the trusted keys list, with the same window. The keys that sign are
// taken from trusted when it is given, so a finding here is the evidence
// of what was changed; without trusted, only overlaps can be seen.
func VerifySigningKeys(keys []keyring.Key, trusted *keyring.Published) []Finding {
	var out []Finding
	for _, o := range keyring.Overlaps(keys) {
		out = append(out, Finding{SigningKeyID: o[1].ID, Kind: FindingKeyWindowOverlap,
			Detail: fmt.Sprintf("the window of %s %s overlaps the window of %s %s: rotation never makes two keys valid at once",
				o[1].ID, window(o[1]), o[0].ID, window(o[0]))})
	}
	if trusted == nil {
		return out
	}
	for _, k := range keys {
		tk := trusted.Trusted(k.ID)
		if len(tk) == 0 {
			out = append(out, Finding{SigningKeyID: k.ID, Kind: FindingUntrustedKey,
				Detail: fmt.Sprintf("key %s (%s) is not among the trusted keys", k.ID, k.VerifierKey)})
			continue
		}
		for _, pk := range tk {
			if t := pk.Key(); t.VerifierKey != k.VerifierKey || !t.SameWindow(k) {
				out = append(out, Finding{SigningKeyID: k.ID, Kind: FindingKeyWindowMismatch,
					Detail: fmt.Sprintf("key %s has the window %s here; the trusted keys state %s (tenant %s)", k.ID, window(k), window(t), pk.Tenant)})
			}
		}
	}
	return out
}

// window renders a key's window for a finding.
func window(k keyring.Key) string {
	end := "open"
	if k.ValidUntil != nil {
		end = k.ValidUntil.UTC().Format(time.RFC3339Nano)
	}
	s := "[" + k.ValidFrom.UTC().Format(time.RFC3339Nano) + ", " + end + ")"
	if k.RevokedAt != nil {
		s += " revoked at " + k.RevokedAt.UTC().Format(time.RFC3339Nano)
	}
	return s
}
