package policy

import (
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// Variables are the names a rule condition, a control condition or an
// expression condition can read. Their CEL types are declared so that
// conditions are type-checked when the pack loads.
//
//	tenant        string               the tenant of the check
//	decision_key  string               the resolved decision key
//	tool          string               the tool, or "" when the check named a decision key only
//	action_class  string               the action class of the spec (or tool)
//	approval_mode string               the effective approval mode
//	args          map(string, dyn)     the action's arguments
//	context       map(string, dyn)     facts the caller passed
//	outputs       map(string, dyn)     the proposed outputs
//	subject_ids   list(string)         the subjects
//	actor         map(string, string)  type, id, workload_identity, delegated_user_id,
//	                                   provenance, delegated_user_provenance (authenticated or
//	                                   claimed; "" for no delegated user or a record sealed
//	                                   before writ set them), key_id, acted_by ("TYPE:ID" or "")
//	workflow      map(string, string)  workflow_id, node_id, run_id, step_id
//	evidence      map(string, dyn)     valid evidence by kind: id, version, hash, ref,
//	                                   observed_at (timestamp), age_seconds (double), attributes (map),
//	                                   provenance and issuer (once writ resolved the citation)
//	usage         map(string, double)  tokens, tool_calls, cost_usd_cents, wall_clock_ms
//	scorecard     map(string, double)  evaluator scores
//	now           timestamp            the decision clock
//	history       map(string, double)  the pack's history aggregates the check reads, by name
//	params        map(string, dyn)     the tenant's parameter values, by name (the pack's
//	                                   defaults where the tenant set none)
//	context_provenance map(string, string) each context field's provenance: "claimed" for
//	                                   the caller's, the item's ("issued", "observed") for a
//	                                   field the spec takes from evidence (context_from_evidence)
//
// context holds, for a field the spec takes from evidence, the value writ
// found, never the caller's (see fillContext).
var Variables = []string{"tenant", "decision_key", "tool", "action_class", "approval_mode", "args", "context", "outputs", "subject_ids", "actor", "workflow", "evidence", "usage", "scorecard", "now", "history", "params", "context_provenance"}

func newEnv() (*cel.Env, error) {
	dyn := cel.MapType(cel.StringType, cel.DynType)
	strs := cel.MapType(cel.StringType, cel.StringType)
	nums := cel.MapType(cel.StringType, cel.DoubleType)
	return cel.NewEnv(
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		ext.Strings(),
		cel.Variable("tenant", cel.StringType),
		cel.Variable("decision_key", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("action_class", cel.StringType),
		cel.Variable("approval_mode", cel.StringType),
		cel.Variable("args", dyn),
		cel.Variable("context", dyn),
		cel.Variable("outputs", dyn),
		cel.Variable("subject_ids", cel.ListType(cel.StringType)),
		cel.Variable("actor", strs),
		cel.Variable("workflow", strs),
		cel.Variable("evidence", dyn),
		cel.Variable("usage", nums),
		cel.Variable("scorecard", nums),
		cel.Variable("now", cel.TimestampType),
		cel.Variable("history", nums),
		cel.Variable("params", dyn),
		cel.Variable("context_provenance", strs),
	)
}

// vars is the activation of one check. Each variable is computed and
// adapted to a CEL value on first use and kept for the rest of the
// decision: a condition that never reads evidence never pays for it, and
// ten conditions that read args share one adapted map.
type vars struct {
	req                                    *writ.CheckRequest
	decisionKey, actionClass, approvalMode string
	now                                    time.Time
	history                                History
	params                                 map[string]any
	// sources are the spec's context fields from evidence; filled and
	// contextSources are the context they give, computed on first use.
	sources        []*pack.ContextSource
	filled         map[string]any
	contextSources map[string]writ.ContextSource

	vals [numVariables]ref.Val
}

// numVariables is len(Variables).
const numVariables = 18

var (
	emptyAny = map[string]any{}
	emptyStr = map[string]string{}
	emptyNum = map[string]float64{}
)

// varIndex maps a variable name to its index in Variables.
func varIndex(name string) int {
	switch name {
	case "tenant":
		return 0
	case "decision_key":
		return 1
	case "tool":
		return 2
	case "action_class":
		return 3
	case "approval_mode":
		return 4
	case "args":
		return 5
	case "context":
		return 6
	case "outputs":
		return 7
	case "subject_ids":
		return 8
	case "actor":
		return 9
	case "workflow":
		return 10
	case "evidence":
		return 11
	case "usage":
		return 12
	case "scorecard":
		return 13
	case "now":
		return 14
	case "history":
		return 15
	case "params":
		return 16
	case "context_provenance":
		return 17
	}
	return -1
}

func (v *vars) ResolveName(name string) (any, bool) {
	i := varIndex(name)
	if i < 0 {
		return nil, false
	}
	if v.vals[i] == nil {
		v.vals[i] = types.DefaultTypeAdapter.NativeToValue(v.native(i))
	}
	return v.vals[i], true
}

// native computes variable i as a Go value.
func (v *vars) native(i int) any {
	req := v.req
	switch i {
	case 0:
		return req.TenantID
	case 1:
		return v.decisionKey
	case 2:
		return req.Tool
	case 3:
		return v.actionClass
	case 4:
		return v.approvalMode
	case 5:
		return orEmpty(req.Arguments)
	case 6:
		return orEmpty(v.context())
	case 17:
		ctx := v.context()
		m := make(map[string]string, len(ctx))
		for k := range ctx {
			m[k] = string(writ.ProvenanceClaimed)
			if s, ok := v.contextSources[k]; ok {
				m[k] = string(s.Provenance)
			}
		}
		return m
	case 7:
		return orEmpty(req.Outputs)
	case 8:
		if req.SubjectIDs == nil {
			return []string{}
		}
		return req.SubjectIDs
	case 9:
		a := req.Actor
		m := map[string]string{"type": a.Type, "id": a.ID, "workload_identity": a.WorkloadIdentity, "delegated_user_id": a.DelegatedUserID,
			"provenance": string(a.Provenance), "delegated_user_provenance": string(a.DelegatedUserProvenance), "key_id": a.KeyID, "acted_by": ""}
		if a.ActedBy != nil {
			m["acted_by"] = a.ActedBy.Type + ":" + a.ActedBy.ID
		}
		return m
	case 10:
		if w := req.Workflow; w != nil {
			return map[string]string{"workflow_id": w.WorkflowID, "node_id": w.NodeID, "run_id": w.RunID, "step_id": w.StepID}
		}
		return emptyStr
	case 11:
		return orEmpty(validEvidence(req, v.now))
	case 12:
		// usage.tool_calls is what the budget counts: the larger of
		// writ's meter and the caller's figure (meter.go).
		n, metered := meteredToolCalls(v.history)
		if u := req.Usage; u != nil {
			return map[string]float64{"tokens": float64(u.Tokens), "tool_calls": max(float64(u.ToolCalls), n), "cost_usd_cents": u.CostUSDCents, "wall_clock_ms": float64(u.WallClockMS)}
		}
		if metered {
			return map[string]float64{"tool_calls": n}
		}
		return emptyNum
	case 13:
		if req.Scorecard == nil {
			return emptyNum
		}
		return req.Scorecard
	case 15:
		if v.history == nil {
			return emptyNum
		}
		return map[string]float64(v.history)
	case 16:
		return orEmpty(v.params)
	}
	return v.now
}

func (v *vars) Parent() interpreter.Activation { return nil }

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return emptyAny
	}
	return m
}

// lookup resolves a dotted path (args.amount, workflow.workflow_id) for
// message templates.
func (v *vars) lookup(path []string) (any, bool) {
	i := varIndex(path[0])
	if i < 0 {
		return nil, false
	}
	var ok bool
	cur := v.native(i)
	for _, p := range path[1:] {
		switch m := cur.(type) {
		case map[string]any:
			cur, ok = m[p]
		case map[string]string:
			cur, ok = m[p]
		case map[string]float64:
			cur, ok = m[p]
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func newVars(req *writ.CheckRequest, r *Resolved, now time.Time) *vars {
	return &vars{req: req, decisionKey: r.Spec.DecisionKey, actionClass: r.ActionClass, approvalMode: string(r.ApprovalMode), now: now, sources: r.Spec.ContextFromEvidence}
}

// context is the check's context as conditions see it: the caller's,
// with the fields the spec takes from evidence filled by fillContext.
func (v *vars) context() map[string]any {
	if len(v.sources) == 0 {
		return v.req.Context
	}
	if v.contextSources == nil {
		v.filled, v.contextSources = fillContext(v.sources, v.req, v.now)
	}
	return v.filled
}

// fillContext returns req's context with each field of sources replaced
// by the value of the source's attribute in the cited evidence item that
// fills it, or removed when none does, and where each such field came
// from. The item is, among the citations writ resolved (the request's
// evidence as the engine pinned it), one of the source's kind, of an
// accepted provenance, of the request's tenant, neither revoked nor
// expired at now, not observed in the future, naming one of the
// request's subjects (of the source's subject type, when it names one),
// whose attributes hold the attribute; of several, the one observed
// last (the first cited, at equal times). The caller's value of a field
// is never read: a fact the spec takes from evidence is never the
// caller's word. It is a pure function of the pinned request and the
// clock, so replay fills the same.
func fillContext(sources []*pack.ContextSource, req *writ.CheckRequest, now time.Time) (map[string]any, map[string]writ.ContextSource) {
	out := make(map[string]any, len(req.Context)+len(sources))
	for k, x := range req.Context {
		out[k] = x
	}
	src := make(map[string]writ.ContextSource, len(sources))
	for _, s := range sources {
		cs := writ.ContextSource{Kind: s.Kind, Attribute: s.Attribute}
		_, cs.IgnoredClaim = req.Context[s.Field]
		delete(out, s.Field)
		var best *writ.Evidence
		for i := range req.Evidence {
			e := &req.Evidence[i]
			if e.Kind != s.Kind || e.Resolution != writ.ResolutionResolved || !s.Accepts(string(e.Provenance)) ||
				e.TenantID != req.TenantID || e.ObservedAt == nil || e.ObservedAt.After(now.Add(ClockSkew)) ||
				e.RevokedAt != nil && !e.RevokedAt.After(now) || e.ExpiresAt != nil && !now.Before(*e.ExpiresAt) {
				continue
			}
			if _, ok := e.Attributes[s.Attribute]; !ok || !namesSubject(e, req.SubjectIDs, s.Subject) {
				continue
			}
			if best == nil || e.ObservedAt.After(*best.ObservedAt) {
				best = e
			}
		}
		if best != nil {
			out[s.Field] = best.Attributes[s.Attribute]
			cs.Evidence, cs.Provenance = best.Ref(), best.Provenance
		}
		src[s.Field] = cs
	}
	return out, src
}

// namesSubject reports whether the resolved item e names one of
// subjects, of type typ ("customer" for customer:… ids) when typ is set.
// The engine pins a resolved item's subjects (writ.Evidence.SubjectIDs)
// when the spec takes context from evidence.
func namesSubject(e *writ.Evidence, subjects []string, typ string) bool {
	for _, s := range e.SubjectIDs {
		if typ != "" && !strings.HasPrefix(s, typ+":") {
			continue
		}
		if slices.Contains(subjects, s) {
			return true
		}
	}
	return false
}

// validEvidence exposes to conditions only evidence of the request's own
// tenant that was not observed in the future; of several items of one
// kind, the most recently observed wins.
func validEvidence(req *writ.CheckRequest, now time.Time) map[string]any {
	if len(req.Evidence) == 0 {
		return nil
	}
	out := make(map[string]any, len(req.Evidence))
	newest := make(map[string]time.Time, len(req.Evidence))
	for _, e := range req.Evidence {
		if e.TenantID != "" && e.TenantID != req.TenantID {
			continue
		}
		if e.Resolution == writ.ResolutionHashMismatch || e.Resolution == writ.ResolutionBadSignature || e.Resolution == writ.ResolutionSubjectMismatch ||
			e.RevokedAt != nil && !e.RevokedAt.After(now) || e.ExpiresAt != nil && !now.Before(*e.ExpiresAt) {
			continue // never let a tampered, forged, revoked or expired item, or one about someone else, speak
		}
		var at time.Time
		if e.ObservedAt != nil {
			at = *e.ObservedAt
			if at.After(now.Add(ClockSkew)) {
				continue
			}
		}
		if prev, ok := newest[e.Kind]; ok && !at.After(prev) {
			continue
		}
		newest[e.Kind] = at
		item := map[string]any{"id": e.ID, "version": e.Version, "hash": e.Hash, "ref": e.Ref()}
		if e.Provenance != "" {
			// Rules can read it: evidence.fraud_assessment.provenance == "issued".
			item["provenance"] = string(e.Provenance)
			item["issuer"] = e.Issuer
		}
		if e.ObservedAt != nil {
			item["observed_at"] = at
			item["age_seconds"] = now.Sub(at).Seconds()
		}
		if e.Attributes != nil {
			item["attributes"] = e.Attributes
		} else {
			item["attributes"] = emptyAny
		}
		out[e.Kind] = item
	}
	return out
}

// ClockSkew is how far in the future an evidence timestamp may be before
// it is treated as invalid.
const ClockSkew = 5 * time.Second
