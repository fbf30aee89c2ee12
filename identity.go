package writ

import (
	"context"
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
)

// Roles lists every role.
var Roles = []Role{RoleAgent, RoleApprover, RoleAuditor, RoleAdmin}

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
