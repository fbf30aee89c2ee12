package pack_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

const (
	okManifest = "name: demo\nversion: 1.0.0\nspecs: [specs/*.yaml]\npolicies: [policies/p.yaml]\ncontrols: controls.yaml\ntools: tools.yaml\n"
	okSpec     = "decision_key: demo.act\nversion: 1.0.0\naction_class: record_mutation\npolicies: [P1]\n"
	okPolicy   = "bundle_id: P1\nversion: 1.0.0\nrules:\n  - id: R1\n    when: args.amount > 10\n    effect: require_approval\n    gate: G1\n    reason: {code: big, message: Big.}\n"
	okControls = "approval_gates:\n  - id: G1\n    approval_mode: destructive\n"
	okTools    = "tools:\n  - name: act\n    decision_key: demo.act\n    approval_mode_ceiling: destructive\n"
)

func fsWith(overrides map[string]string) fstest.MapFS {
	files := map[string]string{
		"pack.yaml":             okManifest,
		"specs/s.yaml":          okSpec,
		"policies/p.yaml":       okPolicy,
		"controls.yaml":         okControls,
		"tools.yaml":            okTools,
		"requests/ignored.json": "{not a pack file",
	}
	for k, v := range overrides {
		if v == "" {
			delete(files, k)
		} else {
			files[k] = v
		}
	}
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return m
}

func TestLoadValid(t *testing.T) {
	p, err := pack.LoadFS(fsWith(nil), "demo")
	if err != nil {
		t.Fatalf("LoadFS = %v", err)
	}
	if p.ID() != "demo@1.0.0" || !strings.HasPrefix(p.Hash, "sha256:") || len(p.Hash) != 71 {
		t.Errorf("pack %s hash %s, want demo@1.0.0 and a sha256 hash", p.ID(), p.Hash)
	}
	if len(p.Files) != 5 {
		t.Errorf("pack loaded %d files, want the 5 it references (not the request file)", len(p.Files))
	}
	if got := p.Tools["act"].ActionClass; got != "record_mutation" {
		t.Errorf("tool action class defaults to %q, want the spec's record_mutation", got)
	}
	want := ""
	for _, f := range p.Files {
		want += f.Hash + "  " + f.Path + "\n"
	}
	if string(p.Manifest) != want {
		t.Errorf("manifest = %q, want %q", p.Manifest, want)
	}
}

func TestContentHash(t *testing.T) {
	a, err := pack.LoadFS(fsWith(nil), "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pack.LoadFS(fsWith(map[string]string{"requests/other.json": "{}"}), "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash {
		t.Error("a file the pack does not load changed its hash")
	}
	c, err := pack.LoadFS(fsWith(map[string]string{"policies/p.yaml": strings.Replace(okPolicy, "> 10", "> 11", 1)}), "c")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash == c.Hash {
		t.Error("changing a rule did not change the pack hash")
	}
}

func TestLoadErrorsNameFileAndLine(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		want      string // "file:line: substring"
	}{
		{"yaml syntax", map[string]string{"specs/s.yaml": "decision_key: [\n"}, "demo/specs/s.yaml:1: did not find expected node content"},
		{"unknown field", map[string]string{"specs/s.yaml": okSpec + "bogus: 1\n"}, `demo/specs/s.yaml:5: unknown field "bogus"`},
		{"wrong type", map[string]string{"policies/p.yaml": strings.Replace(okPolicy, "version: 1.0.0", "version: 1.0", 1)}, "demo/policies/p.yaml:2: version: got number, want string"},
		{"bad effect", map[string]string{"policies/p.yaml": strings.Replace(okPolicy, "require_approval", "maybe", 1)}, "demo/policies/p.yaml:6: rules.0.effect"},
		{"approval without gate", map[string]string{"policies/p.yaml": strings.Replace(okPolicy, "    gate: G1\n", "", 1)}, "demo/policies/p.yaml:4: rules.0: missing property 'gate'"},
		{"unknown gate", map[string]string{"controls.yaml": "approval_gates:\n  - id: G2\n"}, "demo/policies/p.yaml:4: rule R1 names approval gate \"G1\""},
		{"unknown bundle", map[string]string{"specs/s.yaml": strings.Replace(okSpec, "[P1]", "[P2]", 1)}, "names policy bundle \"P2\""},
		{"tool to unknown spec", map[string]string{"tools.yaml": strings.Replace(okTools, "demo.act", "demo.nope", 1)}, "demo/tools.yaml:2: tool \"act\" maps to decision key \"demo.nope\""},
		{"change treatment without a pin", map[string]string{"tools.yaml": okTools + "    on_definition_change: hide\n"}, "demo/tools.yaml:2: tools.0: properties 'definition_digest' required, if 'on_definition_change' exists"},
		{"unknown change treatment", map[string]string{"tools.yaml": okTools + "    definition_digest: sha256:" + strings.Repeat("a", 64) + "\n    on_definition_change: show\n"}, "tools.0.on_definition_change"},
		{"tool class mismatch", map[string]string{"tools.yaml": okTools + "    action_class: upload\n"}, "action class \"upload\""},
		{"duplicate rule", map[string]string{"policies/p.yaml": okPolicy + strings.SplitN(okPolicy, "rules:\n", 2)[1]}, "rule \"R1\" is already defined"},
		{"duplicate key", map[string]string{"specs/s.yaml": okSpec + "version: 2.0.0\n"}, "demo/specs/s.yaml:5: key \"version\" is defined twice"},
		{"binary value", map[string]string{"specs/s.yaml": strings.Replace(okSpec, "demo.act", "!!binary ZGVtby5hY3Q=", 1)}, "demo/specs/s.yaml:1: binary values (!!binary) are not supported"},
		{"missing file", map[string]string{"tools.yaml": ""}, "demo/tools.yaml: cannot read"},
		{"glob matches nothing", map[string]string{"pack.yaml": strings.Replace(okManifest, "specs/*.yaml", "nothing/*.yaml", 1)}, "\"nothing/*.yaml\" matches no file"},
		{"bad duration", map[string]string{"specs/s.yaml": okSpec + "required_evidence:\n  - kind: idv\n    max_age: 3 days\n"}, "demo/specs/s.yaml:7: required_evidence.0.max_age"},
		{"bad regex", map[string]string{"controls.yaml": okControls + "redaction:\n  - id: r\n    patterns: ['(']\n"}, "demo/controls.yaml:6: redaction.0.patterns.0"},
		{"path escape", map[string]string{"pack.yaml": strings.Replace(okManifest, "tools.yaml", "../tools.yaml", 1)}, "not a path inside the pack"},
		{"empty file", map[string]string{"pack.yaml": "# nothing\n"}, "demo/pack.yaml: the file is empty"},
		{"condition without a machine part", map[string]string{"policies/p.yaml": okPolicy + "    what_would_change_this: [{text: Something else.}]\n"}, "demo/policies/p.yaml:9: what_would_change_this needs a condition a machine can check"},
		{"required gate without a mode", map[string]string{"controls.yaml": "approval_gates:\n  - id: G1\n    required: true\n"}, "demo/controls.yaml:2: approval gate G1 is required but names no approval_mode"},
		{"pass mark above 1", map[string]string{"specs/s.yaml": okSpec + "scorecard_pass: {safety: 1, utility: 1.2}\n"}, "demo/specs/s.yaml:5: scorecard_pass.utility"},
		{"pass mark below 0", map[string]string{"specs/s.yaml": okSpec + "scorecard_pass: {safety: -0.1}\n"}, "demo/specs/s.yaml:5: scorecard_pass.safety"},
		{"pass mark not a number", map[string]string{"specs/s.yaml": okSpec + "scorecard_pass: {safety: high}\n"}, "demo/specs/s.yaml:5: scorecard_pass.safety"},
		{"pass mark of no dimension", map[string]string{"specs/s.yaml": okSpec + "scorecard_pass: {\"-bad dim\": 0.5}\n"}, `demo/specs/s.yaml:5: scorecard_pass: unknown field "-bad dim"`},
		{"empty pass mark", map[string]string{"specs/s.yaml": okSpec + "scorecard_pass: {}\n"}, "demo/specs/s.yaml:5: scorecard_pass"},
		{"pass mark not a finite number", map[string]string{"specs/s.yaml": okSpec + "scorecard_pass: {safety: .nan}\n"}, "demo/specs/s.yaml:5: .nan is not a JSON number"},
		{"unknown lineage pin", map[string]string{"specs/s.yaml": okSpec + "required_pins: [kg_snapshot, gpu_model]\n"}, "demo/specs/s.yaml:5: required_pins.1"},
		{"subject id naming no argument", map[string]string{"tools.yaml": okTools + "    subject_ids: [customer]\n"}, "demo/tools.yaml:5: tool \"act\": subject id \"customer\" names no argument"},
		{"subject id naming a bad argument", map[string]string{"tools.yaml": okTools + "    subject_ids: [\"customer:{a b}\"]\n"}, "{a b} is not an argument name"},
		{"capture without subjects", map[string]string{"tools.yaml": okTools + "    captures: {kind: identity_verification}\n"}, "demo/tools.yaml:5: tool \"act\" captures identity_verification evidence but names no subject_ids"},
		{"capture without a kind", map[string]string{"tools.yaml": okTools + "    subject_ids: [\"c:{id}\"]\n    captures: {attributes: [x]}\n"}, "tools.0.captures: missing property 'kind'"},
		{"outputs naming a bad argument", map[string]string{"tools.yaml": okTools + "    outputs: {amount: \"a b\"}\n"}, "tools.0.outputs.amount: 'a b' does not match pattern"},
		{"outputs with an empty name", map[string]string{"tools.yaml": okTools + "    outputs: {\"\": amount}\n"}, "minLength: got 0, want 1"},
		{"outputs proposing the outcome", map[string]string{"tools.yaml": okTools + "    outputs: {outcome: result}\n"}, "demo/tools.yaml:5: tool \"act\": output outcome is writ's"},
		{"empty outputs", map[string]string{"tools.yaml": okTools + "    outputs: {}\n"}, "tools.0.outputs: minProperties"},
		{"outputs naming a number", map[string]string{"tools.yaml": okTools + "    outputs: {amount: 3}\n"}, "tools.0.outputs.amount: got number, want string"},
		{"capture's bad validity", map[string]string{"tools.yaml": okTools + "    subject_ids: [\"c:{id}\"]\n    captures: {kind: idv, valid_for: a day}\n"}, "demo/tools.yaml:6: \"a day\" is not a positive duration"},
		{"bad outputs schema", map[string]string{"specs/s.yaml": okSpec + "outputs_schema: {type: nonsense}\n"}, "demo/specs/s.yaml:5: outputs_schema"},
		{"context from evidence without an attribute", map[string]string{"specs/s.yaml": okSpec + "context_from_evidence:\n  - {field: fraud_score, kind: fraud_assessment}\n"}, "context_from_evidence.0: missing property 'attribute'"},
		{"context from evidence, bad field", map[string]string{"specs/s.yaml": okSpec + "context_from_evidence:\n  - {field: fraud.score, kind: fa, attribute: score}\n"}, "context_from_evidence.0.field"},
		{"context from evidence, claimed", map[string]string{"specs/s.yaml": okSpec + "context_from_evidence:\n  - {field: s, kind: fa, attribute: score, provenance: [claimed]}\n"}, "context_from_evidence.0.provenance.0"},
		{"context field from evidence twice", map[string]string{"specs/s.yaml": okSpec + "context_from_evidence:\n  - {field: s, kind: fa, attribute: score}\n  - {field: s, kind: fb, attribute: score}\n"}, "demo/specs/s.yaml:7: context field \"s\" comes from evidence twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pack.LoadFS(fsWith(tt.overrides), "demo")
			if writ.ErrorCode(err) != writ.EINVALID {
				t.Fatalf("LoadFS = %v, want EINVALID", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadFS error:\n%v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func FuzzLoadSpec(f *testing.F) {
	f.Add(okSpec)
	f.Add("decision_key: x\nversion: 1.0.0\naction_class: upload\nrequired_evidence: [{kind: a, max_age: 1h}]\nbudgets: {tokens: 3}\n")
	f.Add("a: &x 1\nb: *x\n")
	f.Fuzz(func(t *testing.T, spec string) {
		p, err := pack.LoadFS(fsWith(map[string]string{"specs/s.yaml": spec + "\n"}), "fuzz")
		if err == nil && p.Specs["demo.act"] == nil && len(p.Specs) == 0 {
			t.Fatal("a pack loaded without any spec")
		}
		if err != nil && writ.ErrorCode(err) != writ.EINVALID {
			t.Fatalf("LoadFS error is not EINVALID: %v", err)
		}
	})
}

// A redaction rule that names a pattern the patterns section does not
// define does not load, and names the line.
func TestNamedPatternReference(t *testing.T) {
	files := fstest.MapFS{
		"pack.yaml":     {Data: []byte("name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: []\ncontrols: controls.yaml\n")},
		"spec.yaml":     {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: x\n")},
		"controls.yaml": {Data: []byte("patterns:\n  - {id: card, regex: '[0-9]{16}'}\n  - {id: bad, regex: '('}\nredaction:\n  - id: r\n    named_patterns: [card, nope]\n")},
	}
	_, err := pack.LoadFS(files, "t")
	var got []string
	for _, d := range writ.ErrorDetails(err) {
		got = append(got, d.String())
	}
	want := []string{"controls.yaml:3: pattern bad: bad regex", `controls.yaml:6: redaction r names pattern "nope", which the patterns section does not define`}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("LoadFS problems %q, want one containing %q", got, w)
		}
	}
}

// TestToolSubjects: a tool's subject ids are its templates filled from a
// call's arguments; an argument that is absent, empty or not an integer
// is an error.
func TestToolSubjects(t *testing.T) {
	tool := &pack.Tool{Name: "pay", SubjectIDs: []string{"customer:{customer_id}", "order:{order_id}/{line}"}}
	for _, tc := range []struct {
		args map[string]any
		want []string
		err  string
	}{
		{map[string]any{"customer_id": "cus_77", "order_id": "ord_1", "line": float64(3)}, []string{"customer:cus_77", "order:ord_1/3"}, ""},
		{map[string]any{"customer_id": "cus_77", "order_id": "ord_1"}, nil, "argument line is not"},
		{map[string]any{"customer_id": "", "order_id": "ord_1", "line": float64(3)}, nil, "argument customer_id is not"},
		{map[string]any{"customer_id": "cus_77", "order_id": "ord_1", "line": 2.5}, nil, "argument line is not"},
		{map[string]any{"customer_id": true, "order_id": "ord_1", "line": float64(3)}, nil, "argument customer_id is not"},
	} {
		got, err := tool.Subjects(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Subjects(%v) = %v, %v; want an error saying %q", tc.args, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Subjects(%v) = %v, %v; want %v", tc.args, got, err, tc.want)
		}
	}
	if got, err := (&pack.Tool{}).Subjects(map[string]any{"a": "b"}); got != nil || err != nil {
		t.Errorf("Subjects of a tool with no subject_ids = %v, %v; want none", got, err)
	}
}

// TestToolProposedOutputs: a tool's proposed outputs are the arguments
// its outputs mapping names, their JSON types kept; an argument the call
// lacks is an error, so that leaving it out cannot leave a spec's
// outputs_schema unchecked.
func TestToolProposedOutputs(t *testing.T) {
	tool := &pack.Tool{Name: "pay", Outputs: map[string]string{"refund_amount_inr": "amount_inr", "order_id": "order_id", "lines": "lines"}}
	for _, tc := range []struct {
		args map[string]any
		want map[string]any
		err  string
	}{
		{
			map[string]any{"amount_inr": float64(4200), "order_id": "ord_1", "lines": []any{"a"}, "note": "x"},
			map[string]any{"refund_amount_inr": float64(4200), "order_id": "ord_1", "lines": []any{"a"}}, "",
		},
		{map[string]any{"amount_inr": "4200", "order_id": nil, "lines": false}, map[string]any{"refund_amount_inr": "4200", "order_id": nil, "lines": false}, ""},
		{map[string]any{"order_id": "ord_1", "lines": []any{}}, nil, "output refund_amount_inr from argument amount_inr, which the call does not give"},
		{map[string]any{}, nil, "output lines from argument lines"},
	} {
		got, err := tool.ProposedOutputs(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ProposedOutputs(%v) = %v, %v; want an error saying %q", tc.args, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ProposedOutputs(%v) = %v, %v; want %v", tc.args, got, err, tc.want)
		}
	}
	if got, err := (&pack.Tool{}).ProposedOutputs(map[string]any{"a": "b"}); got != nil || err != nil {
		t.Errorf("ProposedOutputs of a tool with no outputs = %v, %v; want none", got, err)
	}
}

func TestScorecardFailures(t *testing.T) {
	mark := map[string]float64{"safety": 1, "utility": 0.8, "policy": 1}
	tests := []struct {
		name      string
		pass      map[string]float64
		scorecard map[string]float64
		want      []string
	}{
		{"every dimension passes", mark, map[string]float64{"safety": 1, "utility": 0.8, "policy": 1, "latency": 0.1}, nil},
		{"one below its mark", mark, map[string]float64{"safety": 1, "utility": 0.79, "policy": 1}, []string{"utility"}},
		{"a dimension left out fails", mark, map[string]float64{"safety": 1, "utility": 0.9}, []string{"policy"}},
		{"several, in byte order", mark, map[string]float64{"utility": 0.1, "safety": 0.99}, []string{"policy", "safety", "utility"}},
		{"no scorecard is not scored", mark, nil, nil},
		{"an empty scorecard is not scored", mark, map[string]float64{}, nil},
		{"no pass mark", nil, map[string]float64{"utility": 0}, nil},
		{"a mark of 0 passes anything reported", map[string]float64{"cost": 0}, map[string]float64{"cost": 0}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &pack.Spec{ScorecardPass: tt.pass}
			if got := s.ScorecardFailures(tt.scorecard); !slices.Equal(got, tt.want) {
				t.Errorf("ScorecardFailures(%v) = %q, want %q", tt.scorecard, got, tt.want)
			}
		})
	}
}
