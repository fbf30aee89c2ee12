package lint

import (
	"slices"
	"strings"

	"github.com/writhq/writ/pack"
)

// graph is a workflow's steps and transitions: next, each conditional
// goto, and onFailure goto. pack.Load has already resolved every step
// reference, so each edge names a step that exists.
type graph struct {
	w     *pack.Workflow
	steps []*pack.Step
	index map[string]int
	out   [][]int // successors, self-loops included
	in    [][]int // predecessors, self-loops excluded
	root  int
	reach []bool   // reachable from the root
	dom   [][]bool // dom[n][d]: d dominates n (for reachable n)
}

func newGraph(w *pack.Workflow) *graph {
	g := &graph{w: w, steps: w.Steps, index: map[string]int{}}
	for i, s := range w.Steps {
		g.index[s.ID] = i
	}
	n := len(w.Steps)
	g.out = make([][]int, n)
	g.in = make([][]int, n)
	for i, s := range w.Steps {
		targets := []string{s.Next}
		for _, gt := range s.Goto {
			targets = append(targets, gt.Step)
		}
		if v := s.Verification; v != nil && v.OnFailure != nil && v.OnFailure.Action == "goto" {
			targets = append(targets, v.OnFailure.Step)
		}
		for _, t := range targets {
			j, ok := g.index[t]
			if t == "" || !ok {
				continue
			}
			g.out[i] = append(g.out[i], j)
			if j != i {
				g.in[j] = append(g.in[j], i)
			}
		}
	}
	g.root = g.index[w.Root().ID]
	g.reach = g.forward(g.root)
	g.dominators()
	return g
}

// forward returns the steps reachable from from (from included).
func (g *graph) forward(from int) []bool {
	seen := make([]bool, len(g.steps))
	stack := []int{from}
	seen[from] = true
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range g.out[i] {
			if !seen[j] {
				seen[j] = true
				stack = append(stack, j)
			}
		}
	}
	return seen
}

// backward returns the steps from which some step of from is reachable
// (those steps included).
func (g *graph) backward(from ...int) []bool {
	seen := make([]bool, len(g.steps))
	stack := append([]int(nil), from...)
	for _, i := range from {
		seen[i] = true
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range g.in[i] {
			if !seen[j] {
				seen[j] = true
				stack = append(stack, j)
			}
		}
	}
	return seen
}

// ancestors returns the steps that can run before step i: those from
// which i is reachable by at least one transition.
func (g *graph) ancestors(i int) []bool {
	anc := g.backward(g.in[i]...)
	for _, j := range g.out[i] {
		if j == i {
			anc[i] = true
		}
	}
	return anc
}

// dominators computes, for every step reachable from the root, the steps
// every path from the root to it passes through.
func (g *graph) dominators() {
	n := len(g.steps)
	g.dom = make([][]bool, n)
	for i := range n {
		if !g.reach[i] {
			continue
		}
		g.dom[i] = make([]bool, n)
		if i == g.root {
			g.dom[i][i] = true
			continue
		}
		copy(g.dom[i], g.reach)
	}
	for changed := true; changed; {
		changed = false
		for i := range n {
			if !g.reach[i] || i == g.root {
				continue
			}
			next := make([]bool, n)
			copy(next, g.reach)
			for _, p := range g.in[i] {
				if !g.reach[p] {
					continue
				}
				for d := range n {
					next[d] = next[d] && g.dom[p][d]
				}
			}
			next[i] = true
			for d := range n {
				if next[d] != g.dom[i][d] {
					g.dom[i] = next
					changed = true
					break
				}
			}
		}
	}
}

// guarded reports whether step i bounds a loop through it: its
// verification checks something, so it can fail, and once its (finite)
// retries are spent it aborts or escalates.
func guarded(s *pack.Step) bool {
	v := s.Verification
	if v == nil || len(v.Evidence)+len(v.ToolCalls) == 0 || v.OnFailure == nil {
		return false
	}
	return v.OnFailure.Action == "abort" || v.OnFailure.Action == "escalate"
}

func (l *linter) graph(g *graph) {
	root := g.steps[g.root]

	// goto-self: a step that goes to itself.
	for _, s := range g.steps {
		if s.Next == s.ID {
			l.errorf(s.Pos, RuleGotoSelf, "step %s names itself as next; repeat a step with verification.retry instead", s.ID)
		}
		for _, gt := range s.Goto {
			if gt.Step == s.ID {
				l.errorf(gt.Pos, RuleGotoSelf, "step %s has a goto to itself (when %s); repeat a step with verification.retry instead", s.ID, gt.When)
			}
		}
		if v := s.Verification; v != nil && v.OnFailure != nil && v.OnFailure.Action == "goto" && v.OnFailure.Step == s.ID {
			l.errorf(v.OnFailure.Pos, RuleGotoSelf, "step %s goes to itself on failure; repeat a step with verification.retry instead", s.ID)
		}
	}

	// graph-root and graph-unreachable.
	extraRoot := make([]bool, len(g.steps))
	for i, s := range g.steps {
		if i != g.root && len(g.in[i]) == 0 {
			extraRoot[i] = true
			l.errorf(s.Pos, RuleGraphRoot, "step %s has no incoming transition but is not the root step %s: a workflow has exactly one root", s.ID, root.ID)
		}
	}
	for i, s := range g.steps {
		if !g.reach[i] && !extraRoot[i] {
			l.add(s.Pos, RuleGraphUnreachable, Warning, "step %s is not reachable from the root step %s", s.ID, root.ID)
		}
	}

	// graph-terminal.
	var terminals []int
	deadEnd := make([]bool, len(g.steps))
	for i, s := range g.steps {
		switch {
		case s.Terminal:
			terminals = append(terminals, i)
			if s.Next != "" || len(s.Goto) > 0 {
				l.errorf(s.Pos, RuleGraphTerminal, "step %s is terminal but has a next step or goto", s.ID)
			}
		case s.Next == "" && len(s.Goto) == 0:
			deadEnd[i] = true
			l.errorf(s.Pos, RuleGraphTerminal, "dead end: step %s has no next step and is not terminal", s.ID)
		case s.Next == "":
			deadEnd[i] = true
			l.errorf(s.Pos, RuleGraphTerminal, "dead end: step %s has no next step for when no goto condition holds, and is not terminal", s.ID)
		}
	}
	if len(terminals) == 0 {
		l.errorf(g.w.Pos, RuleGraphTerminal, "workflow %s has no terminal step", g.w.WorkflowID)
	} else {
		ends := g.backward(terminals...)
		for i, s := range g.steps {
			if !ends[i] && !deadEnd[i] {
				l.errorf(s.Pos, RuleGraphTerminal, "no terminal step is reachable from step %s", s.ID)
			}
		}
	}

	// graph-cycle: with the guarded steps taken out, no cycle may remain.
	keep := make([]bool, len(g.steps))
	for i, s := range g.steps {
		keep[i] = !guarded(s)
	}
	for _, scc := range g.components(keep) {
		if len(scc) < 2 {
			continue // a self-loop is goto-self's
		}
		s := g.steps[scc[0]]
		l.errorf(s.Pos, RuleGraphCycle, "cycle %s has no guard: no step on it has verification (evidence or tool calls) with onFailure abort or escalate, so it can run forever", g.cycle(scc))
	}

	// goto-guard: a conditional goto needs retries exhausted → abort.
	for _, s := range g.steps {
		if len(s.Goto) == 0 {
			continue
		}
		const need = "it needs verification with onFailure abort once its retries are exhausted"
		v := s.Verification
		switch {
		case v == nil:
			l.errorf(s.Goto[0].Pos, RuleGotoGuard, "step %s has a conditional goto but no verification: %s", s.ID, need)
		case v.OnFailure == nil:
			l.errorf(s.Goto[0].Pos, RuleGotoGuard, "step %s has a conditional goto but its verification has no onFailure: %s", s.ID, need)
		case v.OnFailure.Action != "abort":
			l.errorf(s.Goto[0].Pos, RuleGotoGuard, "step %s has a conditional goto but its onFailure is %s: %s", s.ID, v.OnFailure.Action, need)
		}
	}
}

// components returns the strongly connected components of the subgraph
// of kept steps (Tarjan), each sorted by step order, in order of their
// first step.
func (g *graph) components(keep []bool) [][]int {
	n := len(g.steps)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var visit func(i int)
	visit = func(i int) {
		index[i], low[i] = next, next
		next++
		stack = append(stack, i)
		onStack[i] = true
		for _, j := range g.out[i] {
			if !keep[j] {
				continue
			}
			if index[j] < 0 {
				visit(j)
				low[i] = min(low[i], low[j])
			} else if onStack[j] {
				low[i] = min(low[i], index[j])
			}
		}
		if low[i] == index[i] {
			var scc []int
			for {
				j := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[j] = false
				scc = append(scc, j)
				if j == i {
					break
				}
			}
			out = append(out, scc)
		}
	}
	for i := range n {
		if keep[i] && index[i] < 0 {
			visit(i)
		}
	}
	for _, scc := range out {
		slices.Sort(scc)
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}

// cycle renders a shortest cycle through the first step of a strongly
// connected component, staying inside it: "a → b → a".
func (g *graph) cycle(scc []int) string {
	in := map[int]bool{}
	for _, i := range scc {
		in[i] = true
	}
	start := scc[0]
	prev := map[int]int{}
	queue := []int{start}
	seen := map[int]bool{start: true}
	last := -1
	for len(queue) > 0 && last < 0 {
		i := queue[0]
		queue = queue[1:]
		for _, j := range g.out[i] {
			if j == start && i != start {
				last = i
				break
			}
			if in[j] && !seen[j] {
				seen[j] = true
				prev[j] = i
				queue = append(queue, j)
			}
		}
	}
	path := []string{g.steps[start].ID}
	var rev []string
	for i := last; i >= 0 && i != start; i = prev[i] {
		rev = append(rev, g.steps[i].ID)
	}
	for k := len(rev) - 1; k >= 0; k-- {
		path = append(path, rev[k])
	}
	path = append(path, g.steps[start].ID)
	return strings.Join(path, " → ")
}
