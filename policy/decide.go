package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Resolved is a check resolved under the pinned pack: its spec, its tool,
// and the candidate checks that apply.
type Resolved struct {
	Spec         *pack.Spec
	Tool         *pack.Tool // nil when the check named only a decision key
	ActionClass  string
	ApprovalMode writ.ApprovalMode
	// PolicyVersions are the spec's bundles, bundle_id@version.
	PolicyVersions []string
	Controls       writ.ControlsActive
	// CompiledContextHash pins what resolution compiled (see
	// compiledContextHash).
	CompiledContextHash string

	pack  *pack.Pack
	index *specIndex
	cands *candidates
}

// Resolve finds the spec, tool and candidates of req. An unknown tool or
// decision key, or a tool and decision key that disagree, is EINVALID.
func (p *Policy) Resolve(req *writ.CheckRequest) (*Resolved, error) {
	key := req.DecisionKey
	var tool *pack.Tool
	if req.Tool != "" {
		t, ok := p.Pack.Tools[req.Tool]
		if !ok {
			return nil, invalid("tool", "tool %q is not in the tool manifest of pack %s", req.Tool, p.Pack.ID())
		}
		if key != "" && key != t.DecisionKey {
			return nil, invalid("decision_key", "tool %q maps to decision key %q, not %q", req.Tool, t.DecisionKey, key)
		}
		key, tool = t.DecisionKey, t
	}
	if key == "" {
		return nil, invalid("decision_key", "a check needs a decision_key or a tool")
	}
	idx, ok := p.specs[key]
	if !ok {
		return nil, invalid("decision_key", "decision key %q is not defined in pack %s", key, p.Pack.ID())
	}
	if d := req.ToolDefinitionDigest; d != "" && (req.Tool == "" || !validDigest(d)) {
		return nil, invalid("tool_definition_digest", "tool_definition_digest %q must be \"sha256:\" and 64 lowercase hex digits, on a check that names its tool", d)
	}
	if req.ApprovalMode != "" && req.ApprovalMode.Rank() < 0 {
		return nil, invalid("approval_mode", "unknown approval mode %q (want read_only, local_write, network, delegated or destructive)", req.ApprovalMode)
	}
	r := &Resolved{pack: p.Pack, Spec: idx.spec, Tool: tool, ActionClass: idx.spec.ActionClass, PolicyVersions: idx.policyVersions, index: idx, cands: idx.noTool}
	if tool != nil {
		r.ActionClass = tool.ActionClass
		r.cands = idx.byTool[tool.Name]
	}
	// The spec's mode is inherent to the action: a request may ask for a
	// riskier mode (up to the tool's ceiling), never a safer one.
	spec := writ.ApprovalMode(idx.spec.ApprovalMode)
	switch {
	case req.ApprovalMode != "" && req.ApprovalMode.Rank() > spec.Rank():
		r.ApprovalMode = req.ApprovalMode
	case spec != "":
		r.ApprovalMode = spec
	case tool != nil:
		r.ApprovalMode = writ.ApprovalMode(tool.ApprovalModeCeiling)
	}
	r.Controls = r.cands.controls
	r.CompiledContextHash = r.cands.contextHash
	return r, nil
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

func invalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &writ.Error{Code: writ.EINVALID, Message: msg, Details: []writ.Detail{{Field: field, Message: msg}}}
}

// CheckID names one check a decision can apply: a rule, a control, an
// evidence requirement, a budget or the approval-mode ceiling. It is built
// once, when the pack compiles.
type CheckID struct {
	// BundleID is "bundle@version" for a rule, "controls" for a control,
	// "spec:key@version" for an evidence requirement or a budget, and
	// "tool_manifest" for the approval-mode ceiling.
	BundleID string
	RuleID   string
	// PolicyDecisionID identifies the check at its version; the applied
	// verdict is appended (":allow", ":deny", ...), so the same check with
	// the same verdict has the same id in every record.
	PolicyDecisionID string

	idAllow, idFired string
}

func newCheckID(bundleID, ruleID, pdPrefix string, e Effect) *CheckID {
	pd := pdPrefix + ruleID
	return &CheckID{BundleID: bundleID, RuleID: ruleID, PolicyDecisionID: pd, idAllow: pd + ":allow", idFired: pd + ":" + e.String()}
}

// Applied is one check that was applied to a decision.
type Applied struct {
	ID *CheckID
	// Verdict is the check's effect when it fired, Allow when it did not.
	Verdict Effect
	// Firing is set when the check fired.
	Firing *Firing
	// Satisfied names the approval that redeemed the gate this
	// require_approval check fired for; the check then no longer decides
	// the effect (see ApplyApprovals).
	Satisfied string
	// Deferred is set on a require_approval check that fired while a
	// check that is not an approval also blocks: an approval cannot help
	// until that check passes, so the check does not decide the effect and
	// its gate is not asked (see Decision.settle).
	Deferred bool
}

// PolicyDecisionID is the id of the check with its verdict.
func (a Applied) PolicyDecisionID() string {
	if a.Firing != nil {
		return a.ID.idFired
	}
	return a.ID.idAllow
}

// Firing is what a fired check contributes to the receipt.
type Firing struct {
	// EvalError is set when the condition could not be evaluated; the
	// check then fires (fail closed).
	EvalError    string
	Reason       writ.Reason
	NextSteps    []writ.Reason
	Guidance     []string
	Changes      []writ.Condition
	Routing      pack.Routing
	Gate         string
	MustNotRetry bool
	// Awaits says in words what would change the decision where no
	// condition a caller can test does (a fail-closed check awaits the
	// ledger).
	Awaits []string
}

// Decision is the result of Decide.
type Decision struct {
	// Effect is the strongest effect among the checks that fired.
	Effect  Effect
	Applied []Applied
	// Gates are the approval gates the fired checks require.
	Gates []string
	// Granted are the presented approvals that redeemed gates.
	Granted []*writ.ApprovalRequest
	// Metered is what writ counted of the session's usage for the
	// spec's budgets (tool_calls, with this check), when it read the
	// tool-call meter (meter.go); nil otherwise.
	Metered *writ.Usage
	// ContextSources are the context fields the spec takes from
	// evidence, and where each came from (fillContext); nil when it
	// takes none.
	ContextSources map[string]writ.ContextSource
	// MeteredActor is what writ counted of the actor's tool calls in the
	// window of the spec's actor_tool_calls budget (with this check),
	// when it read that meter; nil otherwise.
	MeteredActor *int64
}

// Decide evaluates req under r at the clock reading now, with no history
// values (see DecideWith). It is pure: the same inputs always give the
// same decision.
func (p *Policy) Decide(r *Resolved, req *writ.CheckRequest, now time.Time) *Decision {
	return p.DecideWith(r, req, now, nil)
}

// DecideWith is Decide with the values of the history aggregates the
// check reads (HistoryPlan), which conditions see as history.<name>. The
// values are an input like the clock reading: DecideWith stays pure.
func (p *Policy) DecideWith(r *Resolved, req *writ.CheckRequest, now time.Time, h History) *Decision {
	return p.DecideInputs(r, req, now, Inputs{History: h})
}

// Inputs are what a decision reads besides the request and the clock,
// fetched before deciding and pinned in the record: the history values
// and the tenant's parameter values.
type Inputs struct {
	History History
	// Params are the effective parameter values (pack.EffectiveParams),
	// which conditions see as params.<name>.
	Params map[string]any
}

// DecideInputs is Decide with the inputs in. It stays pure.
func (p *Policy) DecideInputs(r *Resolved, req *writ.CheckRequest, now time.Time, in Inputs) *Decision {
	v := newVars(req, r, now)
	v.history, v.params = in.History, in.Params
	d := &Decision{Applied: make([]Applied, 0, len(r.cands.checks)+len(r.index.evidence)+5)}
	d.ceiling(r)
	d.pinned(r, req)
	for _, ch := range r.cands.checks {
		if ch.bundleID == "controls" {
			d.add(ch.apply(v))
		}
	}
	for _, e := range r.index.evidence {
		d.add(e.apply(v, req, now))
	}
	d.budgets(r.index, req.Usage, in.History)
	d.lineagePins(r.index, req)
	for _, ch := range r.cands.checks {
		if ch.bundleID != "controls" {
			d.add(ch.apply(v))
		}
	}
	d.requiredGates(r.index.gates, r.ApprovalMode)
	d.settle()
	if len(v.sources) > 0 {
		v.context()
		d.ContextSources = v.contextSources
	}
	return d
}

// settle computes the effect from the applied checks. An approval is
// asked for only when it can help: when a fired check other than a
// require_approval one blocks (replan_local or stronger), every
// unsatisfied require_approval check is Deferred, and the effect is the
// strongest of the other checks. The receipt then lists what must change
// first, and no approval request is opened; once those checks pass, the
// same action asks for its approval. A satisfied check (its gate redeemed)
// never decides the effect.
func (d *Decision) settle() {
	blocked := false
	for _, a := range d.Applied {
		if a.Firing != nil && a.Satisfied == "" && a.Verdict > Warn && a.Verdict != RequireApproval {
			blocked = true
		}
	}
	d.Effect = Allow
	for i := range d.Applied {
		a := &d.Applied[i]
		a.Deferred = blocked && a.Firing != nil && a.Satisfied == "" && a.Verdict == RequireApproval
		if a.Firing != nil && a.Satisfied == "" && !a.Deferred && a.Verdict > d.Effect {
			d.Effect = a.Verdict
		}
	}
}

func (d *Decision) add(a Applied) {
	if f := a.Firing; f != nil {
		if a.Verdict > d.Effect {
			d.Effect = a.Verdict
		}
		if f.Gate != "" && !slices.Contains(d.Gates, f.Gate) {
			d.Gates = append(d.Gates, f.Gate)
		}
	}
	d.Applied = append(d.Applied, a)
}

func (ch *check) apply(v *vars) Applied {
	a := Applied{ID: ch.cid}
	var evalErr string
	out, _, err := ch.prg.Eval(v)
	switch {
	case err != nil:
		evalErr = err.Error()
	case out == types.True:
	case out == types.False:
		return a
	default:
		evalErr = fmt.Sprintf("condition evaluated to %v, not a bool", out)
	}
	f := &Firing{
		EvalError:    evalErr,
		Reason:       writ.Reason{Code: ch.reason.code, Message: ch.reason.message.render(v)},
		Routing:      ch.routing,
		Gate:         ch.gate,
		MustNotRetry: ch.mustNotRetry || ch.effect == Deny,
	}
	if evalErr != "" {
		f.Reason.Message += " (the condition could not be evaluated: " + evalErr + "; writ fails closed)"
	}
	for _, s := range ch.nextSteps {
		f.NextSteps = append(f.NextSteps, writ.Reason{Code: s.code, Message: s.message.render(v)})
	}
	for _, g := range ch.guidance {
		f.Guidance = append(f.Guidance, g.render(v))
	}
	for _, c := range ch.changes {
		cond := c.c
		cond.Text = c.text.render(v)
		f.Changes = append(f.Changes, cond)
	}
	a.Verdict, a.Firing = ch.effect, f
	return a
}

// ceiling denies a check that asks for an approval mode above its tool's
// ceiling.
func (d *Decision) ceiling(r *Resolved) {
	if r.Tool == nil {
		return
	}
	a := Applied{ID: r.index.ceilings[r.Tool.Name]}
	ceil := writ.ApprovalMode(r.Tool.ApprovalModeCeiling)
	if r.ApprovalMode.Rank() > ceil.Rank() {
		a.Verdict = Deny
		a.Firing = &Firing{
			Reason:       writ.Reason{Code: "approval_mode_above_ceiling", Message: fmt.Sprintf("Tool %s may act at most as %s; the check asked for %s.", r.Tool.Name, ceil, r.ApprovalMode)},
			NextSteps:    []writ.Reason{{Code: "LOWER_APPROVAL_MODE", Message: fmt.Sprintf("Retry with an approval mode of %s or lower.", ceil)}},
			MustNotRetry: true,
		}
	}
	d.add(a)
}

// pinned denies a check whose observed tool definition is not the one
// the tool manifest pins. A check that carries no observed definition
// (one not made by the MCP gateway) is not compared.
func (d *Decision) pinned(r *Resolved, req *writ.CheckRequest) {
	if r.Tool == nil || r.Tool.DefinitionDigest == "" || req.ToolDefinitionDigest == "" {
		return
	}
	a := Applied{ID: r.index.pins[r.Tool.Name]}
	if req.ToolDefinitionDigest != r.Tool.DefinitionDigest {
		a.Verdict = Deny
		a.Firing = &Firing{
			Reason:       writ.Reason{Code: "tool_definition_changed", Message: fmt.Sprintf("Tool %s's definition changed: the tool server now describes it as %s, but the pack pins %s. The tool may no longer do what was reviewed.", r.Tool.Name, req.ToolDefinitionDigest, r.Tool.DefinitionDigest)},
			NextSteps:    []writ.Reason{{Code: "REVIEW_TOOL_DEFINITION", Message: "Do not call this tool until the pack's owner has reviewed its new definition and pinned its new digest in the tool manifest."}},
			MustNotRetry: true,
		}
	}
	d.add(a)
}

// apply checks one evidence requirement: present, of the request's tenant,
// not observed in the future, and no older than its maximum age.
func (e *evidenceCheck) apply(v *vars, req *writ.CheckRequest, now time.Time) Applied {
	a := Applied{ID: e.cid}
	// A conditional requirement applies only where its condition holds;
	// one that cannot be evaluated applies (writ fails closed).
	var whenErr string
	if e.when != nil {
		out, _, err := e.when.Eval(v)
		switch {
		case err != nil:
			whenErr = err.Error()
		case out == types.False:
			return a
		case out != types.True:
			whenErr = fmt.Sprintf("condition evaluated to %v, not a bool", out)
		}
	}
	kind, maxAge := e.req.Kind, e.req.MaxAge
	var best *writ.Evidence
	// What disqualified the items of the kind, the first of each sort.
	var foreign, future, tampered, badSig, revoked, expired, mismatched, wrongProv, unresolved *writ.Evidence
	for i := range req.Evidence {
		ev := &req.Evidence[i]
		switch {
		case ev.Kind != kind:
		case ev.TenantID != "" && ev.TenantID != req.TenantID:
			foreign = first(foreign, ev)
		case ev.ObservedAt != nil && ev.ObservedAt.After(now.Add(ClockSkew)):
			future = first(future, ev)
		case ev.Resolution == writ.ResolutionHashMismatch:
			tampered = first(tampered, ev)
		case ev.Resolution == writ.ResolutionBadSignature:
			badSig = first(badSig, ev)
		case ev.RevokedAt != nil && !ev.RevokedAt.After(now):
			revoked = first(revoked, ev)
		case ev.ExpiresAt != nil && !now.Before(*ev.ExpiresAt):
			expired = first(expired, ev)
		case ev.Resolution == writ.ResolutionSubjectMismatch:
			mismatched = first(mismatched, ev)
		case ev.Resolution != "" && !slices.Contains(e.accepts, ev.Provenance):
			// A citation writ could not resolve is claimed; it counts
			// only where the requirement accepts claimed evidence.
			if ev.Resolution == writ.ResolutionUnresolvable {
				unresolved = first(unresolved, ev)
			} else {
				wrongProv = first(wrongProv, ev)
			}
		case best == nil || observed(ev).After(observed(best)):
			// Envelopes sealed before writ resolved evidence carry no
			// resolution, and are decided as they were.
			best = ev
		}
	}
	var reason writ.Reason
	switch {
	case best == nil && foreign != nil:
		reason = writ.Reason{Code: "evidence_wrong_tenant", Message: fmt.Sprintf("Evidence %s belongs to another tenant; required %s evidence of this tenant is missing.", foreign.Ref(), kind)}
	case best == nil && tampered != nil:
		reason = writ.Reason{Code: "evidence_hash_mismatch", Message: fmt.Sprintf("Evidence %s does not match the stored item of that id or content address (its hash differs); required %s evidence is missing.", tampered.Ref(), kind)}
	case best == nil && badSig != nil:
		reason = writ.Reason{Code: "evidence_bad_signature", Message: fmt.Sprintf("Evidence %s carries a signature that no issuer key of this tenant verifies; required %s evidence is missing.", badSig.Ref(), kind)}
	case best == nil && revoked != nil:
		reason = writ.Reason{Code: "evidence_revoked", Message: fmt.Sprintf("Evidence %s was revoked at %s; required %s evidence is missing.", revoked.Ref(), revoked.RevokedAt.UTC().Format(time.RFC3339), kind)}
	case best == nil && expired != nil:
		reason = writ.Reason{Code: "evidence_expired", Message: fmt.Sprintf("Evidence %s expired at %s; required %s evidence is missing.", expired.Ref(), expired.ExpiresAt.UTC().Format(time.RFC3339), kind)}
	case best == nil && mismatched != nil:
		reason = writ.Reason{Code: "evidence_subject_mismatch", Message: fmt.Sprintf("Evidence %s is about %s, and this check is about %s: they share no subject; required %s evidence about the check's subject is missing.", mismatched.Ref(), subjectList(mismatched.SubjectIDs), subjectList(req.SubjectIDs), kind)}
	case best == nil && wrongProv != nil:
		reason = writ.Reason{Code: "evidence_provenance", Message: fmt.Sprintf("Evidence %s is %s; %s evidence must be %s.", wrongProv.Ref(), wrongProv.Provenance, kind, provenanceList(e.accepts))}
	case best == nil && unresolved != nil:
		reason = writ.Reason{Code: "unresolvable", Message: fmt.Sprintf("Evidence %s is not in this tenant's evidence store, so it is only the caller's word; %s evidence must be %s.", unresolved.Ref(), kind, provenanceList(e.accepts))}
	case best == nil && future != nil:
		reason = writ.Reason{Code: "evidence_from_future", Message: fmt.Sprintf("Evidence %s was observed in the future (%s); required %s evidence is missing.", future.Ref(), future.ObservedAt.UTC().Format(time.RFC3339), kind)}
	case best == nil:
		reason = writ.Reason{Code: "missing_evidence", Message: fmt.Sprintf("Required %s evidence is missing.", kind)}
	case maxAge > 0 && best.ObservedAt == nil:
		reason = writ.Reason{Code: "stale_evidence", Message: fmt.Sprintf("Evidence %s has no observed_at, so it cannot be shown to be younger than %s.", best.Ref(), e.req.MaxAgeText)}
	case maxAge > 0 && now.Sub(*best.ObservedAt) > maxAge:
		reason = writ.Reason{Code: "stale_evidence", Message: fmt.Sprintf("Evidence %s was observed %s ago, more than the allowed %s.", best.Ref(), now.Sub(*best.ObservedAt).Round(time.Second), e.req.MaxAgeText)}
	default:
		return a
	}
	if e.reason != nil {
		// The pack's own words, with writ's diagnosis kept alongside.
		reason = writ.Reason{Code: e.reason.code, Message: e.reason.message.render(v) + " (" + reason.Message + ")"}
	}
	f := &Firing{Reason: reason, Routing: e.req.Routing, EvalError: whenErr}
	if whenErr != "" {
		f.Reason.Message += " (the requirement's when could not be evaluated: " + whenErr + "; writ fails closed and requires the evidence)"
	}
	a.Verdict, a.Firing = e.effect, f
	step := writ.Reason{Code: "FETCH_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_", ":", "_").Replace(kind)), Message: fmt.Sprintf("Fetch current %s evidence and retry the check.", kind)}
	if reason.Code == "unresolvable" || strings.HasPrefix(reason.Code, "evidence_") && reason.Code != "evidence_from_future" && reason.Code != "evidence_wrong_tenant" {
		step.Message = fmt.Sprintf("Have an issuer the tenant trusts submit current %s evidence to writ (POST /v1/evidence, or a signed item), cite it by its id or content address, and retry the check.", kind)
	}
	if reason.Code == "evidence_subject_mismatch" {
		step.Message = fmt.Sprintf("Cite %s evidence about this check's subject (an item whose subject_ids include one of the check's), having an issuer the tenant trusts submit one if there is none, and retry the check.", kind)
	}
	if e.step != nil {
		step = writ.Reason{Code: e.step.code, Message: e.step.message.render(v)}
	}
	f.NextSteps = []writ.Reason{step}
	text := fmt.Sprintf("Evidence of kind %s for this tenant.", kind)
	if maxAge > 0 {
		text = fmt.Sprintf("Evidence of kind %s for this tenant, observed within %s.", kind, e.req.MaxAgeText)
	}
	if !slices.Contains(e.accepts, writ.ProvenanceClaimed) {
		text = strings.TrimSuffix(text, ".") + ", " + provenanceList(e.accepts) + ", resolvable in this tenant's evidence store."
	}
	if mismatched != nil && best == nil {
		text = strings.TrimSuffix(text, ".") + ", about one of the check's subjects (" + subjectList(req.SubjectIDs) + ")."
	}
	f.Changes = []writ.Condition{{Kind: writ.ConditionEvidence, Text: text, EvidenceKind: kind, MaxAge: e.req.MaxAgeText}}
	return a
}

// subjectList renders subject ids for a diagnosis: "customer:cus_1,
// order:ord_2", or "no subject" for none.
func subjectList(ids []string) string {
	if len(ids) == 0 {
		return "no subject"
	}
	return strings.Join(ids, ", ")
}

func first(have, ev *writ.Evidence) *writ.Evidence {
	if have != nil {
		return have
	}
	return ev
}

// provenanceList renders accepted provenances: "issued or observed".
func provenanceList(ps []writ.Provenance) string {
	var ss []string
	for _, p := range ps {
		ss = append(ss, string(p))
	}
	switch len(ss) {
	case 0:
		return "none"
	case 1:
		return ss[0]
	}
	return strings.Join(ss[:len(ss)-1], ", ") + " or " + ss[len(ss)-1]
}

func observed(e *writ.Evidence) time.Time {
	if e.ObservedAt == nil {
		return time.Time{}
	}
	return *e.ObservedAt
}

// budgets checks the session's usage against the spec's budgets, one
// applied check per budgeted dimension. A dimension writ meters (h holds
// the tool-call meter) counts the larger of writ's figure and the
// caller's: the caller's usage can raise a count, never lower it.
func (d *Decision) budgets(idx *specIndex, u *writ.Usage, h History) {
	if len(idx.budgets) == 0 {
		return
	}
	if u == nil {
		u = &writ.Usage{}
	}
	if n, ok := meteredToolCalls(h); ok && idx.metered {
		d.Metered = &writ.Usage{ToolCalls: int64(n)}
	}
	if n, ok := h[MeterActorToolCalls]; ok && idx.actorWindow > 0 {
		c := int64(n) + 1
		d.MeteredActor = &c
	}
	for _, b := range idx.budgets {
		d.add(b.apply(u, d, h))
	}
}

// budgetCheck is one budgeted dimension of a spec.
type budgetCheck struct {
	cid    *CheckID
	dim    string
	limit  float64
	used   func(*writ.Usage) float64
	effect Effect
	// metered is set for a dimension writ counts itself (tool_calls).
	metered bool
	// window is set for actor_tool_calls: writ's count of the actor's
	// calls over it, and nothing the caller says.
	window     time.Duration
	windowText string
	// issuedOnly is set for a dimension the caller reports (tokens,
	// cost_usd_cents, wall_clock_ms) when the budget accepts issued
	// figures only: a meter key's.
	issuedOnly bool
}

func compileBudgets(s *pack.Spec) []*budgetCheck {
	b := s.Budgets
	if b == nil {
		return nil
	}
	effect, _ := ParseEffect(b.OnExceed)
	var out []*budgetCheck
	add := func(dim string, limit *float64, used func(*writ.Usage) float64) *budgetCheck {
		if limit == nil {
			return nil
		}
		cid := newCheckID("spec:"+s.ID(), "budget."+dim, "pd:"+s.ID()+":", effect)
		bc := &budgetCheck{cid: cid, dim: dim, limit: *limit, used: used, effect: effect, metered: dim == "tool_calls",
			issuedOnly: b.Accepts == string(writ.ProvenanceIssued) && dim != "tool_calls" && dim != "actor_tool_calls"}
		out = append(out, bc)
		return bc
	}
	add("tool_calls", intLimit(b.ToolCalls), func(u *writ.Usage) float64 { return float64(u.ToolCalls) })
	add("tokens", intLimit(b.Tokens), func(u *writ.Usage) float64 { return float64(u.Tokens) })
	add("cost_usd_cents", b.CostUSDCents, func(u *writ.Usage) float64 { return u.CostUSDCents })
	add("wall_clock_ms", intLimit(b.WallClockMS), func(u *writ.Usage) float64 { return float64(u.WallClockMS) })
	if bc := add("actor_tool_calls", intLimit(b.ActorToolCalls), nil); bc != nil {
		bc.window = b.ActorWindow
		bc.windowText = b.ActorWindowText
		if bc.windowText == "" {
			bc.windowText = "24h"
		}
	}
	return out
}

// apply checks the budget against the caller's usage u and, for a
// dimension writ meters, writ's own count (d.Metered, d.MeteredActor,
// nil when it has none; h holds MeterNoSession when the check named no
// session and no run to count across).
func (b *budgetCheck) apply(u *writ.Usage, d *Decision, h History) Applied {
	a := Applied{ID: b.cid}
	if b.window > 0 {
		return b.applyActor(d.MeteredActor)
	}
	if _, ok := h[MeterNoSession]; ok && b.metered {
		return b.unmetered("the check names no session (inputs_refs.session) and no run (workflow.run_id), so writ has nothing to count the session's tool calls across",
			writ.Reason{Code: "NAME_SESSION", Message: "Send the check with the session it belongs to (inputs_refs.session) or its workflow run (workflow.run_id)."},
			"The check names its session (inputs_refs.session) or its run (workflow.run_id).")
	}
	if b.issuedOnly && u.Provenance != writ.ProvenanceIssued {
		return b.unmetered("the check's usage is the caller's word (claimed), and the budget accepts only figures a meter sent (issued)",
			writ.Reason{Code: "REPORT_THROUGH_METER", Message: "Send the check through a meter the tenant trusts (a key with the role meter, such as the MCP gateway's or an LLM proxy's), which reports the figures."},
			fmt.Sprintf("The check's %s comes from a meter key (usage provenance issued).", b.dim))
	}
	used := b.used(u)
	var counted string
	if m := d.Metered; b.metered && m != nil {
		claimed := used
		used = max(used, b.used(m))
		counted = fmt.Sprintf(" (writ counted %s in this session; the caller reported %s)", strconv.FormatFloat(b.used(m), 'f', -1, 64), strconv.FormatFloat(claimed, 'f', -1, 64))
	}
	if used <= b.limit {
		return a
	}
	lim := strconv.FormatFloat(b.limit, 'f', -1, 64)
	a.Verdict = b.effect
	a.Firing = &Firing{
		Reason:    writ.Reason{Code: "budget_exceeded", Message: fmt.Sprintf("Budget %s exceeded: used %s, allowed %s.", b.dim, strconv.FormatFloat(used, 'f', -1, 64), lim) + counted},
		NextSteps: []writ.Reason{{Code: "REDUCE_" + strings.ToUpper(b.dim), Message: fmt.Sprintf("Finish within the %s budget of %s, or ask the policy owner for a larger one.", b.dim, lim)}},
		Changes:   []writ.Condition{{Kind: writ.ConditionBudget, Text: fmt.Sprintf("The run's %s stay within %s.", b.dim, lim), Expression: fmt.Sprintf("usage.%s <= %s", b.dim, floatLiteral(b.limit))}},
	}
	return a
}

// applyActor checks an actor_tool_calls budget against writ's count of
// the actor's allowed checks in the window, with this one (n); the
// caller's usage plays no part. Without a count (a check that names no
// actor) the budget refuses it.
func (b *budgetCheck) applyActor(n *int64) Applied {
	a := Applied{ID: b.cid}
	if n == nil {
		return b.unmetered("the check names no actor, so writ has nothing to count the actor's tool calls across",
			writ.Reason{Code: "NAME_ACTOR", Message: "Send the check with an API key, or naming its actor."},
			"The check names its actor.")
	}
	if float64(*n) <= b.limit {
		return a
	}
	lim := strconv.FormatFloat(b.limit, 'f', -1, 64)
	a.Verdict = b.effect
	a.Firing = &Firing{
		Reason:    writ.Reason{Code: "budget_exceeded", Message: fmt.Sprintf("Budget actor_tool_calls exceeded: used %d, allowed %s. (writ counted %d for this actor in the last %s, whatever sessions they named)", *n, lim, *n, b.windowText)},
		NextSteps: []writ.Reason{{Code: "REDUCE_ACTOR_TOOL_CALLS", Message: fmt.Sprintf("Wait until the actor's tool calls in the last %s are within %s, or ask the policy owner for a larger budget.", b.windowText, lim)}},
		Changes: []writ.Condition{{Kind: writ.ConditionBudget, Text: fmt.Sprintf("The actor's tool calls in the last %s stay within %s.", b.windowText, lim),
			Expression: fmt.Sprintf("history[%q] + 1.0 <= %s", MeterActorToolCalls, floatLiteral(b.limit))}},
	}
	return a
}

// unmetered is the budget's firing when writ cannot count what it
// bounds: the budget's on_exceed effect, never the caller's figure.
func (b *budgetCheck) unmetered(why string, step writ.Reason, change string) Applied {
	return Applied{ID: b.cid, Verdict: b.effect, Firing: &Firing{
		Reason:    writ.Reason{Code: "budget_unmetered", Message: fmt.Sprintf("Budget %s cannot be counted: %s.", b.dim, why)},
		NextSteps: []writ.Reason{step},
		Changes:   []writ.Condition{{Kind: writ.ConditionBudget, Text: change}},
	}}
}

func intLimit(n *int64) *float64 {
	if n == nil {
		return nil
	}
	f := float64(*n)
	return &f
}

// floatLiteral renders f as a CEL double literal.
func floatLiteral(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// Pack is the pack r was resolved under.
func (r *Resolved) Pack() *pack.Pack { return r.pack }
