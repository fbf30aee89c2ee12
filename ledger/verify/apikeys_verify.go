package verify

import (
	"context"
	"errors"
	"fmt"

	"github.com/writhq/writ/auth"
)

// Finding kinds of VerifyAPIKeys.
const (
	FindingAPIKeyMismatch = "api_key_mismatch" // an API key whose signature does not bear out its stored row
	FindingAPIKeyUnsigned = "api_key_unsigned" // an API key in force with no signature: refused until `writ keys sign`
)

// APIKeySource lists API keys (a store's auth.Store, or a bundle's).
type APIKeySource interface {
	// APIKeys lists the API keys of a tenant, of every tenant for "".
	APIKeys(ctx context.Context, tenantID string) ([]*auth.Key, error)
}

// VerifyAPIKeys checks the signature of every API key in ks against keys
// (auth.Verify): a key whose row its signature does not bear out (a
// column changed, a signature copied from another key, a signing key the
// ring does not hold or whose window does not hold the signing time) is
// api_key_mismatch, revoked or not; an unsigned key not revoked is
// api_key_unsigned. An unsigned revoked key opens nothing and is not
// reported.
func VerifyAPIKeys(ctx context.Context, ks APIKeySource, keys auth.Verifier) ([]Finding, error) {
	list, err := ks.APIKeys(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("API keys: %w", err)
	}
	out := []Finding{}
	for _, k := range list {
		switch err := auth.Verify(k, keys); {
		case err == nil:
		case errors.Is(err, auth.ErrUnsigned):
			if k.RevokedAt == nil {
				out = append(out, Finding{TenantID: k.TenantID, KeyID: k.ID, Kind: FindingAPIKeyUnsigned,
					Detail: fmt.Sprintf("API key %s (%s) has no signature, so servers refuse it; if writ created it, sign it with writ keys sign", k.ID, k.Subject)})
			}
		default:
			out = append(out, Finding{TenantID: k.TenantID, KeyID: k.ID, Kind: FindingAPIKeyMismatch,
				Detail: fmt.Sprintf("API key %s (%s): %v", k.ID, k.Subject, err)})
		}
	}
	return out, nil
}
