package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/writhq/writ"
)

// Authentication and tenant scoping.
//
// When Config.Authenticate is set, a route with roles (see routes) needs
// "Authorization: Bearer <API key>", and the key must hold one of the
// route's roles. The key's principal then rides in the request context
// (writ.WithPrincipal), and the key's tenant is the only tenant the
// request can name: a tenant_id left out or empty is filled in with it,
// and any other is refused with 403 before the service is called. Ids in
// paths are looked up within that tenant, so another tenant's id is not
// found, exactly as a missing one.

// authChallenge is the WWW-Authenticate challenge of every 401.
const authChallenge = `Bearer realm="writ"`

// Errors of authentication and scoping. Their messages are safe to show:
// they say nothing about which keys or tenants exist.
var (
	errNoKey       = writ.Errorf(writ.EUNAUTHENTICATED, "this request needs an API key: send Authorization: Bearer <API key>")
	errBadAuthz    = writ.Errorf(writ.EUNAUTHENTICATED, "the Authorization header must be one header of the form: Bearer <API key>")
	errOtherTenant = writ.Errorf(writ.EFORBIDDEN, "this API key belongs to another tenant")
)

// authorize authenticates the request's API key and checks that it holds
// one of roles. It returns the request with the key's principal in its
// context, or the request as it is in development mode (no
// authenticator). A key the authenticator refuses is EUNAUTHENTICATED
// (401); an authenticator that fails otherwise (its store is down) makes
// the answer EUNAVAILABLE (503), never a pass.
func (s *Server) authorize(r *http.Request, roles []writ.Role) (*http.Request, error) {
	if s.cfg.Authenticate == nil {
		if len(r.Header.Values(HeaderDelegation)) > 0 && roles != nil {
			// Development mode: every actor is claimed, so a token
			// sent to authenticate a user is refused, not ignored.
			return r, &writ.Error{Code: writ.EINVALID, Message: "a delegation token (Writ-Delegation) is verified in keyed mode only: this server runs without API keys, so every actor is claimed",
				Details: []writ.Detail{{Field: HeaderDelegation, Message: "keyed mode only"}}}
		}
		return r, nil
	}
	token, err := bearerToken(r.Header.Values("Authorization"))
	if err != nil {
		return r, err
	}
	p, err := s.cfg.Authenticate(r.Context(), token)
	switch {
	case writ.ErrorCode(err) == writ.EUNAUTHENTICATED:
		return r, err
	case err != nil:
		s.log.WarnContext(r.Context(), "cannot authenticate the request: the authenticator failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
		return r, &writ.Error{Code: writ.EUNAVAILABLE, Message: "API keys cannot be checked now; retry later", Err: err}
	case p == nil || p.TenantID == "":
		return r, fmt.Errorf("the authenticator accepted a key without returning its principal and tenant")
	}
	if !slices.ContainsFunc(roles, p.Has) {
		return r, writ.Errorf(writ.EFORBIDDEN, "this API key may not %s %s: that needs the role %s", r.Method, r.URL.Path, rolesText(roles))
	}
	ctx := writ.WithPrincipal(r.Context(), p)
	d, err := s.delegation(ctx, r, p)
	if err != nil {
		return r, err
	}
	if d != nil {
		ctx = writ.WithDelegation(ctx, d)
	}
	return r.WithContext(ctx), nil
}

// HeaderDelegation carries a delegation token: a JWT whose subject is the
// human user the caller acts for, signed by an issuer the key's tenant
// trusts (docs/trust.md).
const HeaderDelegation = "Writ-Delegation"

// delegation verifies the request's delegation token, if it sends one:
// exactly one header, verified for the key's tenant. Without a verifier
// the header is refused, never ignored: a caller that sends a token
// expects its user to be authenticated.
func (s *Server) delegation(ctx context.Context, r *http.Request, p *writ.Principal) (*writ.Delegation, error) {
	vals := r.Header.Values(HeaderDelegation)
	switch {
	case len(vals) == 0:
		return nil, nil
	case len(vals) > 1 || strings.TrimSpace(vals[0]) == "":
		return nil, &writ.Error{Code: writ.EINVALID, Message: "send at most one Writ-Delegation header, holding one token",
			Details: []writ.Detail{{Field: HeaderDelegation, Message: "malformed"}}}
	case s.cfg.VerifyDelegation == nil:
		return nil, &writ.Error{Code: writ.EFORBIDDEN, Message: "delegation refused: this server trusts no delegation token issuer (writ serve --delegation-issuers), so a delegated user can only be claimed; leave Writ-Delegation out",
			Details: []writ.Detail{{Field: HeaderDelegation, Message: "no issuer configured"}}}
	}
	d, err := s.cfg.VerifyDelegation(ctx, p.TenantID, strings.TrimSpace(vals[0]))
	switch {
	case writ.ErrorCode(err) == writ.EFORBIDDEN || writ.ErrorCode(err) == writ.EINVALID:
		return nil, err
	case err != nil:
		s.log.WarnContext(ctx, "cannot verify a delegation token", slog.String("path", r.URL.Path), slog.Any("error", err))
		return nil, &writ.Error{Code: writ.EUNAVAILABLE, Message: "delegation tokens cannot be checked now; retry later", Err: err}
	case d == nil || d.Subject == "" || d.TenantID != p.TenantID:
		return nil, fmt.Errorf("the delegation verifier accepted a token without returning its subject for the key's tenant")
	}
	return d, nil
}

// bearerToken returns the token of the request's Authorization headers:
// exactly one, of the Bearer scheme (case-insensitive, RFC 9110 and RFC
// 6750), with a token that has no spaces.
func bearerToken(headers []string) (string, error) {
	switch {
	case len(headers) == 0 || (len(headers) == 1 && strings.TrimSpace(headers[0]) == ""):
		return "", errNoKey
	case len(headers) > 1:
		return "", errBadAuthz
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(headers[0]), " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", errBadAuthz
	}
	return token, nil
}

// rolesText renders roles for a message: "auditor" or "approver or auditor".
func rolesText(roles []writ.Role) string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return strings.Join(names, " or ")
}

// scopeTenant returns the tenant a request acts for, given the tenant_id
// it names ("" for none). In development mode (no principal in ctx) the
// request must name one. Authenticated, it is the API key's tenant: given
// may be left out, and must not name another.
func scopeTenant(ctx context.Context, given string) (string, error) {
	p := writ.PrincipalFrom(ctx)
	switch {
	case p == nil && given == "":
		return "", &writ.Error{Code: writ.EINVALID, Message: "tenant_id is required",
			Details: []writ.Detail{{Field: paramTenantID, Message: "is required"}}}
	case p == nil, given == p.TenantID:
		return given, nil
	case given == "":
		return p.TenantID, nil
	}
	return "", errOtherTenant
}

// scopedQuery parses the request's query, and scopes its tenant_id when
// the request is authenticated: filled in with the API key's tenant when
// absent or empty, and refused when it names another. A repeated
// tenant_id is left for the query's parser to report.
func scopedQuery(r *http.Request) (url.Values, error) {
	values, err := parseQuery(r)
	if err != nil {
		return nil, err
	}
	p := writ.PrincipalFrom(r.Context())
	if p == nil {
		return values, nil
	}
	given := values[paramTenantID]
	for _, t := range given {
		if t != "" && t != p.TenantID {
			return nil, errOtherTenant
		}
	}
	if len(given) == 0 || (len(given) == 1 && given[0] == "") {
		values.Set(paramTenantID, p.TenantID)
	}
	return values, nil
}
