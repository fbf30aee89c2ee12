package writ

import (
	"context"
	"time"
)

// ParamsPin is the record's params field: the tenant parameter values a
// decision's conditions read (params.<name>), pinned so that replay
// decides with exactly them, not with the tenant's values of the day.
// Records of packs that declare no parameter carry none.
type ParamsPin struct {
	// Digest is "sha256:" and the hex SHA-256 of the RFC 8785 canonical
	// JSON of Values.
	Digest string `json:"digest"`
	// Values are the effective values: every parameter the pack
	// declares, the tenant's value where it set one, else the default.
	Values map[string]any `json:"values"`
	// Set is the record id of the tenant's parameter change in force when
	// the decision was made, "" when the tenant had set none (the pack's
	// defaults throughout).
	Set string `json:"set,omitempty"`
}

// TenantParams reads and sets each tenant's values of the pinned pack's
// tenant parameters (docs/pack-format.md, "Tenant parameters"). The
// in-process engine and the HTTP client both satisfy it.
type TenantParams interface {
	// Params returns the tenant's parameters as they stand: the pack's
	// declarations, the values the tenant set and the effective values
	// its checks read.
	Params(ctx context.Context, tenantID string) (*ParamsState, error)
	// SetParams replaces the values the tenant sets with r.Values (a
	// parameter left out takes its default again), as a sealed change
	// record (decision key "params:<pack name>"), durable before it
	// returns. Values that do not match their parameters' schemas, or
	// name a parameter the pack does not declare, are EINVALID and
	// change nothing. When r.Replaces is set and is not the change in
	// force, it is ECONFLICT and changes nothing.
	SetParams(ctx context.Context, r *SetParamsRequest) (*ParamsState, error)
}

// SetParamsRequest sets a tenant's parameter values.
type SetParamsRequest struct {
	TenantID string `json:"tenant_id,omitempty"`
	// Values are the tenant's values by parameter name; the ones left out
	// take the pack's defaults.
	Values map[string]any `json:"values"`
	// By names who sets them when the server authenticates no one; with
	// an API key it is the key's subject.
	By string `json:"by,omitempty"`
	// Reason says why, for the record.
	Reason string `json:"reason"`
	// Replaces, when set, is the record id of the change the caller
	// read (ParamsState.Set): the change is refused (ECONFLICT) if
	// another was made since. "none" stands for no change yet.
	Replaces string `json:"replaces,omitempty"`
	TraceID  string `json:"trace_id,omitempty"`
}

// ParamsState is a tenant's parameters as they stand.
type ParamsState struct {
	TenantID string `json:"tenant_id"`
	// Pack is the pinned pack, name@version.
	Pack string `json:"pack"`
	// Declared are the pack's parameters, in file order.
	Declared []ParamDecl `json:"declared"`
	// Values are the values the tenant set ({} when none).
	Values map[string]any `json:"values"`
	// Effective are the values its checks read, with their digest (the
	// record's params field).
	Effective map[string]any `json:"effective"`
	Digest    string         `json:"digest"`
	// Set is the record id of the change in force, "" when none was
	// made; SetBy and SetAt say who made it and when.
	Set   string     `json:"set,omitempty"`
	SetBy string     `json:"set_by,omitempty"`
	SetAt *time.Time `json:"set_at,omitempty"`
}

// ParamDecl is one parameter a pack declares.
type ParamDecl struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Schema      map[string]any `json:"schema"`
	Default     any            `json:"default"`
}
