package policy

import (
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/writhq/writ"
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
//	actor         map(string, string)  type, id, workload_identity, delegated_user_id
//	workflow      map(string, string)  workflow_id, node_id, run_id, step_id
//	evidence      map(string, dyn)     valid evidence by kind: id, version, hash, ref,
//	                                   observed_at (timestamp), age_seconds (double), attributes (map)
//	usage         map(string, double)  tokens, tool_calls, cost_usd_cents, wall_clock_ms
//	scorecard     map(string, double)  evaluator scores
//	now           timestamp            the decision clock
var Variables = []string{"tenant", "decision_key", "tool", "action_class", "approval_mode", "args", "context", "outputs", "subject_ids", "actor", "workflow", "evidence", "usage", "scorecard", "now"}

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
	)
}

// vars is the activation of one check. Scalars are resolved by a switch;
// the map-valued variables are built on first use and kept for the rest
// of the decision, so a condition that never reads evidence never pays
// for it.
type vars struct {
	req                                    *writ.CheckRequest
	decisionKey, actionClass, approvalMode string
	now                                    time.Time

	actor, workflow map[string]string
	usage           map[string]float64
	evidence        map[string]any
	// boxed caches the interface values of non-map variables: boxing a
	// string, slice or time allocates, so each is boxed once per decision.
	boxed [len(boxedNames)]any
	built uint8
}

var boxedNames = [...]string{"tenant", "decision_key", "tool", "action_class", "approval_mode", "subject_ids", "now"}

const (
	builtActor uint8 = 1 << iota
	builtWorkflow
	builtUsage
	builtEvidence
)

var (
	emptyAny = map[string]any{}
	emptyStr = map[string]string{}
	emptyNum = map[string]float64{}
)

func (v *vars) ResolveName(name string) (any, bool) {
	req := v.req
	for i, n := range boxedNames {
		if n == name {
			if v.boxed[i] == nil {
				v.boxed[i] = v.box(name)
			}
			return v.boxed[i], true
		}
	}
	switch name {
	case "args":
		return orEmpty(req.Arguments), true
	case "context":
		return orEmpty(req.Context), true
	case "outputs":
		return orEmpty(req.Outputs), true
	case "actor":
		if v.built&builtActor == 0 {
			v.built |= builtActor
			a := req.Actor
			v.actor = map[string]string{"type": a.Type, "id": a.ID, "workload_identity": a.WorkloadIdentity, "delegated_user_id": a.DelegatedUserID}
		}
		return v.actor, true
	case "workflow":
		if v.built&builtWorkflow == 0 {
			v.built |= builtWorkflow
			v.workflow = emptyStr
			if w := req.Workflow; w != nil {
				v.workflow = map[string]string{"workflow_id": w.WorkflowID, "node_id": w.NodeID, "run_id": w.RunID, "step_id": w.StepID}
			}
		}
		return v.workflow, true
	case "evidence":
		if v.built&builtEvidence == 0 {
			v.built |= builtEvidence
			v.evidence = orEmpty(validEvidence(req, v.now))
		}
		return v.evidence, true
	case "usage":
		if v.built&builtUsage == 0 {
			v.built |= builtUsage
			v.usage = emptyNum
			if u := req.Usage; u != nil {
				v.usage = map[string]float64{"tokens": float64(u.Tokens), "tool_calls": float64(u.ToolCalls), "cost_usd_cents": u.CostUSDCents, "wall_clock_ms": float64(u.WallClockMS)}
			}
		}
		return v.usage, true
	case "scorecard":
		if req.Scorecard == nil {
			return emptyNum, true
		}
		return req.Scorecard, true
	}
	return nil, false
}

func (v *vars) box(name string) any {
	switch name {
	case "tenant":
		return v.req.TenantID
	case "decision_key":
		return v.decisionKey
	case "tool":
		return v.req.Tool
	case "action_class":
		return v.actionClass
	case "approval_mode":
		return v.approvalMode
	case "subject_ids":
		if v.req.SubjectIDs == nil {
			return []string{}
		}
		return v.req.SubjectIDs
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
	root, ok := v.ResolveName(path[0])
	if !ok {
		return nil, false
	}
	cur := root
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
	return &vars{req: req, decisionKey: r.Spec.DecisionKey, actionClass: r.ActionClass, approvalMode: string(r.ApprovalMode), now: now}
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
