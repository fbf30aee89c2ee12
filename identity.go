package writ

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// TenantIDPattern is what a tenant id may be: 1-128 letters, digits,
// '_', '.', ':' or '-', starting with a letter or digit. Every request
// is held to it (POST /v1/check refuses any other tenant_id), and so is
// an API key when it is created, so that no key names a tenant no
// request can use.
var TenantIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$`)

// MaxSubjectLen caps an API key's subject, in bytes.
const MaxSubjectLen = 128

// ValidSubject reports whether s may be the subject of an API key (who
// holds it: the name approval decisions and logs carry): 1-128 bytes of
// printable text without surrounding spaces, and none of the markup
// characters < > " ' & ` that would let a name pass for something else
// wherever it is shown.
func ValidSubject(s string) bool {
	if s == "" || len(s) > MaxSubjectLen || strings.TrimSpace(s) != s {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || strings.ContainsRune("<>\"'&`", r) {
			return false
		}
	}
	return true
}

// Role is what an API key may do.
type Role string

// Roles.
const (
	// RoleAgent runs boundary checks and workflow runs.
	RoleAgent Role = "agent"
	// RoleApprover lists, shows and decides approval requests.
	RoleApprover Role = "approver"
	// RoleAuditor reads records, proofs, checkpoints, runs and approvals,
	// verifies, replays and exports.
	RoleAuditor Role = "auditor"
	// RoleAdmin manages API keys and packs, and issues checkpoints.
	RoleAdmin Role = "admin"
	// RoleMeter marks a key the tenant trusts to measure usage: the
	// token and cost figures of its checks are issued, not claimed (the
	// MCP gateway's key, an LLM proxy's). It grants nothing by itself: a
	// meter that checks has the agent role as well.
	RoleMeter Role = "meter"
	// RoleIssuer submits and revokes evidence items (an identity
	// verification service, a fraud engine, a CI system, the MCP
	// gateway): what it submits is issued.
	RoleIssuer Role = "issuer"
	// RoleGateway marks the MCP gateway's own key (writ gateway
	// --server): the evidence it captures from a tool's result, with the
	// observation that names the call, is observed. It grants nothing
	// else: the gateway checks with the agent role.
	RoleGateway Role = "gateway"
)

// Roles lists every role.
var Roles = []Role{RoleAgent, RoleApprover, RoleAuditor, RoleAdmin, RoleMeter, RoleIssuer, RoleGateway}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Principal is an authenticated caller: an API key of one tenant.
type Principal struct {
	TenantID string `json:"tenant_id"`
	KeyID    string `json:"key_id"`
	// Subject names who holds the key (a person, a service); it is the
	// approver named in approvals.
	Subject string `json:"subject"`
	Roles   []Role `json:"roles"`
	// ActorType is the actor type the key acts as (AGENT, HUMAN or
	// SERVICE); empty means AGENT. With Subject it is the actor of every
	// check, report and attempt the key makes.
	ActorType string `json:"actor_type,omitempty"`
	// ActsFor are the principals the key may act for besides its own:
	// patterns "TYPE:ID" (see ValidActsFor), for example an
	// orchestrator's SERVICE key acting for its agents ("AGENT:agt_*").
	ActsFor []string `json:"acts_for,omitempty"`
}

// Has reports whether the principal holds role.
func (p *Principal) Has(role Role) bool { return p != nil && slices.Contains(p.Roles, role) }

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated caller.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the authenticated caller ctx carries, or nil
// (development mode, or an in-process caller).
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Actor returns the principal the key acts as: its actor type (AGENT by
// default) and its subject.
func (p *Principal) Actor() ActorRef {
	t := p.ActorType
	if t == "" {
		t = ActorAgent
	}
	return ActorRef{Type: t, ID: p.Subject}
}

// MayActFor reports whether the key may act for the actor typ:id: it is
// the key's own principal, or one of its acts_for patterns matches it.
func (p *Principal) MayActFor(typ, id string) bool {
	if p == nil {
		return false
	}
	if own := p.Actor(); own.Type == typ && own.ID == id {
		return true
	}
	for _, pat := range p.ActsFor {
		t, idPat, _ := strings.Cut(pat, ":")
		if t != "*" && t != typ {
			continue
		}
		if ok, err := path.Match(idPat, id); err == nil && ok {
			return true
		}
	}
	return false
}

// ValidActorType reports whether t is an actor type a key may act as:
// AGENT, HUMAN or SERVICE.
func ValidActorType(t string) bool {
	return t == ActorAgent || t == ActorHuman || t == ActorService
}

// ValidActsFor checks an acts_for pattern: "TYPE:ID", where TYPE is
// AGENT, HUMAN, SERVICE or * (any type) and ID is an actor id in which
// '*' matches any run of characters but '/', '?' one character, and
// [...] a class (Go's path.Match).
func ValidActsFor(pattern string) error {
	t, id, ok := strings.Cut(pattern, ":")
	switch {
	case !ok || id == "":
		return fmt.Errorf("acts_for pattern %q: want TYPE:ID, for example AGENT:agt_*", pattern)
	case t != "*" && !ValidActorType(t):
		return fmt.Errorf("acts_for pattern %q: the type must be AGENT, HUMAN, SERVICE or *", pattern)
	}
	if _, err := path.Match(id, ""); err != nil {
		return fmt.Errorf("acts_for pattern %q: %v", pattern, err)
	}
	return nil
}

// Delegation is a delegated user writ verified: the subject of a
// delegation token (a JWT) signed by an issuer the tenant configured.
// The edge that verified the token puts it in the request's context
// (WithDelegation); BindActor reads it.
type Delegation struct {
	// TenantID is the tenant whose issuers verified the token.
	TenantID string
	// Subject is the token's sub: the delegated user.
	Subject string
	// Issuer is the token's iss.
	Issuer string
}

type delegationKey struct{}

// WithDelegation returns ctx carrying a verified delegation.
func WithDelegation(ctx context.Context, d *Delegation) context.Context {
	return context.WithValue(ctx, delegationKey{}, d)
}

// DelegationFrom returns the verified delegation ctx carries, or nil.
func DelegationFrom(ctx context.Context) *Delegation {
	d, _ := ctx.Value(delegationKey{}).(*Delegation)
	return d
}

// BindActor returns the actor a request of tenant acts as, given the
// actor it names: the identity comes from the credential, never from the
// request (docs/trust.md).
//
// In keyed mode (ctx carries the API key's principal) the actor is the
// key's principal: a request that names no actor gets it; one that names
// another is refused (EFORBIDDEN) unless the key may act for it
// (Principal.ActsFor), and then ActedBy records the key's principal. The
// actor is authenticated and carries the key id. The delegated user is
// the subject of a verified delegation token (ctx's Delegation, which
// must be of the same tenant and agree with a delegated_user_id the
// request names), authenticated; without one it is claimed.
//
// In development mode (no principal) everything is claimed, and a
// verified delegation is refused (EINVALID): tokens are verified in keyed
// mode only.
//
// A request that sets a member writ sets (Actor.Bound) is refused.
func BindActor(ctx context.Context, tenantID string, a Actor) (Actor, error) {
	if a.Bound() {
		return a, &Error{Code: EFORBIDDEN, Message: "actor.provenance, actor.key_id, actor.acted_by, actor.delegated_user_provenance and actor.delegated_user_issuer are set by writ from the request's credentials; leave them out",
			Details: []Detail{{Field: "actor", Message: "sets members only writ sets"}}}
	}
	out := a.Claimed()
	p, d := PrincipalFrom(ctx), DelegationFrom(ctx)
	if p == nil {
		if d != nil {
			return a, &Error{Code: EINVALID, Message: "a delegation token is verified in keyed mode only: this server runs without API keys, so every actor is claimed",
				Details: []Detail{{Field: "delegation", Message: "keyed mode only"}}}
		}
		out.Provenance = ProvenanceClaimed
		if out.DelegatedUserID != "" {
			out.DelegatedUserProvenance = ProvenanceClaimed
		}
		return out, nil
	}
	own := p.Actor()
	switch {
	case a.Type == "" && a.ID == "":
		out.Type, out.ID = own.Type, own.ID
	case (a.Type == "" || a.Type == own.Type) && a.ID == own.ID:
		out.Type = own.Type
	case a.Type != "" && a.ID != "" && p.MayActFor(a.Type, a.ID):
		out.ActedBy = &own
	default:
		named := a.Type + ":" + a.ID
		return a, &Error{Code: EFORBIDDEN,
			Message: fmt.Sprintf("actor mismatch: the request names actor %s, but API key %s acts as %s:%s and may not act for %s", named, p.KeyID, own.Type, own.ID, named),
			Details: []Detail{{Field: "actor", Message: fmt.Sprintf("is not the API key's principal (%s:%s)", own.Type, own.ID)}}}
	}
	out.Provenance, out.KeyID = ProvenanceAuthenticated, p.KeyID
	switch {
	case d != nil && d.TenantID != tenantID:
		return a, &Error{Code: EFORBIDDEN, Message: fmt.Sprintf("the delegation token was verified for tenant %q, not %q", d.TenantID, tenantID),
			Details: []Detail{{Field: "delegation", Message: "another tenant"}}}
	case d != nil && a.DelegatedUserID != "" && a.DelegatedUserID != d.Subject:
		return a, &Error{Code: EFORBIDDEN, Message: fmt.Sprintf("delegated user mismatch: the request names actor.delegated_user_id %q, but the delegation token's subject is %q", a.DelegatedUserID, d.Subject),
			Details: []Detail{{Field: "actor.delegated_user_id", Message: "is not the delegation token's subject"}}}
	case d != nil:
		out.DelegatedUserID, out.DelegatedUserProvenance, out.DelegatedUserIssuer = d.Subject, ProvenanceAuthenticated, d.Issuer
	case out.DelegatedUserID != "":
		out.DelegatedUserProvenance = ProvenanceClaimed
	}
	return out, nil
}

// BindUsage returns a copy of u bound to ctx's credentials: its
// provenance is issued when the request's API key has the role meter,
// and left out (claimed) otherwise, development mode included. A usage
// that sets provenance itself is refused (403): writ sets it.
func BindUsage(ctx context.Context, u *Usage) (*Usage, error) {
	if u == nil {
		return nil, nil
	}
	if u.Provenance != "" {
		return nil, &Error{Code: EFORBIDDEN, Message: "usage.provenance is set by writ from the request's credentials (issued for a key with the role meter); leave it out",
			Details: []Detail{{Field: "usage.provenance", Message: "set by writ"}}}
	}
	out := *u
	if p := PrincipalFrom(ctx); p != nil && slices.Contains(p.Roles, RoleMeter) {
		out.Provenance = ProvenanceIssued
	}
	return &out, nil
}

// MayActOn reports whether a request with ctx's credentials may act on
// a decision or run whose actor is owner (a report, a resume, a step
// attempt): always in development mode; in keyed mode when it comes from
// the key that made it, from another key of the same principal, or from
// a key that may act for its actor. It returns the EFORBIDDEN error
// naming the mismatch otherwise.
func MayActOn(ctx context.Context, what string, owner Actor) error {
	p := PrincipalFrom(ctx)
	if p == nil || owner.KeyID != "" && owner.KeyID == p.KeyID || p.MayActFor(owner.Type, owner.ID) {
		return nil
	}
	by := owner.Type + ":" + owner.ID
	if owner.KeyID != "" {
		by += " with API key " + owner.KeyID
	}
	own := p.Actor()
	return &Error{Code: EFORBIDDEN, Message: fmt.Sprintf("%s was made by %s; API key %s (%s:%s) may not act on it", what, by, p.KeyID, own.Type, own.ID)}
}
