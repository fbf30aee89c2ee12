package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// A conditional evidence requirement applies only where its when holds,
// keeps its own codes, next step and condition, and applies (fails closed)
// when its when cannot be evaluated.
func TestConditionalEvidence(t *testing.T) {
	spec := `required_evidence:
  - kind: customer_consent
    when: has(args.to) && !args.to.endsWith('@acme.example')
    max_age: 24h
    reason: {code: consent_required, message: 'An email to {{args.to}} needs the customer''s consent.'}
    safe_next_step: {code: FETCH_CONSENT, message: Ask the CRM for consent.}
  - kind: broken
    when: args.missing == 'x'
`
	pol := testPack(t, "", spec, "")
	consent := []writ.Evidence{{Kind: "customer_consent", ID: "c1", Version: "1", ObservedAt: &now}}
	broken := []writ.Evidence{{Kind: "broken", ID: "b1", Version: "1"}}
	tests := []struct {
		name     string
		args     map[string]any
		evidence []writ.Evidence
		fired    []string // reason codes
	}{
		{"internal: no consent needed", map[string]any{"to": "a@acme.example"}, broken, nil},
		{"external without consent", map[string]any{"to": "a@customer.example"}, broken, []string{"consent_required"}},
		{"external with consent", map[string]any{"to": "a@customer.example"}, append(consent, broken...), nil},
		{"no recipient: when is false", map[string]any{}, broken, nil},
		{"when cannot be evaluated: the requirement applies", map[string]any{"to": "a@acme.example"}, nil, []string{"missing_evidence"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rc := decide(t, pol, &writ.CheckRequest{Tool: "act", Arguments: tt.args, Evidence: tt.evidence})
			if got := codes(rc.Reasons); strings.Join(got, ",") != strings.Join(tt.fired, ",") {
				t.Fatalf("Decide(%v) reasons = %v, want %v", tt.args, got, tt.fired)
			}
			if len(tt.fired) == 0 {
				return
			}
			if d.Effect != policy.ReplanLocal {
				t.Errorf("Decide(%v).Effect = %s, want replan_local", tt.args, d.Effect)
			}
			c := rc.WhatWouldChangeThisConditions
			if len(c) != 1 || c[0].Kind != writ.ConditionEvidence {
				t.Errorf("Decide(%v) conditions = %+v, want one evidence condition", tt.args, c)
			}
			if tt.fired[0] == "consent_required" {
				if rc.SafeNextSteps[0].Code != "FETCH_CONSENT" || !strings.HasPrefix(rc.Reasons[0].Message, "An email to a@customer.example needs") {
					t.Errorf("Decide(%v) = %+v / %+v, want the requirement's own words", tt.args, rc.Reasons, rc.SafeNextSteps)
				}
			} else if !strings.Contains(rc.Reasons[0].Message, "could not be evaluated") {
				t.Errorf("Decide(%v) reason %q does not say the condition failed", tt.args, rc.Reasons[0].Message)
			}
		})
	}
}

// A requirement's when is compiled like a rule's: a non-bool or a bad
// expression is a compile error at its line, and it may not read history.
func TestConditionalEvidenceCompileErrors(t *testing.T) {
	for _, tt := range []struct{ when, want string }{
		{"args.to", "has type dyn"},
		{"1 + 1", "has type int, want bool"},
		{"args.to ==", "invalid CEL condition"},
		{"history.sent >= 1.0", "when cannot read history"},
	} {
		files := fstest.MapFS{
			"pack.yaml": {Data: []byte("name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: []\n")},
			"spec.yaml": {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: x\nrequired_evidence:\n  - kind: k\n    when: " + quote(tt.when) + "\n")},
		}
		p, err := pack.LoadFS(files, "t")
		if err != nil {
			t.Fatalf("LoadFS: %v", err)
		}
		_, err = policy.Compile(p)
		ds := writ.ErrorDetails(err)
		if tt.want == "has type dyn" {
			if err != nil {
				t.Errorf("Compile(when: %s) = %v, want it to compile (dyn is checked when it runs)", tt.when, ds)
			}
			continue
		}
		if len(ds) != 1 || ds[0].Line != 6 || !strings.Contains(ds[0].Message, tt.want) {
			t.Errorf("Compile(when: %s) = %v, want one problem at line 6 containing %q", tt.when, ds, tt.want)
		}
	}
}
