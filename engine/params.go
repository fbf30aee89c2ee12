package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
)

// Tenant parameters (docs/pack-format.md, "Tenant parameters"). A
// tenant's values are the outputs of its newest parameter change record
// (decision key "params:<pack name>"): records are never updated, so a
// change is a new record, and the chain says who changed what, when. A
// check reads them with one indexed query (the newest record of the
// key), merges them over the pack's defaults and pins the result in its
// record (writ.ParamsPin), so replay decides with what the check read.

// tenantParams is what a tenant set: its values, and the change record
// in force ("" and nil values when it made none).
type tenantParams struct {
	values map[string]any
	set    string
	by     string
	at     time.Time
}

// readTenantParams reads the tenant's newest parameter change.
func (e *Engine) readTenantParams(ctx context.Context, p *pack.Pack, tenantID string) (*tenantParams, error) {
	page, err := e.store.Records(ctx, writ.RecordQuery{TenantID: tenantID, DecisionKey: p.ParamsKey(), Newest: true, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Records) == 0 {
		return &tenantParams{}, nil
	}
	rec := &page.Records[0].Record
	values, ok := rec.Outputs["values"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parameter change record %s has no values", rec.RecordID)
	}
	return &tenantParams{values: values, set: rec.RecordID, by: rec.Actor.ID, at: rec.Timestamp}, nil
}

// checkParams returns the params pin of a check of the tenant: nil when
// the pack declares no parameter (and then nothing is read). Values the
// tenant set for parameters the pack no longer declares are left out;
// one that no longer matches its parameter's schema fails the check
// closed (the error says which).
func (e *Engine) checkParams(ctx context.Context, tenantID string) (*writ.ParamsPin, error) {
	p := e.policy.Pack
	if len(p.Params) == 0 {
		return nil, nil
	}
	tp, err := e.readTenantParams(ctx, p, tenantID)
	if err != nil {
		return nil, err
	}
	values, err := declaredParams(p, tp.values)
	if err != nil {
		return nil, fmt.Errorf("the tenant's parameter values (record %s) do not fit pack %s: %w", tp.set, p.ID(), err)
	}
	return record.PinParams(p.EffectiveParams(values), tp.set)
}

// declaredParams keeps the values of the parameters p declares, checked
// against their schemas.
func declaredParams(p *pack.Pack, values map[string]any) (map[string]any, error) {
	kept := map[string]any{}
	for k, v := range values {
		if p.Param(k) != nil {
			kept[k] = v
		}
	}
	return p.CheckParams(kept)
}

// Params returns the tenant's parameters; see writ.TenantParams.
func (e *Engine) Params(ctx context.Context, tenantID string) (*writ.ParamsState, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if tenantID == "" || !tenantPattern.MatchString(tenantID) {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "a valid tenant_id is required", Details: []writ.Detail{{Field: "tenant_id", Message: "a valid tenant_id is required"}}}
	}
	p := e.policy.Pack
	tp, err := e.readTenantParams(ctx, p, tenantID)
	if err != nil {
		return nil, err
	}
	return paramsState(p, tenantID, tp)
}

func paramsState(p *pack.Pack, tenantID string, tp *tenantParams) (*writ.ParamsState, error) {
	st := &writ.ParamsState{TenantID: tenantID, Pack: p.ID(), Declared: []writ.ParamDecl{}, Values: map[string]any{}, Effective: map[string]any{},
		Set: tp.set, SetBy: tp.by}
	if tp.set != "" {
		at := tp.at.UTC()
		st.SetAt = &at
	}
	for _, pa := range p.Params {
		sch, _ := pa.SchemaDoc.(map[string]any)
		st.Declared = append(st.Declared, writ.ParamDecl{Name: pa.Name, Description: pa.Description, Schema: sch, Default: pa.Default})
	}
	if tp.values != nil {
		st.Values = tp.values
	}
	values, err := declaredParams(p, tp.values)
	if err != nil {
		return nil, fmt.Errorf("the tenant's parameter values (record %s) do not fit pack %s: %w", tp.set, p.ID(), err)
	}
	pin, err := record.PinParams(p.EffectiveParams(values), tp.set)
	if err != nil {
		return nil, err
	}
	if pin != nil {
		st.Effective, st.Digest = pin.Values, pin.Digest
	}
	return st, nil
}

// SetParams sets the tenant's parameter values; see writ.TenantParams.
// The change is a decision record (decision key "params:<pack name>"),
// sealed and appended like any other; the values take effect for the
// checks decided after it is durable.
func (e *Engine) SetParams(ctx context.Context, req *writ.SetParamsRequest) (*writ.ParamsState, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty parameter change")
	}
	p := e.policy.Pack
	rq := *req
	var ds []writ.Detail
	bad := func(field, msg string) { ds = append(ds, writ.Detail{Field: field, Message: msg}) }
	if rq.TenantID == "" || !tenantPattern.MatchString(rq.TenantID) {
		bad("tenant_id", "a valid tenant_id is required")
	}
	if len(p.Params) == 0 {
		return nil, writ.Errorf(writ.EINVALID, "pack %s declares no tenant parameter", p.ID())
	}
	if rq.Values == nil {
		bad("values", "required: the tenant's values by parameter name ({} for the defaults)")
	}
	if strings.TrimSpace(rq.Reason) == "" {
		bad("reason", "required: say why, for the record")
	}
	bindSubject(ctx, &rq.By, "by", "the setter", bad)
	if rq.TraceID != "" && !writ.ValidTraceID(rq.TraceID) {
		bad("trace_id", "must be 32 lowercase hex digits, not all zero")
	}
	if len(ds) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid parameter change: " + ds[0].Field + " " + ds[0].Message, Details: ds}
	}
	values, err := p.CheckParams(rq.Values)
	if err != nil {
		return nil, err
	}
	prev, err := e.readTenantParams(ctx, p, rq.TenantID)
	if err != nil {
		return nil, notRecorded("the parameter change", err)
	}
	if rq.Replaces != "" {
		cur := prev.set
		if cur == "" {
			cur = "none"
		}
		if rq.Replaces != cur {
			return nil, writ.Errorf(writ.ECONFLICT, "the tenant's parameters were changed meanwhile (the change in force is %s, not %s); read them again", cur, rq.Replaces)
		}
	}
	now := e.now().UTC()
	if rq.TraceID == "" {
		rq.TraceID = e.newTraceID(now)
	}
	rec, envelope, err := e.paramsRecord(&rq, values, prev, now)
	if err != nil {
		return nil, err
	}
	if broken := e.rules.CheckRecord(ctx, rec); len(broken) > 0 {
		return nil, &writ.Error{Code: writ.EINTERNAL, Message: "the parameter change record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	st, err := paramsState(p, rq.TenantID, &tenantParams{values: values, set: rec.RecordID, by: rq.By, at: now})
	if err != nil {
		return nil, err
	}
	receipt, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	entry := &ledger.Entry{Record: rec, Receipt: receipt, Envelope: envelope}
	if err := ledger.Bind(entry, nil); err != nil {
		return nil, err
	}
	if entry.Presealed, err = record.Preseal(rec); err != nil {
		return nil, fmt.Errorf("canonicalize parameter change record: %w", err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		return nil, notRecorded("the parameter change", err)
	}
	return st, nil
}

func (e *Engine) paramsRecord(rq *writ.SetParamsRequest, values map[string]any, prev *tenantParams, now time.Time) (*writ.Record, []byte, error) {
	p := e.policy.Pack
	envelope, err := json.Marshal(record.ParamsEnvelope{TenantID: rq.TenantID, Values: values, By: rq.By, Reason: e.redactor.String(rq.Reason), Replaces: rq.Replaces, TraceID: rq.TraceID})
	if err != nil {
		return nil, nil, err
	}
	if hasNUL(envelope) {
		return nil, nil, errNUL
	}
	id := e.newID("dr_", now)
	rec, err := record.ParamsChange(p, id, envelope, prev.set, now)
	if err != nil {
		return nil, nil, err
	}
	return rec, envelope, nil
}

// paramValues are the values of a params pin (nil for none).
func paramValues(p *writ.ParamsPin) map[string]any {
	if p == nil {
		return nil
	}
	return p.Values
}
