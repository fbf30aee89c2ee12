package lint

import (
	"fmt"
	"slices"
	"sort"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// provenanceFields are the members of the CEL variable actor that hold a
// provenance (policy.Variables).
var provenanceFields = []string{"provenance", "delegated_user_provenance"}

// provenances checks every rule and control condition that compares a
// provenance (actor.provenance, actor.delegated_user_provenance,
// context_provenance.<field>) with a string: the string must be a provenance writ knows (writ.Provenances),
// or the condition can never be what its author meant: a rule that
// blocks unless actor.provenance == "authentic" blocks everyone, and one
// that allows when it is "verified" allows no one.
func (l *linter) provenances() {
	parser, err := cel.NewEnv()
	if err != nil {
		return
	}
	check := func(pos pack.Pos, what, cond string) {
		if cond == "" {
			return
		}
		parsed, iss := parser.Parse(cond)
		if iss.Err() != nil {
			return // RuleCEL reports it
		}
		for _, bad := range unknownProvenances(parsed.NativeRep().Expr()) {
			l.errorf(pos, RuleProvenance, "%s compares a provenance with %q, which is none: writ's provenances are %s", what, bad, provenanceList())
		}
	}
	ids := make([]string, 0, len(l.p.Bundles))
	for id := range l.p.Bundles {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, r := range l.p.Bundles[id].Rules {
			check(r.WhenPos, "rule "+r.ID, r.When)
		}
	}
	for _, c := range slices.Concat(l.p.Controls.MustRefuse, l.p.Controls.MustEscalate) {
		check(c.WhenPos, "control "+c.ID, c.When)
	}
}

// unknownProvenances returns the string constants e compares a
// provenance member of actor with (==, != or in a list) that are not
// provenances.
func unknownProvenances(e ast.Expr) []string {
	var out []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if x.Kind() != ast.CallKind {
			return
		}
		call := x.AsCall()
		args := call.Args()
		if len(args) != 2 {
			return
		}
		switch call.FunctionName() {
		case operators.Equals, operators.NotEquals:
			for i := range 2 {
				if isProvenance(args[i]) {
					out = append(out, unknownConst(args[1-i])...)
				}
			}
		case operators.In:
			if isProvenance(args[0]) && args[1].Kind() == ast.ListKind {
				for _, el := range args[1].AsList().Elements() {
					out = append(out, unknownConst(el)...)
				}
			}
		}
	}))
	return out
}

// isProvenance reports whether e reads actor.provenance or
// actor["provenance"] (or the delegated user's), or a context field's
// provenance (context_provenance.<field> or context_provenance["field"]).
func isProvenance(e ast.Expr) bool {
	switch e.Kind() {
	case ast.SelectKind:
		s := e.AsSelect()
		return isIdent(s.Operand(), "actor") && slices.Contains(provenanceFields, s.FieldName()) ||
			isIdent(s.Operand(), "context_provenance")
	case ast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != operators.Index || len(c.Args()) != 2 {
			return false
		}
		if isIdent(c.Args()[0], "context_provenance") {
			return true // any field's provenance
		}
		if !isIdent(c.Args()[0], "actor") {
			return false
		}
		k := c.Args()[1]
		if k.Kind() != ast.LiteralKind {
			return false
		}
		s, ok := k.AsLiteral().(types.String)
		return ok && slices.Contains(provenanceFields, string(s))
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	return e.Kind() == ast.IdentKind && e.AsIdent() == name
}

// unknownConst returns e's value when e is a string constant that is no
// provenance.
func unknownConst(e ast.Expr) []string {
	if e.Kind() != ast.LiteralKind {
		return nil
	}
	s, ok := e.AsLiteral().(types.String)
	if !ok || writ.Provenance(s).Valid() {
		return nil
	}
	return []string{string(s)}
}

func provenanceList() string {
	names := make([]string, len(writ.Provenances))
	for i, p := range writ.Provenances {
		names[i] = fmt.Sprintf("%q", p)
	}
	return listing(names)
}
