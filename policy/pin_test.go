package policy_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

const (
	pinned   = "sha256:" + "1111111111111111111111111111111111111111111111111111111111111111"
	observed = "sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
)

func pinnedPack(t *testing.T) *policy.Policy {
	t.Helper()
	m := fstest.MapFS{
		"pack.yaml":  {Data: []byte("name: t\nversion: 1.0.0\nspecs: [spec.yaml]\npolicies: [rules.yaml]\ntools: tools.yaml\n")},
		"spec.yaml":  {Data: []byte("decision_key: t.act\nversion: 1.0.0\naction_class: record_mutation\npolicies: [B]\n")},
		"rules.yaml": {Data: []byte("bundle_id: B\nversion: 1.0.0\nrules: []\n")},
		"tools.yaml": {Data: []byte("tools:\n  - {name: act, decision_key: t.act, approval_mode_ceiling: network, definition_digest: " + pinned + "}\n  - {name: loose, decision_key: t.act, approval_mode_ceiling: network}\n")},
	}
	p, err := pack.LoadFS(m, "t")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return pol
}

func TestToolDefinitionPin(t *testing.T) {
	pol := pinnedPack(t)
	for _, tc := range []struct {
		tool, digest string
		want         writ.Outcome
		reason       string
	}{
		{"act", pinned, writ.OutcomeAllow, ""},
		{"act", observed, writ.OutcomeGoalFailTerminal, "tool_definition_changed"},
		{"act", "", writ.OutcomeAllow, ""}, // no observed definition: not compared
		{"loose", observed, writ.OutcomeAllow, ""},
	} {
		req := &writ.CheckRequest{Tool: tc.tool, ToolDefinitionDigest: tc.digest, Actor: writ.Actor{Type: writ.ActorAgent, ID: "a"}}
		_, rc := decide(t, pol, req)
		var codes []string
		for _, r := range rc.Reasons {
			codes = append(codes, r.Code)
		}
		if rc.Outcome != tc.want || (tc.reason != "" && !strings.Contains(strings.Join(codes, ","), tc.reason)) {
			t.Errorf("Decide(tool %s, digest %q) = %s %v, want %s %s", tc.tool, tc.digest, rc.Outcome, codes, tc.want, tc.reason)
		}
	}
}

func TestToolDefinitionDigestMalformed(t *testing.T) {
	pol := pinnedPack(t)
	for _, req := range []*writ.CheckRequest{
		{TenantID: "acme", Tool: "act", ToolDefinitionDigest: "sha256:abc"},
		{TenantID: "acme", Tool: "act", ToolDefinitionDigest: strings.ToUpper(pinned)},
		{TenantID: "acme", DecisionKey: "t.act", ToolDefinitionDigest: pinned},
	} {
		_, err := pol.Resolve(req)
		var we *writ.Error
		if !errors.As(err, &we) || we.Code != writ.EINVALID {
			t.Errorf("Resolve(%+v) = %v, want EINVALID", req, err)
		}
	}
}
