package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/replay"
)

// loadOpenAPI parses the embedded document into JSON values (maps, slices,
// strings, float64 numbers, booleans).
func loadOpenAPI(t testing.TB) map[string]any {
	t.Helper()
	var y any
	if err := yaml.Unmarshal(OpenAPI(), &y); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	b, err := json.Marshal(y)
	if err != nil {
		t.Fatalf("openapi.yaml is not JSON-compatible: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// obj follows keys from v through nested objects; it fails the test if one
// is missing.
func obj(t *testing.T, v any, keys ...string) map[string]any {
	t.Helper()
	for i, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("openapi.yaml: %s is not an object", strings.Join(keys[:i], "."))
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("openapi.yaml: %s is missing", strings.Join(keys[:i+1], "."))
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("openapi.yaml: %s is not an object", strings.Join(keys, "."))
	}
	return m
}

func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	if v, _ := doc["openapi"].(string); !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	paths := obj(t, doc, "paths")
	s := NewServer(&fakeService{}, Config{})
	registered := map[string]bool{}
	for _, r := range s.routes {
		key := strings.ToLower(r.method) + " " + r.path
		registered[key] = true
		op, ok := paths[r.path].(map[string]any)[strings.ToLower(r.method)].(map[string]any)
		if !ok {
			t.Errorf("route %s %s is not in the document's paths", r.method, r.path)
			continue
		}
		if id, _ := op["operationId"].(string); id == "" {
			t.Errorf("%s %s has no operationId", r.method, r.path)
		}
		success := "200"
		if r.method == http.MethodPost && (r.path == "/v1/runs" || r.path == "/v1/decisions/{id}/execution" || r.path == "/v1/keys" ||
			strings.HasPrefix(r.path, "/v1/records/") || r.path == "/v1/evidence") {
			success = "201"
		}
		if _, ok := op["responses"].(map[string]any)[success]; !ok {
			t.Errorf("%s %s documents no %s response", r.method, r.path, success)
		}
		for _, name := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(r.path, -1) {
			if !hasParameter(doc, op, name[1], "path") {
				t.Errorf("%s %s does not document path parameter %s", r.method, r.path, name[1])
			}
		}
	}
	for path, item := range paths {
		for method := range item.(map[string]any) {
			if !registered[method+" "+path] {
				t.Errorf("the document describes %s %s, which the server does not serve", method, path)
			}
		}
	}

	// Every query parameter the server reads is documented, and no other;
	// the required ones are documented as required.
	wantParams := map[string][]string{
		"get /v1/records": slices.Collect(maps.Keys(recordQueryValues(writ.RecordQuery{
			TenantID: "t", DecisionKey: "k", Status: "s", Outcome: "o", SubjectID: "s", TraceID: "t",
			DecisionKeyPrefix: "k", SubjectPrefix: "s", Newest: true, ApprovalMode: "m", PolicyDecisionID: "p", Approver: "a", RefersTo: "r", Scorecard: "failed",
			From: testTime, To: testTime, Limit: 1, Cursor: "c",
		}))),
		"get /v1/records/{id}":          {paramTenantID},
		"get /v1/evidence/{id}":         {paramTenantID},
		"get /v1/records/{id}/envelope": {paramTenantID},
		"get /v1/ledger/keys":           {paramTenantID},
		"post /v1/ledger/checkpoint":    {paramTenantID},
		"get /v1/keys":                  {paramTenantID},
		"get /v1/pack":                  {paramTenantID},
		"get /v1/stats/latency":         {paramTenantID},
		"get /v1/ledger/witnesses":      {paramTenantID},
		"get /v1/ledger/checkpoint":     checkpointParams,
		"get /v1/records/{id}/proof":    proofParams,
		"get /v1/ledger/consistency":    consistencyParams,
		"get /v1/runs/{id}":             {paramTenantID},
		"get /v1/runs": slices.Collect(maps.Keys(runQueryValues(writ.RunQuery{
			TenantID: "t", WorkflowID: "w", Status: "s", Limit: 1, Cursor: "c",
		}))),
		"post /v1/runs/{id}/steps/{step}/attempts": {paramTenantID},
		"get /v1/approvals": append(slices.Collect(maps.Keys(approvalQueryValues(writ.ApprovalQuery{
			TenantID: "t", State: "s", GateID: "g", DecisionKey: "k", CreatedBefore: testTime, Limit: 1, Cursor: "c",
		}))), paramOlderThan),
		"get /v1/approvals/{id}":       {paramTenantID},
		"get /v1/params":               {paramTenantID},
		"get /v1/records/{id}/replay":  {paramTenantID},
		"post /v1/records/{id}/replay": {paramTenantID},
		"get /v1/records/{id}/links":   {paramTenantID},
		"get /v1/replay":               replayTraceParams,
		"get /v1/shadow/report": slices.Collect(maps.Keys(shadowQueryValues(writ.ShadowQuery{
			TenantID: "t", PackHash: "h", DecisionKey: "k", From: testTime, To: testTime, Examples: 1,
		}))),
		"get /v1/decisions/{id}":      {paramTenantID},
		"get /v1/decisions/in_flight": {paramTenantID, paramExpiredBy, paramLimit, paramCursor},
	}
	// tenant_id is never required: with an API key, it is the key's.
	required := func(key, name string) bool {
		return key == "get /v1/ledger/consistency" && name == paramFrom ||
			key == "get /v1/replay" && name == paramTraceID
	}
	for _, r := range s.routes {
		key := strings.ToLower(r.method) + " " + r.path
		op, ok := paths[r.path].(map[string]any)[strings.ToLower(r.method)].(map[string]any)
		if !ok {
			continue
		}
		var documented []string
		params, _ := op["parameters"].([]any)
		for _, p := range params {
			p := resolve(t, doc, p)
			if p["in"] != "query" {
				continue
			}
			name := p["name"].(string)
			documented = append(documented, name)
			if req, _ := p["required"].(bool); req != required(key, name) {
				t.Errorf("%s documents query parameter %s with required %v, want %v", key, name, req, !req)
			}
		}
		want := slices.Clone(wantParams[key])
		slices.Sort(want)
		if slices.Sort(documented); !slices.Equal(documented, want) {
			t.Errorf("%s documents query parameters %q, want %q", key, documented, want)
		}
	}

	// The client sends only parameters the server reads.
	for key, v := range map[string]url.Values{
		"get /v1/ledger/checkpoint":  treeSizeValues("t", 7),
		"get /v1/records/{id}/proof": treeSizeValues("t", 7),
		"get /v1/ledger/consistency": consistencyValues("t", 3, 7),
		"get /v1/approvals": approvalQueryValues(writ.ApprovalQuery{
			TenantID: "t", State: "s", GateID: "g", DecisionKey: "k", CreatedBefore: testTime, Limit: 1, Cursor: "c",
		}),
		"get /v1/replay": replayTraceValues("t", testTraceID),
	} {
		for name := range v {
			if !slices.Contains(wantParams[key], name) {
				t.Errorf("the client sends %s the query parameter %s, which the server does not read", key, name)
			}
		}
	}
}

// TestOpenAPIRoles holds the document to the route table: every operation
// states the roles its route allows (x-writ-roles) and needs the bearer
// API key exactly when it has roles, and every protected operation
// documents the 401 and 403 answers.
func TestOpenAPIRoles(t *testing.T) {
	doc := loadOpenAPI(t)
	scheme := obj(t, doc, "components", "securitySchemes", "apiKey")
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Errorf("securitySchemes.apiKey = %v, want an http bearer scheme", scheme)
	}
	for _, r := range NewServer(&fakeService{}, Config{}).routes {
		op := obj(t, doc, "paths", r.path, strings.ToLower(r.method))
		var documented []string
		xroles, ok := op["x-writ-roles"].([]any)
		if !ok {
			t.Errorf("%s %s has no x-writ-roles list", r.method, r.path)
		}
		for _, v := range xroles {
			documented = append(documented, v.(string))
		}
		want := strs(r.roles...)
		slices.Sort(documented)
		slices.Sort(want)
		if !slices.Equal(documented, want) {
			t.Errorf("%s %s: x-writ-roles = %q, want the route's roles %q", r.method, r.path, documented, want)
		}
		var wantSecurity any = []any{}
		if r.roles != nil {
			wantSecurity = []any{map[string]any{"apiKey": []any{}}}
		}
		if got := op["security"]; !reflect.DeepEqual(got, wantSecurity) {
			t.Errorf("%s %s: security = %v, want %v", r.method, r.path, got, wantSecurity)
		}
		responses := obj(t, op, "responses")
		for _, code := range []string{"401", "403"} {
			if _, ok := responses[code]; ok != (r.roles != nil) {
				t.Errorf("%s %s documents a %s response: %v, want %v", r.method, r.path, code, ok, r.roles != nil)
			}
		}
	}
}

// hasParameter reports whether op declares the parameter name in where.
func hasParameter(doc map[string]any, op map[string]any, name, where string) bool {
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		m, _ := p.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m, _ = pointer(doc, ref).(map[string]any)
		}
		if m["name"] == name && m["in"] == where {
			return true
		}
	}
	return false
}

// resolve follows v's $ref, if any.
func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		m, _ = pointer(doc, ref).(map[string]any)
	}
	if m == nil {
		t.Fatalf("openapi.yaml: cannot resolve %v", v)
	}
	return m
}

// pointer resolves a local reference ("#/a/b") in doc, or returns nil.
func pointer(doc map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var v any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		if v, ok = m[tok]; !ok {
			return nil
		}
	}
	return v
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := loadOpenAPI(t)
	var walk func(path string, v any)
	n := 0
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				if pointer(doc, ref) == nil {
					t.Errorf("openapi.yaml %s: $ref %q does not resolve", path, ref)
				}
			}
			for k, e := range v {
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", path, i), e)
			}
		}
	}
	walk("#", doc)
	if n < 20 {
		t.Errorf("found only %d $refs; the walk is broken", n)
	}
}

// schemaTypes maps the document's object schemas to the Go types whose
// JSON they describe.
var schemaTypes = map[string]reflect.Type{
	"VerifierKey":                reflect.TypeFor[keyring.Key](),
	"CheckRequest":               reflect.TypeFor[writ.CheckRequest](),
	"RetractRequest":             reflect.TypeFor[writ.RetractRequest](),
	"FeedbackRequest":            reflect.TypeFor[writ.FeedbackRequest](),
	"AnnotationAck":              reflect.TypeFor[writ.AnnotationAck](),
	"RecordLinks":                reflect.TypeFor[writ.RecordLinks](),
	"LastReplay":                 reflect.TypeFor[writ.LastReplay](),
	"Actor":                      reflect.TypeFor[writ.Actor](),
	"ActorRef":                   reflect.TypeFor[writ.ActorRef](),
	"InputsRefs":                 reflect.TypeFor[writ.InputsRefs](),
	"WorkflowRef":                reflect.TypeFor[writ.WorkflowRef](),
	"Evidence":                   reflect.TypeFor[writ.Evidence](),
	"Usage":                      reflect.TypeFor[writ.Usage](),
	"ToolLineage":                reflect.TypeFor[writ.ToolLineage](),
	"HistoryValue":               reflect.TypeFor[writ.HistoryValue](),
	"MeteredUsage":               reflect.TypeFor[writ.MeteredUsage](),
	"ContextSource":              reflect.TypeFor[writ.ContextSource](),
	"CallerLineage":              reflect.TypeFor[writ.CallerLineage](),
	"Receipt":                    reflect.TypeFor[writ.Receipt](),
	"Reason":                     reflect.TypeFor[writ.Reason](),
	"Condition":                  reflect.TypeFor[writ.Condition](),
	"Disposition":                reflect.TypeFor[writ.Disposition](),
	"Routing":                    reflect.TypeFor[writ.Routing](),
	"ResumeContract":             reflect.TypeFor[writ.ResumeContract](),
	"RuntimeLoopback":            reflect.TypeFor[writ.RuntimeLoopback](),
	"ReceiptMetadata":            reflect.TypeFor[writ.Metadata](),
	"Record":                     reflect.TypeFor[writ.Record](),
	"PolicyDecision":             reflect.TypeFor[writ.PolicyDecision](),
	"Approval":                   reflect.TypeFor[writ.Approval](),
	"ControlsActive":             reflect.TypeFor[writ.ControlsActive](),
	"Lineage":                    reflect.TypeFor[writ.Lineage](),
	"Replay":                     reflect.TypeFor[writ.Replay](),
	"Bound":                      reflect.TypeFor[writ.Bound](),
	"Audit":                      reflect.TypeFor[writ.Audit](),
	"Problem":                    reflect.TypeFor[problem](),
	"ProblemDetail":              reflect.TypeFor[writ.Detail](),
	"Health":                     reflect.TypeFor[HealthReport](),
	"Identity":                   reflect.TypeFor[Identity](),
	"Checkpoint":                 reflect.TypeFor[writ.Checkpoint](),
	"InclusionProof":             reflect.TypeFor[writ.InclusionProof](),
	"ConsistencyProof":           reflect.TypeFor[writ.ConsistencyProof](),
	"StartRunRequest":            reflect.TypeFor[writ.StartRunRequest](),
	"AttemptBody":                reflect.TypeFor[attemptBody](),
	"ToolCallClaim":              reflect.TypeFor[writ.ToolCallClaim](),
	"StepVerdict":                reflect.TypeFor[writ.StepVerdict](),
	"VerdictCheck":               reflect.TypeFor[writ.VerdictCheck](),
	"Run":                        reflect.TypeFor[writ.Run](),
	"RunPage":                    reflect.TypeFor[writ.RunPage](),
	"ShadowReport":               reflect.TypeFor[writ.ShadowReport](),
	"LatencyStats":               reflect.TypeFor[writ.LatencyStats](),
	"LedgerWitnesses":            reflect.TypeFor[writ.LedgerWitnesses](),
	"CheckpointHead":             reflect.TypeFor[writ.CheckpointHead](),
	"WitnessLag":                 reflect.TypeFor[writ.WitnessLag](),
	"LatencyWindow":              reflect.TypeFor[writ.LatencyWindow](),
	"LatencySummary":             reflect.TypeFor[writ.LatencySummary](),
	"ShadowPack":                 reflect.TypeFor[writ.ShadowPack](),
	"OutcomeTransition":          reflect.TypeFor[writ.OutcomeTransition](),
	"RunSummary":                 reflect.TypeFor[writ.RunSummary](),
	"RunEvent":                   reflect.TypeFor[writ.RunEvent](),
	"ApprovalRequest":            reflect.TypeFor[writ.ApprovalRequest](),
	"ApprovalBinding":            reflect.TypeFor[writ.ApprovalBinding](),
	"Requester":                  reflect.TypeFor[writ.Requester](),
	"ApprovalDecision":           reflect.TypeFor[writ.ApprovalDecision](),
	"Execution":                  reflect.TypeFor[writ.Execution](),
	"ExecutionError":             reflect.TypeFor[writ.ExecutionError](),
	"TranscriptEntry":            reflect.TypeFor[writ.TranscriptEntry](),
	"TranscriptCall":             reflect.TypeFor[writ.TranscriptCall](),
	"ExecutionReport":            reflect.TypeFor[writ.ExecutionReport](),
	"ExecutionAck":               reflect.TypeFor[writ.ExecutionAck](),
	"ParamsPin":                  reflect.TypeFor[writ.ParamsPin](),
	"SetParamsRequest":           reflect.TypeFor[writ.SetParamsRequest](),
	"ParamsState":                reflect.TypeFor[writ.ParamsState](),
	"EraseRequest":               reflect.TypeFor[writ.EraseRequest](),
	"Erasure":                    reflect.TypeFor[writ.Erasure](),
	"AddEvidenceRequest":         reflect.TypeFor[writ.AddEvidenceRequest](),
	"RevokeEvidenceRequest":      reflect.TypeFor[writ.RevokeEvidenceRequest](),
	"StoredEvidence":             reflect.TypeFor[writ.StoredEvidence](),
	"EvidenceRevocation":         reflect.TypeFor[writ.EvidenceRevocation](),
	"EvidenceObservation":        reflect.TypeFor[writ.EvidenceObservation](),
	"EvidenceItem":               reflect.TypeFor[writ.EvidenceItem](),
	"ResumeBody":                 reflect.TypeFor[resumeBody](),
	"DecisionStory":              reflect.TypeFor[writ.DecisionStory](),
	"InFlightPage":               reflect.TypeFor[writ.InFlightPage](),
	"ApprovalEvent":              reflect.TypeFor[writ.ApprovalEvent](),
	"ApprovalPage":               reflect.TypeFor[writ.ApprovalPage](),
	"DecideApprovalBody":         reflect.TypeFor[decideBody](),
	"WithdrawApprovalBody":       reflect.TypeFor[withdrawBody](),
	"APIKey":                     reflect.TypeFor[wireKey](),
	"PackInForce":                reflect.TypeFor[wirePack](),
	"PackBundle":                 reflect.TypeFor[wireBundle](),
	"PackRule":                   reflect.TypeFor[wireRule](),
	"CreateAPIKeyBody":           reflect.TypeFor[createKeyBody](),
	"RevokeAPIKeyBody":           reflect.TypeFor[revokeKeyBody](),
	"ReplayResult":               reflect.TypeFor[writ.ReplayResult](),
	"ReplayDifference":           reflect.TypeFor[writ.ReplayDifference](),
	"ReplayResults":              reflect.TypeFor[replayResults](),
	"AuthZENSubject":             reflect.TypeFor[azSubject](),
	"AuthZENAction":              reflect.TypeFor[azAction](),
	"AuthZENResource":            reflect.TypeFor[azResource](),
	"AuthZENEvaluation":          reflect.TypeFor[azEvaluation](),
	"AuthZENEvaluations":         reflect.TypeFor[azEvaluations](),
	"AuthZENDecision":            reflect.TypeFor[azDecision](),
	"AuthZENEvaluationsResponse": reflect.TypeFor[azBatchResponse](),
	"AuthZENMetadata":            reflect.TypeFor[AuthZENMetadata](),
	"Ready":                      reflect.TypeFor[ReadyReport](),
	"ReadyCheck":                 reflect.TypeFor[ReadyCheck](),
}

// scopedTenant lists the schemas whose tenant_id Go always encodes but the
// document does not require: with an API key, the server fills it in.
var scopedTenant = []string{"CheckRequest", "StartRunRequest", "ExecutionReport"}

// goFields lists the json names of t's fields, and those without omitempty
// (always present when encoded).
func goFields(t reflect.Type) (names, always []string) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			always = append(always, name)
		}
	}
	slices.Sort(names)
	slices.Sort(always)
	return names, always
}

func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := obj(t, doc, "components", "schemas")
	for name, s := range schemas {
		s := s.(map[string]any)
		if s["type"] != "object" {
			continue
		}
		typ, ok := schemaTypes[name]
		if !ok {
			// RecordPage is encoded by hand (recordPageJSON);
			// AuthZENCheckContext is a CheckRequest restricted by
			// propertyNames.
			if name != "RecordPage" && name != "AuthZENCheckContext" {
				t.Errorf("schema %s describes no Go type; add it to schemaTypes", name)
			}
			continue
		}
		names, always := goFields(typ)
		if slices.Contains(scopedTenant, name) {
			always = slices.DeleteFunc(always, func(n string) bool { return n == paramTenantID })
		}
		props := slices.Sorted(maps.Keys(obj(t, s, "properties")))
		if !slices.Equal(props, names) {
			t.Errorf("schema %s properties = %q, want the json names of %s: %q", name, props, typ, names)
		}
		var required []string
		reqs, _ := s["required"].([]any)
		for _, r := range reqs {
			required = append(required, r.(string))
		}
		if slices.Sort(required); !slices.Equal(required, always) {
			t.Errorf("schema %s required = %q, want the fields %s always encodes: %q", name, required, typ, always)
		}
	}
	for name := range schemaTypes {
		if _, ok := schemas[name]; !ok {
			t.Errorf("schemaTypes names %s, which the document does not define", name)
		}
	}
}

func TestOpenAPIEnumsMatchGo(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := obj(t, doc, "components", "schemas")
	tests := []struct {
		path []string
		want []string
	}{
		{[]string{"ApprovalMode"}, strs(writ.ModeReadOnly, writ.ModeLocalWrite, writ.ModeNetwork, writ.ModeDelegated, writ.ModeDestructive)},
		{[]string{"Actor", "properties", "type"}, strs(writ.ActorAgent, writ.ActorHuman, writ.ActorService)},
		{[]string{"Outcome"}, strs(writ.OutcomeAllow, writ.OutcomeAllowWithWarning, writ.OutcomeReplanRequired, writ.OutcomeGoalFailTerminal)},
		{[]string{"DispositionMode"}, strs(writ.ModeContinueDownstream, writ.ModeLocalReplan, writ.ModeUpstreamReplan, writ.ModeHumanReview, writ.ModeTerminalBlock)},
		{[]string{"Routing", "properties", "direction"}, strs(writ.DirectionDownstream, writ.DirectionLocal, writ.DirectionUpstream, writ.DirectionHuman, writ.DirectionStop)},
		{[]string{"Condition", "properties", "kind"}, strs(writ.ConditionEvidence, writ.ConditionApproval, writ.ConditionExpression, writ.ConditionBudget)},
		{[]string{"ReceiptMetadata", "properties", "repeated"}, strs(writ.RepeatedIdempotent, writ.RepeatedMustNotRetry, writ.RepeatedStillWaiting)},
		{[]string{"RecordStatus"}, strs(writ.StatusDecided, writ.StatusDeferred, writ.StatusRejected, writ.StatusEscalated, writ.StatusInFlight, writ.StatusClosed)},
		{[]string{"Problem", "properties", "code"}, slices.Collect(maps.Keys(problemKinds))},
		{[]string{"StepVerdict", "properties", "state"}, strs(writ.VerdictAccepted, writ.VerdictAcceptedWithWarnings, writ.VerdictRetry, writ.VerdictAborted, writ.VerdictEscalated)},
		{[]string{"Run", "properties", "status"}, strs(writ.RunActive, writ.RunCompleted, writ.RunAborted, writ.RunEscalated)},
		{[]string{"RunSummary", "properties", "status"}, writ.RunStatuses},
		{[]string{"RunEvent", "properties", "kind"}, strs(ledger.RunStarted, ledger.CallObserved, ledger.CallExecuted, ledger.StepAttempt)},
		{[]string{"VerdictCheck", "properties", "kind"}, strs("evidence", "tool_call")}, // acceptance.KindEvidence, KindToolCall
		{[]string{"ApprovalState"}, approvalStates},
		{[]string{"ApprovalDecision", "properties", "decision"}, strs(writ.ApprovalApproved, writ.ApprovalDenied, writ.ApprovalWithdrawn)},
		{[]string{"ApprovalEvent", "properties", "kind"}, strs(writ.ApprovalEventApproved, writ.ApprovalEventDenied, writ.ApprovalEventWithdrawn, writ.ApprovalEventRedeemed)},
		{[]string{"Health", "properties", "auth"}, strs(AuthAPIKeys, AuthDisabled)},
		{[]string{"ReplayResult", "properties", "status"}, strs(writ.ReplayEqual, writ.ReplayDiff, writ.ReplayError, writ.ReplayInputsErased)},
		{[]string{"ReplayResult", "properties", "status"}, replayStatuses},
		{[]string{"ReplayResult", "properties", "kind"}, strs(replay.KindCheck, replay.KindStepVerdict, replay.KindApprovalDecision, replay.KindExecutionReport, replay.KindParamsChange, replay.KindErasure,
			replay.KindEvidence, replay.KindRetraction, replay.KindFeedback, replay.KindReplayResult)},
		{[]string{"ReplayClass"}, strs(replay.ClassEvidence, replay.ClassPolicy, replay.ClassToolTranscript, replay.ClassCompiledContext,
			replay.ClassScorecard, replay.ClassHistory, replay.ClassParams, replay.ClassRecord, replay.ClassTamper)},
	}
	for _, tt := range tests {
		var got []string
		for _, v := range obj(t, schemas, tt.path...)["enum"].([]any) {
			got = append(got, v.(string))
		}
		slices.Sort(got)
		slices.Sort(tt.want)
		if !slices.Equal(got, tt.want) {
			t.Errorf("enum of %s = %q, want %q", strings.Join(tt.path, "."), got, tt.want)
		}
	}
	if got := obj(t, schemas, "Receipt", "properties", "receipt_type")["const"]; got != writ.ReceiptType {
		t.Errorf("Receipt receipt_type const = %v, want %q", got, writ.ReceiptType)
	}
}

func strs[S ~string](v ...S) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = string(s)
	}
	return out
}

// compileSchemas compiles the document's component schemas (OpenAPI 3.1
// schemas are JSON Schema 2020-12) with format assertions on. The whole
// document is one resource, so "#/components/schemas/X" references
// resolve as they are.
func compileSchemas(t testing.TB) func(name string) *jsonschema.Schema {
	t.Helper()
	return compileDocument(t, nil)
}

// compileDocument is compileSchemas of the document as edit leaves it
// (nil: as it is).
func compileDocument(t testing.TB, edit func(doc map[string]any)) func(name string) *jsonschema.Schema {
	t.Helper()
	doc := loadOpenAPI(t)
	if edit != nil {
		edit(doc)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	const url = "https://writ.invalid/openapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(url, compiled); err != nil {
		t.Fatal(err)
	}
	return func(name string) *jsonschema.Schema {
		t.Helper()
		s, err := c.Compile(url + "#/components/schemas/" + name)
		if err != nil {
			t.Fatalf("compile schema %s: %v", name, err)
		}
		return s
	}
}

// validate checks the JSON body against a schema.
func validate(s *jsonschema.Schema, body []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenAPIValidatesGoValues(t *testing.T) {
	schema := compileSchemas(t)
	valid := []struct {
		schema string
		body   []byte
	}{
		{"CheckRequest", mustJSON(t, fullCheckRequest())},
		{"CheckRequest", []byte(`{"tenant_id":"t","actor":{"type":"HUMAN","id":"u"}}`)},
		{"CheckRequest", []byte(`{"actor":{"type":"HUMAN","id":"u"}}`)},
		{"CheckRequest", mustJSON(t, &writ.CheckRequest{Actor: writ.Actor{Type: writ.ActorAgent, ID: "a"}, ApprovalIDs: []string{"apr_1"}})},
		{"Receipt", mustJSON(t, fullReceipt())},
		{"Record", mustJSON(t, fullRecord())},
		{"Record", storedRecord(fullRecord()).Raw},
		{"ProblemDetail", mustJSON(t, writ.Detail{Field: "a", File: "b", Line: 1, Message: "c"})},
		{"Health", mustJSON(t, HealthReport{Status: HealthOK, Version: "v", Pack: "p@1", PackHash: "h", Store: "sqlite", Auth: AuthAPIKeys})},
		{"Health", mustJSON(t, HealthReport{Status: HealthOK, Auth: AuthDisabled, Warning: devModeWarning})},
		{"ApprovalRequest", mustJSON(t, fullApproval())},
		{"ApprovalRequest", mustJSON(t, wireApproval(&writ.ApprovalRequest{
			ApprovalID: "apr_2", TenantID: "t", GateID: "escalation:R1", Terminal: true, ApprovalModeEffective: writ.ModeNetwork,
			RequestedBy: writ.Requester{ActorID: "a"}, CreatedAt: testTime, ExpiresAt: testTime, Allowance: 1, State: writ.ApprovalPending,
		}))},
		{"ApprovalRequest", mustJSON(t, func() *writ.ApprovalRequest {
			a := fullApproval()
			a.State, a.Decision.Decision, a.Decision.ValidUntil = writ.ApprovalDenied, writ.ApprovalDenied, time.Time{}
			a.Events = a.Events[:1]
			a.Events[0].Kind = writ.ApprovalEventDenied
			return a
		}())},
		{"ApprovalPage", mustJSON(t, wireApprovalPage(fullApprovals().approvals))},
		{"ApprovalPage", mustJSON(t, wireApprovalPage(&writ.ApprovalPage{}))},
		{"DecideApprovalBody", mustJSON(t, decideBodyOf(&writ.DecideApprovalRequest{TenantID: "t", ApprovalID: "apr_1", Decision: writ.ApprovalApproved, Approver: "maria", Reason: "ok", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}))},
		{"DecideApprovalBody", []byte(`{"reason":"ok"}`)},
		{"WithdrawApprovalBody", []byte(`{}`)},
		{"WithdrawApprovalBody", []byte(`{"tenant_id":"t","reason":"not needed","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`)},
		{"Receipt", mustJSON(t, func() *writ.Receipt {
			r := fullReceipt()
			r.Metadata.ApprovalIDs = []string{"apr_1"}
			r.WhatWouldChangeThisConditions[0].ApprovalID = "apr_1"
			return r
		}())},
		{"Checkpoint", mustJSON(t, fullCheckpoint(7))},
		{"InclusionProof", mustJSON(t, fullInclusionProof())},
		{"InclusionProof", mustJSON(t, &writ.InclusionProof{TenantID: "t", RecordID: "r", Seq: 1, TreeSize: 1, LeafHash: testHash(1), Proof: []string{}, Checkpoint: *fullCheckpoint(1)})},
		{"ConsistencyProof", mustJSON(t, fullConsistencyProof())},
		{"StartRunRequest", mustJSON(t, fullStartRunRequest())},
		{"StartRunRequest", []byte(`{"tenant_id":"t","workflow_id":"w"}`)},
		{"AttemptBody", mustJSON(t, attemptBodyOf(fullAttemptRequest()))},
		{"AttemptBody", []byte(`{"actor":{"type":"AGENT","id":"a"},"result":{}}`)},
		{"StepVerdict", mustJSON(t, fullVerdict())},
		{"StepVerdict", mustJSON(t, wireVerdict(&writ.StepVerdict{RunID: "r", StepID: "s", State: writ.VerdictAccepted, DecisionID: "d", RecordID: "dr"}))},
		{"Run", mustJSON(t, fullRun())},
		{"RunPage", mustJSON(t, fullRunPage())},
		{"RunPage", []byte(`{"runs":[]}`)},
		{"ShadowReport", mustJSON(t, fullShadowReport())},
		{"ShadowReport", []byte(`{"tenant_id":"t","packs":[],"decisions":0,"changed":0,"transitions":[]}`)},
		{"LatencyStats", mustJSON(t, fullLatency("t"))},
		{"LatencyStats", []byte(`{"tenant_id":"t","window_seconds":60,"since":"2026-11-29T06:00:00Z","windows":[]}`)},
		{"Run", mustJSON(t, wireRun(&writ.Run{TenantID: "t", RunID: "r", WorkflowID: "w", WorkflowVersion: "1", Pack: "p@1", PackHash: "h", Status: writ.RunCompleted, StartedAt: testTime}))},
		{"ReplayResult", mustJSON(t, equalReplay())},
		{"ReplayResult", mustJSON(t, diffReplay())},
		{"ReplayResult", mustJSON(t, errorReplay())},
		{"ReplayResult", mustJSON(t, &writ.ReplayResult{TenantID: "t", RecordID: "r", Status: writ.ReplayDiff, Classes: []string{replay.ClassTamper},
			Differences: []writ.ReplayDifference{{Class: replay.ClassTamper, Path: "audit.record_hash", Recorded: json.RawMessage(`null`), Replayed: json.RawMessage(`[1,{"a":true}]`)}}})},
		{"ReplayResults", mustJSON(t, replayResults{Results: fullReplays().replays})},
	}
	for _, tt := range valid {
		if err := validate(schema(tt.schema), tt.body); err != nil {
			t.Errorf("%s does not validate %s:\n%v", tt.schema, tt.body, err)
		}
	}

	// The schemas are strict enough to reject what Go would not produce.
	full := string(mustJSON(t, fullReceipt()))
	invalid := []struct {
		schema string
		body   string
	}{
		{"Receipt", strings.Replace(full, `"outcome":"replan_required"`, `"outcome":"maybe"`, 1)},
		{"Receipt", strings.Replace(full, `"receipt_type":"verifiedx_decision_receipt"`, `"receipt_type":"other"`, 1)},
		{"Receipt", strings.Replace(full, `"reasons":`, `"reason":`, 1)},
		{"Receipt", strings.Replace(full, `"direction":"upstream"`, `"direction":"sideways"`, 1)},
		{"Receipt", strings.Replace(full, `"safe_to_execute":false`, `"safe_to_execute":"no"`, 1)},
		{"CheckRequest", `{"tenant_id":"t","actor":{"type":"ROBOT","id":"a"}}`},
		{"CheckRequest", `{"tenant_id":"t","actor":{"type":"AGENT","id":"a"},"approval_mode":"yolo"}`},
		{"CheckRequest", `{"tenant_id":"t","actor":{"type":"AGENT","id":"a"},"extra":1}`},
		{"CheckRequest", `{"tenant_id":"t","actor":{"type":"AGENT","id":"a"},"evidence":[{"kind":"k","id":"i","observed_at":"soon"}]}`},
		{"CheckRequest", `{"actor":{"type":"AGENT","id":"a"},"approval_ids":"apr_1"}`},
		{"ApprovalRequest", strings.Replace(string(mustJSON(t, fullApproval())), `"state":"approved"`, `"state":"granted"`, 1)},
		{"ApprovalRequest", strings.Replace(string(mustJSON(t, fullApproval())), `"kind":"redeemed"`, `"kind":"used"`, 1)},
		{"ApprovalRequest", strings.Replace(string(mustJSON(t, fullApproval())), `"events":[`, `"events":null,"x":[`, 1)},
		{"ApprovalRequest", strings.Replace(string(mustJSON(t, fullApproval())), `"binding":{`, `"binding":{"extra":1,`, 1)},
		{"ApprovalPage", `{"approvals":[{}]}`},
		{"DecideApprovalBody", `{"reason":"ok","decision":"approved"}`},
		{"DecideApprovalBody", `{"reason":""}`},
		{"DecideApprovalBody", `{"approver":"maria"}`},
		{"Health", `{"status":"ok","auth":"maybe"}`},
		{"Health", `{"status":"ok"}`},
		{"Record", strings.Replace(string(mustJSON(t, fullRecord())), `"status":"DECIDED"`, `"status":"DONE"`, 1)},
		{"Checkpoint", strings.Replace(string(mustJSON(t, fullCheckpoint(7))), `"tree_size":7`, `"tree_size":"7"`, 1)},
		{"Checkpoint", strings.Replace(string(mustJSON(t, fullCheckpoint(7))), `"root_hash":"`, `"root_hash":"x`, 1)},
		{"Checkpoint", strings.Replace(string(mustJSON(t, fullCheckpoint(7))), `"note":`, `"signed_note":`, 1)},
		{"InclusionProof", strings.Replace(string(mustJSON(t, fullInclusionProof())), `"seq":5`, `"seq":0`, 1)},
		{"InclusionProof", strings.Replace(string(mustJSON(t, fullInclusionProof())), `"proof":["`, `"proof":["AAAA","`, 1)},
		{"ConsistencyProof", strings.Replace(string(mustJSON(t, fullConsistencyProof())), `"old_size":3,`, ``, 1)},
		{"ConsistencyProof", strings.Replace(string(mustJSON(t, fullConsistencyProof())), `"new":{`, `"new":{"extra":1,`, 1)},
		{"StartRunRequest", `{"tenant_id":"t"}`},
		{"StartRunRequest", `{"tenant_id":"t","workflow_id":"w","context":[]}`},
		{"AttemptBody", `{"actor":{"type":"AGENT","id":"a"},"result":{},"run_id":"r"}`},
		{"AttemptBody", `{"actor":{"type":"AGENT","id":"a"},"result":{},"tool_calls":[{"args":{}}]}`},
		{"AttemptBody", `{"actor":{"type":"AGENT","id":"a"}}`},
		{"StepVerdict", strings.Replace(string(mustJSON(t, fullVerdict())), `"state":"retry"`, `"state":"maybe"`, 1)},
		{"StepVerdict", strings.Replace(string(mustJSON(t, fullVerdict())), `"kind":"tool_call"`, `"kind":"vibe"`, 1)},
		{"Run", strings.Replace(string(mustJSON(t, fullRun())), `"status":"active"`, `"status":"paused"`, 1)},
		{"Run", strings.Replace(string(mustJSON(t, fullRun())), `"kind":"call_observed"`, `"kind":"call"`, 1)},
		{"Run", strings.Replace(string(mustJSON(t, fullRun())), `"started_at":"`, `"started_at":"x`, 1)},
		{"ReplayResult", strings.Replace(string(mustJSON(t, equalReplay())), `"status":"replay_equal"`, `"status":"equal"`, 1)},
		{"ReplayResult", strings.Replace(string(mustJSON(t, equalReplay())), `"status":"replay_equal"`, `"outcome":"replay_equal"`, 1)},
		{"ReplayResult", strings.Replace(string(mustJSON(t, equalReplay())), `"kind":"check"`, `"kind":"receipt"`, 1)},
		{"ReplayResult", strings.Replace(string(mustJSON(t, diffReplay())), `"class":"changed_policy"`, `"class":"changed_mood"`, 1)},
		{"ReplayResult", strings.Replace(string(mustJSON(t, diffReplay())), `"classes":["changed_policy"`, `"classes":["policy"`, 1)},
		{"ReplayResult", strings.Replace(string(mustJSON(t, diffReplay())), `"path":"outputs.outcome"`, `"path":"outputs.outcome","line":3`, 1)},
		{"ReplayResults", `{"results":[]}`},
		{"ReplayResults", `{"results":[{"tenant_id":"t","record_id":"r"}]}`},
	}
	for _, tt := range invalid {
		if err := validate(schema(tt.schema), []byte(tt.body)); err == nil {
			t.Errorf("%s validates %s, want an error", tt.schema, tt.body)
		}
	}
}

// TestOpenAPIDescribesServerAnswers validates what the server actually
// sends against the documented response schemas, and checks that the
// document declares each answer's status and media type for its route.
func TestOpenAPIDescribesServerAnswers(t *testing.T) {
	doc := loadOpenAPI(t)
	schema := compileSchemas(t)
	bare := &writ.Receipt{ // nil lists: the server must still send arrays
		ReceiptType: writ.ReceiptType, DecisionID: "d", Outcome: writ.OutcomeAllow, ActionClass: "memory_write",
		SafeToExecute: true, Disposition: writ.Disposition{Mode: writ.ModeContinueDownstream, DownstreamAllowed: true},
		Routing: writ.Routing{Direction: writ.DirectionDownstream}, Metadata: writ.Metadata{RecordID: "r"},
	}
	stored := storedRecord(fullRecord())
	notFound := &fakeService{err: writ.Errorf(writ.ENOTFOUND, "no checkpoint yet")}
	noteReq := newRequest(http.MethodGet, "/v1/ledger/checkpoint?tenant_id=t", "")
	noteReq.Header.Set("Accept", "text/plain")
	attempt := func(body string) *http.Request {
		return newRequest(http.MethodPost, "/v1/runs/run_1/steps/visual_check/attempts?tenant_id=acme", body)
	}
	const attemptBody = `{"actor":{"type":"AGENT","id":"a"},"result":{}}`
	const decide = `{"reason":"Invoice checked.","approver":"maria"}`
	withKey := func(req *http.Request, key string) *http.Request {
		req.Header.Set("Authorization", "Bearer "+key)
		return req
	}
	tests := []struct {
		svc         *fakeService
		noLedger    bool
		noWorkflows bool
		noApprovals bool
		noReplays   bool
		auth        bool // the server authenticates callers (testKeys)
		req         *http.Request
		status      int
		schema      string // "" for a body that is not JSON
	}{
		{svc: &fakeService{receipt: bare}, req: newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`), status: 200, schema: "Receipt"},
		{svc: &fakeService{receipt: fullReceipt(), err: writ.Errorf(writ.EUNAVAILABLE, "x")}, req: newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`), status: 503, schema: "Receipt"},
		{svc: &fakeService{}, req: newRequest(http.MethodPost, "/v1/check", `{"tenant_id":1,"x":[]}`), status: 400, schema: "Problem"},
		{svc: &fakeService{err: errors500{}}, req: newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"t"}`), status: 500, schema: "Problem"},
		{svc: &fakeService{}, req: newRequest(http.MethodGet, "/v1/nowhere", ""), status: 404, schema: "Problem"},
		{svc: &fakeService{receipt: bare}, req: newRequest(http.MethodPost, "/access/v1/evaluation", azSampleAcme), status: 200, schema: "AuthZENDecision"},
		{svc: &fakeService{receipt: fullReceipt(), err: writ.Errorf(writ.EUNAVAILABLE, "x")}, req: newRequest(http.MethodPost, "/access/v1/evaluation", azSampleAcme), status: 503, schema: "Problem"},
		{svc: &fakeService{receipt: fullReceipt(), err: writ.Errorf(writ.EUNAVAILABLE, "x")}, req: newRequest(http.MethodPost, "/access/v1/evaluations", `{"context":{"tenant_id":"acme"},"evaluations":[`+azSample+`,`+azSample+`]}`), status: 200, schema: "AuthZENEvaluationsResponse"},
		{svc: &fakeService{receipt: bare}, req: newRequest(http.MethodPost, "/access/v1/evaluations", `{"context":{"tenant_id":"acme"},"evaluations":[`+azSample+`]}`), status: 200, schema: "AuthZENEvaluationsResponse"},
		{svc: &fakeService{}, req: newRequest(http.MethodPost, "/access/v1/evaluations", `{"evaluations":[]}`), status: 400, schema: "Problem"},
		{svc: &fakeService{}, req: newRequest(http.MethodGet, "/.well-known/authzen-configuration", ""), status: 200, schema: "AuthZENMetadata"},
		{svc: &fakeService{}, req: newRequest(http.MethodGet, "/readyz", ""), status: 200, schema: "Ready"},
		{svc: &fakeService{}, req: newRequest(http.MethodGet, "/metrics", ""), status: 200},
		{svc: &fakeService{record: stored}, req: newRequest(http.MethodGet, "/v1/records/r?tenant_id=t", ""), status: 200, schema: "Record"},
		{svc: &fakeService{page: &writ.RecordPage{Records: []writ.StoredRecord{*stored, *stored}, NextCursor: "n"}}, req: newRequest(http.MethodGet, "/v1/records?tenant_id=t", ""), status: 200, schema: "RecordPage"},
		{svc: &fakeService{page: &writ.RecordPage{}}, req: newRequest(http.MethodGet, "/v1/records?tenant_id=t", ""), status: 200, schema: "RecordPage"},
		{svc: &fakeService{}, req: newRequest(http.MethodGet, "/healthz", ""), status: 200, schema: "Health"},
		{svc: fullLedger(), req: newRequest(http.MethodGet, "/v1/ledger/checkpoint?tenant_id=t&size=7", ""), status: 200, schema: "Checkpoint"},
		{svc: fullLedger(), req: noteReq, status: 200},
		{svc: fullLedger(), req: newRequest(http.MethodPost, "/v1/ledger/checkpoint?tenant_id=t", ""), status: 200, schema: "Checkpoint"},
		{svc: fullLedger(), req: newRequest(http.MethodGet, "/v1/records/r/proof?tenant_id=t", ""), status: 200, schema: "InclusionProof"},
		{svc: fullLedger(), req: newRequest(http.MethodGet, "/v1/ledger/consistency?tenant_id=t&from=3&to=7", ""), status: 200, schema: "ConsistencyProof"},
		{svc: fullLedger(), req: newRequest(http.MethodGet, "/v1/ledger/consistency?tenant_id=t&from=7&to=3", ""), status: 400, schema: "Problem"},
		{svc: notFound, req: newRequest(http.MethodGet, "/v1/ledger/checkpoint?tenant_id=t", ""), status: 404, schema: "Problem"},
		{svc: notFound, req: newRequest(http.MethodPost, "/v1/ledger/checkpoint?tenant_id=t", ""), status: 404, schema: "Problem"},
		{svc: notFound, req: newRequest(http.MethodGet, "/v1/records/r/proof?tenant_id=t", ""), status: 404, schema: "Problem"},
		{svc: notFound, req: newRequest(http.MethodGet, "/v1/ledger/consistency?tenant_id=t&from=1", ""), status: 404, schema: "Problem"},
		{svc: fullLedger(), noLedger: true, req: newRequest(http.MethodGet, "/v1/records/r/proof?tenant_id=t", ""), status: 404, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.EUNAVAILABLE, "store down")}, req: newRequest(http.MethodGet, "/v1/ledger/consistency?tenant_id=t&from=1", ""), status: 503, schema: "Problem"},
		{svc: fullWorkflows(), req: newRequest(http.MethodPost, "/v1/runs", `{"tenant_id":"acme","workflow_id":"w"}`), status: 201, schema: "Run"},
		{svc: &fakeService{run: &writ.Run{TenantID: "acme", RunID: "run_1", Status: writ.RunActive}}, req: newRequest(http.MethodPost, "/v1/runs", `{"tenant_id":"acme","workflow_id":"w"}`), status: 201, schema: "Run"},
		{svc: fullWorkflows(), req: newRequest(http.MethodPost, "/v1/runs", `{"tenant_id":"acme","workflow":"w"}`), status: 400, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.ECONFLICT, "run run_1 already exists")}, req: newRequest(http.MethodPost, "/v1/runs", `{"tenant_id":"acme","workflow_id":"w","run_id":"run_1"}`), status: 409, schema: "Problem"},
		{svc: fullWorkflows(), noWorkflows: true, req: newRequest(http.MethodPost, "/v1/runs", `{"tenant_id":"acme","workflow_id":"w"}`), status: 404, schema: "Problem"},
		{svc: fullWorkflows(), req: newRequest(http.MethodPost, "/v1/runs", strings.Repeat(" ", DefaultMaxBodyBytes+1)), status: 413, schema: "Problem"},
		{svc: fullWorkflows(), req: newRequest(http.MethodGet, "/v1/runs/run_1?tenant_id=acme", ""), status: 200, schema: "Run"},
		{svc: &fakeService{err: writ.Errorf(writ.ENOTFOUND, "run run_1 not found")}, req: newRequest(http.MethodGet, "/v1/runs/run_1?tenant_id=acme", ""), status: 404, schema: "Problem"},
		{svc: fullWorkflows(), req: newRequest(http.MethodGet, "/v1/runs/run_1", ""), status: 400, schema: "Problem"},
		{svc: fullWorkflows(), req: attempt(attemptBody), status: 200, schema: "StepVerdict"},
		{svc: &fakeService{verdict: &writ.StepVerdict{RunID: "run_1", StepID: "visual_check", State: writ.VerdictAccepted}}, req: attempt(attemptBody), status: 200, schema: "StepVerdict"},
		{svc: fullWorkflows(), req: attempt(`{"actor":{"type":"AGENT","id":"a"},"result":{},"step_id":"x"}`), status: 400, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.ECONFLICT, "step visual_check is out of order")}, req: attempt(attemptBody), status: 409, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.ENOTFOUND, "run run_1 not found")}, req: attempt(attemptBody), status: 404, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.EUNAVAILABLE, "store down")}, req: attempt(attemptBody), status: 503, schema: "Problem"},
		{svc: &fakeService{err: errors500{}}, req: attempt(attemptBody), status: 500, schema: "Problem"},
		{svc: fullApprovals(), req: newRequest(http.MethodGet, "/v1/approvals?tenant_id=acme&state=pending&older_than=2h", ""), status: 200, schema: "ApprovalPage"},
		{svc: &fakeService{approvals: &writ.ApprovalPage{}}, req: newRequest(http.MethodGet, "/v1/approvals?tenant_id=acme", ""), status: 200, schema: "ApprovalPage"},
		{svc: fullApprovals(), req: newRequest(http.MethodGet, "/v1/approvals?tenant_id=acme&older_than=soon", ""), status: 400, schema: "Problem"},
		{svc: fullApprovals(), noApprovals: true, req: newRequest(http.MethodGet, "/v1/approvals?tenant_id=acme", ""), status: 404, schema: "Problem"},
		{svc: fullApprovals(), req: newRequest(http.MethodGet, "/v1/approvals/apr_1?tenant_id=acme", ""), status: 200, schema: "ApprovalRequest"},
		{svc: &fakeService{err: writ.Errorf(writ.ENOTFOUND, "approval apr_1 not found")}, req: newRequest(http.MethodGet, "/v1/approvals/apr_1?tenant_id=acme", ""), status: 404, schema: "Problem"},
		{svc: fullApprovals(), req: newRequest(http.MethodPost, "/v1/approvals/apr_1/approve", `{"tenant_id":"acme","reason":"ok","approver":"maria"}`), status: 200, schema: "ApprovalRequest"},
		{svc: fullApprovals(), req: newRequest(http.MethodPost, "/v1/approvals/apr_1/deny", `{"tenant_id":"acme","reason":"no","approver":"maria"}`), status: 200, schema: "ApprovalRequest"},
		{svc: fullApprovals(), req: newRequest(http.MethodPost, "/v1/approvals/apr_1/deny", `{"tenant_id":"acme","approver":"maria"}`), status: 400, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.ECONFLICT, "approval apr_1 was already approved")}, req: newRequest(http.MethodPost, "/v1/approvals/apr_1/approve", `{"tenant_id":"acme","reason":"ok","approver":"maria"}`), status: 409, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.EFORBIDDEN, "maria asked for approval apr_1 and may not approve it")}, req: newRequest(http.MethodPost, "/v1/approvals/apr_1/approve", `{"tenant_id":"acme","reason":"ok","approver":"maria"}`), status: 403, schema: "Problem"},
		{svc: fullApprovals(), req: func() *http.Request {
			req := newRequest(http.MethodPost, "/v1/approvals/apr_1/approve", "reason=ok")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return req
		}(), status: 415, schema: "Problem"},
		{svc: fullApprovals(), auth: true, req: withKey(newRequest(http.MethodPost, "/v1/approvals/apr_1/approve", decide), "approver-key"), status: 200, schema: "ApprovalRequest"},
		{svc: fullApprovals(), auth: true, req: newRequest(http.MethodGet, "/v1/approvals", ""), status: 401, schema: "Problem"},
		{svc: fullApprovals(), auth: true, req: withKey(newRequest(http.MethodGet, "/v1/records", ""), "revoked-key"), status: 401, schema: "Problem"},
		{svc: fullApprovals(), auth: true, req: withKey(newRequest(http.MethodGet, "/v1/records", ""), "agent-key"), status: 403, schema: "Problem"},
		{svc: fullApprovals(), auth: true, req: withKey(newRequest(http.MethodPost, "/v1/check", `{"tenant_id":"globex"}`), "agent-key"), status: 403, schema: "Problem"},
		{svc: fullApprovals(), auth: true, req: withKey(newRequest(http.MethodPost, "/v1/runs", `{"workflow_id":"w"}`), "down-key"), status: 503, schema: "Problem"},
		{svc: fullApprovals(), auth: true, req: newRequest(http.MethodGet, "/healthz", ""), status: 200, schema: "Health"},
		{svc: fullReplays(), req: newRequest(http.MethodGet, "/v1/records/r1/replay?tenant_id=acme", ""), status: 200, schema: "ReplayResult"},
		{svc: &fakeService{replay: diffReplay()}, req: newRequest(http.MethodGet, "/v1/records/r2/replay?tenant_id=acme", ""), status: 200, schema: "ReplayResult"},
		{svc: &fakeService{replay: errorReplay()}, req: newRequest(http.MethodGet, "/v1/records/r3/replay?tenant_id=acme", ""), status: 200, schema: "ReplayResult"},
		{svc: fullReplays(), req: newRequest(http.MethodGet, "/v1/records/r1/replay", ""), status: 400, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.ENOTFOUND, "record r1 not found")}, req: newRequest(http.MethodGet, "/v1/records/r1/replay?tenant_id=acme", ""), status: 404, schema: "Problem"},
		{svc: fullReplays(), noReplays: true, req: newRequest(http.MethodGet, "/v1/records/r1/replay?tenant_id=acme", ""), status: 404, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.EUNAVAILABLE, "store down")}, req: newRequest(http.MethodGet, "/v1/records/r1/replay?tenant_id=acme", ""), status: 503, schema: "Problem"},
		{svc: &fakeService{err: errors500{}}, req: newRequest(http.MethodGet, "/v1/records/r1/replay?tenant_id=acme", ""), status: 500, schema: "Problem"},
		{svc: fullReplays(), auth: true, req: withKey(newRequest(http.MethodGet, "/v1/records/r1/replay", ""), "auditor-key"), status: 200, schema: "ReplayResult"},
		{svc: fullReplays(), auth: true, req: withKey(newRequest(http.MethodGet, "/v1/records/r1/replay", ""), "agent-key"), status: 403, schema: "Problem"},
		{svc: fullReplays(), auth: true, req: newRequest(http.MethodGet, "/v1/replay?trace_id="+testTraceID, ""), status: 401, schema: "Problem"},
		{svc: fullReplays(), req: newRequest(http.MethodGet, "/v1/replay?tenant_id=acme&trace_id="+testTraceID, ""), status: 200, schema: "ReplayResults"},
		{svc: fullReplays(), req: newRequest(http.MethodGet, "/v1/replay?tenant_id=acme&trace_id=4BF92F3577B34DA6A3CE929D0E0E4736", ""), status: 400, schema: "Problem"},
		{svc: fullReplays(), req: newRequest(http.MethodGet, "/v1/replay?tenant_id=acme", ""), status: 400, schema: "Problem"},
		{svc: &fakeService{err: writ.Errorf(writ.ENOTFOUND, "tenant acme has no records of trace %s", testTraceID)}, req: newRequest(http.MethodGet, "/v1/replay?tenant_id=acme&trace_id="+testTraceID, ""), status: 404, schema: "Problem"},
		{svc: fullReplays(), noReplays: true, req: newRequest(http.MethodGet, "/v1/replay?tenant_id=acme&trace_id="+testTraceID, ""), status: 404, schema: "Problem"},
	}
	for _, tt := range tests {
		cfg := Config{Ledger: tt.svc, Workflows: tt.svc, Approvals: tt.svc, Replays: tt.svc}
		if tt.noLedger {
			cfg.Ledger = nil
		}
		if tt.noWorkflows {
			cfg.Workflows = nil
		}
		if tt.noApprovals {
			cfg.Approvals = nil
		}
		if tt.noReplays {
			cfg.Replays = nil
		}
		if tt.auth {
			cfg.Authenticate = testKeys.authenticate
		}
		s, _ := newTestServer(tt.svc, cfg)
		rec := serve(s, tt.req)
		if rec.Code != tt.status {
			t.Errorf("%s %s = %d, want %d", tt.req.Method, tt.req.URL, rec.Code, tt.status)
			continue
		}
		if tt.schema != "" {
			if err := validate(schema(tt.schema), rec.Body.Bytes()); err != nil {
				t.Errorf("%s %s: the %d body does not validate against %s:\n%s\n%v", tt.req.Method, tt.req.URL, rec.Code, tt.schema, rec.Body, err)
			}
		}
		_, pattern := s.mux.Handler(tt.req)
		if pattern == "" {
			continue // no route: nothing in the document to compare with
		}
		method, path, _ := strings.Cut(pattern, " ")
		op := obj(t, doc, "paths", path, strings.ToLower(method))
		resp, ok := obj(t, op, "responses")[fmt.Sprint(rec.Code)]
		if !ok {
			t.Errorf("%s %s answered %d, which the document does not list for %s", tt.req.Method, tt.req.URL, rec.Code, pattern)
			continue
		}
		mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
		content, ok := resolve(t, doc, resp)["content"].(map[string]any)[mt].(map[string]any)
		if !ok {
			t.Errorf("%s %s answered %d with %s, which the document does not list for %s", tt.req.Method, tt.req.URL, rec.Code, mt, pattern)
			continue
		}
		ref, _ := obj(t, content, "schema")["$ref"].(string)
		if want := "#/components/schemas/" + tt.schema; tt.schema != "" && ref != want {
			t.Errorf("%s %s: the document says a %d %s is %q, want %q", tt.req.Method, tt.req.URL, rec.Code, mt, ref, want)
		}
	}
}

type errors500 struct{}

func (errors500) Error() string { return "boom" }
