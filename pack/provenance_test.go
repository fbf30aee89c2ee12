package pack_test

import (
	"slices"
	"testing"

	"github.com/writhq/writ/pack"
)

// TestAcceptedProvenance: a requirement's own list wins; left out, a
// spec of a mutating action class (the seed's, or one the workflow
// policies add) accepts issued and observed evidence, never claimed
// (issue 32), and any other spec accepts all three.
func TestAcceptedProvenance(t *testing.T) {
	const policies = "mutatingActionClasses: [local_edit]\n"
	for _, c := range []struct {
		name, class, list, policies string
		want                        []string
	}{
		{"a seed mutating class, provenance left out", "record_mutation", "", "", []string{"issued", "observed"}},
		{"another seed mutating class", "external_message_send", "", "", []string{"issued", "observed"}},
		{"a class the policies make mutating", "local_edit", "", policies, []string{"issued", "observed"}},
		{"a class that is not mutating", "local_edit", "", "", []string{"issued", "observed", "claimed"}},
		{"a read", "record_read", "", "", []string{"issued", "observed", "claimed"}},
		{"a mutating class writing claimed out", "record_mutation", "[issued, observed, claimed]", "", []string{"issued", "observed", "claimed"}},
		{"a read narrowing its own list", "record_read", "[issued]", "", []string{"issued"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := "decision_key: demo.act\nversion: 1.0.0\naction_class: " + c.class + "\npolicies: [P1]\nrequired_evidence:\n  - kind: identity_verification\n"
			if c.list != "" {
				spec += "    provenance: " + c.list + "\n"
			}
			files := map[string]string{"specs/s.yaml": spec}
			if c.policies != "" {
				files["pack.yaml"] = okManifest + "workflow_policies: wp.yaml\n"
				files["wp.yaml"] = c.policies
			}
			p, err := pack.LoadFS(fsWith(files), "demo")
			if err != nil {
				t.Fatalf("LoadFS = %v", err)
			}
			s := p.Specs["demo.act"]
			if got := p.AcceptedProvenance(s, s.RequiredEvidence[0]); !slices.Equal(got, c.want) {
				t.Errorf("AcceptedProvenance(%s, provenance %q) = %v, want %v", c.class, c.list, got, c.want)
			}
		})
	}
}
