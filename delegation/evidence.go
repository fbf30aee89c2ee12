package delegation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// EvidenceIssuer is an issuer of signed evidence items a tenant
// registered: its name (the items' issuer) and its public keys.
type EvidenceIssuer struct {
	Issuer string
	Keys   jwk.Set
}

// EvidenceIssuers are the issuers of signed evidence each tenant
// registered, by tenant: engine.Config.EvidenceIssuers.
type EvidenceIssuers map[string][]EvidenceIssuer

// evidenceIssuersFile is the evidence issuers file (writ serve
// --evidence-issuers):
//
//	{"tenants": {"acme": [{"issuer": "idv.acme.example", "jwks_file": "idv.jwks.json"}]}}
//
// A relative jwks_file is read relative to the file's directory.
type evidenceIssuersFile struct {
	Tenants map[string][]struct {
		Issuer   string `json:"issuer"`
		JWKSFile string `json:"jwks_file"`
	} `json:"tenants"`
}

// LoadEvidenceIssuers reads an evidence issuers file.
func LoadEvidenceIssuers(path string) (EvidenceIssuers, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f evidenceIssuersFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("evidence issuers %s: %w", path, err)
	}
	out := EvidenceIssuers{}
	for tenant, list := range f.Tenants {
		if !writ.TenantIDPattern.MatchString(tenant) {
			return nil, fmt.Errorf("evidence issuers %s: %q is not a tenant id", path, tenant)
		}
		for _, is := range list {
			if is.Issuer == "" || is.JWKSFile == "" {
				return nil, fmt.Errorf("evidence issuers %s: tenant %s: each issuer needs issuer and jwks_file", path, tenant)
			}
			p := is.JWKSFile
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(path), p)
			}
			set, err := jwk.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("evidence issuers %s: tenant %s issuer %s: %w", path, tenant, is.Issuer, err)
			}
			for i := range set.Len() {
				k, _ := set.Key(i)
				if kid, ok := k.KeyID(); !ok || kid == "" {
					return nil, fmt.Errorf("evidence issuers %s: tenant %s issuer %s: every key needs a kid, which signed items name", path, tenant, is.Issuer)
				}
			}
			out[tenant] = append(out[tenant], EvidenceIssuer{Issuer: is.Issuer, Keys: set})
		}
	}
	return out, nil
}

func badSignature(format string, args ...any) error {
	return &writ.Error{Code: writ.EFORBIDDEN, Message: "signed evidence refused: " + fmt.Sprintf(format, args...), Details: []writ.Detail{{Field: "jws", Message: "not accepted"}}}
}

// Verify verifies a compact JWS carrying an evidence item of tenant: its
// header names (kid) a key of an issuer the tenant registered, the
// signature verifies under that key alone, the payload is the item's
// canonical JSON exactly, the item is of the tenant, and its issuer is
// the key's issuer. It returns the item and the key id. Keys a token
// carries or points at (jwk, jku, x5u) are never used.
func (is EvidenceIssuers) Verify(tenantID, token string) (*writ.EvidenceItem, string, error) {
	if len(token) > 2*writ.MaxEvidenceItemBytes {
		return nil, "", writ.Errorf(writ.ETOOLARGE, "the signed item is %d bytes; the limit is %d", len(token), 2*writ.MaxEvidenceItemBytes)
	}
	msg, err := jws.ParseString(token)
	if err != nil || len(msg.Signatures()) != 1 {
		return nil, "", badSignature("not a compact JWS with one signature")
	}
	kid, ok := msg.Signatures()[0].ProtectedHeaders().KeyID()
	if !ok || kid == "" {
		return nil, "", badSignature("the JWS header names no key (kid)")
	}
	var (
		keys   jwk.Set
		issuer string
	)
	for _, i := range is[tenantID] {
		if _, ok := i.Keys.LookupKeyID(kid); ok {
			keys, issuer = i.Keys, i.Issuer
			break
		}
	}
	if keys == nil {
		return nil, "", badSignature("key %q is not a key of an evidence issuer tenant %s registered", kid, tenantID)
	}
	// The issuer's keys alone, the one the header names, with the
	// algorithm its key states or implies (never the header's choice).
	payload, err := jws.Verify([]byte(token), jws.WithKeySet(keys, jws.WithInferAlgorithmFromKey(true), jws.WithRequireKid(true)))
	if err != nil {
		return nil, "", badSignature("the signature does not verify under key %q of issuer %s", kid, issuer)
	}
	var item writ.EvidenceItem
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&item); err != nil {
		return nil, "", badSignature("the payload is not an evidence item: %v", err)
	}
	canon, err := record.Canonical(&item)
	if err != nil || !bytes.Equal(canon, payload) {
		return nil, "", badSignature("the payload is not the item's canonical JSON (RFC 8785, every member present)")
	}
	switch {
	case item.TenantID != tenantID:
		return nil, "", writ.Errorf(writ.EFORBIDDEN, "the signed item is of tenant %q, not %q", item.TenantID, tenantID)
	case item.Issuer != issuer:
		return nil, "", badSignature("the item names issuer %q, but key %q is issuer %s's", item.Issuer, kid, issuer)
	}
	return &item, kid, nil
}
