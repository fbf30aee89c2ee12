package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/ledger/ledgertest"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// TestHistoryTwoServers races 16 writers over two stores on one database
// (two pools, as two writ servers) against a limit of 3: exactly 3
// contribute (see ledgertest.HistoryRace).
func TestHistoryTwoServers(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	a, b := openStore(t, dsn), openStore(t, dsn)
	defer a.Close()
	defer b.Close()
	ledgertest.HistoryRace(t, []ledger.Store{a, b}, 16, 3)
}

// TestVelocityTwoServers sends 16 concurrent refunds of one customer to
// two engines, each on its own store of one database, under the refund
// example's "at most 3 refunds per customer in 24 h": exactly 3 are
// allowed, and the chain verifies.
func TestVelocityTwoServers(t *testing.T) {
	dsn := testSchema(t)
	t.Parallel()
	ctx := context.Background()
	p, err := pack.Load("../examples/refund")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
	var engines []*engine.Engine
	var stores []*Store
	for range 2 {
		st := openStore(t, dsn)
		defer st.Close()
		eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: []byte("writ-test-binding-key-0123456789abcdef"), Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		engines, stores = append(engines, eng), append(stores, st)
	}
	observed := now.Add(-time.Minute)
	// The identity verification the refunds cite, on file: a refund
	// accepts no evidence that is only the caller's word.
	ictx := writ.WithPrincipal(ctx, &writ.Principal{TenantID: "acme", KeyID: "key_idv", Subject: "idv.acme.example", Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	if _, err := engines[0].AddEvidence(ictx, &writ.AddEvidenceRequest{TenantID: "acme", Kind: "identity_verification", ID: "idv_1",
		SubjectIDs: []string{"customer:cus_race"}, ObservedAt: &observed}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	outcomes := map[writ.Outcome]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-start
			order := fmt.Sprintf("ord_%d", i)
			req := &writ.CheckRequest{
				TenantID: "acme", Tool: "payments.issue_refund",
				Arguments:  map[string]any{"order_id": order, "amount_inr": 4200.0, "currency": "INR"},
				Actor:      writ.Actor{Type: writ.ActorAgent, ID: "agt_support"},
				SubjectIDs: []string{"customer:cus_race", "order:" + order},
				// A session each: the refund spec's tool_calls budget refuses a
				// check that names none, and this race is the customer's.
				InputsRefs: &writ.InputsRefs{Session: "sess_" + order},
				Evidence:   []writ.Evidence{{Kind: "identity_verification", ID: "idv_1", Version: "1", ObservedAt: &observed}},
				Context:    map[string]any{"order_total_inr": 18000.0},
				Outputs:    map[string]any{"refund_amount_inr": 4200.0, "currency": "INR", "order_id": order},
			}
			rc, err := engines[i%2].Check(ctx, req)
			if err != nil {
				t.Errorf("refund %d: %v", i, err)
				return
			}
			mu.Lock()
			outcomes[rc.Outcome]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if outcomes[writ.OutcomeAllow] != 3 || outcomes[writ.OutcomeGoalFailTerminal] != 13 {
		t.Errorf("16 concurrent refunds of one customer on two servers: %v, want 3 allowed and 13 denied", outcomes)
	}
	findings, _, err := verify.VerifyChains(ctx, stores[0])
	if err != nil || len(findings) > 0 {
		t.Errorf("VerifyChains = %+v, %v", findings, err)
	}
}
