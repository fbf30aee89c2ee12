package packtest

import (
	"context"
	"testing"

	"github.com/writhq/writ"
)

// TestCredentials: what a case says about its actor's provenance becomes
// the credentials writ binds it from, and writ.BindActor gives back the
// actor the case named.
func TestCredentials(t *testing.T) {
	tests := []struct {
		name  string
		actor writ.Actor
	}{
		{"an agent's key", writ.Actor{Type: writ.ActorAgent, ID: "agt_1", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_a"}},
		{"an orchestrator acting for an agent", writ.Actor{Type: writ.ActorAgent, ID: "agt_1", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_o",
			ActedBy: &writ.ActorRef{Type: writ.ActorService, ID: "orch"}}},
		{"a verified delegated user", writ.Actor{Type: writ.ActorAgent, ID: "agt_1", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_a",
			DelegatedUserID: "usr_1", DelegatedUserProvenance: writ.ProvenanceAuthenticated, DelegatedUserIssuer: "https://idp"}},
		{"a claimed delegated user", writ.Actor{Type: writ.ActorAgent, ID: "agt_1", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_a",
			DelegatedUserID: "usr_1", DelegatedUserProvenance: writ.ProvenanceClaimed}},
		{"development mode", writ.Actor{Type: writ.ActorHuman, ID: "h", Provenance: writ.ProvenanceClaimed}},
	}
	for _, tc := range tests {
		ctx, req := credentials(context.Background(), &writ.CheckRequest{TenantID: "acme", Actor: tc.actor})
		if req.Actor.Bound() {
			t.Errorf("%s: the request still sets what writ sets: %+v", tc.name, req.Actor)
		}
		got, err := writ.BindActor(ctx, "acme", req.Actor)
		if err != nil {
			t.Errorf("%s: BindActor = %v", tc.name, err)
			continue
		}
		if got.Provenance != tc.actor.Provenance || got.KeyID != tc.actor.KeyID || got.DelegatedUserProvenance != tc.actor.DelegatedUserProvenance ||
			got.DelegatedUserIssuer != tc.actor.DelegatedUserIssuer || (got.ActedBy == nil) != (tc.actor.ActedBy == nil) || got.ID != tc.actor.ID {
			t.Errorf("%s: bound actor = %+v, want %+v", tc.name, got, tc.actor)
		}
	}
}
