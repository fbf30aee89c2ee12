package acceptance_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/pack"
)

func TestCompileErrors(t *testing.T) {
	const wf = `workflow_id: w
version: 1.0.0
steps:
  - id: s
    goto:
      - when: 'result.size() +'
        step: end
      - when: '1 + 1'
        step: end
    verification:
      evidence:
        - path: a
          cel: 'call.name == "x"'
          rejectMessage: r
        - path: b
          cel: 'value ==='
          rejectMessage: r
        - path: c
          cel: '"text"'
          rejectMessage: r
      toolCalls:
        - name: t
          when: 'result.ok'
        - name: u
          when: 'call.args.size()'
    next: end
  - id: end
    terminal: true
`
	p, err := pack.LoadFS(packFS(wf, "", ""), "t")
	if err != nil {
		t.Fatal(err)
	}
	_, err = acceptance.Compile(p)
	var we *writ.Error
	if !errors.As(err, &we) || we.Code != writ.EINVALID {
		t.Fatalf("err = %v, want EINVALID", err)
	}
	if want := "pack t is invalid (7 problems in verification contracts)"; we.Message != want {
		t.Errorf("Message = %q, want %q", we.Message, want)
	}
	want := []struct {
		line int
		has  []string
	}{
		{6, []string{"workflow w step s goto 0 when", `invalid CEL condition "result.size() +"`, "column "}},
		{8, []string{"workflow w step s goto 1 when", `condition "1 + 1" has type int, want bool`}},
		{12, []string{"workflow w step s evidence 0 (a) cel", "undeclared reference to 'call'"}},
		{15, []string{"workflow w step s evidence 1 (b) cel", `invalid CEL condition "value ==="`}},
		{18, []string{"workflow w step s evidence 2 (c) cel", `condition "\"text\"" has type string, want bool`}},
		{22, []string{"workflow w step s toolCalls 0 (t) when", "undeclared reference to 'result'"}},
		{24, []string{"workflow w step s toolCalls 1 (u) when", "has type int, want bool"}},
	}
	if len(we.Details) != len(want) {
		t.Fatalf("details:\n%v\nwant %d", err, len(want))
	}
	for i, w := range want {
		d := we.Details[i]
		if d.File != "t/wf.yaml" || d.Line != w.line {
			t.Errorf("detail %d at %s:%d, want t/wf.yaml:%d (%s)", i, d.File, d.Line, w.line, d.Message)
		}
		for _, s := range w.has {
			if !strings.Contains(d.Message, s) {
				t.Errorf("detail %d = %q, want it to contain %q", i, d.Message, s)
			}
		}
	}
}

func TestCompileExample(t *testing.T) {
	p, err := pack.Load("../examples/storybook")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acceptance.Compile(p); err != nil {
		t.Errorf("Compile: %v", err)
	}
}
