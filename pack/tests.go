package pack

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/writhq/writ"
)

// TestsPattern is where a pack keeps its test files, relative to the
// pack root. Test files are not part of the pack: the manifest does not
// list them, so they are not in Pack.Files, Pack.Manifest or Pack.Hash.
// Adding or changing a test never changes what records pin.
const TestsPattern = "tests/*.yaml"

// TestFile is one file of pack tests (schema/test.schema.json).
type TestFile struct {
	// Path names the file in messages: joined to the pack dir.
	Path        string
	Description string
	// EvidenceStore are the file's own evidence items (its top-level
	// evidence_store), which every case's EvidenceStore begins with.
	EvidenceStore []*TestEvidence
	Cases         []*TestCase
}

// TestCase is one case: a check (Request, Approvals, Expect) or a
// workflow run (Run).
type TestCase struct {
	Name        string
	Description string
	// Now is the clock at the start of the case.
	Now time.Time
	// RequestFile is a JSON check request file (relative to the pack
	// root); Request, when also given, is a JSON merge patch (RFC 7386)
	// over it.
	RequestFile string
	// Request is the check request in the JSON data model (numbers are
	// json.Number).
	Request   map[string]any
	Approvals []*TestApproval
	// Before are checks decided on the case's ledger, in order, at Now,
	// before the case's own check (the decisions history aggregates
	// count).
	Before []*TestPrior
	// History are the history aggregates on file, by aggregate name: the
	// value each already holds, for every group the case reads, before
	// the case begins.
	History map[string]float64
	// Params are tenant parameter values set for the check's tenant
	// before the case begins (a parameter change record), checked
	// against the pack's parameters; nil keeps the defaults.
	Params map[string]any
	// EvidenceStore are the evidence items in the evidence store before
	// the case begins: the file's, then the case's own.
	EvidenceStore []*TestEvidence
	Expect        []Expectation
	Run           *TestRun

	Pos, RequestPos, ExpectPos, HistoryPos Pos
}

// TestEvidence is an evidence item in the evidence store before a case
// begins, submitted by an issuer key whose subject is Issuer (so its
// provenance is issued) and, when Revoked is set, revoked with that
// reason. TenantID "" is the tenant of the case's check.
type TestEvidence struct {
	Kind       string
	ID         string
	TenantID   string
	SubjectIDs []string
	Attributes map[string]any
	ObservedAt time.Time
	ExpiresAt  *time.Time
	Issuer     string
	Revoked    string
	Pos        Pos
}

// TestPrior is a check decided before a case's own: its request file,
// patched by Request (RFC 7396), decided Repeat times.
type TestPrior struct {
	RequestFile string
	Request     map[string]any
	Repeat      int
	Pos         Pos
}

// TestApproval is an approval on file: the approval request the check
// asks for at Gate, decided before the check is decided again with it.
type TestApproval struct {
	Gate     string
	Decision string // approved or denied
	Approver string
	Reason   string
	Pos      Pos
}

// Expectation is one field a case expects, with the value it wants.
// Want is in the JSON data model: string, bool, json.Number or []any of
// strings.
type Expectation struct {
	Field string
	Want  any
	Pos   Pos
}

// TestRun is a workflow run: the attempts at its steps, in order.
type TestRun struct {
	Workflow string
	TenantID string
	Context  map[string]any
	Attempts []*TestAttempt
	Pos      Pos
}

// TestAttempt is one attempt at a step, after the boundary checks
// (Calls) the agent made for the step.
type TestAttempt struct {
	Step string
	// After, when set, is how far the clock advances before the attempt
	// (0 attempts at once). When nil, the clock advances by the previous
	// verdict's retry_after_ms, as an agent that waits out the backoff.
	After     *time.Duration
	Calls     []*TestCall
	Result    map[string]any
	ToolCalls []writ.ToolCallClaim
	Expect    []Expectation
	Pos       Pos
}

// TestCall is a boundary check made for a run's step: when writ allows
// it, the run records it as a call writ observed.
type TestCall struct {
	Request map[string]any
	Expect  []Expectation
	Pos     Pos
}

// CheckIDs are the ids a case may name under expect.fired for p: rule
// ids, control ids, evidence.<kind> and budget.<dimension> of the specs,
// approval gate ids (a denied approval fires at its gate) and
// approval_mode_ceiling.
func (p *Pack) CheckIDs() map[string]bool {
	ids := map[string]bool{"approval_mode_ceiling": true}
	for id := range p.Gates {
		ids[id] = true
	}
	for _, b := range p.Bundles {
		for _, r := range b.Rules {
			ids[r.ID] = true
		}
	}
	for _, list := range [][]*Control{p.Controls.MustRefuse, p.Controls.MustEscalate} {
		for _, c := range list {
			ids[c.ID] = true
		}
	}
	for _, s := range p.Specs {
		for _, e := range s.RequiredEvidence {
			ids["evidence."+e.Kind] = true
		}
		if b := s.Budgets; b != nil {
			for dim, set := range map[string]bool{"tool_calls": b.ToolCalls != nil, "tokens": b.Tokens != nil, "cost_usd_cents": b.CostUSDCents != nil, "wall_clock_ms": b.WallClockMS != nil, "actor_tool_calls": b.ActorToolCalls != nil} {
				if set {
					ids["budget."+dim] = true
				}
			}
		}
	}
	return ids
}

// LoadTests loads the test files of the pack p, which was loaded from
// dir: every file matching TestsPattern, checked against the test
// schema and against p (workflows, steps, gates and check ids must
// exist). Every problem is reported with its file and line, as Load
// reports a pack's; a pack without test files has no tests (nil, nil).
func LoadTests(dir string, p *Pack) ([]*TestFile, error) {
	return LoadTestsFS(os.DirFS(dir), dir, p)
}

// LoadTestsFS is LoadTests over any fs.FS.
func LoadTestsFS(fsys fs.FS, dir string, p *Pack) ([]*TestFile, error) {
	l := &loader{fsys: fsys, dir: dir, files: map[string]*File{}}
	matches, err := fs.Glob(fsys, TestsPattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(matches)
	var out []*TestFile
	for _, rel := range matches {
		if f := l.loadTestFile(p, rel); f != nil {
			out = append(out, f)
		}
	}
	if len(l.problems) > 0 {
		return nil, &writ.Error{
			Code:    writ.EINVALID,
			Message: fmt.Sprintf("the tests of pack %s are invalid (%d %s)", dir, len(l.problems), plural(len(l.problems), "problem", "problems")),
			Details: l.problems,
		}
	}
	return out, nil
}

func (l *loader) loadTestFile(p *Pack, rel string) *TestFile {
	doc := l.read(rel, "test")
	if doc == nil {
		return nil
	}
	root := doc.value.(map[string]any)
	f := &TestFile{Path: doc.path}
	f.Description, _ = root["description"].(string)
	names := map[string]Pos{}
	ids := p.CheckIDs()
	onFile := l.testEvidence(doc, "", root)
	f.EvidenceStore = onFile
	for i, v := range root["cases"].([]any) {
		ptr := fmt.Sprintf("/cases/%d", i)
		c := l.testCase(doc, p, ids, ptr, v.(map[string]any))
		c.EvidenceStore = append(slices.Clone(onFile), c.EvidenceStore...)
		if prev, dup := names[c.Name]; dup {
			l.addf(l.pos(doc, ptr+"/name"), "case %q is already defined at %s", c.Name, prev)
		}
		names[c.Name] = c.Pos
		f.Cases = append(f.Cases, c)
	}
	return f
}

func (l *loader) testCase(doc *document, p *Pack, ids map[string]bool, ptr string, m map[string]any) *TestCase {
	c := &TestCase{Pos: l.pos(doc, ptr), RequestPos: l.pos(doc, ptr+"/request"), ExpectPos: l.pos(doc, ptr+"/expect"), HistoryPos: l.pos(doc, ptr+"/history")}
	c.Name, _ = m["name"].(string)
	c.Description, _ = m["description"].(string)
	now, err := time.Parse(time.RFC3339, m["now"].(string))
	if err != nil {
		l.addf(l.pos(doc, ptr+"/now"), "now: %q is not an RFC 3339 time", m["now"])
	}
	c.Now = now.UTC()
	c.RequestFile, _ = m["request_file"].(string)
	c.Request, _ = m["request"].(map[string]any)
	_, hasExpect := m["expect"]
	_, hasRequest := m["request"]
	isCheck := hasRequest || c.RequestFile != ""
	run, isRun := m["run"].(map[string]any)
	switch {
	case isCheck && isRun:
		l.addf(c.Pos, "case %q: a case is a check (request, request_file) or a run, not both", c.Name)
	case !isCheck && !isRun:
		l.addf(c.Pos, "case %q needs a request (or request_file) to check, or a run", c.Name)
	case isRun && (hasExpect || m["approvals"] != nil):
		l.addf(c.Pos, "case %q: a run case states its expectations on each attempt, not expect or approvals", c.Name)
	case isCheck && !hasExpect:
		l.addf(c.Pos, "case %q: a check case needs expect", c.Name)
	}
	if c.RequestFile != "" {
		if !fs.ValidPath(c.RequestFile) {
			l.addf(l.pos(doc, ptr+"/request_file"), "request_file %q is not a path inside the pack", c.RequestFile)
		} else if _, err := fs.Stat(l.fsys, path.Clean(c.RequestFile)); err != nil {
			l.addf(l.pos(doc, ptr+"/request_file"), "request_file %q: %v", c.RequestFile, unwrapPathError(err))
		}
	}
	for i, b := range asList(m["before"]) {
		bm := b.(map[string]any)
		bp := fmt.Sprintf("%s/before/%d", ptr, i)
		prior := &TestPrior{Repeat: 1, Pos: l.pos(doc, bp)}
		prior.RequestFile, _ = bm["request_file"].(string)
		prior.Request, _ = bm["request"].(map[string]any)
		if n, ok := bm["repeat"].(json.Number); ok {
			if v, err := n.Int64(); err == nil {
				prior.Repeat = int(v)
			}
		}
		if prior.RequestFile != "" {
			if !fs.ValidPath(prior.RequestFile) {
				l.addf(l.pos(doc, bp+"/request_file"), "request_file %q is not a path inside the pack", prior.RequestFile)
			} else if _, err := fs.Stat(l.fsys, path.Clean(prior.RequestFile)); err != nil {
				l.addf(l.pos(doc, bp+"/request_file"), "request_file %q: %v", prior.RequestFile, unwrapPathError(err))
			}
		}
		if isRun {
			l.addf(prior.Pos, "case %q: before belongs to a check case", c.Name)
		}
		c.Before = append(c.Before, prior)
	}
	for i, a := range asList(m["approvals"]) {
		am := a.(map[string]any)
		ta := &TestApproval{Pos: l.pos(doc, fmt.Sprintf("%s/approvals/%d", ptr, i))}
		ta.Gate, _ = am["gate"].(string)
		ta.Decision, _ = am["decision"].(string)
		ta.Approver, _ = am["approver"].(string)
		ta.Reason, _ = am["reason"].(string)
		if _, ok := p.Gates[ta.Gate]; !ok {
			l.addf(ta.Pos, "approval names gate %q, which the runtime controls do not define", ta.Gate)
		}
		c.Approvals = append(c.Approvals, ta)
	}
	if e, ok := m["expect"].(map[string]any); ok {
		c.Expect = l.expectations(doc, ids, ptr+"/expect", e)
	}
	if h, ok := m["history"].(map[string]any); ok {
		declared := map[string]bool{}
		for _, sp := range p.Specs {
			// The tool-call meter exists when a spec has a tool_calls budget.
			declared[MeterToolCalls] = declared[MeterToolCalls] || sp.Budgets != nil && sp.Budgets.ToolCalls != nil
			declared[MeterNoSession] = declared[MeterToolCalls]
			declared[MeterActorToolCalls] = declared[MeterActorToolCalls] || sp.Budgets != nil && sp.Budgets.ActorToolCalls != nil
		}
		for _, a := range p.History {
			declared[a.Name] = true
		}
		c.History = map[string]float64{}
		for name, v := range h {
			if !declared[name] {
				l.addf(l.pos(doc, ptr+"/history/"+escapePointer(name)), "history names aggregate %q, which pack.yaml does not declare", name)
				continue
			}
			f, err := v.(json.Number).Float64()
			if err != nil {
				l.addf(l.pos(doc, ptr+"/history/"+escapePointer(name)), "history %s: %v", name, err)
			}
			c.History[name] = f
		}
	}
	c.EvidenceStore = l.testEvidence(doc, ptr, m)
	if c.EvidenceStore != nil && isRun {
		l.addf(l.pos(doc, ptr+"/evidence_store"), "case %q: evidence_store belongs to a check case", c.Name)
	}
	if pm, ok := m["params"].(map[string]any); ok {
		if isRun {
			l.addf(l.pos(doc, ptr+"/params"), "case %q: params are set for a check case, not a run", c.Name)
		}
		values, err := p.CheckParams(pm)
		for _, d := range writ.ErrorDetails(err) {
			name := strings.TrimPrefix(d.Field, "values.")
			l.addf(l.pos(doc, ptr+"/params/"+escapePointer(name)), "params: %s", d.Message)
		}
		c.Params = values
	}
	if isRun {
		c.Run = l.testRun(doc, p, ids, ptr+"/run", run)
	}
	return c
}

func (l *loader) testRun(doc *document, p *Pack, ids map[string]bool, ptr string, m map[string]any) *TestRun {
	r := &TestRun{Pos: l.pos(doc, ptr)}
	r.Workflow, _ = m["workflow"].(string)
	r.TenantID, _ = m["tenant_id"].(string)
	r.Context, _ = m["context"].(map[string]any)
	w := p.Workflows[r.Workflow]
	if w == nil {
		l.addf(l.pos(doc, ptr+"/workflow"), "run names workflow %q, which the pack does not define", r.Workflow)
	}
	for i, a := range m["attempts"].([]any) {
		aptr := fmt.Sprintf("%s/attempts/%d", ptr, i)
		am := a.(map[string]any)
		at := &TestAttempt{Pos: l.pos(doc, aptr)}
		at.Step, _ = am["step"].(string)
		if w != nil && w.Step(at.Step) == nil {
			l.addf(l.pos(doc, aptr+"/step"), "attempt names step %q, which workflow %s does not define", at.Step, w.WorkflowID)
		}
		if s, ok := am["after"].(string); ok {
			d, err := time.ParseDuration(s)
			if err != nil {
				l.addf(l.pos(doc, aptr+"/after"), "%q is not a duration", s)
			}
			at.After = &d
		}
		at.Result, _ = am["result"].(map[string]any)
		if tc, ok := am["tool_calls"]; ok {
			b, _ := json.Marshal(tc)
			if err := json.Unmarshal(b, &at.ToolCalls); err != nil {
				l.addf(l.pos(doc, aptr+"/tool_calls"), "tool_calls: %v", err)
			}
		}
		for j, cv := range asList(am["calls"]) {
			cptr := fmt.Sprintf("%s/calls/%d", aptr, j)
			cm := cv.(map[string]any)
			call := &TestCall{Pos: l.pos(doc, cptr)}
			call.Request, _ = cm["request"].(map[string]any)
			if e, ok := cm["expect"].(map[string]any); ok {
				call.Expect = l.expectations(doc, ids, cptr+"/expect", e)
			}
			at.Calls = append(at.Calls, call)
		}
		at.Expect = l.expectations(doc, ids, aptr+"/expect", am["expect"].(map[string]any))
		r.Attempts = append(r.Attempts, at)
	}
	return r
}

// expectations turns an expect mapping into its fields, in file order.
// error excludes every other field: a refused request has no receipt.
func (l *loader) expectations(doc *document, ids map[string]bool, ptr string, m map[string]any) []Expectation {
	var out []Expectation
	for k, v := range m {
		out = append(out, Expectation{Field: k, Want: v, Pos: l.pos(doc, ptr+"/"+escapePointer(k))})
	}
	slices.SortFunc(out, func(a, b Expectation) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return strings.Compare(a.Field, b.Field)
	})
	if _, ok := m["error"]; ok && len(m) > 1 {
		l.addf(l.pos(doc, ptr+"/error"), "expect: error excludes every other field (a refused request has no receipt or verdict)")
	}
	if fired, ok := m["fired"].([]any); ok {
		for i, f := range fired {
			if id, _ := f.(string); !ids[id] {
				l.addf(l.pos(doc, fmt.Sprintf("%s/fired/%d", ptr, i)), "expect.fired names %q, which is not a rule, control, approval gate, evidence requirement (evidence.<kind>) or budget (budget.<dimension>) of the pack", id)
			}
		}
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// nullKey is a key whose value is null in a mapping of a test file.
type nullKey struct {
	m   map[string]any
	key string
}

// liftPatchNulls removes the null-valued keys, at any depth, of the
// requests of a test file (a case's request and each run call's
// request), and returns them. A request is a JSON merge patch (RFC 7386)
// in which null deletes the key from the request file, so the schema,
// which describes requests, checks it without them; read puts them back
// once the file is valid.
func liftPatchNulls(root any) []nullKey {
	var out []nullKey
	var lift func(v any)
	lift = func(v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, x := range m {
			if x == nil {
				out = append(out, nullKey{m, k})
				delete(m, k)
				continue
			}
			lift(x)
		}
	}
	top, _ := root.(map[string]any)
	cases, _ := top["cases"].([]any)
	for _, c := range cases {
		cm, _ := c.(map[string]any)
		lift(cm["request"])
		before, _ := cm["before"].([]any)
		for _, b := range before {
			bm, _ := b.(map[string]any)
			lift(bm["request"])
		}
		run, _ := cm["run"].(map[string]any)
		attempts, _ := run["attempts"].([]any)
		for _, a := range attempts {
			am, _ := a.(map[string]any)
			calls, _ := am["calls"].([]any)
			for _, call := range calls {
				callm, _ := call.(map[string]any)
				lift(callm["request"])
			}
		}
	}
	return out
}

// testEvidence reads the evidence_store list of m (a test file, or the
// case at ptr).
func (l *loader) testEvidence(doc *document, ptr string, m map[string]any) []*TestEvidence {
	var out []*TestEvidence
	for i, v := range asList(m["evidence_store"]) {
		em := v.(map[string]any)
		ep := fmt.Sprintf("%s/evidence_store/%d", ptr, i)
		te := &TestEvidence{Pos: l.pos(doc, ep), Attributes: map[string]any{}, SubjectIDs: []string{}}
		te.Kind, _ = em["kind"].(string)
		te.ID, _ = em["id"].(string)
		te.TenantID, _ = em["tenant_id"].(string)
		te.Issuer, _ = em["issuer"].(string)
		te.Revoked, _ = em["revoked"].(string)
		if a, ok := em["attributes"].(map[string]any); ok {
			te.Attributes = a
		}
		for _, s := range asList(em["subject_ids"]) {
			id, _ := s.(string)
			te.SubjectIDs = append(te.SubjectIDs, id)
		}
		at, err := time.Parse(time.RFC3339, fmt.Sprint(em["observed_at"]))
		if err != nil {
			l.addf(l.pos(doc, ep+"/observed_at"), "observed_at: %q is not an RFC 3339 time", em["observed_at"])
		}
		te.ObservedAt = at.UTC()
		if x, ok := em["expires_at"]; ok {
			at, err := time.Parse(time.RFC3339, fmt.Sprint(x))
			if err != nil {
				l.addf(l.pos(doc, ep+"/expires_at"), "expires_at: %q is not an RFC 3339 time", x)
			}
			at = at.UTC()
			te.ExpiresAt = &at
		}
		out = append(out, te)
	}
	return out
}
