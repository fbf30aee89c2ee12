// Package pack loads and validates packs: the versioned, content-hashed
// directories of YAML files in which policy owners keep decision specs,
// policy bundles, runtime controls and a tool manifest.
//
// Loading is strict. Every file is checked against an embedded JSON Schema
// (schema/*.schema.json), then cross-references are resolved (a spec's
// bundles, a tool's decision key, a rule's gate). Every problem is reported
// with its file and line; a pack with any problem does not load. Package
// pack does no evaluation: rule conditions are compiled by package policy.
package pack

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/writhq/writ"
)

// ManifestFile is the file at the root of every pack.
const ManifestFile = "pack.yaml"

// Pack is a loaded, validated pack.
type Pack struct {
	Name        string
	Version     string
	Description string
	// Hash is the pack's content hash: Digest of Manifest.
	Hash string
	// Manifest lists every file the pack loaded, one "<sha256:hex>  <path>\n"
	// line per file, sorted by path.
	Manifest []byte
	// Files are the files the pack loaded (pack.yaml included), sorted by path.
	Files []File
	// Dir is where the pack was loaded from (for messages only).
	Dir string

	Limits   Limits
	Specs    map[string]*Spec   // by decision key
	Bundles  map[string]*Bundle // by bundle id
	Tools    map[string]*Tool   // by tool name
	Controls Controls
	Gates    map[string]*Gate // by gate id
	// Workflows by workflow id, and the pack's workflow policies (the
	// zero policies when the pack has no policies file).
	Workflows        map[string]*Workflow
	WorkflowPolicies *WorkflowPolicies
	// ApprovalWebhook, when set, announces each new approval request.
	ApprovalWebhook *Webhook
	// History are the pack's aggregates over the tenant's own decisions,
	// in file order (see history.go).
	History []*Aggregate
	// Params are the pack's tenant parameters, in file order (see
	// params.go); none when the pack has no params file.
	Params []*Param
}

// Webhook is where writ announces new approval requests: an HTTPS (or,
// for development, loopback HTTP) URL, and the environment variable that
// holds the secret the deliveries are signed with. The secret itself
// never lives in the pack.
type Webhook struct {
	URL       string `yaml:"url"`
	SecretEnv string `yaml:"secret_env"`
}

// ID is the pack's pinned version, name@version.
func (p *Pack) ID() string { return p.Name + "@" + p.Version }

// RequiredGates returns the gates, in controls.yaml order, that a check
// whose approval_mode_effective is mode needs an approval at: the
// required gates whose approval mode mode reaches (see Gate.Required).
func (p *Pack) RequiredGates(mode writ.ApprovalMode) []*Gate {
	var out []*Gate
	for _, g := range p.Controls.ApprovalGates {
		if g.Required && g.ApprovalMode != "" && mode.Rank() >= writ.ApprovalMode(g.ApprovalMode).Rank() {
			out = append(out, g)
		}
	}
	return out
}

// File is one file of a pack, content-addressed.
type File struct {
	Path string // slash-separated, relative to the pack root
	Hash string // sha256:hex of Data
	Data []byte
}

// Pos locates a definition in a pack file.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// Limits bound evaluation.
type Limits struct {
	// CELCost is the runtime cost limit of one condition evaluation.
	CELCost uint64
}

// DefaultCELCost is the default runtime cost limit of one CEL evaluation.
const DefaultCELCost = 100_000

// Spec is a decision spec, decision_key@version.
type Spec struct {
	DecisionKey      string                 `yaml:"decision_key"`
	Version          string                 `yaml:"version"`
	Description      string                 `yaml:"description"`
	ActionClass      string                 `yaml:"action_class"`
	AllowedOutcomes  []string               `yaml:"allowed_outcomes"`
	ApprovalMode     string                 `yaml:"approval_mode"`
	Policies         []string               `yaml:"policies"`
	OutputsSchemaDoc any                    `yaml:"-"`
	RequiredEvidence []*EvidenceRequirement `yaml:"required_evidence"`
	Budgets          *Budgets               `yaml:"budgets"`
	Execution        *Execution             `yaml:"execution"`
	// RequiredPins are the lineage pins (PinKGSnapshot, PinModelProfile,
	// PinEvaluatorSuite) every check of the spec must carry in its
	// request's lineage: a check without one is not allowed (the seed's
	// lineage rule), and a record allowed without one breaks it.
	RequiredPins []string `yaml:"required_pins"`
	// ScorecardPass is the pass mark of each scorecard dimension, in
	// [0, 1]: a record of the spec whose scorecard has a dimension below
	// its mark (or leaves it out) lists it in scorecard_failed (see
	// ScorecardFailures). The decision itself does not change.
	ScorecardPass map[string]float64 `yaml:"scorecard_pass"`
	// ContextFromEvidence are the context fields writ fills from the
	// evidence the check cites, ignoring the caller's value (issue 32).
	ContextFromEvidence []*ContextSource `yaml:"context_from_evidence"`

	// OutputsSchema is the compiled outputs schema, or nil.
	OutputsSchema *jsonschema.Schema `yaml:"-"`
	Pos           Pos                `yaml:"-"`
}

// ID is decision_key@version.
func (s *Spec) ID() string { return s.DecisionKey + "@" + s.Version }

// ScorecardFailures returns, in byte order, the dimensions of the spec's
// pass mark that scorecard fails: those it scores below the mark and
// those it leaves out (fail closed). It returns nil when the spec has no
// pass mark or scorecard is empty: a check that reports no scores is not
// scored. It is a function of the spec and the scorecard alone, so
// replay against the pinned pack recomputes it.
func (s *Spec) ScorecardFailures(scorecard map[string]float64) []string {
	if len(s.ScorecardPass) == 0 || len(scorecard) == 0 {
		return nil
	}
	var failed []string
	for dim, mark := range s.ScorecardPass {
		if score, ok := scorecard[dim]; !ok || score < mark {
			failed = append(failed, dim)
		}
	}
	slices.Sort(failed)
	return failed
}

// The lineage pins a spec may require (Spec.RequiredPins), named as the
// record's lineage members.
const (
	PinKGSnapshot     = "kg_snapshot"
	PinModelProfile   = "model_profile"
	PinEvaluatorSuite = "evaluator_suite"
)

// LineagePins are the pins a spec may require, in record order.
var LineagePins = []string{PinKGSnapshot, PinModelProfile, PinEvaluatorSuite}

// EvidenceRequirement is evidence a spec requires before it allows.
type EvidenceRequirement struct {
	Kind string `yaml:"kind"`
	// When, when set, is a CEL condition over the request: the
	// requirement applies only to checks for which it holds (or cannot be
	// evaluated: writ fails closed).
	When         string  `yaml:"when"`
	MaxAgeText   string  `yaml:"max_age"`
	OnMissing    string  `yaml:"on_missing"`
	Reason       *Reason `yaml:"reason"`
	SafeNextStep *Reason `yaml:"safe_next_step"`
	Routing      Routing `yaml:"routing"`
	// Provenance lists the provenances an item must have to satisfy the
	// requirement: issued (submitted or signed by an issuer the tenant
	// trusts), observed (captured by writ itself, the MCP gateway) and
	// claimed (the caller's word: a citation writ cannot resolve). Empty
	// means the default: issued and observed for a spec of a mutating
	// action class (MutatingActionClasses, or one the workflow policies
	// add), all three otherwise. See AcceptedProvenance.
	Provenance []string `yaml:"provenance"`

	MaxAge  time.Duration `yaml:"-"`
	Pos     Pos           `yaml:"-"`
	WhenPos Pos           `yaml:"-"`
}

// ContextSource says that a context field comes from evidence: writ
// sets context.<Field> to attribute Attribute of the cited item of Kind
// that resolved with an accepted provenance, names one of the check's
// subjects (with Subject's prefix, when set) and was observed last; the
// caller's value of the field is never read. With no such item the field
// is absent, and a condition that reads it fails closed.
type ContextSource struct {
	Field     string `yaml:"field"`
	Kind      string `yaml:"kind"`
	Attribute string `yaml:"attribute"`
	// Subject, when set, is the type of subject id the item must name:
	// "customer" for customer:… ids.
	Subject string `yaml:"subject"`
	// Provenance lists the provenances the item may have: issued,
	// observed (the default is both; claimed is never accepted, since a
	// claimed item is the caller's word).
	Provenance []string `yaml:"provenance"`
	Pos        Pos      `yaml:"-"`
}

// Accepts reports whether an item of provenance p may fill the field.
func (c *ContextSource) Accepts(p string) bool {
	if len(c.Provenance) == 0 {
		return p == "issued" || p == "observed"
	}
	return slices.Contains(c.Provenance, p)
}

// Execution says what follows an allow of the spec: how long the allow
// stays valid, and whether the agent must report whether the effect ran.
type Execution struct {
	ValidForText string `yaml:"valid_for"`
	// Report is "required" or "optional" (the default).
	Report string `yaml:"report"`

	// ValidFor is ValidForText parsed; zero means an allow does not expire.
	ValidFor time.Duration `yaml:"-"`
	Pos      Pos           `yaml:"-"`
}

// ReportRequired reports whether an allow of the spec stays IN_FLIGHT
// until its execution report closes it.
func (x *Execution) ReportRequired() bool { return x != nil && x.Report == "required" }

// Budgets bound the resources a run may have used when it asks.
type Budgets struct {
	ToolCalls    *int64   `yaml:"tool_calls"`
	Tokens       *int64   `yaml:"tokens"`
	CostUSDCents *float64 `yaml:"cost_usd_cents"`
	WallClockMS  *int64   `yaml:"wall_clock_ms"`
	// ActorToolCalls bounds the tool calls writ allowed the acting
	// principal (actor) over ActorWindow, whatever sessions it named.
	ActorToolCalls  *int64 `yaml:"actor_tool_calls"`
	ActorWindowText string `yaml:"actor_window"`
	// ActorWindow is ActorWindowText parsed, DefaultActorWindow when
	// it is empty.
	ActorWindow time.Duration `yaml:"-"`
	// Accepts is the weakest provenance of usage figures the tokens,
	// cost_usd_cents and wall_clock_ms budgets count: claimed (the
	// default) or issued (only figures a meter key sent).
	Accepts  string `yaml:"accepts"`
	OnExceed string `yaml:"on_exceed"`
	Pos      Pos    `yaml:"-"`
}

// DefaultActorWindow is the window of an actor_tool_calls budget that
// names none.
const DefaultActorWindow = 24 * time.Hour

// Reason is a code and a message; messages may hold {{path}} templates.
type Reason struct {
	Code    string `yaml:"code"`
	Message string `yaml:"message"`
}

// Routing carries routing hints.
type Routing struct {
	TargetHint   string `yaml:"target_hint"`
	ReturnToNode string `yaml:"return_to_node"`
}

// AppliesTo narrows a rule or control; empty lists match everything.
type AppliesTo struct {
	Tools         []string `yaml:"tools"`
	ActionClasses []string `yaml:"action_classes"`
	DecisionKeys  []string `yaml:"decision_keys"`
}

// Bundle is a policy bundle, bundle_id@version.
type Bundle struct {
	BundleID    string  `yaml:"bundle_id"`
	Version     string  `yaml:"version"`
	Description string  `yaml:"description"`
	Rules       []*Rule `yaml:"rules"`
	Pos         Pos     `yaml:"-"`
}

// ID is bundle_id@version.
func (b *Bundle) ID() string { return b.BundleID + "@" + b.Version }

// Rule is one deterministic rule: when its condition holds, its effect applies.
type Rule struct {
	ID                     string       `yaml:"id"`
	Description            string       `yaml:"description"`
	AppliesTo              AppliesTo    `yaml:"applies_to"`
	When                   string       `yaml:"when"`
	Effect                 string       `yaml:"effect"`
	Gate                   string       `yaml:"gate"`
	Reason                 Reason       `yaml:"reason"`
	SafeNextSteps          []Reason     `yaml:"safe_next_steps"`
	ViewerGuidance         []string     `yaml:"viewer_guidance"`
	WhatWouldChangeThis    []*Condition `yaml:"what_would_change_this"`
	Routing                Routing      `yaml:"routing"`
	MustNotRetrySameAction bool         `yaml:"must_not_retry_same_action"`

	Pos     Pos `yaml:"-"`
	WhenPos Pos `yaml:"-"`
}

// Condition is what would change a decision, as text and for machines.
type Condition struct {
	Text         string `yaml:"text"`
	Kind         string `yaml:"kind"`
	EvidenceKind string `yaml:"evidence_kind"`
	MaxAge       string `yaml:"max_age"`
	Gate         string `yaml:"gate"`
	Expression   string `yaml:"expression"`
	Pos          Pos    `yaml:"-"`
}

// Controls are the runtime controls in force for every check of the pack.
type Controls struct {
	MustRefuse    []*Control       `yaml:"must_refuse"`
	MustEscalate  []*Control       `yaml:"must_escalate"`
	ApprovalGates []*Gate          `yaml:"approval_gates"`
	Redaction     []*RedactionRule `yaml:"redaction"`
	// Patterns are named regular expressions, defined once: redaction
	// rules name them (NamedPatterns), and conditions read them as
	// patterns.<id>.
	Patterns []*NamedPattern `yaml:"patterns"`
}

// NamedPattern is one entry of the patterns section of controls.yaml.
type NamedPattern struct {
	ID          string `yaml:"id"`
	Description string `yaml:"description"`
	Regex       string `yaml:"regex"`

	Pos Pos `yaml:"-"`
}

// PatternMap returns the named patterns, id to regex.
func (c *Controls) PatternMap() map[string]string {
	m := make(map[string]string, len(c.Patterns))
	for _, np := range c.Patterns {
		m[np.ID] = np.Regex
	}
	return m
}

// Control is a must_refuse or must_escalate control.
type Control struct {
	ID            string    `yaml:"id"`
	Description   string    `yaml:"description"`
	AppliesTo     AppliesTo `yaml:"applies_to"`
	When          string    `yaml:"when"`
	Reason        Reason    `yaml:"reason"`
	SafeNextSteps []Reason  `yaml:"safe_next_steps"`
	Routing       Routing   `yaml:"routing"`

	Pos     Pos `yaml:"-"`
	WhenPos Pos `yaml:"-"`
}

// Gate is an approval gate.
type Gate struct {
	ID           string `yaml:"id"`
	Description  string `yaml:"description"`
	ApprovalMode string `yaml:"approval_mode"`
	TargetHint   string `yaml:"target_hint"`
	TTLText      string `yaml:"ttl"`
	// Allowance is how many checks one approval at the gate may allow
	// (default 1).
	Allowance int `yaml:"allowance"`
	// Elicit lets the MCP gateway ask the person at the agent's client to
	// decide the gate's approvals (MCP elicitation; docs/mcp.md).
	Elicit bool `yaml:"elicit"`
	// Required makes the gate's approval mode one that requires it: every
	// check whose approval_mode_effective is at or above ApprovalMode
	// needs an approval at this gate before it is allowed, whatever the
	// rules say (the seed's approval rule). Required needs ApprovalMode.
	Required bool `yaml:"required"`

	TTL time.Duration `yaml:"-"`
	Pos Pos           `yaml:"-"`
}

// RedactionRule removes sensitive values before anything is stored.
type RedactionRule struct {
	ID           string   `yaml:"id"`
	Description  string   `yaml:"description"`
	Fields       []string `yaml:"fields"`
	PatternTexts []string `yaml:"patterns"`
	// NamedPatterns are ids of the controls' Patterns, used as if their
	// regexes were written in PatternTexts (after them, in order).
	NamedPatterns []string `yaml:"named_patterns"`
	// Classification, when set, keeps the values under Fields instead of
	// discarding them: the stored request envelope carries a reference
	// and a salted commitment ("[classified:<id>:sha256:…]"), and the raw
	// value goes to the classified store under this label, linked to the
	// check's subjects, until an erasure deletes it. A classified rule
	// lists fields only (see docs/pack-format.md, Classification).
	Classification string `yaml:"classification"`

	// Patterns are PatternTexts then NamedPatterns, compiled.
	Patterns []*regexp.Regexp `yaml:"-"`
	Pos      Pos              `yaml:"-"`
}

// Tool is one entry of the tool manifest.
type Tool struct {
	Name                string `yaml:"name"`
	Description         string `yaml:"description"`
	DecisionKey         string `yaml:"decision_key"`
	ActionClass         string `yaml:"action_class"`
	ApprovalModeCeiling string `yaml:"approval_mode_ceiling"`
	// DefinitionDigest pins the tool's MCP definition ("sha256:" and 64
	// hex digits; see docs/mcp.md): a check that observed another
	// definition is denied with reason tool_definition_changed.
	DefinitionDigest string `yaml:"definition_digest"`
	// OnDefinitionChange says what the MCP gateway shows the agent of a
	// pinned tool whose definition changed: ChangeShowPinned (the
	// default: the pinned definition, its calls refused) or ChangeHide
	// (nothing: the tool is not listed). Only with DefinitionDigest.
	OnDefinitionChange string `yaml:"on_definition_change"`
	// SubjectIDs are the subject ids of the tool's calls through the MCP
	// gateway (the check's subject_ids): templates in which {name}
	// stands for the call's argument name, a string or an integer (see
	// Subjects). The gateway refuses a call whose arguments lack one.
	SubjectIDs []string `yaml:"subject_ids"`
	// Outputs are the proposed outputs of the tool's calls through the
	// MCP gateway (the check's outputs, which the spec's outputs_schema
	// validates): each output name maps to the argument whose value it
	// is, its JSON type kept (see ProposedOutputs). The gateway refuses
	// a call whose arguments lack one, so leaving an argument out cannot
	// leave the schema unchecked.
	Outputs map[string]string `yaml:"outputs"`
	// Captures marks the tool's result as evidence: the MCP gateway
	// stores it, observed, when a call succeeds.
	Captures *Capture `yaml:"captures"`
	Pos      Pos      `yaml:"-"`
}

// Capture says what evidence a tool's result is (Tool.Captures): an item
// of Kind for the call's subject ids, with the named attributes of its
// result.
type Capture struct {
	Kind string `yaml:"kind"`
	// Attributes name the members of the result's structured content
	// (or of the JSON object its first text content holds) kept as the
	// item's attributes; a member the result lacks is left out.
	Attributes []string `yaml:"attributes"`
	// ValidForText, when set, makes the item expire that long after it
	// was observed.
	ValidForText string        `yaml:"valid_for"`
	ValidFor     time.Duration `yaml:"-"`
}

// subjectPlaceholder is one {name} of a subject id template.
var subjectPlaceholder = regexp.MustCompile(`\{([^{}]*)\}`)

// argumentName is what a subject id template's placeholder may name.
var argumentName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$`)

// Subjects returns the subject ids of a call of t with args: each
// template of SubjectIDs with every {name} replaced by the argument
// name, which must be a non-empty string or an integer. It returns nil
// when t names none.
func (t *Tool) Subjects(args map[string]any) ([]string, error) {
	var out []string
	for _, tmpl := range t.SubjectIDs {
		var err error
		id := subjectPlaceholder.ReplaceAllStringFunc(tmpl, func(m string) string {
			name := m[1 : len(m)-1]
			switch v := args[name].(type) {
			case string:
				if v != "" {
					return v
				}
			case float64:
				if v == float64(int64(v)) {
					return strconv.FormatInt(int64(v), 10)
				}
			case json.Number:
				if _, perr := v.Int64(); perr == nil {
					return v.String()
				}
			}
			if err == nil {
				err = fmt.Errorf("the tool manifest names the call's subject %q, but argument %s is not a non-empty string or an integer", tmpl, name)
			}
			return ""
		})
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// ProposedOutputs returns the outputs of a call of t with args: for each
// output name of Outputs, the value of the argument it names, as the
// call gave it. It returns an error naming the first output, in name
// order, whose argument the call lacks, and nil when t names no outputs.
func (t *Tool) ProposedOutputs(args map[string]any) (map[string]any, error) {
	if len(t.Outputs) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(t.Outputs))
	for _, name := range slices.Sorted(maps.Keys(t.Outputs)) {
		arg := t.Outputs[name]
		v, ok := args[arg]
		if !ok {
			return nil, fmt.Errorf("the tool manifest proposes the call's output %s from argument %s, which the call does not give", name, arg)
		}
		out[name] = v
	}
	return out, nil
}

// What the gateway shows of a pinned tool whose definition changed
// (Tool.OnDefinitionChange).
const (
	ChangeShowPinned = "show_pinned"
	ChangeHide       = "hide"
)

type manifest struct {
	Name        string   `yaml:"name"`
	Version     string   `yaml:"version"`
	Description string   `yaml:"description"`
	Specs       []string `yaml:"specs"`
	Policies    []string `yaml:"policies"`
	Controls    string   `yaml:"controls"`
	Tools       string   `yaml:"tools"`
	Workflows   []string `yaml:"workflows"`
	WFPolicies  string   `yaml:"workflow_policies"`
	Limits      struct {
		CELCost uint64 `yaml:"cel_cost"`
	} `yaml:"limits"`
	Approvals struct {
		Webhook *Webhook `yaml:"webhook"`
	} `yaml:"approvals"`
	History []*Aggregate `yaml:"history"`
	Params  string       `yaml:"params"`
}

// Load loads the pack rooted at dir.
func Load(dir string) (*Pack, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("cannot open pack %s: %v", dir, unwrapPathError(err))}
	}
	if !info.IsDir() {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("pack %s is not a directory", dir)}
	}
	return LoadFS(os.DirFS(dir), dir)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if ok := asPathError(err, &pe); ok {
		return pe.Err
	}
	return err
}

// LoadFS loads a pack from fsys; dir names it in messages.
func LoadFS(fsys fs.FS, dir string) (*Pack, error) {
	l := &loader{fsys: fsys, dir: dir, files: map[string]*File{}}
	p := l.load()
	if len(l.problems) > 0 {
		return nil, &writ.Error{
			Code:    writ.EINVALID,
			Message: fmt.Sprintf("pack %s is invalid (%d %s)", dir, len(l.problems), plural(len(l.problems), "problem", "problems")),
			Details: l.problems,
		}
	}
	return p, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

type loader struct {
	fsys     fs.FS
	dir      string
	files    map[string]*File
	problems []writ.Detail
}

// display is how a pack file is named in messages: joined to the pack dir.
func (l *loader) display(rel string) string { return filepath.Join(l.dir, filepath.FromSlash(rel)) }

func (l *loader) add(err error) {
	if d, ok := err.(*problem); ok {
		l.problems = append(l.problems, writ.Detail(*d))
		return
	}
	l.problems = append(l.problems, writ.Detail{File: l.dir, Message: err.Error()})
}

func (l *loader) addf(pos Pos, format string, args ...any) {
	l.problems = append(l.problems, writ.Detail{File: pos.File, Line: pos.Line, Message: fmt.Sprintf(format, args...)})
}

// read reads, hashes and parses one pack file and validates it against
// its schema. It returns nil when the file has problems (already recorded).
func (l *loader) read(rel, schemaName string) *document {
	if !fs.ValidPath(rel) {
		l.addf(Pos{File: l.display(ManifestFile)}, "%q is not a path inside the pack", rel)
		return nil
	}
	data, err := fs.ReadFile(l.fsys, rel)
	if err != nil {
		l.addf(Pos{File: l.display(rel)}, "cannot read: %v", unwrapPathError(err))
		return nil
	}
	l.files[rel] = &File{Path: rel, Hash: digest(data), Data: data}
	doc, err := parseDocument(l.display(rel), data)
	if err != nil {
		l.add(err)
		return nil
	}
	var nulls []nullKey
	if schemaName == "test" {
		nulls = liftPatchNulls(doc.value)
	}
	if errs := validate(schemaName, doc); len(errs) > 0 {
		l.problems = append(l.problems, errs...)
		return nil
	}
	for _, n := range nulls {
		n.m[n.key] = nil
	}
	return doc
}

// expand resolves the glob patterns of a manifest list to sorted paths.
func (l *loader) expand(field string, patterns []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, pat := range patterns {
		if strings.HasPrefix(pat, "/") || strings.Contains(pat, "..") {
			l.addf(Pos{File: l.display(ManifestFile), Line: 0}, "%s: %q must be a path inside the pack", field, pat)
			continue
		}
		matches, err := fs.Glob(l.fsys, path.Clean(pat))
		if err != nil {
			l.addf(Pos{File: l.display(ManifestFile)}, "%s: bad pattern %q: %v", field, pat, err)
			continue
		}
		if len(matches) == 0 {
			l.addf(Pos{File: l.display(ManifestFile)}, "%s: %q matches no file", field, pat)
		}
		sort.Strings(matches)
		for _, m := range matches {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

func (l *loader) load() *Pack {
	doc := l.read(ManifestFile, "pack")
	if doc == nil {
		return nil
	}
	var m manifest
	if err := doc.root.Decode(&m); err != nil {
		l.addf(Pos{File: doc.path, Line: doc.root.Line}, "%v", err)
		return nil
	}
	p := &Pack{
		Name: m.Name, Version: m.Version, Description: m.Description, Dir: l.dir,
		Limits:          Limits{CELCost: m.Limits.CELCost},
		ApprovalWebhook: m.Approvals.Webhook,
		Specs:           map[string]*Spec{},
		Bundles:         map[string]*Bundle{},
		Tools:           map[string]*Tool{},
		Gates:           map[string]*Gate{},

		Workflows:        map[string]*Workflow{},
		WorkflowPolicies: &WorkflowPolicies{},
	}
	if p.Limits.CELCost == 0 {
		p.Limits.CELCost = DefaultCELCost
	}
	for _, rel := range l.expand("specs", m.Specs) {
		l.loadSpec(p, rel)
	}
	for _, rel := range l.expand("policies", m.Policies) {
		l.loadBundle(p, rel)
	}
	if m.Controls != "" {
		l.loadControls(p, m.Controls)
	}
	if m.Tools != "" {
		l.loadTools(p, m.Tools)
	}
	for _, rel := range l.expand("workflows", m.Workflows) {
		l.loadWorkflow(p, rel)
	}
	if m.WFPolicies != "" {
		l.loadWorkflowPolicies(p, m.WFPolicies)
	}
	if m.Params != "" {
		l.loadParams(p, m.Params)
	}
	l.loadHistory(doc, p, m.History)
	l.crossCheck(p)
	l.checkHistory(p)

	for _, f := range l.files {
		p.Files = append(p.Files, *f)
	}
	slices.SortFunc(p.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	var b strings.Builder
	for _, f := range p.Files {
		fmt.Fprintf(&b, "%s  %s\n", f.Hash, f.Path)
	}
	p.Manifest = []byte(b.String())
	p.Hash = digest(p.Manifest)
	return p
}

func (l *loader) pos(doc *document, ptr string) Pos {
	return Pos{File: doc.path, Line: doc.line(ptr)}
}

func (l *loader) duration(doc *document, ptr, text string) time.Duration {
	if text == "" {
		return 0
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		l.addf(l.pos(doc, ptr), "%q is not a positive duration", text)
	}
	return d
}

func (l *loader) loadSpec(p *Pack, rel string) {
	doc := l.read(rel, "spec")
	if doc == nil {
		return
	}
	s := new(Spec)
	if err := doc.root.Decode(s); err != nil {
		l.addf(l.pos(doc, ""), "%v", err)
		return
	}
	s.Pos = l.pos(doc, "")
	if prev, dup := p.Specs[s.DecisionKey]; dup {
		l.addf(l.pos(doc, "/decision_key"), "decision key %q is already defined at %s", s.DecisionKey, prev.Pos)
		return
	}
	if v, ok := doc.value.(map[string]any)["outputs_schema"]; ok {
		s.OutputsSchemaDoc = v
	}
	if s.OutputsSchemaDoc != nil {
		sch, err := compileOutputsSchema(s.DecisionKey, s.OutputsSchemaDoc)
		if err != nil {
			l.addf(l.pos(doc, "/outputs_schema"), "outputs_schema: %v", err)
		}
		s.OutputsSchema = sch
	}
	for i, r := range s.RequiredEvidence {
		ptr := fmt.Sprintf("/required_evidence/%d", i)
		r.Pos = l.pos(doc, ptr)
		if r.When != "" {
			r.WhenPos = l.pos(doc, ptr+"/when")
		}
		r.MaxAge = l.duration(doc, ptr+"/max_age", r.MaxAgeText)
		if r.OnMissing == "" {
			r.OnMissing = "replan_local"
		}
	}
	fields := map[string]bool{}
	for i, c := range s.ContextFromEvidence {
		c.Pos = l.pos(doc, fmt.Sprintf("/context_from_evidence/%d", i))
		if fields[c.Field] {
			l.addf(c.Pos, "context field %q comes from evidence twice: one source a field", c.Field)
		}
		fields[c.Field] = true
	}
	if x := s.Execution; x != nil {
		x.Pos = l.pos(doc, "/execution")
		x.ValidFor = l.duration(doc, "/execution/valid_for", x.ValidForText)
		if x.Report == "" {
			x.Report = "optional"
		}
	}
	if s.Budgets != nil {
		s.Budgets.Pos = l.pos(doc, "/budgets")
		if s.Budgets.OnExceed == "" {
			s.Budgets.OnExceed = "deny"
		}
		if s.Budgets.Accepts == "" {
			s.Budgets.Accepts = "claimed"
		}
		b := s.Budgets
		switch {
		case b.ActorWindowText != "" && b.ActorToolCalls == nil:
			l.addf(l.pos(doc, "/budgets/actor_window"), "actor_window without actor_tool_calls: it is the window of that budget")
		case b.ActorToolCalls != nil && b.ActorWindowText == "":
			b.ActorWindow = DefaultActorWindow
		case b.ActorToolCalls != nil:
			b.ActorWindow = l.duration(doc, "/budgets/actor_window", b.ActorWindowText)
			if b.ActorWindow > MaxWindow {
				l.addf(l.pos(doc, "/budgets/actor_window"), "actor_window %s is longer than %s (366 days)", b.ActorWindowText, MaxWindow)
			}
		}
	}
	p.Specs[s.DecisionKey] = s
}

func (l *loader) loadBundle(p *Pack, rel string) {
	doc := l.read(rel, "policy")
	if doc == nil {
		return
	}
	b := new(Bundle)
	if err := doc.root.Decode(b); err != nil {
		l.addf(l.pos(doc, ""), "%v", err)
		return
	}
	b.Pos = l.pos(doc, "")
	if prev, dup := p.Bundles[b.BundleID]; dup {
		l.addf(l.pos(doc, "/bundle_id"), "bundle %q is already defined at %s", b.BundleID, prev.Pos)
		return
	}
	seen := map[string]Pos{}
	for i, r := range b.Rules {
		ptr := fmt.Sprintf("/rules/%d", i)
		r.Pos = l.pos(doc, ptr)
		r.WhenPos = l.pos(doc, ptr+"/when")
		if prev, dup := seen[r.ID]; dup {
			l.addf(l.pos(doc, ptr+"/id"), "rule %q is already defined at %s", r.ID, prev)
		}
		seen[r.ID] = r.Pos
		for j, c := range r.WhatWouldChangeThis {
			c.Pos = l.pos(doc, fmt.Sprintf("%s/what_would_change_this/%d", ptr, j))
			l.checkCondition(doc, c)
		}
	}
	p.Bundles[b.BundleID] = b
}

func (l *loader) checkCondition(doc *document, c *Condition) {
	if c.Kind == "" {
		switch {
		case c.Gate != "":
			c.Kind = writ.ConditionApproval
		case c.EvidenceKind != "":
			c.Kind = writ.ConditionEvidence
		case c.Expression != "":
			c.Kind = writ.ConditionExpression
		}
	}
	switch c.Kind {
	case "":
		l.addf(c.Pos, "what_would_change_this needs a condition a machine can check: a kind with its gate, evidence_kind or expression")
	case writ.ConditionEvidence:
		if c.EvidenceKind == "" {
			l.addf(c.Pos, "an evidence condition needs evidence_kind")
		}
	case writ.ConditionApproval:
		if c.Gate == "" {
			l.addf(c.Pos, "an approval condition needs gate")
		}
	case writ.ConditionExpression:
		if c.Expression == "" {
			l.addf(c.Pos, "an expression condition needs expression")
		}
	}
	if c.MaxAge != "" {
		if d, err := time.ParseDuration(c.MaxAge); err != nil || d <= 0 {
			l.addf(c.Pos, "max_age %q is not a positive duration", c.MaxAge)
		}
	}
}

func (l *loader) loadControls(p *Pack, rel string) {
	doc := l.read(rel, "controls")
	if doc == nil {
		return
	}
	if err := doc.root.Decode(&p.Controls); err != nil {
		l.addf(l.pos(doc, ""), "%v", err)
		return
	}
	ids := map[string]Pos{}
	claim := func(id string, pos Pos) {
		if prev, dup := ids[id]; dup {
			l.addf(pos, "control %q is already defined at %s", id, prev)
		}
		ids[id] = pos
	}
	for name, list := range map[string][]*Control{"must_refuse": p.Controls.MustRefuse, "must_escalate": p.Controls.MustEscalate} {
		for i, c := range list {
			ptr := fmt.Sprintf("/%s/%d", name, i)
			c.Pos = l.pos(doc, ptr)
			c.WhenPos = l.pos(doc, ptr+"/when")
		}
	}
	for _, list := range [][]*Control{p.Controls.MustRefuse, p.Controls.MustEscalate} {
		for _, c := range list {
			claim(c.ID, c.Pos)
		}
	}
	for i, g := range p.Controls.ApprovalGates {
		ptr := fmt.Sprintf("/approval_gates/%d", i)
		g.Pos = l.pos(doc, ptr)
		g.TTL = l.duration(doc, ptr+"/ttl", g.TTLText)
		if g.Required && g.ApprovalMode == "" {
			l.addf(g.Pos, "approval gate %s is required but names no approval_mode: a required gate is required from its approval mode up", g.ID)
		}
		claim(g.ID, g.Pos)
		p.Gates[g.ID] = g
	}
	named := map[string]*regexp.Regexp{}
	for i, np := range p.Controls.Patterns {
		ptr := fmt.Sprintf("/patterns/%d", i)
		np.Pos = l.pos(doc, ptr)
		claim(np.ID, np.Pos)
		re, err := regexp.Compile(np.Regex)
		if err != nil {
			l.addf(l.pos(doc, ptr+"/regex"), "pattern %s: bad regex: %v", np.ID, err)
			continue
		}
		named[np.ID] = re
	}
	for i, r := range p.Controls.Redaction {
		ptr := fmt.Sprintf("/redaction/%d", i)
		r.Pos = l.pos(doc, ptr)
		claim(r.ID, r.Pos)
		if r.Classification != "" && (len(r.PatternTexts) > 0 || len(r.NamedPatterns) > 0 || len(r.Fields) == 0) {
			l.addf(r.Pos, "redaction %s is classified (%s): a classified rule lists fields only, not patterns", r.ID, r.Classification)
		}
		for j, pat := range r.PatternTexts {
			re, err := regexp.Compile(pat)
			if err != nil {
				l.addf(l.pos(doc, fmt.Sprintf("%s/patterns/%d", ptr, j)), "bad pattern: %v", err)
				continue
			}
			r.Patterns = append(r.Patterns, re)
		}
		for j, id := range r.NamedPatterns {
			re, ok := named[id]
			if !ok {
				if !slices.ContainsFunc(p.Controls.Patterns, func(np *NamedPattern) bool { return np.ID == id }) {
					l.addf(l.pos(doc, fmt.Sprintf("%s/named_patterns/%d", ptr, j)), "redaction %s names pattern %q, which the patterns section does not define", r.ID, id)
				}
				continue
			}
			r.Patterns = append(r.Patterns, re)
		}
	}
}

func (l *loader) loadTools(p *Pack, rel string) {
	doc := l.read(rel, "tools")
	if doc == nil {
		return
	}
	var m struct {
		Tools []*Tool `yaml:"tools"`
	}
	if err := doc.root.Decode(&m); err != nil {
		l.addf(l.pos(doc, ""), "%v", err)
		return
	}
	for i, t := range m.Tools {
		t.Pos = l.pos(doc, fmt.Sprintf("/tools/%d", i))
		if prev, dup := p.Tools[t.Name]; dup {
			l.addf(t.Pos, "tool %q is already defined at %s", t.Name, prev.Pos)
			continue
		}
		p.Tools[t.Name] = t
		ptr := fmt.Sprintf("/tools/%d", i)
		for j, tmpl := range t.SubjectIDs {
			ms := subjectPlaceholder.FindAllStringSubmatch(tmpl, -1)
			if len(ms) == 0 {
				l.addf(l.pos(doc, fmt.Sprintf("%s/subject_ids/%d", ptr, j)), "tool %q: subject id %q names no argument ({name}); every call would have the same subject", t.Name, tmpl)
			}
			for _, m := range ms {
				if !argumentName.MatchString(m[1]) {
					l.addf(l.pos(doc, fmt.Sprintf("%s/subject_ids/%d", ptr, j)), "tool %q: subject id %q: {%s} is not an argument name", t.Name, tmpl, m[1])
				}
			}
		}
		if _, ok := t.Outputs["outcome"]; ok {
			l.addf(l.pos(doc, ptr+"/outputs/outcome"), "tool %q: output outcome is writ's (the record's outcome), so a check may not propose it, and every call would be refused", t.Name)
		}
		if c := t.Captures; c != nil {
			c.ValidFor = l.duration(doc, ptr+"/captures/valid_for", c.ValidForText)
			if len(t.SubjectIDs) == 0 {
				l.addf(l.pos(doc, ptr+"/captures"), "tool %q captures %s evidence but names no subject_ids: the item would be about no one, and the gateway cites captured items by the subjects a call shares with them", t.Name, c.Kind)
			}
		}
	}
}

// crossCheck resolves references between files.
func (l *loader) crossCheck(p *Pack) {
	for _, s := range sortedSpecs(p) {
		for _, id := range s.Policies {
			if _, ok := p.Bundles[id]; !ok {
				l.addf(s.Pos, "spec %s names policy bundle %q, which the pack does not define", s.DecisionKey, id)
			}
		}
	}
	for _, s := range sortedSpecs(p) {
		if strings.HasPrefix(s.DecisionKey, "workflow:") {
			l.addf(s.Pos, "decision key %q: the prefix workflow: is reserved for step verdicts", s.DecisionKey)
		}
		if strings.HasPrefix(s.DecisionKey, "approval:") {
			l.addf(s.Pos, "decision key %q: the prefix approval: is reserved for approval decisions", s.DecisionKey)
		}
		if strings.HasPrefix(s.DecisionKey, ParamsKeyPrefix) {
			l.addf(s.Pos, "decision key %q: the prefix params: is reserved for tenant parameter changes", s.DecisionKey)
		}
		if strings.HasPrefix(s.DecisionKey, ErasureKeyPrefix) {
			l.addf(s.Pos, "decision key %q: the prefix erasure: is reserved for erasures of classified values", s.DecisionKey)
		}
		for _, pre := range []string{"evidence:", "evidence_revocation:", "writ:"} {
			if strings.HasPrefix(s.DecisionKey, pre) {
				l.addf(s.Pos, "decision key %q: the prefix %s is reserved for writ's evidence records and claims", s.DecisionKey, pre)
			}
		}
	}
	for _, t := range sortedTools(p) {
		s, ok := p.Specs[t.DecisionKey]
		if !ok {
			l.addf(t.Pos, "tool %q maps to decision key %q, which the pack does not define", t.Name, t.DecisionKey)
			continue
		}
		if t.ActionClass == "" {
			t.ActionClass = s.ActionClass
		} else if t.ActionClass != s.ActionClass {
			l.addf(t.Pos, "tool %q has action class %q but its decision spec %s has %q", t.Name, t.ActionClass, s.DecisionKey, s.ActionClass)
		}
		if s.ApprovalMode != "" && writ.ApprovalMode(s.ApprovalMode).Rank() > writ.ApprovalMode(t.ApprovalModeCeiling).Rank() {
			l.addf(t.Pos, "tool %q has approval-mode ceiling %s, below its spec's approval mode %s", t.Name, t.ApprovalModeCeiling, s.ApprovalMode)
		}
	}
	checkScope := func(pos Pos, what string, a AppliesTo) {
		for _, k := range a.DecisionKeys {
			if _, ok := p.Specs[k]; !ok {
				l.addf(pos, "%s applies to decision key %q, which the pack does not define", what, k)
			}
		}
		for _, t := range a.Tools {
			if _, ok := p.Tools[t]; !ok {
				l.addf(pos, "%s applies to tool %q, which the tool manifest does not define", what, t)
			}
		}
	}
	checkGate := func(pos Pos, what, gate string) {
		if gate != "" {
			if _, ok := p.Gates[gate]; !ok {
				l.addf(pos, "%s names approval gate %q, which the runtime controls do not define", what, gate)
			}
		}
	}
	for _, b := range sortedBundles(p) {
		for _, r := range b.Rules {
			what := fmt.Sprintf("rule %s", r.ID)
			checkScope(r.Pos, what, r.AppliesTo)
			checkGate(r.Pos, what, r.Gate)
			if r.Gate != "" && r.Effect != "require_approval" {
				l.addf(r.Pos, "rule %s names gate %q but its effect is %s, not require_approval", r.ID, r.Gate, r.Effect)
			}
			for _, c := range r.WhatWouldChangeThis {
				checkGate(c.Pos, what, c.Gate)
			}
		}
	}
	for _, list := range [][]*Control{p.Controls.MustRefuse, p.Controls.MustEscalate} {
		for _, c := range list {
			checkScope(c.Pos, "control "+c.ID, c.AppliesTo)
		}
	}
}

func sortedSpecs(p *Pack) []*Spec {
	out := make([]*Spec, 0, len(p.Specs))
	for _, s := range p.Specs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Spec) int { return strings.Compare(a.DecisionKey, b.DecisionKey) })
	return out
}

func sortedTools(p *Pack) []*Tool {
	out := make([]*Tool, 0, len(p.Tools))
	for _, t := range p.Tools {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sortedBundles(p *Pack) []*Bundle {
	out := make([]*Bundle, 0, len(p.Bundles))
	for _, b := range p.Bundles {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *Bundle) int { return strings.Compare(a.BundleID, b.BundleID) })
	return out
}

// AcceptedProvenance returns the provenances evidence must have to
// satisfy requirement r of spec s: r's own list, else the default. The
// default for a mutating action class is issued or observed, never
// claimed: a citation writ cannot resolve is the caller's word, and the
// caller is the party being governed (issue 32). A requirement that
// truly takes the caller's word writes claimed out, and lint's
// claimed-evidence rule reports it.
func (p *Pack) AcceptedProvenance(s *Spec, r *EvidenceRequirement) []string {
	if len(r.Provenance) > 0 {
		return r.Provenance
	}
	if p.WorkflowPolicies.Mutating(s.ActionClass) {
		return []string{"issued", "observed"}
	}
	return []string{"issued", "observed", "claimed"}
}
