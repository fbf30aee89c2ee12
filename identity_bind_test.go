package writ_test

import (
	"context"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

func TestBindActor(t *testing.T) {
	agent := &writ.Principal{TenantID: "acme", KeyID: "key_real", Subject: "agt_real", Roles: []writ.Role{writ.RoleAgent}}
	orch := &writ.Principal{TenantID: "acme", KeyID: "key_orch", Subject: "orch", ActorType: writ.ActorService, ActsFor: []string{"AGENT:agt_*"}}
	keyed := func(p *writ.Principal) context.Context { return writ.WithPrincipal(context.Background(), p) }
	verified := func(ctx context.Context, tenant, sub string) context.Context {
		return writ.WithDelegation(ctx, &writ.Delegation{TenantID: tenant, Subject: sub, Issuer: "https://idp"})
	}
	tests := []struct {
		name    string
		ctx     context.Context
		named   writ.Actor
		want    writ.Actor
		wantErr string
	}{
		{"development mode", context.Background(), writ.Actor{Type: writ.ActorHuman, ID: "ceo_alice", DelegatedUserID: "u"},
			writ.Actor{Type: writ.ActorHuman, ID: "ceo_alice", DelegatedUserID: "u", Provenance: writ.ProvenanceClaimed, DelegatedUserProvenance: writ.ProvenanceClaimed}, ""},
		{"development mode with a token", verified(context.Background(), "acme", "u"), writ.Actor{Type: writ.ActorAgent, ID: "a"}, writ.Actor{}, "keyed mode only"},
		{"no actor named", keyed(agent), writ.Actor{},
			writ.Actor{Type: writ.ActorAgent, ID: "agt_real", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_real"}, ""},
		{"its own principal, without a type", keyed(agent), writ.Actor{ID: "agt_real", WorkloadIdentity: "spiffe://w"},
			writ.Actor{Type: writ.ActorAgent, ID: "agt_real", WorkloadIdentity: "spiffe://w", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_real"}, ""},
		{"a forged actor", keyed(agent), writ.Actor{Type: writ.ActorHuman, ID: "ceo_alice"}, writ.Actor{}, "actor mismatch: the request names actor HUMAN:ceo_alice, but API key key_real acts as AGENT:agt_real"},
		{"its own id, another type", keyed(agent), writ.Actor{Type: writ.ActorHuman, ID: "agt_real"}, writ.Actor{}, "actor mismatch"},
		{"acting for an agent", keyed(orch), writ.Actor{Type: writ.ActorAgent, ID: "agt_7"},
			writ.Actor{Type: writ.ActorAgent, ID: "agt_7", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_orch", ActedBy: &writ.ActorRef{Type: writ.ActorService, ID: "orch"}}, ""},
		{"acting for someone outside acts_for", keyed(orch), writ.Actor{Type: writ.ActorHuman, ID: "agt_7"}, writ.Actor{}, "may not act for HUMAN:agt_7"},
		{"setting provenance", keyed(agent), writ.Actor{Type: writ.ActorAgent, ID: "agt_real", Provenance: writ.ProvenanceAuthenticated}, writ.Actor{}, "set by writ"},
		{"setting the key id", context.Background(), writ.Actor{Type: writ.ActorAgent, ID: "a", KeyID: "key_x"}, writ.Actor{}, "set by writ"},
		{"a verified delegated user", verified(keyed(agent), "acme", "usr_1"), writ.Actor{},
			writ.Actor{Type: writ.ActorAgent, ID: "agt_real", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_real", DelegatedUserID: "usr_1",
				DelegatedUserProvenance: writ.ProvenanceAuthenticated, DelegatedUserIssuer: "https://idp"}, ""},
		{"a claimed delegated user", keyed(agent), writ.Actor{DelegatedUserID: "usr_1"},
			writ.Actor{Type: writ.ActorAgent, ID: "agt_real", Provenance: writ.ProvenanceAuthenticated, KeyID: "key_real", DelegatedUserID: "usr_1", DelegatedUserProvenance: writ.ProvenanceClaimed}, ""},
		{"a token for another user", verified(keyed(agent), "acme", "usr_1"), writ.Actor{DelegatedUserID: "usr_2"}, writ.Actor{}, "delegated user mismatch"},
		{"a token for another tenant", verified(keyed(agent), "globex", "usr_1"), writ.Actor{}, writ.Actor{}, `verified for tenant "globex"`},
	}
	for _, tc := range tests {
		got, err := writ.BindActor(tc.ctx, "acme", tc.named)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: BindActor(%+v) = %+v, %v; want an error containing %q", tc.name, tc.named, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.Type != tc.want.Type || got.ID != tc.want.ID || got.WorkloadIdentity != tc.want.WorkloadIdentity || got.DelegatedUserID != tc.want.DelegatedUserID ||
			got.Provenance != tc.want.Provenance || got.KeyID != tc.want.KeyID || got.DelegatedUserProvenance != tc.want.DelegatedUserProvenance ||
			got.DelegatedUserIssuer != tc.want.DelegatedUserIssuer || (got.ActedBy == nil) != (tc.want.ActedBy == nil) || (got.ActedBy != nil && *got.ActedBy != *tc.want.ActedBy) {
			t.Errorf("%s: BindActor(%+v) = %+v, %v; want %+v", tc.name, tc.named, got, err, tc.want)
		}
	}
}

func TestMayActOn(t *testing.T) {
	owner := writ.Actor{Type: writ.ActorAgent, ID: "agt_real", KeyID: "key_real"}
	tests := []struct {
		name string
		p    *writ.Principal
		ok   bool
	}{
		{"development mode", nil, true},
		{"the key that made it", &writ.Principal{KeyID: "key_real", Subject: "renamed"}, true},
		{"another key of the same principal", &writ.Principal{KeyID: "key_rotated", Subject: "agt_real"}, true},
		{"a key that may act for it", &writ.Principal{KeyID: "key_orch", Subject: "orch", ActorType: writ.ActorService, ActsFor: []string{"*:agt_*"}}, true},
		{"another agent's key", &writ.Principal{KeyID: "key_other", Subject: "agt_other"}, false},
		{"the same subject as a human", &writ.Principal{KeyID: "key_h", Subject: "agt_real", ActorType: writ.ActorHuman}, false},
	}
	for _, tc := range tests {
		ctx := context.Background()
		if tc.p != nil {
			ctx = writ.WithPrincipal(ctx, tc.p)
		}
		err := writ.MayActOn(ctx, "decision dec_1", owner)
		if (err == nil) != tc.ok || (err != nil && writ.ErrorCode(err) != writ.EFORBIDDEN) {
			t.Errorf("%s: MayActOn = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestValidActsFor(t *testing.T) {
	for _, p := range []string{"AGENT:agt_*", "*:x", "SERVICE:svc-[0-9]"} {
		if err := writ.ValidActsFor(p); err != nil {
			t.Errorf("ValidActsFor(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"agt_*", "ROBOT:x", "AGENT:", "AGENT:[", ""} {
		if err := writ.ValidActsFor(p); err == nil {
			t.Errorf("ValidActsFor(%q) = nil, want an error", p)
		}
	}
}
