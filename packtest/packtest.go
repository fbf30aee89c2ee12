// Package packtest runs a pack's tests: the cases of its tests/*.yaml
// files, each decided in-process by the same engine code `writ check`
// and the server use, on a fresh temporary ledger, at the case's clock.
//
// A check case gives a check request (and approvals on file) and the
// fields of the receipt and record it expects; a run case gives a
// workflow run's step attempts, with the boundary checks made for each
// step, and the fields of each verdict it expects. Only the fields a case
// names are compared. The result is a Report: each case's failures
// (field, want, got, file:line) and the pack's coverage (which rules,
// controls, evidence requirements, budgets, verification checks and
// workflow steps no case exercised).
//
// The test file format is pack.TestFile (schema/test.schema.json in
// package pack); docs/pack-format.md describes it.
package packtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
)

// Options tune a run of a pack's tests.
type Options struct {
	// Run, when set, runs only the cases whose name it matches. Coverage
	// is then of those cases only.
	Run *regexp.Regexp
}

// Suite is a pack with its tests, loaded and checked: every request is
// a valid check request, decoded as the server would.
type Suite struct {
	Dir    string
	Pack   *pack.Pack
	Policy *policy.Policy
	Files  []*pack.TestFile

	requests map[*pack.TestCase]*writ.CheckRequest
	// before are the checks each case decides before its own (its
	// before: items, each repeated).
	before   map[*pack.TestCase][]priorCheck
	template string // a migrated, empty SQLite ledger (see newTemplate)
}

// newTemplate creates an empty SQLite ledger with every migration
// applied, closed, in a temporary directory. Each case starts from a
// copy of it: migrating a fresh database is most of what opening one
// costs, and a copy of an empty, migrated database is the same empty
// ledger.
func newTemplate() (string, error) {
	dir, err := os.MkdirTemp("", "writ-test-ledger-")
	if err != nil {
		return "", err
	}
	st, err := sqlite.Open(dir)
	if err == nil {
		err = st.Close()
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("create an empty ledger: %w", err)
	}
	return dir, nil
}

// copyLedger copies the template's database file (and its write-ahead
// log, should closing have left one) into dir.
func copyLedger(template, dir string) error {
	for _, name := range []string{sqlite.FileName, sqlite.FileName + "-wal"} {
		data, err := os.ReadFile(filepath.Join(template, name))
		if errors.Is(err, fs.ErrNotExist) && name != sqlite.FileName {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Load loads the pack at dir and its tests. A broken pack, a broken test
// file or a request that is not a valid check is an EINVALID error whose
// details name every problem with its file and line.
func Load(dir string) (*Suite, error) {
	p, err := pack.Load(dir)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Compile(p)
	if err != nil {
		return nil, err
	}
	files, err := pack.LoadTests(dir, p)
	if err != nil {
		return nil, err
	}
	s := &Suite{Dir: dir, Pack: p, Policy: pol, Files: files, requests: map[*pack.TestCase]*writ.CheckRequest{}, before: map[*pack.TestCase][]priorCheck{}}
	fsys := os.DirFS(dir)
	var problems []writ.Detail
	for _, f := range files {
		for _, c := range f.Cases {
			if c.Run != nil {
				continue
			}
			req, err := buildRequest(fsys, c)
			if err == nil && !expectsError(c.Expect) {
				// A request the pack cannot resolve is not a valid check
				// (unless the case expects it refused).
				_, err = pol.Resolve(req)
			}
			if err != nil {
				problems = append(problems, writ.Detail{File: c.RequestPos.File, Line: c.RequestPos.Line, Message: fmt.Sprintf("case %q: the request is not a valid check request: %s", c.Name, describe(err))})
				continue
			}
			s.requests[c] = req
			for i, b := range c.Before {
				req, err := buildRequestFrom(fsys, b.RequestFile, b.Request)
				if err == nil {
					_, err = pol.Resolve(req)
				}
				if err != nil {
					problems = append(problems, writ.Detail{File: b.Pos.File, Line: b.Pos.Line, Message: fmt.Sprintf("case %q: before[%d] is not a valid check request: %s", c.Name, i, describe(err))})
					continue
				}
				for n := range b.Repeat {
					if n > 0 {
						req, _ = buildRequestFrom(fsys, b.RequestFile, b.Request) // decoded once already
					}
					if b.Repeat > 1 {
						// Each repetition is a decision of its own.
						req.IdempotencyKey = ""
					}
					s.before[c] = append(s.before[c], priorCheck{req: req, pos: b.Pos, index: i})
				}
			}
		}
	}
	if len(problems) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("the tests of pack %s are invalid (%d %s)", dir, len(problems), plural(len(problems))), Details: problems}
	}
	return s, nil
}

func plural(n int) string {
	if n == 1 {
		return "problem"
	}
	return "problems"
}

func expectsError(es []pack.Expectation) bool {
	for _, e := range es {
		if e.Field == "error" {
			return true
		}
	}
	return false
}

// describe renders an error with its details on one line.
func describe(err error) string {
	msg := writ.ErrorMessage(err)
	for _, d := range writ.ErrorDetails(err) {
		if d.Field != "" && d.Message != msg {
			msg += "; " + d.Field + ": " + d.Message
		}
	}
	return msg
}

// buildRequest assembles a check case's request: the request file, the
// inline request merged over it (RFC 7386), decoded strictly.
func buildRequest(fsys fs.FS, c *pack.TestCase) (*writ.CheckRequest, error) {
	return buildRequestFrom(fsys, c.RequestFile, c.Request)
}

// buildRequestFrom is a request file (none: {}) with patch merged over it.
func buildRequestFrom(fsys fs.FS, file string, patch map[string]any) (*writ.CheckRequest, error) {
	var doc any = map[string]any{}
	if file != "" {
		data, err := fs.ReadFile(fsys, path.Clean(file))
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
	}
	if patch != nil {
		doc = mergePatch(doc, patch)
	}
	return decodeRequest(doc)
}

// priorCheck is one check a case decides before its own.
type priorCheck struct {
	req   *writ.CheckRequest
	pos   pack.Pos
	index int
}

// decodeRequest decodes a request in the JSON data model into a check
// request: unknown fields and wrong types are refused.
func decodeRequest(doc any) (*writ.CheckRequest, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	req := new(writ.CheckRequest)
	if err := dec.Decode(req); err != nil {
		return nil, err
	}
	return req, nil
}

// mergePatch applies an RFC 7386 JSON merge patch: objects merge key by
// key, null deletes, anything else replaces.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	out := make(map[string]any, len(tm)+len(pm))
	for k, v := range tm {
		out[k] = v
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

// Run runs every case of s (those opts.Run matches) and reports the
// results and the coverage. An error means the tests could not run (no
// temporary ledger, say), not that a case failed.
func (s *Suite) Run(ctx context.Context, opts Options) (*Report, error) {
	rep := &Report{Pack: s.Pack.ID(), PackHash: s.Pack.Hash, Dir: s.Dir, Cases: []*CaseResult{}}
	cov := newCoverage(s.Pack)
	tmpl, err := newTemplate()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmpl)
	s.template = tmpl
	for _, f := range s.Files {
		for _, c := range f.Cases {
			if opts.Run != nil && !opts.Run.MatchString(c.Name) {
				continue
			}
			res, err := s.runCase(ctx, c, cov)
			if err != nil {
				return nil, err
			}
			rep.Cases = append(rep.Cases, res)
			if res.Passed {
				rep.Passed++
			} else {
				rep.Failed++
			}
		}
	}
	rep.Coverage = cov.report()
	return rep, nil
}

// clock is a case's controllable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// bindingKey keys argument bindings in the temporary ledgers; nothing
// outlives a case, so a fixed key will do.
var bindingKey = bytes.Repeat([]byte("writ-test-binding-key/"), 2)

func (s *Suite) runCase(ctx context.Context, c *pack.TestCase, cov *coverage) (*CaseResult, error) {
	res := &CaseResult{Name: c.Name, File: c.Pos.File, Line: c.Pos.Line, Kind: "check"}
	if c.Run != nil {
		res.Kind = "run"
	}
	tmp, err := os.MkdirTemp("", "writ-test-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := copyLedger(s.template, tmp); err != nil {
		return nil, fmt.Errorf("copy the empty ledger: %w", err)
	}
	st, err := sqlite.Open(tmp)
	if err != nil {
		return nil, fmt.Errorf("open a temporary ledger: %w", err)
	}
	defer st.Close()
	clk := &clock{t: c.Now}
	var store ledger.Store = st
	if len(c.History) > 0 {
		ids := map[string]string{}
		for _, a := range s.Policy.Aggregates() {
			ids[a[0]] = a[1]
		}
		of := &onFile{Store: st, offset: map[string]float64{}}
		for name, v := range c.History {
			of.offset[ids[name]] = v
		}
		store = of
	}
	eng, err := engine.New(ctx, engine.Config{Policy: s.Policy, Store: store, BindingKey: bindingKey, Now: clk.now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, fmt.Errorf("start an engine: %w", err)
	}
	defer eng.Close()
	r := &caseRun{s: s, eng: eng, st: st, clk: clk, cov: cov, res: res}
	if c.Run != nil {
		r.run(ctx, c)
	} else {
		r.check(ctx, c)
	}
	res.Passed = len(res.Failures) == 0
	return res, nil
}

// caseRun runs one case against its engine.
type caseRun struct {
	s   *Suite
	eng *engine.Engine
	st  ledger.Store // the case's ledger, for what was stored
	clk *clock
	cov *coverage
	res *CaseResult
}

func (r *caseRun) fail(pos pack.Pos, field string, want, got any) {
	f := Failure{Field: field, File: pos.File, Line: pos.Line, Want: want, Got: got}
	if w, ok := want.([]string); ok {
		if g, ok := got.([]string); ok {
			f.Missing, f.Unexpected = setDiff(w, g), setDiff(g, w)
		}
	}
	r.res.Failures = append(r.res.Failures, f)
}

// setDiff returns the elements of a that b lacks, sorted.
func setDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// decided is what a check answered: its receipt and record (and the
// record's sealed bytes), or the error that refused it.
type decided struct {
	rc  *writ.Receipt
	rec *writ.Record
	raw []byte
	err error
}

// decide runs one check and reads back its record; the checks that
// fired count towards coverage.
func (r *caseRun) decide(ctx context.Context, req *writ.CheckRequest) decided {
	ctx, req = credentials(ctx, req)
	rc, err := r.eng.Check(ctx, req)
	if err != nil {
		return decided{rc: rc, err: err}
	}
	d := decided{rc: rc}
	if id := rc.Metadata.RecordID; id != "" {
		sr, err := r.eng.Record(ctx, req.TenantID, id)
		if err != nil {
			return decided{err: fmt.Errorf("read the decision record back: %w", err)}
		}
		d.rec, d.raw = &sr.Record, sr.Raw
		r.cov.fired(d.rec.PolicyDecisions)
		for _, a := range d.rec.Approvals {
			r.cov.gate(a.GateID)
		}
	}
	for _, aid := range rc.Metadata.ApprovalIDs {
		if a, err := r.eng.Approval(ctx, req.TenantID, aid); err == nil {
			r.cov.gate(a.GateID)
		}
	}
	return d
}

func (r *caseRun) check(ctx context.Context, c *pack.TestCase) {
	req := r.s.requests[c]
	if !r.storeEvidence(ctx, c, req.TenantID) {
		return
	}
	// The checks before the case's own are decided on its ledger, at its
	// clock; their answers are not compared and do not count toward
	// coverage, but one that is refused fails the case.
	for _, b := range r.s.before[c] {
		if _, err := r.eng.Check(ctx, b.req); err != nil {
			r.fail(b.pos, fmt.Sprintf("before[%d]", b.index), "a receipt", "refused: "+describe(err))
			return
		}
	}
	if c.Params != nil {
		_, err := r.eng.SetParams(ctx, &writ.SetParamsRequest{TenantID: req.TenantID, Values: c.Params, By: "human:writ-test-admin", Reason: "writ test case " + c.Name})
		if err != nil {
			r.fail(c.Pos, "params", "the tenant's parameter values set", "refused: "+describe(err))
			return
		}
	}
	d := r.decide(ctx, req)
	if d.err == nil && len(c.Approvals) > 0 {
		d = r.approve(ctx, c, req, d)
		if d.rc == nil && d.err == nil {
			return // approve reported the failure
		}
	}
	r.compareCheck("", c.Expect, d, c.RequestPos)
	r.compareStored(ctx, c.Expect, d)
}

// storeEvidence submits the case's evidence_store items (StoreEvidence).
// It reports false, having failed the case, when writ refuses one.
func (r *caseRun) storeEvidence(ctx context.Context, c *pack.TestCase, tenant string) bool {
	for i, te := range c.EvidenceStore {
		if _, err := StoreEvidence(ctx, r.eng, tenant, te); err != nil {
			r.fail(te.Pos, fmt.Sprintf("evidence_store[%d]", i), "the evidence item stored", "refused: "+describe(err))
			return false
		}
	}
	return true
}

// StoreEvidence puts a test's evidence item in eng's evidence store, as
// writ test does before a case: submitted with an API key of its issuer
// holding the issuer role (so it is issued), and revoked with its reason
// when it says so. An item that names no tenant is tenant's. It returns
// the number of records sealed, in the item's tenant.
func StoreEvidence(ctx context.Context, eng *engine.Engine, tenant string, te *pack.TestEvidence) (int, error) {
	if te.TenantID != "" {
		tenant = te.TenantID
	}
	ictx := writ.WithPrincipal(ctx, &writ.Principal{TenantID: tenant, KeyID: "key_issuer_test", Subject: te.Issuer, Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	obs := te.ObservedAt
	if _, err := eng.AddEvidence(ictx, &writ.AddEvidenceRequest{TenantID: tenant, Kind: te.Kind, ID: te.ID, SubjectIDs: te.SubjectIDs,
		Attributes: te.Attributes, ObservedAt: &obs, ExpiresAt: te.ExpiresAt}); err != nil {
		return 0, err
	}
	if te.Revoked == "" {
		return 1, nil
	}
	if _, err := eng.RevokeEvidence(ictx, &writ.RevokeEvidenceRequest{TenantID: tenant, ID: te.ID, Reason: te.Revoked}); err != nil {
		return 1, err
	}
	return 2, nil
}

// approve decides the approval on file that the first check asked for,
// then decides the check again presenting it.
func (r *caseRun) approve(ctx context.Context, c *pack.TestCase, req *writ.CheckRequest, d decided) decided {
	ta := c.Approvals[0]
	var asked []string
	var id string
	for _, aid := range d.rc.Metadata.ApprovalIDs {
		a, err := r.eng.Approval(ctx, req.TenantID, aid)
		if err != nil {
			return decided{err: fmt.Errorf("read approval %s: %w", aid, err)}
		}
		asked = append(asked, a.GateID)
		if a.GateID == ta.Gate && id == "" {
			id = aid
		}
	}
	if id == "" {
		r.fail(ta.Pos, "approvals[0].gate", ta.Gate, fmt.Sprintf("the check asked for no approval at %s (it asked at %v; outcome %s)", ta.Gate, asked, d.rc.Outcome))
		return decided{}
	}
	approver := ta.Approver
	if approver == "" {
		approver = "human:writ-test-approver"
	}
	reason := ta.Reason
	if reason == "" {
		reason = "writ test case " + c.Name
	}
	if _, err := r.eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: req.TenantID, ApprovalID: id, Decision: ta.Decision, Approver: approver, Reason: reason}); err != nil {
		r.fail(ta.Pos, "approvals[0]", "the approval decided", "refused: "+describe(err))
		return decided{}
	}
	again := *req
	again.ApprovalIDs = []string{id}
	return r.decide(ctx, &again)
}

func (r *caseRun) run(ctx context.Context, c *pack.TestCase) {
	tr := c.Run
	tenant := tr.TenantID
	if tenant == "" {
		tenant = "test"
	}
	w := r.s.Pack.Workflows[tr.Workflow]
	run, err := r.eng.StartRun(ctx, &writ.StartRunRequest{TenantID: tenant, WorkflowID: tr.Workflow, Context: tr.Context})
	if err != nil {
		r.fail(tr.Pos, "run", "the run started", "refused: "+describe(err))
		return
	}
	r.cov.reached(w, run.CurrentStep)
	actor := writ.Actor{Type: writ.ActorAgent, ID: "writ-test-agent"}
	var prev *writ.StepVerdict
	for i, a := range tr.Attempts {
		prefix := fmt.Sprintf("attempts[%d] (%s).", i, a.Step)
		switch {
		case a.After != nil:
			r.clk.t = r.clk.t.Add(*a.After)
		case prev != nil && prev.State == writ.VerdictRetry && prev.RetryAfterMS > 0:
			// The agent waits out the backoff the verdict asked for.
			r.clk.t = r.clk.t.Add(time.Duration(prev.RetryAfterMS) * time.Millisecond)
		}
		for j, call := range a.Calls {
			doc := mergePatch(map[string]any{
				"tenant_id": tenant,
				"actor":     map[string]any{"type": actor.Type, "id": actor.ID},
				"workflow":  map[string]any{"workflow_id": tr.Workflow, "run_id": run.RunID, "step_id": a.Step},
			}, call.Request)
			req, err := decodeRequest(doc)
			cprefix := fmt.Sprintf("%scalls[%d].", prefix, j)
			if err != nil {
				r.fail(call.Pos, cprefix+"request", "a valid check request", err.Error())
				continue
			}
			d := r.decide(ctx, req)
			if len(call.Expect) > 0 {
				r.compareCheck(cprefix, call.Expect, d, call.Pos)
			} else if d.err != nil {
				r.fail(call.Pos, cprefix+"error", "a receipt", "refused: "+describe(d.err))
			}
		}
		v, err := r.eng.SubmitAttempt(ctx, &writ.AttemptRequest{TenantID: tenant, RunID: run.RunID, StepID: a.Step, Actor: actor, Result: a.Result, ToolCalls: a.ToolCalls})
		var status string
		if err == nil {
			r.cov.attempted(w, a.Step, v)
			if got, rerr := r.eng.Run(ctx, tenant, run.RunID); rerr == nil {
				status = got.Status
				r.cov.reached(w, got.CurrentStep)
			}
			prev = v
		}
		r.compareAttempt(prefix, a, v, status, err)
	}
}

// credentials turns what a case's request says about its actor's
// provenance into the credentials writ would have verified, so a case
// can test a rule that reads them (docs/trust.md): actor.provenance
// "authenticated" is an API key of the actor's principal (key_id, default
// "key_test"; with acted_by, the key of that principal, allowed to act
// for the actor), and delegated_user_provenance "authenticated" a
// delegation token of delegated_user_issuer (default "test") whose
// subject is the delegated user; usage.provenance "issued" makes that key
// (or one of the actor's principal) a meter. The request then goes in without them,
// as a caller sends it, and writ binds them again. Anything else
// (claimed, or nothing) is development mode.
func credentials(ctx context.Context, req *writ.CheckRequest) (context.Context, *writ.CheckRequest) {
	a := req.Actor
	issued := req.Usage != nil && req.Usage.Provenance == writ.ProvenanceIssued
	if req.Usage != nil && req.Usage.Provenance != "" {
		rq, u := *req, *req.Usage
		u.Provenance = ""
		rq.Usage = &u
		req = &rq
	}
	if !a.Bound() && !issued {
		return ctx, req
	}
	if a.Provenance == writ.ProvenanceAuthenticated || issued {
		p := &writ.Principal{TenantID: req.TenantID, KeyID: a.KeyID, Subject: a.ID, Roles: []writ.Role{writ.RoleAgent}, ActorType: a.Type}
		if p.KeyID == "" {
			p.KeyID = "key_test"
		}
		if by := a.ActedBy; by != nil {
			p.Subject, p.ActorType, p.ActsFor = by.ID, by.Type, []string{a.Type + ":" + a.ID}
		}
		if issued {
			// usage.provenance "issued": the key is a meter as well.
			p.Roles = append(p.Roles, writ.RoleMeter)
		}
		ctx = writ.WithPrincipal(ctx, p)
	}
	if a.DelegatedUserProvenance == writ.ProvenanceAuthenticated {
		iss := a.DelegatedUserIssuer
		if iss == "" {
			iss = "test"
		}
		ctx = writ.WithDelegation(ctx, &writ.Delegation{TenantID: req.TenantID, Subject: a.DelegatedUserID, Issuer: iss})
	}
	rq := *req
	rq.Actor = a.Claimed()
	return ctx, &rq
}
