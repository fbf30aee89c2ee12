package pack

import (
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Workflow is a workflow of steps, each optionally with a verification
// contract: what a step's result must prove before the step is accepted.
type Workflow struct {
	WorkflowID  string   `yaml:"workflow_id"`
	Version     string   `yaml:"version"`
	Description string   `yaml:"description"`
	Context     []string `yaml:"context"`
	Start       string   `yaml:"start"`
	Steps       []*Step  `yaml:"steps"`

	Pos Pos `yaml:"-"`
	// byID indexes Steps.
	byID map[string]*Step
}

// ID is workflow_id@version.
func (w *Workflow) ID() string { return w.WorkflowID + "@" + w.Version }

// Step returns the step with id, or nil.
func (w *Workflow) Step(id string) *Step { return w.byID[id] }

// Root is the step a run starts at.
func (w *Workflow) Root() *Step {
	if w.Start != "" {
		return w.byID[w.Start]
	}
	return w.Steps[0]
}

// Step is one step of a workflow.
type Step struct {
	ID           string        `yaml:"id"`
	Description  string        `yaml:"description"`
	ActionClass  string        `yaml:"action_class"`
	Prompt       string        `yaml:"prompt"`
	Outputs      []string      `yaml:"outputs"`
	Verification *Verification `yaml:"verification"`
	Next         string        `yaml:"next"`
	Goto         []*Goto       `yaml:"goto"`
	Terminal     bool          `yaml:"terminal"`

	Pos       Pos `yaml:"-"`
	PromptPos Pos `yaml:"-"`
}

// Verification is a step's verification contract.
type Verification struct {
	Evidence          []*EvidenceRule `yaml:"evidence"`
	ToolCalls         []*ToolCallRule `yaml:"toolCalls"`
	OnMissingEvidence string          `yaml:"onMissingEvidence"` // reject-and-retry (default), reject-and-abort, warn
	RetryPrompt       string          `yaml:"retryPrompt"`
	Retry             *Retry          `yaml:"retry"`
	OnFailure         *OnFailure      `yaml:"onFailure"`

	Pos Pos `yaml:"-"`
}

// EvidenceRule is one evidence rule: the value at Path must meet Expect,
// Equals, Pattern or CEL.
type EvidenceRule struct {
	Path          string `yaml:"path"`
	Expect        any    `yaml:"expect"` // true, false, "present", "absent" or nil
	Equals        any    `yaml:"equals"`
	HasEquals     bool   `yaml:"-"`
	PatternText   string `yaml:"pattern"`
	CEL           string `yaml:"cel"`
	RejectMessage string `yaml:"rejectMessage"`

	Pattern *regexp.Regexp `yaml:"-"`
	Pos     Pos            `yaml:"-"`
}

// ToolCallRule requires Min calls of a tool (observed by writ, unless
// Observed is written out false; observed and reported succeeded, if
// Executed) that meet When.
type ToolCallRule struct {
	Name string `yaml:"name"`
	Min  int    `yaml:"min"`
	// Observed is nil when the rule does not say: observed calls only
	// (RequiresObserved). observed: false must be written out for a
	// claimed call to count.
	Observed      *bool  `yaml:"observed"`
	Executed      bool   `yaml:"executed"`
	When          string `yaml:"when"`
	RejectMessage string `yaml:"rejectMessage"`

	Pos Pos `yaml:"-"`
}

// RequiresObserved reports whether only calls writ observed count: the
// default, unless the rule writes observed: false.
func (t *ToolCallRule) RequiresObserved() bool {
	return t.Observed == nil || *t.Observed
}

// ClaimedAllowed reports whether the rule writes observed: false, so
// that calls the agent merely claims count.
func (t *ToolCallRule) ClaimedAllowed() bool {
	return t.Observed != nil && !*t.Observed
}

// Retry is a step's retry budget and backoff.
type Retry struct {
	Budget           int     `yaml:"budget"`
	Strategy         string  `yaml:"strategy"`
	InitialDelayText string  `yaml:"initialDelay"`
	MaxDelayText     string  `yaml:"maxDelay"`
	Jitter           float64 `yaml:"jitter"`

	InitialDelay, MaxDelay time.Duration `yaml:"-"`
	Pos                    Pos           `yaml:"-"`
}

// OnFailure says what happens once a step's retries are spent (or it is
// rejected with reject-and-abort): abort, escalate to human review, or go
// to a step.
type OnFailure struct {
	Action     string `yaml:"action"`
	Step       string `yaml:"step"`
	TargetHint string `yaml:"target_hint"`
	Pos        Pos    `yaml:"-"`
}

// Goto is a conditional transition: when When holds over the step's
// result, the run goes to Step instead of Next.
type Goto struct {
	When string `yaml:"when"`
	Step string `yaml:"step"`
	Pos  Pos    `yaml:"-"`
}

// WorkflowPolicies are the pack-wide rules for workflows.
type WorkflowPolicies struct {
	MutatingActionClasses          []string     `yaml:"mutatingActionClasses"`
	RequireVerificationForMutating *bool        `yaml:"requireVerificationForMutating"`
	Exemptions                     []*Exemption `yaml:"exemptions"`
	Retry                          struct {
		MaxBudget         *int     `yaml:"maxBudget"`
		AllowedStrategies []string `yaml:"allowedStrategies"`
	} `yaml:"retry"`

	Pos Pos `yaml:"-"`
}

// Exemption exempts one mutating step from the verification requirement
// (Workflow and Step), or one mutating spec from the rule that its
// evidence requirements do not accept claimed evidence (DecisionKey).
// Exactly one of the two shapes is written, with its Reason.
type Exemption struct {
	Workflow    string `yaml:"workflow" json:"workflow,omitempty"`
	Step        string `yaml:"step" json:"step,omitempty"`
	DecisionKey string `yaml:"decision_key" json:"decision_key,omitempty"`
	Reason      string `yaml:"reason" json:"reason"`
	Pos         Pos    `yaml:"-" json:"-"`
}

// MutatingActionClasses are the seed's mutating action classes: a step of
// one of them gets the stricter defaults of a mutating step whether or
// not the pack has a workflow policies file. memory_write is among them:
// a step whose memory does not persist is exempted in writing.
var MutatingActionClasses = []string{"record_mutation", "system_change", "external_message_send", "webhook_call", "browser_submit", "upload", "memory_write"}

// Mutating reports whether an action class is mutating: one of
// MutatingActionClasses, or one the policies add. The policies can add
// classes, never remove one; a step is relieved only by an exemption.
// A nil p has the defaults alone.
func (p *WorkflowPolicies) Mutating(actionClass string) bool {
	return slices.Contains(MutatingActionClasses, actionClass) || p.DeclaredMutating(actionClass)
}

// DeclaredMutating reports whether the policies themselves list an action
// class as mutating (what Mutating meant before the seed's classes were
// mutating by default, issue 31).
func (p *WorkflowPolicies) DeclaredMutating(actionClass string) bool {
	return p != nil && slices.Contains(p.MutatingActionClasses, actionClass)
}

// SpecExemption returns the exemption of the spec with decision key
// key, or nil: a written reason for a mutating spec's evidence
// requirement to accept claimed evidence (lint's claimed-evidence rule).
func (p *WorkflowPolicies) SpecExemption(key string) *Exemption {
	if p == nil {
		return nil
	}
	for _, e := range p.Exemptions {
		if e.DecisionKey != "" && e.DecisionKey == key {
			return e
		}
	}
	return nil
}

// ExemptionFor returns the exemption of a workflow's step, or nil. An
// exemption names the workflow by its id, or by id@version to exempt one
// version only.
func (p *WorkflowPolicies) ExemptionFor(w *Workflow, stepID string) *Exemption {
	if p == nil {
		return nil
	}
	for _, e := range p.Exemptions {
		if (e.Workflow == w.WorkflowID || e.Workflow == w.ID()) && e.Step == stepID {
			return e
		}
	}
	return nil
}

// RequiresVerification reports whether mutating steps must carry
// verification (default true).
func (p *WorkflowPolicies) RequiresVerification() bool {
	return p == nil || p.RequireVerificationForMutating == nil || *p.RequireVerificationForMutating
}

func (l *loader) loadWorkflow(p *Pack, rel string) {
	doc := l.read(rel, "workflow")
	if doc == nil {
		return
	}
	w := new(Workflow)
	if err := doc.root.Decode(w); err != nil {
		l.addf(l.pos(doc, ""), "%v", err)
		return
	}
	w.Pos = l.pos(doc, "")
	if prev, dup := p.Workflows[w.WorkflowID]; dup {
		l.addf(l.pos(doc, "/workflow_id"), "workflow %q is already defined at %s", w.WorkflowID, prev.Pos)
		return
	}
	w.byID = map[string]*Step{}
	for i, s := range w.Steps {
		ptr := fmt.Sprintf("/steps/%d", i)
		s.Pos = l.pos(doc, ptr)
		s.PromptPos = l.pos(doc, ptr+"/prompt")
		if prev, dup := w.byID[s.ID]; dup {
			l.addf(l.pos(doc, ptr+"/id"), "step %q is already defined at %s", s.ID, prev.Pos)
			continue
		}
		w.byID[s.ID] = s
		for j, g := range s.Goto {
			g.Pos = l.pos(doc, fmt.Sprintf("%s/goto/%d", ptr, j))
		}
		v := s.Verification
		if v == nil {
			continue
		}
		v.Pos = l.pos(doc, ptr+"/verification")
		if v.OnMissingEvidence == "" {
			v.OnMissingEvidence = "reject-and-retry"
		}
		for j, e := range v.Evidence {
			eptr := fmt.Sprintf("%s/verification/evidence/%d", ptr, j)
			e.Pos = l.pos(doc, eptr)
			if _, ok := doc.lines[eptr+"/equals"]; ok {
				e.HasEquals = true
			}
			if e.PatternText != "" {
				re, err := regexp.Compile(e.PatternText)
				if err != nil {
					l.addf(l.pos(doc, eptr+"/pattern"), "bad pattern: %v", err)
				}
				e.Pattern = re
			}
		}
		for j, t := range v.ToolCalls {
			t.Pos = l.pos(doc, fmt.Sprintf("%s/verification/toolCalls/%d", ptr, j))
			if t.Min == 0 {
				t.Min = 1
			}
		}
		if r := v.Retry; r != nil {
			rptr := ptr + "/verification/retry"
			r.Pos = l.pos(doc, rptr)
			r.InitialDelay = l.duration(doc, rptr+"/initialDelay", r.InitialDelayText)
			r.MaxDelay = l.duration(doc, rptr+"/maxDelay", r.MaxDelayText)
			if r.Strategy == "" {
				r.Strategy = "fixed"
			}
		}
		if f := v.OnFailure; f != nil {
			f.Pos = l.pos(doc, ptr+"/verification/onFailure")
		}
	}
	// References must resolve for a run to be possible; graph safety
	// (reachability, cycles, guards) is lint's.
	ref := func(pos Pos, what, id string) {
		if id != "" && w.byID[id] == nil {
			l.addf(pos, "%s names step %q, which workflow %s does not define", what, id, w.WorkflowID)
		}
	}
	ref(l.pos(doc, "/start"), "start", w.Start)
	for _, s := range w.Steps {
		ref(s.Pos, "step "+s.ID+" next", s.Next)
		for _, g := range s.Goto {
			ref(g.Pos, "step "+s.ID+" goto", g.Step)
		}
		if v := s.Verification; v != nil && v.OnFailure != nil {
			ref(v.OnFailure.Pos, "step "+s.ID+" onFailure", v.OnFailure.Step)
		}
	}
	p.Workflows[w.WorkflowID] = w
}

func (l *loader) loadWorkflowPolicies(p *Pack, rel string) {
	doc := l.read(rel, "workflow-policies")
	if doc == nil {
		return
	}
	wp := new(WorkflowPolicies)
	if err := doc.root.Decode(wp); err != nil {
		l.addf(l.pos(doc, ""), "%v", err)
		return
	}
	wp.Pos = l.pos(doc, "")
	for i, e := range wp.Exemptions {
		e.Pos = l.pos(doc, fmt.Sprintf("/exemptions/%d", i))
	}
	p.WorkflowPolicies = wp
}
