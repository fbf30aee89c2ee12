package packtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/writhq/writ"
	"github.com/writhq/writ/packtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./packtest -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func run(t *testing.T, dir string) *packtest.Report {
	t.Helper()
	s, err := packtest.Load(dir)
	if err != nil {
		t.Fatalf("Load(%s) = %v %v", dir, err, writ.ErrorDetails(err))
	}
	rep, err := s.Run(context.Background(), packtest.Options{})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	return rep
}

// TestExamples holds every example pack to its tests and to full
// coverage: every rule, control, evidence requirement, budget,
// verification check and step is exercised by a case.
func TestExamples(t *testing.T) {
	dirs, _ := filepath.Glob("../examples/*")
	if len(dirs) == 0 {
		t.Fatal("no example packs")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rep := run(t, dir)
			if len(rep.Cases) == 0 {
				t.Fatal("the example has no tests")
			}
			var out bytes.Buffer
			rep.WriteText(&out, false)
			if rep.Failed > 0 {
				t.Errorf("%d cases failed:\n%s", rep.Failed, out.String())
			}
			if rep.Coverage.Percent != 100 || len(rep.Coverage.Uncovered()) > 0 {
				t.Errorf("coverage %.1f%%, want 100%%:\n%s", rep.Coverage.Percent, out.String())
			}
		})
	}
}

// TestFailureAndCoverageReport keeps the reports of a fixture whose one
// case expects the wrong outcome and whose second rule no case tests:
// the failure names the field, the want, the got and the case's
// file:line, and the coverage names the untested rule.
func TestFailureAndCoverageReport(t *testing.T) {
	rep := run(t, "testdata/untested")
	if rep.Passed != 1 || rep.Failed != 1 {
		t.Fatalf("passed %d failed %d, want 1 and 1", rep.Passed, rep.Failed)
	}
	f := rep.Cases[1].Failures
	if len(f) != 2 || f[0].Field != "outcome" || f[0].Want != "replan_required" || f[0].Got != "goal_fail_terminal" || f[0].Line != 21 {
		t.Fatalf("failures = %+v, want outcome wanted replan_required, got goal_fail_terminal, at line 21, then reasons", f)
	}
	if f[1].Field != "reasons" || f[1].Line != 22 || len(f[1].Missing) != 1 || f[1].Missing[0] != "foreign_transfer" || len(f[1].Unexpected) != 0 {
		t.Errorf("failure %+v, want reasons at line 22 missing foreign_transfer", f[1])
	}
	un := rep.Coverage.Uncovered()
	if len(un) != 1 || un[0].ID != "R_FOREIGN_TRANSFER" || un[0].Kind != packtest.KindRule {
		t.Errorf("uncovered = %+v, want rule R_FOREIGN_TRANSFER", un)
	}
	var text, js, junit bytes.Buffer
	if err := rep.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	golden(t, "untested.txt", text.Bytes())
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	// The pack hash is a function of the fixture's bytes; the golden file
	// holds the report's shape, not the hash.
	rep.PackHash = "sha256:…"
	if err := enc.Encode(rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "untested.json", js.Bytes())
	if err := rep.WriteJUnit(&junit); err != nil {
		t.Fatal(err)
	}
	golden(t, "untested.junit.xml", junit.Bytes())
}

// TestRecordedAndStored: a case sets a tenant parameter and asserts on
// the sealed record and on what is stored after redaction; a case whose
// record paths, evidence_refs, absent values and placeholders are wrong
// fails on each, and a redaction rule no case saw redact is uncovered.
func TestRecordedAndStored(t *testing.T) {
	rep := run(t, "testdata/recorded")
	if rep.Passed != 1 || rep.Failed != 1 {
		t.Fatalf("passed %d failed %d, want 1 and 1", rep.Passed, rep.Failed)
	}
	var fields []string
	for _, f := range rep.Cases[1].Failures {
		fields = append(fields, f.Field)
	}
	want := []string{"evidence_refs", "record.params.set", "record.params.values.limit", "stored.absent", "stored.present"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("failures on %q, want %q", fields, want)
	}
	un := rep.Coverage.Uncovered()
	if len(un) != 1 || un[0].ID != "never_used" || un[0].Kind != packtest.KindRedaction {
		t.Errorf("uncovered = %+v, want redaction rule never_used", un)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	golden(t, "recorded.txt", text.Bytes())
}

// TestBadTestFiles: a test file with a problem is refused before any
// case runs, with the file and line of every problem.
func TestBadTestFiles(t *testing.T) {
	const okCase = "  - name: ok\n    now: 2026-05-09T09:00:00Z\n    request:\n      tenant_id: acme\n      tool: transfer\n      actor: {type: AGENT, id: a}\n      arguments: {amount: 1}\n    expect: {outcome: allow}\n"
	tests := []struct {
		name, file string
		want       []string // each "line: message fragment"
	}{
		{"unknown case field", "cases:\n" + okCase + "    expcet: {outcome: allow}\n", []string{`:10: cases.0: unknown field "expcet"`}},
		{"unknown request field", "cases:\n" + strings.Replace(okCase, "      arguments:", "      argumnets:", 1), []string{`:8: cases.0.request: unknown field "argumnets"`}},
		{"unknown expectation field", "cases:\n" + strings.Replace(okCase, "{outcome: allow}", "{outcome: allow, verdict: deny}", 1), []string{`:9: cases.0.expect: unknown field "verdict"`}},
		{"request that is not a valid check", "cases:\n" + strings.Replace(okCase, "tool: transfer", "tool: wire", 1), []string{`:4: case "ok": the request is not a valid check request: tool "wire" is not in the tool manifest`}},
		{"wrong type in request", "cases:\n" + strings.Replace(okCase, "tenant_id: acme", "tenant_id: [acme]", 1), []string{`:5: cases.0.request.tenant_id: got array, want string`}},
		{"fired names no rule", "cases:\n" + strings.Replace(okCase, "{outcome: allow}", "{fired: [R_NOPE]}", 1), []string{`:9: expect.fired names "R_NOPE"`}},
		{"bad outcome", "cases:\n" + strings.Replace(okCase, "{outcome: allow}", "{outcome: allowed}", 1), []string{`:9: cases.0.expect.outcome: value must be one of`}},
		{"duplicate case", "cases:\n" + okCase + okCase, []string{`:10: case "ok" is already defined at`}},
		{"neither check nor run", "cases:\n  - name: empty\n    now: 2026-05-09T09:00:00Z\n", []string{`:2: case "empty" needs a request`}},
		{"unknown workflow and step", "cases:\n  - name: r\n    now: 2026-05-09T09:00:00Z\n    run:\n      workflow: nope\n      attempts:\n        - step: s\n          expect: {state: accepted}\n", []string{`:5: run names workflow "nope"`}},
		{"error with other fields", "cases:\n" + strings.Replace(okCase, "{outcome: allow}", "{outcome: allow, error: boom}", 1), []string{`:9: expect: error excludes every other field`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"pack.yaml", "specs/transfer.yaml", "policies/transfers.yaml", "tools.yaml"} {
				data, err := os.ReadFile(filepath.Join("testdata/untested", f))
				if err != nil {
					t.Fatal(err)
				}
				os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
				os.WriteFile(filepath.Join(dir, f), data, 0o644)
			}
			os.MkdirAll(filepath.Join(dir, "tests"), 0o755)
			os.WriteFile(filepath.Join(dir, "tests", "t.yaml"), []byte(tt.file), 0o644)
			_, err := packtest.Load(dir)
			if writ.ErrorCode(err) != writ.EINVALID {
				t.Fatalf("Load = %v, want EINVALID", err)
			}
			var got []string
			for _, d := range writ.ErrorDetails(err) {
				got = append(got, d.String())
			}
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					if strings.Contains(g, filepath.Join(dir, "tests", "t.yaml")+w) {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem %q in:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// TestTestsAreNotPartOfThePack: adding tests does not change the pack's
// content hash, so no pinned record or golden receipt moves.
func TestTestsAreNotPartOfThePack(t *testing.T) {
	s, err := packtest.Load("../examples/refund")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Pack.Files {
		if strings.HasPrefix(f.Path, "tests/") {
			t.Errorf("pack file %s: tests must not be part of the pack", f.Path)
		}
	}
	if len(s.Files) == 0 {
		t.Error("the refund example has no test files")
	}
}

// refundEvidence is the evidence_store block of the refund example's
// tests: the items its request files cite, issued by the IDV service and
// the fraud engine. A test that writes its own cases over the example's
// starts its file with it, since the refund (a record_mutation) accepts
// only evidence writ resolves in the tenant's store.
func refundEvidence(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../examples/refund/tests/refund.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		EvidenceStore yaml.Node `yaml:"evidence_store"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if file.EvidenceStore.Kind != yaml.SequenceNode || len(file.EvidenceStore.Content) == 0 {
		t.Fatal("the refund example's tests have no evidence_store")
	}
	out, err := yaml.Marshal(map[string]*yaml.Node{"evidence_store": &file.EvidenceStore})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestHistoryOnFile: a case's history names the pack's aggregates (an
// unknown one is refused with file:line), and its values are what the
// velocity rule reads.
func TestHistoryOnFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../examples/refund")); err != nil {
		t.Fatal(err)
	}
	evidence := refundEvidence(t)
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "tests", "refund.yaml"), []byte(evidence+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const head = "cases:\n  - name: velocity\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n"
	write(head + "    history: {refunds_per_customr: 3}\n    expect: {outcome: allow}\n")
	_, err := packtest.Load(dir)
	if ds := writ.ErrorDetails(err); len(ds) != 1 || ds[0].Line != 5+strings.Count(evidence, "\n") || !strings.Contains(ds[0].Message, `history names aggregate "refunds_per_customr", which pack.yaml does not declare`) {
		t.Errorf("unknown aggregate: %v %v", err, ds)
	}
	for _, tt := range []struct {
		value   string
		outcome string
	}{{"2", "allow"}, {"3", "goal_fail_terminal"}, {"2.5", "allow"}, {"7", "goal_fail_terminal"}} {
		write(head + "    history: {refunds_per_customer: " + tt.value + "}\n    expect: {outcome: " + tt.outcome + "}\n")
		rep := run(t, dir)
		if rep.Failed != 0 {
			var out bytes.Buffer
			rep.WriteText(&out, false)
			t.Errorf("refunds_per_customer %s: want %s:\n%s", tt.value, tt.outcome, out.String())
		}
	}
}

// TestPinnedDefinitionInline: a case's inline request may carry the
// tool definition digest the gateway sends, so a pinned tool is tested
// like any other check.
func TestPinnedDefinitionInline(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../examples/refund")); err != nil {
		t.Fatal(err)
	}
	pinned := "sha256:" + strings.Repeat("ab", 32)
	tools := "tools:\n  - name: payments.issue_refund\n    decision_key: support.refund.execute\n    approval_mode_ceiling: destructive\n    definition_digest: " + pinned + "\n"
	cases := refundEvidence(t) + "cases:\n" +
		"  - name: the pinned definition\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n" +
		"    request: {tool_definition_digest: \"" + pinned + "\"}\n    expect: {outcome: allow}\n" +
		"  - name: another definition\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n" +
		"    request: {tool_definition_digest: \"sha256:" + strings.Repeat("cd", 32) + "\"}\n" +
		"    expect: {outcome: goal_fail_terminal, reasons: [tool_definition_changed]}\n"
	for name, body := range map[string]string{"tools.yaml": tools, "tests/refund.yaml": cases} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rep := run(t, dir); rep.Failed != 0 || rep.Passed != 2 {
		var out bytes.Buffer
		rep.WriteText(&out, false)
		t.Errorf("want both cases to pass:\n%s", out.String())
	}
}

// TestConditionalEvidence: writ test decides a requirement's when like
// the engine does, and a requirement whose when never held in any case is
// uncovered (it never fired).
func TestConditionalEvidence(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/untested")); err != nil {
		t.Fatal(err)
	}
	spec := "decision_key: bank.transfer\nversion: 1.0.0\naction_class: record_mutation\npolicies: [POLICY_TRANSFERS]\n" +
		"required_evidence:\n  - kind: kyc\n    when: args.amount > 100\n    on_missing: replan_upstream\n    reason: {code: kyc_required, message: Transfers over 100 need KYC.}\n"
	small := "  - name: a small transfer needs no KYC\n    now: 2026-05-09T09:00:00Z\n    request:\n      tenant_id: acme\n      tool: transfer\n      actor: {type: AGENT, id: agt_1}\n      arguments: {amount: 10}\n    expect: {outcome: allow, fired: []}\n"
	large := "  - name: a larger one does\n    now: 2026-05-09T09:00:00Z\n    request:\n      tenant_id: acme\n      tool: transfer\n      actor: {type: AGENT, id: agt_1}\n      arguments: {amount: 500}\n    expect: {outcome: replan_required, reasons: [kyc_required], fired: [evidence.kyc]}\n"
	// A transfer is a record_mutation, so the KYC it cites must be in the
	// tenant's evidence store (issued), not only the caller's word.
	withKYC := "  - name: with KYC it passes\n    now: 2026-05-09T09:00:00Z\n" +
		"    evidence_store:\n      - {kind: kyc, id: k1, subject_ids: ['customer:c1'], observed_at: 2026-05-09T08:00:00Z, issuer: kyc.acme.example}\n" +
		"    request:\n      tenant_id: acme\n      tool: transfer\n      actor: {type: AGENT, id: agt_1}\n      subject_ids: ['customer:c1']\n      arguments: {amount: 500}\n      evidence: [{kind: kyc, id: k1}]\n    expect: {outcome: allow, fired: []}\n"
	for name, body := range map[string]string{"specs/transfer.yaml": spec, "tests/transfers.yaml": "cases:\n" + small + large + withKYC} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := run(t, dir)
	var out bytes.Buffer
	rep.WriteText(&out, false)
	if rep.Failed != 0 || rep.Passed != 3 {
		t.Fatalf("want all three cases to pass:\n%s", out.String())
	}
	covered := func(rep *packtest.Report) bool {
		for _, it := range rep.Coverage.Items {
			if it.Kind == packtest.KindEvidence && it.ID == "evidence.kyc" {
				return it.Covered
			}
		}
		t.Fatal("no coverage item evidence.kyc")
		return false
	}
	if !covered(rep) {
		t.Errorf("evidence.kyc is not covered although a case fired it:\n%s", out.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "tests/transfers.yaml"), []byte("cases:\n"+small+withKYC), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := run(t, dir); covered(rep) {
		t.Errorf("evidence.kyc is covered although its when never held without KYC attached")
	}
}

// TestPatchNullDeletes: a case's request is a JSON merge patch over its
// request file (RFC 7386): null deletes a key, at any depth, whatever
// the key's type in a request.
func TestPatchNullDeletes(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../examples/refund")); err != nil {
		t.Fatal(err)
	}
	cases := refundEvidence(t) + "cases:\n" +
		"  - name: without evidence the refund replans\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n" +
		"    request: {evidence: null, idempotency_key: null}\n    expect: {outcome: replan_required, reasons: [missing_identity_verification]}\n" +
		"  - name: a nested null deletes only its key\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n" +
		"    request: {arguments: {amount_inr: null}}\n    expect: {outcome: goal_fail_terminal, reasons: [refund_exceeds_order_total, high_value_refund]}\n"
	if err := os.WriteFile(filepath.Join(dir, "tests", "refund.yaml"), []byte(cases), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := run(t, dir)
	if rep.Failed != 0 || rep.Passed != 2 {
		var out bytes.Buffer
		rep.WriteText(&out, false)
		t.Errorf("want both cases to pass:\n%s", out.String())
	}
}

// TestHistoryFilterThroughWritTest: a case's before: checks are decided
// on its ledger first, so writ test sees what a filter_expression counts:
// refunds under 1000 INR are not counted, so three of them do not trip
// the velocity rule, and three counted ones do.
func TestHistoryFilterThroughWritTest(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../examples/refund")); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, "pack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest = bytes.Replace(manifest, []byte("    filter: allowed\n"), []byte("    filter: allowed\n    filter_expression: \"args.amount_inr >= 1000.0\"\n"), 1)
	cases := refundEvidence(t) + "cases:\n" +
		"  - name: small refunds are not counted\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n" +
		"    before:\n      - {request_file: requests/refund-allow.json, request: {arguments: {amount_inr: 500}}, repeat: 3}\n" +
		"    expect: {outcome: allow, fired: []}\n" +
		"  - name: counted refunds trip the velocity rule\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n" +
		"    before:\n      - {request_file: requests/refund-allow.json, request: {idempotency_key: null, arguments: {amount_inr: 500}}}\n      - {request_file: requests/refund-allow.json, repeat: 3}\n" +
		"    expect: {outcome: goal_fail_terminal, fired: [R_REFUND_VELOCITY]}\n"
	for name, body := range map[string][]byte{"pack.yaml": manifest, "tests/refund.yaml": []byte(cases)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := run(t, dir)
	if rep.Failed != 0 || rep.Passed != 2 {
		var out bytes.Buffer
		rep.WriteText(&out, false)
		t.Errorf("want both cases to pass:\n%s", out.String())
	}
}
