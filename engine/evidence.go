package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

var (
	_ writ.EvidenceService = (*Engine)(nil)

	// evidenceKindPattern is what an evidence kind may be: a pack id.
	evidenceKindPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,199}$`)
	// evidenceIDPattern is what an item's id may be (never sha256:…,
	// which names items by content address).
	evidenceIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$`)
)

// ContentAddress is the content address of an evidence item: "sha256:"
// over its RFC 8785 form.
func ContentAddress(item *writ.EvidenceItem) (string, []byte, error) {
	canon, err := record.Canonical(item)
	if err != nil {
		return "", nil, fmt.Errorf("evidence item: %w", err)
	}
	return record.Digest(canon), canon, nil
}

// issuerPrincipal returns the caller when it may submit or revoke
// evidence for tenant: an API key of the tenant with the issuer role. In
// development mode (no principal) it returns nil and no error: there every
// caller is an issuer, as every caller is an approver, and the record's
// actor says the issuer is only claimed (docs/trust.md).
func issuerPrincipal(ctx context.Context, tenantID string) (*writ.Principal, error) {
	p := writ.PrincipalFrom(ctx)
	switch {
	case p == nil:
		return nil, nil
	case p.TenantID != tenantID:
		return nil, writ.Errorf(writ.EFORBIDDEN, "the item belongs to tenant %q, but the API key is of tenant %q: an issuer submits evidence of its own tenant only", tenantID, p.TenantID)
	case !p.Has(writ.RoleIssuer):
		return nil, writ.Errorf(writ.EFORBIDDEN, "API key %s has no issuer role: only an issuer key submits or revokes evidence (or an item signed by a registered issuer key is carried in as jws)", p.KeyID)
	}
	return p, nil
}

// gatewaySubject is the issuer and actor of the evidence an in-process
// MCP gateway captures (CaptureEvidence): writ itself saw the call.
const gatewaySubject = "writ-gateway"

// gatewayPrincipal returns the caller when it may submit evidence the
// MCP gateway observed for tenant: an API key of the tenant with the
// gateway role (writ gateway --server's own key).
func gatewayPrincipal(ctx context.Context, tenantID string) (*writ.Principal, error) {
	p := writ.PrincipalFrom(ctx)
	switch {
	case p == nil:
		return nil, writ.Errorf(writ.EFORBIDDEN, "observed evidence (observation) is submitted by the MCP gateway only: an API key with the gateway role; this request has none (in development mode there are no keys)")
	case p.TenantID != tenantID:
		return nil, writ.Errorf(writ.EFORBIDDEN, "the item belongs to tenant %q, but the API key is of tenant %q: the gateway submits evidence of its own key's tenant only", tenantID, p.TenantID)
	case !p.Has(writ.RoleGateway):
		return nil, writ.Errorf(writ.EFORBIDDEN, "API key %s has no gateway role: only the MCP gateway's key submits observed evidence (observation); an issuer submits without it", p.KeyID)
	}
	return p, nil
}

// AddEvidence stores an evidence item: sealed as an evidence record in
// the tenant's chain, with its id and content address claimed in the
// same transaction. See writ.AddEvidenceRequest.
func (e *Engine) AddEvidence(ctx context.Context, req *writ.AddEvidenceRequest) (*writ.StoredEvidence, error) {
	return e.addEvidence(ctx, req, false)
}

// CaptureEvidence stores an item an MCP gateway running in this process
// captured from a tool's result (req.Observation set): observed, with
// writ's gateway as its issuer and actor, whoever the call's caller was.
// It is for the in-process gateway only (gateway.Capturer), never served
// over HTTP, where the gateway's key must have the gateway role.
func (e *Engine) CaptureEvidence(ctx context.Context, req *writ.AddEvidenceRequest) (*writ.StoredEvidence, error) {
	if req == nil || req.Observation == nil {
		return nil, writ.Errorf(writ.EINVALID, "a captured item names the call it was observed in (observation)")
	}
	return e.addEvidence(ctx, req, true)
}

func (e *Engine) addEvidence(ctx context.Context, req *writ.AddEvidenceRequest, inProcessGateway bool) (*writ.StoredEvidence, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty evidence item")
	}
	if err := needTenant(req.TenantID); err != nil {
		return nil, err
	}
	if req.TraceID != "" && !writ.ValidTraceID(req.TraceID) {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "trace_id must be 32 lowercase hex digits, not all zero", Details: []writ.Detail{{Field: "trace_id", Message: "not a W3C trace id"}}}
	}
	now := e.now().UTC()
	env := record.EvidenceEnvelope{Provenance: writ.ProvenanceIssued}
	var actor writ.Actor
	if req.JWS != "" && req.Observation != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "an observed item is not signed: give observation or jws, not both", Details: []writ.Detail{{Field: "observation", Message: "given with jws"}}}
	}
	if req.JWS != "" {
		if req.Kind != "" || req.ID != "" || req.SubjectIDs != nil || req.Attributes != nil || req.ObservedAt != nil || req.ExpiresAt != nil || req.Issuer != "" {
			return nil, &writ.Error{Code: writ.EINVALID, Message: "a signed item is given by its jws alone: the item is its payload", Details: []writ.Detail{{Field: "jws", Message: "given with item fields"}}}
		}
		if p := writ.PrincipalFrom(ctx); p != nil && p.TenantID != req.TenantID {
			return nil, writ.Errorf(writ.EFORBIDDEN, "the item is for tenant %q, but the API key is of tenant %q", req.TenantID, p.TenantID)
		}
		item, kid, err := e.verifySigned(req.TenantID, req.JWS)
		if err != nil {
			return nil, err
		}
		if err := checkItem(item, now); err != nil {
			return nil, err
		}
		if red := e.redacted(item); !reflect.DeepEqual(red, item) {
			return nil, writ.Errorf(writ.EINVALID, "the signed item carries what the pack's redaction rules remove (%s): writ stores items redacted, and a redacted item no longer matches its signature; have the issuer sign it without that", strings.Join(record.RedactionRuleIDs(e.policy.Pack), ", "))
		}
		env.Item, env.SignedBy, env.JWS = *item, kid, req.JWS
		actor = writ.Actor{Type: writ.ActorService, ID: item.Issuer, Provenance: writ.ProvenanceClaimed}
		if p := writ.PrincipalFrom(ctx); p != nil {
			actor = writ.Actor{Type: p.Actor().Type, ID: p.Subject, Provenance: writ.ProvenanceAuthenticated, KeyID: p.KeyID}
			env.SubmittedBy = p.KeyID
		}
	} else {
		var p *writ.Principal
		var err error
		switch {
		case inProcessGateway:
			p = &writ.Principal{TenantID: req.TenantID, Subject: gatewaySubject, ActorType: writ.ActorService, Roles: []writ.Role{writ.RoleGateway}}
		case req.Observation != nil:
			p, err = gatewayPrincipal(ctx, req.TenantID)
		default:
			p, err = issuerPrincipal(ctx, req.TenantID)
		}
		if err != nil {
			return nil, err
		}
		issuer := req.Issuer
		switch {
		case p == nil && strings.TrimSpace(issuer) == "":
			return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid evidence item: issuer is required when the server authenticates no one (development mode)", Details: []writ.Detail{{Field: "issuer", Message: "is required when the server authenticates no one (development mode)"}}}
		case p == nil:
			actor = writ.Actor{Type: writ.ActorService, ID: issuer, Provenance: writ.ProvenanceClaimed}
		case issuer != "" && issuer != p.Subject:
			return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("issuer %q is not the API key's subject %q: writ sets the issuer from the key", req.Issuer, p.Subject), Details: []writ.Detail{{Field: "issuer", Message: "not the key's subject"}}}
		default:
			issuer = p.Subject
			env.SubmittedBy = p.KeyID
			actor = writ.Actor{Type: p.Actor().Type, ID: p.Subject, Provenance: writ.ProvenanceAuthenticated, KeyID: p.KeyID}
		}
		if o := req.Observation; o != nil {
			if err := checkObservation(o); err != nil {
				return nil, err
			}
			obs := *o
			env.Observation, env.Provenance = &obs, writ.ProvenanceObserved
		}
		if inProcessGateway {
			// No key: writ's own gateway, in this process, saw the call.
			env.SubmittedBy = ""
			actor = writ.Actor{Type: writ.ActorService, ID: gatewaySubject, Provenance: writ.ProvenanceObserved}
		}
		item := &writ.EvidenceItem{TenantID: req.TenantID, Kind: req.Kind, ID: req.ID, SubjectIDs: req.SubjectIDs, Attributes: req.Attributes, ExpiresAt: req.ExpiresAt, Issuer: issuer}
		if req.ObservedAt != nil {
			item.ObservedAt = req.ObservedAt.UTC()
		}
		if item.ExpiresAt != nil {
			t := item.ExpiresAt.UTC()
			item.ExpiresAt = &t
		}
		if item.ID == "" {
			item.ID = e.newID("ev_", now)
		}
		if item.SubjectIDs == nil {
			item.SubjectIDs = []string{}
		}
		if item.Attributes == nil {
			item.Attributes = map[string]any{}
		}
		if err := checkItem(item, now); err != nil {
			return nil, err
		}
		env.Item = *e.redacted(item)
	}
	ca, canon, err := ContentAddress(&env.Item)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if len(canon) > writ.MaxEvidenceItemBytes {
		return nil, writ.Errorf(writ.ETOOLARGE, "the evidence item is %d bytes in canonical form; the limit is %d", len(canon), writ.MaxEvidenceItemBytes)
	}
	env.ContentAddress, env.Actor = ca, actor
	env.TraceID = req.TraceID
	if env.TraceID == "" {
		env.TraceID = e.newTraceID(now)
	}
	envelope, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	if hasNUL(envelope) {
		return nil, errNUL
	}
	rec, err := record.Evidence(e.policy.Pack, e.newID("dr_", now), envelope, now)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	out := storedEvidence(&env, rec)
	entry := &ledger.Entry{Record: rec, Envelope: envelope,
		Idempotency: &ledger.IdempotencyClaim{Key: ledger.EvidenceClaim(env.Item.ID), ArgsDigest: ca},
		Block:       &ledger.BlockKey{DecisionKey: ledger.EvidenceBlockKey, ArgsDigest: ca}}
	if err := e.appendEvidence(ctx, entry, out, "the evidence item"); err != nil {
		return nil, err
	}
	if entry.Prior != nil {
		return nil, writ.Errorf(writ.ECONFLICT, "the tenant already has an evidence item %s (record %s): items are never replaced; submit it under another id, or revoke the old one and submit a new one", env.Item.ID, entry.Prior.RecordID)
	}
	return out, nil
}

// appendEvidence checks, binds and appends an evidence entry whose
// receipt is out.
func (e *Engine) appendEvidence(ctx context.Context, entry *ledger.Entry, out any, what string) error {
	if broken := e.rules.CheckRecord(ctx, entry.Record); len(broken) > 0 {
		return &writ.Error{Code: writ.EINTERNAL, Message: what + " record breaks a validation rule (" + strings.Join(broken, "; ") + ")"}
	}
	receipt, err := json.Marshal(out)
	if err != nil {
		return err
	}
	entry.Receipt = receipt
	if err := ledger.Bind(entry, nil); err != nil {
		return err
	}
	if entry.Presealed, err = record.Preseal(entry.Record); err != nil {
		return fmt.Errorf("canonicalize %s record: %w", what, err)
	}
	if err := e.appendTraced(ctx, entry); err != nil {
		return notRecorded(what, err)
	}
	return nil
}

// redacted returns item with the pack's redaction rules applied to its
// id-like strings and attributes.
func (e *Engine) redacted(item *writ.EvidenceItem) *writ.EvidenceItem {
	out := *item
	out.SubjectIDs = e.redactor.Strings(item.SubjectIDs)
	if out.SubjectIDs == nil {
		out.SubjectIDs = []string{}
	}
	if item.Attributes != nil {
		out.Attributes = e.redactor.Map(item.Attributes)
	}
	return &out
}

// checkObservation checks the call an observed item names.
func checkObservation(o *writ.EvidenceObservation) error {
	var ds []writ.Detail
	if o.Tool == "" {
		ds = append(ds, writ.Detail{Field: "observation.tool", Message: "required"})
	}
	if o.ToolCallID == "" {
		ds = append(ds, writ.Detail{Field: "observation.tool_call_id", Message: "required"})
	}
	if o.DecisionID == "" {
		ds = append(ds, writ.Detail{Field: "observation.decision_id", Message: "required: the decision that allowed the call"})
	}
	if !digestPattern.MatchString(o.ResultDigest) {
		ds = append(ds, writ.Detail{Field: "observation.result_digest", Message: "required: sha256: and 64 hex digits"})
	}
	if len(ds) > 0 {
		return &writ.Error{Code: writ.EINVALID, Message: "invalid observation: " + ds[0].Field + " " + ds[0].Message, Details: ds}
	}
	return nil
}

// checkItem checks an item's shape: what no pack can make valid.
func checkItem(item *writ.EvidenceItem, now time.Time) error {
	var ds []writ.Detail
	bad := func(field, format string, args ...any) {
		ds = append(ds, writ.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !evidenceKindPattern.MatchString(item.Kind) {
		bad("kind", "required: 1-200 letters, digits, '_', '.', ':' or '-', starting with a letter or digit")
	}
	if !evidenceIDPattern.MatchString(item.ID) || strings.HasPrefix(item.ID, "sha256:") {
		bad("id", "1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit, and not sha256:… (which names items by content address)")
	}
	for i, s := range item.SubjectIDs {
		if s == "" {
			bad(fmt.Sprintf("subject_ids[%d]", i), "must not be empty")
		}
	}
	switch {
	case item.ObservedAt.IsZero():
		bad("observed_at", "required: when the fact was observed")
	case item.ObservedAt.After(now.Add(policy.ClockSkew)):
		bad("observed_at", "is in the future (%s; writ's clock reads %s)", item.ObservedAt.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	if x := item.ExpiresAt; x != nil && !x.After(item.ObservedAt) {
		bad("expires_at", "must be after observed_at")
	}
	if item.Issuer == "" {
		bad("issuer", "required")
	}
	if !writ.TenantIDPattern.MatchString(item.TenantID) {
		bad("tenant_id", "a valid tenant_id is required")
	}
	if len(ds) > 0 {
		return &writ.Error{Code: writ.EINVALID, Message: "invalid evidence item: " + ds[0].Field + " " + ds[0].Message, Details: ds}
	}
	return nil
}

func remarshal(v, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

func storedEvidence(env *record.EvidenceEnvelope, rec *writ.Record) *writ.StoredEvidence {
	return &writ.StoredEvidence{Item: env.Item, ContentAddress: env.ContentAddress, Provenance: env.Provenance, Observation: env.Observation, SubmittedBy: env.SubmittedBy,
		SignedBy: env.SignedBy, RecordID: rec.RecordID, Seq: rec.Audit.Seq, StoredAt: rec.Timestamp}
}

// RevokeEvidence revokes an item: a revocation record, never an edit.
func (e *Engine) RevokeEvidence(ctx context.Context, req *writ.RevokeEvidenceRequest) (*writ.StoredEvidence, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if req == nil {
		return nil, writ.Errorf(writ.EINVALID, "empty revocation")
	}
	if err := needTenant(req.TenantID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid revocation: reason required: say why, for the record", Details: []writ.Detail{{Field: "reason", Message: "required"}}}
	}
	if req.TraceID != "" && !writ.ValidTraceID(req.TraceID) {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "trace_id must be 32 lowercase hex digits, not all zero", Details: []writ.Detail{{Field: "trace_id", Message: "not a W3C trace id"}}}
	}
	p, err := issuerPrincipal(ctx, req.TenantID)
	if err != nil {
		return nil, err
	}
	cur, err := e.Evidence(ctx, req.TenantID, req.ID)
	if err != nil {
		return nil, err
	}
	if cur.Revoked != nil {
		return nil, writ.Errorf(writ.ECONFLICT, "evidence item %s was already revoked (record %s)", cur.Item.ID, cur.Revoked.RecordID)
	}
	now := e.now().UTC()
	env := record.RevocationEnvelope{TenantID: req.TenantID, Kind: cur.Item.Kind, ID: cur.Item.ID, ContentAddress: cur.ContentAddress, Revokes: cur.RecordID,
		DecisionID: cur.RecordID, Reason: e.redactor.String(req.Reason), TraceID: req.TraceID,
		Actor: writ.Actor{Type: writ.ActorService, ID: cur.Item.Issuer, Provenance: writ.ProvenanceClaimed}}
	if p != nil {
		env.Actor = writ.Actor{Type: p.Actor().Type, ID: p.Subject, Provenance: writ.ProvenanceAuthenticated, KeyID: p.KeyID}
	}
	if env.TraceID == "" {
		env.TraceID = e.newTraceID(now)
	}
	envelope, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	if hasNUL(envelope) {
		return nil, errNUL
	}
	rec, err := record.EvidenceRevocation(e.policy.Pack, e.newID("dr_", now), envelope, now)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	out := *cur
	out.Revoked = &writ.EvidenceRevocation{At: now, Reason: env.Reason, By: env.Actor.ID, RecordID: rec.RecordID}
	entry := &ledger.Entry{Record: rec, Envelope: envelope,
		Idempotency: &ledger.IdempotencyClaim{Key: ledger.EvidenceRevocationClaim(cur.Item.ID), ArgsDigest: cur.ContentAddress},
		Block:       &ledger.BlockKey{DecisionKey: ledger.EvidenceRevocationBlockKey, ArgsDigest: cur.ContentAddress}}
	if err := e.appendEvidence(ctx, entry, &out, "the evidence revocation"); err != nil {
		return nil, err
	}
	if entry.Prior != nil {
		return nil, writ.Errorf(writ.ECONFLICT, "evidence item %s was already revoked (record %s)", cur.Item.ID, entry.Prior.RecordID)
	}
	return &out, nil
}

// Evidence returns a stored item of the tenant by its id or content
// address, with its revocation, or ENOTFOUND.
func (e *Engine) Evidence(ctx context.Context, tenantID, id string) (*writ.StoredEvidence, error) {
	if err := needTenant(tenantID); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "an evidence id or content address is required", Details: []writ.Detail{{Field: "id", Message: "required"}}}
	}
	var ids, addrs []string
	if strings.HasPrefix(id, "sha256:") {
		addrs = []string{id}
	} else {
		ids = []string{id}
	}
	found, err := e.readEvidence(ctx, tenantID, ids, addrs)
	if err != nil {
		return nil, err
	}
	for _, se := range found.items {
		if se.Item.ID == id || se.ContentAddress == id {
			return se, nil
		}
	}
	return nil, &writ.Error{Code: writ.ENOTFOUND, Message: fmt.Sprintf("tenant %s has no evidence item %q", tenantID, id)}
}

// evidenceFound are the evidence records one read found.
type evidenceFound struct {
	items []*writ.StoredEvidence
	// broken are the content addresses of stored items that no longer
	// hash to their address (the store was tampered with).
	broken map[string]bool
}

// readEvidence reads, in one store query, the items named by ids or
// addresses with their revocations.
func (e *Engine) readEvidence(ctx context.Context, tenantID string, ids, addrs []string) (*evidenceFound, error) {
	recs, err := e.store.EvidenceRecords(ctx, tenantID, ids, addrs)
	if err != nil {
		return nil, err
	}
	found := &evidenceFound{broken: map[string]bool{}}
	revs := map[string]*writ.EvidenceRevocation{}
	for i := range recs {
		rec := &recs[i].Record
		if rec.TenantID != tenantID {
			continue
		}
		switch {
		case strings.HasPrefix(rec.DecisionKey, ledger.EvidenceKeyPrefix):
			var env record.EvidenceEnvelope
			if err := remarshal(rec.Outputs["item"], &env.Item); err != nil {
				return nil, fmt.Errorf("evidence record %s: %w", rec.RecordID, err)
			}
			env.ContentAddress, _ = rec.Outputs["content_address"].(string)
			pv, _ := rec.Outputs["provenance"].(string)
			env.Provenance = writ.Provenance(pv)
			env.SignedBy, _ = rec.Outputs["signed_by"].(string)
			if o, ok := rec.Outputs["observation"]; ok {
				env.Observation = &writ.EvidenceObservation{}
				if err := remarshal(o, env.Observation); err != nil {
					return nil, fmt.Errorf("evidence record %s: observation: %w", rec.RecordID, err)
				}
			}
			env.SubmittedBy = rec.Actor.KeyID
			if ca, _, err := ContentAddress(&env.Item); err != nil || ca != env.ContentAddress {
				found.broken[env.ContentAddress] = true
			}
			se := storedEvidence(&env, rec)
			se.Seq = rec.Audit.Seq
			found.items = append(found.items, se)
		case strings.HasPrefix(rec.DecisionKey, ledger.EvidenceRevocationKeyPrefix):
			ca, _ := rec.Outputs["content_address"].(string)
			reason, _ := rec.Outputs["reason"].(string)
			revs[ca] = &writ.EvidenceRevocation{At: rec.Timestamp, Reason: reason, By: rec.Actor.ID, RecordID: rec.RecordID}
		}
	}
	for _, se := range found.items {
		se.Revoked = revs[se.ContentAddress]
	}
	return found, nil
}

// resolveEvidence resolves the citations of a check against the tenant's
// evidence store with one read (readEvidence), and returns the
// citations as resolved (writ.Evidence's Resolution and what follows
// it). A citation of another tenant is left to decide, which refuses it.
// A stored (or validly signed) item that shares no subject id with the
// check resolves as subject_mismatch, with its subjects pinned.
func (e *Engine) resolveEvidence(ctx context.Context, req *writ.CheckRequest, withSubjects bool) ([]writ.Evidence, error) {
	out := slices.Clone(req.Evidence)
	var ids, addrs []string
	signed := make([]*writ.EvidenceItem, len(out))
	kids := make([]string, len(out))
	for i := range out {
		c := &out[i]
		if c.TenantID != "" && c.TenantID != req.TenantID {
			continue
		}
		if c.JWS != "" {
			item, kid, err := e.verifySigned(req.TenantID, c.JWS)
			if err != nil || item.Kind != c.Kind || c.ID != "" && c.ID != item.ID && c.ID != mustAddress(item) {
				c.Resolution, c.Provenance = writ.ResolutionBadSignature, writ.ProvenanceClaimed
				continue
			}
			signed[i], kids[i] = item, kid
			addrs = append(addrs, mustAddress(item))
			continue
		}
		if strings.HasPrefix(c.ID, "sha256:") {
			addrs = append(addrs, c.ID)
		} else {
			ids = append(ids, c.ID)
		}
	}
	if len(ids)+len(addrs) == 0 {
		return out, nil
	}
	found, err := e.readEvidence(ctx, req.TenantID, ids, addrs)
	if err != nil {
		return nil, err
	}
	for i := range out {
		c := &out[i]
		if c.Resolution != "" || c.TenantID != "" && c.TenantID != req.TenantID {
			continue
		}
		var se *writ.StoredEvidence
		if item := signed[i]; item != nil {
			ca := mustAddress(item)
			se = &writ.StoredEvidence{Item: *item, ContentAddress: ca, Provenance: writ.ProvenanceIssued, SignedBy: kids[i]}
			for _, s := range found.items {
				if s.ContentAddress == ca {
					se.Revoked = s.Revoked
				}
			}
		} else {
			for _, s := range found.items {
				if s.Item.ID == c.ID || s.ContentAddress == c.ID {
					se = s
				}
			}
		}
		switch {
		case se == nil:
			c.Resolution, c.Provenance = writ.ResolutionUnresolvable, writ.ProvenanceClaimed
			continue
		case found.broken[se.ContentAddress], se.Item.Kind != c.Kind, c.Hash != "" && c.Hash != se.ContentAddress:
			c.Resolution, c.Provenance = writ.ResolutionHashMismatch, writ.ProvenanceClaimed
			continue
		}
		it := se.Item
		obs := it.ObservedAt
		*c = writ.Evidence{Kind: it.Kind, ID: it.ID, Hash: se.ContentAddress, TenantID: it.TenantID, ObservedAt: &obs, Attributes: it.Attributes,
			JWS: c.JWS, Resolution: writ.ResolutionResolved, Provenance: se.Provenance, Issuer: it.Issuer, ExpiresAt: it.ExpiresAt}
		if withSubjects {
			c.SubjectIDs = slices.Clone(it.SubjectIDs)
		}
		if !aboutSubjects(it.SubjectIDs, req.SubjectIDs) {
			// A true fact about someone else: one customer's identity
			// verification does not verify another's refund.
			c.Resolution, c.SubjectIDs = writ.ResolutionSubjectMismatch, slices.Clone(it.SubjectIDs)
		}
		if r := se.Revoked; r != nil {
			at := r.At
			c.RevokedAt = &at
		}
	}
	return out, nil
}

// aboutSubjects reports whether an item with subject ids item is about
// a check with subject ids check: they share one, compared exactly. An
// item that names no subject, or a check that names none, shares none,
// so fails closed. Stored items' subjects are redacted by the pack's
// patterns; a subject id a pattern changes therefore never matches.
func aboutSubjects(item, check []string) bool {
	return slices.ContainsFunc(item, func(s string) bool { return slices.Contains(check, s) })
}

func mustAddress(item *writ.EvidenceItem) string {
	ca, _, err := ContentAddress(item)
	if err != nil {
		return ""
	}
	return ca
}

// EvidenceVerifier verifies a compact JWS carrying an evidence item of a
// tenant, signed by an issuer key the tenant registered, and returns the
// item and the key id (delegation.EvidenceIssuers implements it).
type EvidenceVerifier interface {
	Verify(tenantID, token string) (*writ.EvidenceItem, string, error)
}

func (e *Engine) verifySigned(tenantID, token string) (*writ.EvidenceItem, string, error) {
	if e.issuers == nil {
		return nil, "", &writ.Error{Code: writ.EFORBIDDEN, Message: "signed evidence refused: tenant " + tenantID + " registered no evidence issuer keys", Details: []writ.Detail{{Field: "jws", Message: "not accepted"}}}
	}
	return e.issuers.Verify(tenantID, token)
}
