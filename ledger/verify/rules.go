package verify

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

// BlobSource returns content-addressed blobs (a store, or a bundle).
type BlobSource interface {
	Blob(ctx context.Context, hash string) ([]byte, error)
}

// Packs serves the compiled packs that records pin (a *pinned.Packs):
// Pinned returns the pack that hash pins, rebuilt from its stored files
// and checked against hash, compiled, with the pack in Policy.Pack; or an
// error saying why it cannot (not stored, invalid, another hash). The
// rules ask it for every record, so it should keep what it compiled.
type Packs interface {
	Pinned(ctx context.Context, hash string) (*policy.Policy, error)
}

// Rules checks the decision record's validation rules against the pack
// each record pins, which packs serves compiled:
//
//   - schema: the record has every required field with the right type and
//     no unknown one, and its outputs match the spec's outputs schema;
//   - evidence: an allowed decision cites every evidence kind its spec
//     requires;
//   - policy: the record lists policy decisions, and its policy versions
//     are exactly the spec's bundles in the pinned pack;
//   - approval: an allowed decision that a require_approval rule fired on
//     carries an approval;
//   - controls: every control the pinned pack applies to the spec is
//     listed, and nothing the pack does not define;
//   - lineage: pack, pack hash and decision spec are pinned and resolve;
//   - trace: the trace id is a W3C trace id;
//   - params: a parameter change sets values that match the pinned
//     pack's parameters, with their digest; a check's pinned values are
//     the pinned pack's parameters, matching their schemas, with their
//     digest.
//
// The seal rule (hashes, signatures, key windows) is checked by Verify.
type Rules struct {
	packs Packs
}

// NewRules returns the rule checker that takes the packs records pin
// from packs.
func NewRules(packs Packs) *Rules {
	return &Rules{packs: packs}
}

var statuses = []writ.Status{writ.StatusDecided, writ.StatusDeferred, writ.StatusRejected, writ.StatusEscalated, writ.StatusInFlight, writ.StatusClosed}

// requiredMembers are the record members the schema rule requires to be
// present and not null.
var requiredMembers = []string{"record_id", "decision_id", "tenant_id", "decision_key", "decision_version", "timestamp", "status", "actor",
	"subject_ids", "inputs_refs", "outputs", "evidence_refs", "policy_decisions", "approvals", "controls_active", "lineage", "trace_id", "replay", "audit"}

// requiredFields are the indexes of writ.Record's fields that decode the
// required members, in the order of requiredMembers (-1 for a member no
// field decodes).
var requiredFields = func() []int {
	t := reflect.TypeFor[writ.Record]()
	byName := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		byName[name] = i
	}
	out := make([]int, len(requiredMembers))
	for i, m := range requiredMembers {
		out[i] = -1
		if f, ok := byName[m]; ok {
			out[i] = f
		}
	}
	return out
}()

// Check returns the rules raw breaks, "<rule>: <what>" each.
func (r *Rules) Check(ctx context.Context, raw []byte) []string {
	_, out := r.checkDecoded(ctx, raw)
	return out
}

// checkDecoded is Check that also returns the record it decoded, or nil
// if raw does not decode as a record, so that a verifier reads the
// record's members from it instead of reading raw again.
func (r *Rules) checkDecoded(ctx context.Context, raw []byte) (*writ.Record, []string) {
	var out []string
	bad := func(rule, format string, args ...any) { out = append(out, rule+": "+fmt.Sprintf(format, args...)) }

	rec := new(writ.Record)
	if err := jsonv2.Unmarshal(raw, rec, jsonv2.RejectUnknownMembers(true)); err != nil {
		bad("schema", "the record does not match the record schema: %v", err)
		return nil, out
	}
	if !surelyPresent(rec) {
		// A member decoded to its zero value was absent, null or empty:
		// only the raw members tell which.
		var present map[string]jsontext.Value
		_ = jsonv2.Unmarshal(raw, &present)
		for _, f := range requiredMembers {
			if v, ok := present[f]; !ok || string(v) == "null" {
				bad("schema", "required field %s is missing", f)
			}
		}
	}
	return rec, append(out, r.CheckRecord(ctx, rec)...)
}

// surelyPresent reports whether every required member of a freshly
// decoded record decoded to something other than its zero value, and so
// was present and not null. A record writ writes always is; anything else
// is checked against its raw members.
func surelyPresent(rec *writ.Record) bool {
	v := reflect.ValueOf(rec).Elem()
	for _, i := range requiredFields {
		if i < 0 || v.Field(i).IsZero() {
			return false
		}
	}
	return true
}

// CheckRecord checks the rules of a record writ is about to seal: the
// typed record, so nothing is decoded (its encoding has every field the
// schema requires by construction).
func (r *Rules) CheckRecord(ctx context.Context, rec *writ.Record) []string {
	var out []string
	bad := func(rule, format string, args ...any) { out = append(out, rule+": "+fmt.Sprintf(format, args...)) }
	if !slices.Contains(statuses, rec.Status) {
		bad("schema", "status %q is not a record status", rec.Status)
	}
	if rec.Actor.Type == "" || rec.Actor.ID == "" {
		bad("schema", "actor needs a type and an id")
	}
	if !writ.ValidTraceID(rec.TraceID) {
		bad("trace", "trace_id %q is not a W3C trace id", rec.TraceID)
	}
	l := rec.Lineage
	if l.PackVersion == "" || l.PackHash == "" || l.DecisionSpec == "" {
		bad("lineage", "the pack, its hash and the decision spec must be pinned")
		return out
	}
	if len(rec.PolicyDecisions) == 0 {
		bad("policy", "the record lists no policy decision")
	}
	pol, err := r.packs.Pinned(ctx, l.PackHash)
	if err != nil {
		bad("lineage", "pinned pack %s: %v", l.PackHash, err)
		return out
	}
	p := pol.Pack
	if p.ID() != l.PackVersion {
		bad("lineage", "pack_version %s, but the pinned pack is %s", l.PackVersion, p.ID())
	}
	if strings.HasPrefix(rec.DecisionKey, "workflow:") {
		r.checkVerdict(p, rec, bad)
		return out
	}
	if strings.HasPrefix(rec.DecisionKey, "approval:") {
		r.checkApproval(p, rec, bad)
		return out
	}
	if strings.HasPrefix(rec.DecisionKey, "execution:") {
		checkExecution(rec, bad)
		return out
	}
	if strings.HasPrefix(rec.DecisionKey, pack.ParamsKeyPrefix) {
		checkParamsChange(p, rec, bad)
		return out
	}
	if strings.HasPrefix(rec.DecisionKey, ledger.EvidenceKeyPrefix) || strings.HasPrefix(rec.DecisionKey, ledger.EvidenceRevocationKeyPrefix) {
		checkEvidenceRecord(rec, bad)
		return out
	}
	if ledger.AboutRecord(rec.DecisionKey) {
		checkAbout(rec, bad)
		return out
	}
	if strings.HasPrefix(rec.DecisionKey, pack.ErasureKeyPrefix) {
		checkErasure(p, rec, bad)
		return out
	}
	checkParamsPin(p, rec.Params, bad)
	spec, ok := p.Specs[rec.DecisionKey]
	if !ok || spec.ID() != l.DecisionSpec || spec.Version != rec.DecisionVersion {
		bad("lineage", "decision spec %s@%s is not in the pinned pack", rec.DecisionKey, rec.DecisionVersion)
		return out
	}
	var bundles []string
	for _, id := range spec.Policies {
		bundles = append(bundles, p.Bundles[id].ID())
	}
	if !slices.Equal(bundles, l.PolicyVersions) && !(len(bundles) == 0 && len(l.PolicyVersions) == 0) {
		bad("policy", "policy_versions %v, but the spec's bundles in the pinned pack are %v", l.PolicyVersions, bundles)
	}
	if spec.OutputsSchema != nil {
		outputs := map[string]any{}
		for k, v := range rec.Outputs {
			if k != "outcome" {
				outputs[k] = v
			}
		}
		if err := spec.OutputsSchema.Validate(outputs); err != nil {
			bad("schema", "outputs do not match the outputs schema of %s: %v", spec.ID(), err)
		}
	}
	// scorecard_failed is what the spec's pass mark makes of the
	// record's scorecard, whatever the outcome.
	if want := spec.ScorecardFailures(rec.Scorecard); !slices.Equal(rec.ScorecardFailed, want) {
		bad("policy", "scorecard_failed %q, but the pass mark of %s gives %q", rec.ScorecardFailed, spec.ID(), want)
	}
	allowed := rec.Status == writ.StatusDecided || rec.Status == writ.StatusInFlight
	if rec.Status == writ.StatusInFlight && (rec.Execution == nil || !rec.Execution.ReportRequired) {
		bad("schema", "an IN_FLIGHT check is a permit awaiting a required execution report")
	}
	if allowed {
		for _, req := range spec.RequiredEvidence {
			if req.When != "" {
				// A conditional requirement applies only where its CEL
				// condition held; replay evaluates it again.
				continue
			}
			if !slices.ContainsFunc(rec.EvidenceRefs, func(ref string) bool { return strings.HasPrefix(ref, req.Kind+":") }) {
				bad("evidence", "the decision was allowed without the %s evidence its spec requires", req.Kind)
			}
		}
		fired := slices.ContainsFunc(rec.PolicyDecisions, func(d writ.PolicyDecision) bool { return d.Verdict == "require_approval" })
		if fired && len(rec.Approvals) == 0 {
			bad("approval", "a require_approval rule fired and the decision was allowed without an approval")
		}
		for _, pin := range spec.RequiredPins {
			if lineagePin(l, pin) == "" {
				bad("lineage", "spec %s requires lineage.%s, and the decision was allowed without it", spec.ID(), pin)
			}
		}
		for _, g := range p.RequiredGates(rec.ApprovalModeEffective) {
			if !slices.ContainsFunc(rec.Approvals, func(a writ.Approval) bool { return a.GateID == g.ID }) {
				bad("approval", "approval_mode_effective %s requires an approval at gate %s, and the decision was allowed with none attached", rec.ApprovalModeEffective, g.ID)
			}
		}
	}
	if compiled, ok := pol.CompiledControls(rec.DecisionKey, rec.Replay.CompiledContextHash); ok {
		checkCompiledControls(p, compiled, rec.ControlsActive, bad)
	} else {
		r.checkControls(p, spec, rec.ControlsActive, bad)
	}
	return out
}

// lineagePin returns the record's lineage pin named pin.
func lineagePin(l writ.Lineage, pin string) string {
	switch pin {
	case pack.PinKGSnapshot:
		return l.KGSnapshot
	case pack.PinModelProfile:
		return l.ModelProfile
	case pack.PinEvaluatorSuite:
		return l.EvaluatorSuite
	}
	return ""
}

// checkCompiledControls is the seed's controls rule for a check record
// whose compiled_context_hash names what resolution compiled: every
// redaction, refusal, escalation and approval control active at compile
// time is in controls_active, and nothing else.
func checkCompiledControls(p *pack.Pack, compiled, active writ.ControlsActive, bad func(rule, format string, args ...any)) {
	check := func(what string, want, listed []string) {
		for _, id := range want {
			if !slices.Contains(listed, id) {
				bad("controls", "%s control %s was active at compile time but is missing from the record", what, id)
			}
		}
		for _, id := range listed {
			if !slices.Contains(want, id) {
				bad("controls", "%s control %s is listed but was not active at compile time under the pinned pack %s", what, id, p.ID())
			}
		}
	}
	check("must_refuse", compiled.MustRefuse, active.MustRefuse)
	check("must_escalate", compiled.MustEscalate, active.MustEscalate)
	check("approval gate", compiled.ApprovalGatesActive, active.ApprovalGatesActive)
	check("redaction", compiled.RedactionRulesActive, active.RedactionRulesActive)
}

func (r *Rules) checkControls(p *pack.Pack, spec *pack.Spec, active writ.ControlsActive, bad func(rule, format string, args ...any)) {
	check := func(what string, listed []string, defined []*pack.Control) {
		ids := map[string]bool{}
		for _, c := range defined {
			ids[c.ID] = true
			// A control that applies to the spec whatever the tool must be listed.
			a := c.AppliesTo
			applies := len(a.Tools) == 0 && (len(a.DecisionKeys) == 0 || slices.Contains(a.DecisionKeys, spec.DecisionKey)) &&
				(len(a.ActionClasses) == 0 || slices.Contains(a.ActionClasses, spec.ActionClass))
			if applies && !slices.Contains(listed, c.ID) {
				bad("controls", "%s control %s was in force but is not listed", what, c.ID)
			}
		}
		for _, id := range listed {
			if !ids[id] {
				bad("controls", "%s control %s is not defined by the pinned pack", what, id)
			}
		}
	}
	check("must_refuse", active.MustRefuse, p.Controls.MustRefuse)
	check("must_escalate", active.MustEscalate, p.Controls.MustEscalate)
	var redaction []string
	for _, rr := range p.Controls.Redaction {
		redaction = append(redaction, rr.ID)
	}
	if !slices.Equal(redaction, active.RedactionRulesActive) && !(len(redaction) == 0 && len(active.RedactionRulesActive) == 0) {
		bad("controls", "redaction_rules_active %v, but the pinned pack redacts with %v", active.RedactionRulesActive, redaction)
	}
	for _, g := range active.ApprovalGatesActive {
		if _, ok := p.Gates[g]; !ok {
			bad("controls", "approval gate %s is not defined by the pinned pack", g)
		}
	}
}

// checkApproval checks the record of an approval decision: its gate is in
// the pinned pack, an approval
// carries itself in approvals[], and a denial carries none.
func (r *Rules) checkApproval(p *pack.Pack, rec *writ.Record, bad func(rule, format string, args ...any)) {
	gate := strings.TrimPrefix(rec.DecisionKey, "approval:")
	// An escalation is named after whatever escalated (a rule, a control,
	// an evidence requirement or a budget); a gate must be the pack's.
	if !strings.HasPrefix(gate, writ.EscalationGatePrefix) {
		if _, ok := p.Gates[gate]; !ok {
			bad("lineage", "approval gate %s is not in the pinned pack", gate)
		}
	}
	if rec.Lineage.DecisionSpec != rec.DecisionKey {
		bad("lineage", "decision_spec %s, want %s", rec.Lineage.DecisionSpec, rec.DecisionKey)
	}
	switch rec.Status {
	case writ.StatusDecided:
		if len(rec.Approvals) != 1 || rec.Approvals[0].GateID != gate || rec.Approvals[0].Approver != rec.Actor.ID {
			bad("approval", "an approval's record carries exactly its own approval, by its actor, at gate %s", gate)
		}
	case writ.StatusRejected:
		if len(rec.Approvals) != 0 {
			bad("approval", "a denial's record carries no approval")
		}
	default:
		bad("schema", "an approval decision is DECIDED or REJECTED, not %s", rec.Status)
	}
	// A withdrawal is its requester's, an agent's; approving and denying
	// are people's.
	if rec.Outputs["outcome"] == writ.ApprovalWithdrawn {
		if rec.Status != writ.StatusRejected || rec.Actor.Type != writ.ActorAgent {
			bad("approval", "a withdrawal is REJECTED by an AGENT actor, not %s by %s", rec.Status, rec.Actor.Type)
		}
		return
	}
	if rec.Actor.Type != writ.ActorHuman {
		bad("approval", "an approval decision is made by a HUMAN actor, not %s", rec.Actor.Type)
	}
}

// checkExecution checks the record of an execution report: CLOSED, with
// the report in execution, superseding the record it reports for.
func checkExecution(rec *writ.Record, bad func(rule, format string, args ...any)) {
	if rec.Lineage.DecisionSpec != rec.DecisionKey {
		bad("lineage", "decision_spec %s, want %s", rec.Lineage.DecisionSpec, rec.DecisionKey)
	}
	if rec.Status != writ.StatusClosed {
		bad("schema", "an execution report is CLOSED, not %s", rec.Status)
	}
	x := rec.Execution
	if x == nil || x.Status == "" || x.ReportedFor == "" || x.ReportedFor != rec.Supersedes {
		bad("schema", "an execution report carries its status and the record it reports for, which it supersedes")
	}
}

// checkVerdict checks the lineage of a step verdict's record: its
// workflow and step exist in the pinned pack at the recorded version.
func (r *Rules) checkVerdict(p *pack.Pack, rec *writ.Record, bad func(rule, format string, args ...any)) {
	wfStep := strings.TrimPrefix(rec.DecisionKey, "workflow:")
	wfID, stepID, _ := strings.Cut(wfStep, "/")
	w, ok := p.Workflows[wfID]
	if !ok || w.Step(stepID) == nil || w.Version != rec.DecisionVersion {
		bad("lineage", "workflow step %s@%s is not in the pinned pack", wfStep, rec.DecisionVersion)
		return
	}
	if want := "workflow:" + w.ID() + "/" + stepID; rec.Lineage.DecisionSpec != want {
		bad("lineage", "decision_spec %s, want %s", rec.Lineage.DecisionSpec, want)
	}
	var redaction []string
	for _, rr := range p.Controls.Redaction {
		redaction = append(redaction, rr.ID)
	}
	if !slices.Equal(redaction, rec.ControlsActive.RedactionRulesActive) && !(len(redaction) == 0 && len(rec.ControlsActive.RedactionRulesActive) == 0) {
		bad("controls", "redaction_rules_active %v, but the pinned pack redacts with %v", rec.ControlsActive.RedactionRulesActive, redaction)
	}
}

// checkParamsChange checks the record of a tenant's parameter change: its
// key is the pinned pack's, and its values match the pack's parameters.
func checkParamsChange(p *pack.Pack, rec *writ.Record, bad func(rule, format string, args ...any)) {
	if rec.DecisionKey != p.ParamsKey() || rec.Lineage.DecisionSpec != rec.DecisionKey {
		bad("lineage", "parameter change %s is not of the pinned pack %s", rec.DecisionKey, p.ID())
	}
	values, ok := rec.Outputs["values"].(map[string]any)
	if !ok {
		bad("params", "a parameter change carries its values in outputs.values")
		return
	}
	if _, err := p.CheckParams(values); err != nil {
		bad("params", "%v", err)
	}
	if d, err := record.CanonicalDigest(values); err != nil || d != rec.Outputs["digest"] {
		bad("params", "outputs.digest is not the digest of outputs.values")
	}
}

// checkErasure checks the record of an erasure of classified values: its
// decision key and spec are the pinned pack's erasure key, and its
// outputs list the references it erased, with their count.
func checkErasure(p *pack.Pack, rec *writ.Record, bad func(rule, format string, args ...any)) {
	if rec.DecisionKey != p.ErasureKey() || rec.Lineage.DecisionSpec != rec.DecisionKey {
		bad("lineage", "an erasure's decision key and spec are %s", p.ErasureKey())
	}
	refs, ok := rec.Outputs["refs"].([]any)
	if !ok {
		bad("schema", "an erasure lists the references it erased in outputs.refs")
		return
	}
	for _, r := range refs {
		if s, ok := r.(string); !ok || !strings.HasPrefix(s, "sha256:") {
			bad("schema", "outputs.refs holds %v, which is not a classified reference", r)
		}
	}
	if n, ok := rec.Outputs["erased"]; !ok || fmt.Sprint(n) != fmt.Sprint(len(refs)) {
		bad("schema", "outputs.erased is not the number of outputs.refs")
	}
}

// checkParamsPin checks a check's pinned parameter values: exactly the
// pinned pack's parameters (none when it declares none), each matching
// its schema, with their digest.
func checkParamsPin(p *pack.Pack, pin *writ.ParamsPin, bad func(rule, format string, args ...any)) {
	if pin == nil {
		if len(p.Params) > 0 {
			bad("params", "the pinned pack declares tenant parameters and the record pins no values")
		}
		return
	}
	if len(pin.Values) != len(p.Params) {
		bad("params", "the record pins %d parameter values; the pinned pack declares %d parameters", len(pin.Values), len(p.Params))
	}
	if _, err := p.CheckParams(pin.Values); err != nil {
		bad("params", "%v", err)
	}
	if d, err := record.CanonicalDigest(pin.Values); err != nil || d != pin.Digest {
		bad("params", "params.digest is not the digest of params.values")
	}
}

// checkEvidenceRecord checks an evidence record (decision key
// "evidence:<kind>") or an evidence revocation record
// ("evidence_revocation:<kind>"): the item it seals is of the record's
// tenant and kind, its content address is the digest of the item's
// canonical form, and its provenance is issued or observed; a
// revocation is CLOSED, supersedes the evidence record and names the
// item's id and content address.
func checkEvidenceRecord(rec *writ.Record, bad func(rule, format string, args ...any)) {
	if rec.Lineage.DecisionSpec != rec.DecisionKey {
		bad("lineage", "decision_spec %s, want %s", rec.Lineage.DecisionSpec, rec.DecisionKey)
	}
	ca, _ := rec.Outputs["content_address"].(string)
	if !validDigest(ca) {
		bad("evidence", "outputs.content_address %q is not a digest", ca)
	}
	if kind, ok := strings.CutPrefix(rec.DecisionKey, ledger.EvidenceRevocationKeyPrefix); ok {
		if rec.Status != writ.StatusClosed || rec.Supersedes == "" {
			bad("evidence", "an evidence revocation is CLOSED and supersedes the evidence record it revokes")
		}
		if id, _ := rec.Outputs["revokes"].(string); id == "" || !slices.Contains(rec.EvidenceRefs, kind+":"+id+"#"+ca) {
			bad("evidence", "an evidence revocation names the item it revokes (outputs.revokes) and cites it as %s:<id>#<content address>", kind)
		}
		return
	}
	kind := strings.TrimPrefix(rec.DecisionKey, ledger.EvidenceKeyPrefix)
	if rec.Status != writ.StatusDecided {
		bad("evidence", "an evidence record is DECIDED, not %s", rec.Status)
	}
	item, ok := rec.Outputs["item"].(map[string]any)
	if !ok {
		bad("evidence", "an evidence record holds its item in outputs.item")
		return
	}
	if item["kind"] != kind || item["tenant_id"] != rec.TenantID {
		bad("evidence", "the item is of kind %v and tenant %v, not the record's %s and %s", item["kind"], item["tenant_id"], kind, rec.TenantID)
	}
	if got, err := record.CanonicalDigest(item); err != nil || got != ca {
		bad("evidence", "the item's content address is %s, not the %s the record states (the item was changed)", got, ca)
	}
	if pv, _ := rec.Outputs["provenance"].(string); pv != string(writ.ProvenanceIssued) && pv != string(writ.ProvenanceObserved) {
		bad("evidence", "provenance %q: a stored item is issued or observed", pv)
	}
	if id, _ := item["id"].(string); !slices.Contains(rec.EvidenceRefs, kind+":"+id+"#"+ca) {
		bad("evidence", "an evidence record cites its item as %s:<id>#<content address>", kind)
	}
	if tok, ok := rec.Outputs["jws"]; ok {
		checkEvidenceJWS(tok, rec.Outputs["signed_by"], item, bad)
	}
}

// checkEvidenceJWS checks what can be checked of a signed item's JWS
// without the issuer's keys (which the tenant registered, and which a
// bundle does not carry; writ verified the signature with them when the
// item was stored): it is a compact JWS whose payload is exactly the
// item's canonical form, and whose protected header's kid is signed_by.
func checkEvidenceJWS(tok, signedBy any, item map[string]any, bad func(rule, format string, args ...any)) {
	s, _ := tok.(string)
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		bad("evidence", "outputs.jws is not a compact JWS (three dot-separated parts)")
		return
	}
	canon, err := record.Canonical(item)
	if payload, perr := base64.RawURLEncoding.DecodeString(parts[1]); err != nil || perr != nil || !bytes.Equal(payload, canon) {
		bad("evidence", "the payload of outputs.jws is not the item's canonical form (the item or its signature was changed)")
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err == nil {
		err = jsonv2.Unmarshal(raw, &hdr)
	}
	if kid, _ := signedBy.(string); err != nil || hdr.Kid == "" || hdr.Kid != kid {
		bad("evidence", "outputs.signed_by %v is not the kid of outputs.jws's protected header", signedBy)
	}
}

func validDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkAbout checks the record of a retraction, a feedback entry or a
// replay result: it names the record it is about in outputs.record_id
// and cites it as evidence; a retraction is CLOSED and supersedes it, the
// others are DECIDED and supersede nothing.
func checkAbout(rec *writ.Record, bad func(rule, format string, args ...any)) {
	if rec.Lineage.DecisionSpec != rec.DecisionKey {
		bad("lineage", "decision_spec %s, want %s", rec.Lineage.DecisionSpec, rec.DecisionKey)
	}
	about, _ := rec.Outputs["record_id"].(string)
	if about == "" || !slices.Contains(rec.EvidenceRefs, "record:"+about) {
		bad("evidence", "a record about a record names it in outputs.record_id and cites it in evidence_refs")
	}
	if _, ok := rec.Outputs["outcome"].(string); !ok {
		bad("schema", "a record about a record carries its outcome in outputs.outcome")
	}
	if strings.HasPrefix(rec.DecisionKey, writ.RetractionKeyPrefix) {
		if rec.Status != writ.StatusClosed || rec.Supersedes != about {
			bad("schema", "a retraction is CLOSED and supersedes the record it retracts")
		}
		if r, _ := rec.Outputs["reason"].(string); strings.TrimSpace(r) == "" {
			bad("schema", "a retraction says why in outputs.reason")
		}
		return
	}
	if rec.Status != writ.StatusDecided || rec.Supersedes != "" {
		bad("schema", "a feedback entry or a replay result is DECIDED and supersedes nothing")
	}
}
