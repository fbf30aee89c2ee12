package gateway_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// refundArgs are the arguments of the refund example's tools. Currency
// may be left out, as far as the tool's input schema goes, so that the
// gateway's own refusal of a call lacking a mapped argument is what the
// test sees.
type refundArgs struct {
	CustomerID string  `json:"customer_id"`
	OrderID    string  `json:"order_id,omitempty"`
	AmountINR  float64 `json:"amount_inr,omitempty"`
	Currency   string  `json:"currency,omitempty"`
}

// newRefundFixture puts the gateway, with the refund example pack as it
// is (examples/refund), in front of an identity check (a customer named
// cus_fail fails it: isError) and a refund tool; refunds counts the
// refunds that reached the tool.
func newRefundFixture(t *testing.T) (*fixture, *atomic.Int32) {
	t.Helper()
	refunds := new(atomic.Int32)
	server := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "idv-payments", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "check_identity", Description: "Verify a customer's identity."}, func(ctx context.Context, req *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, any, error) {
			if a.CustomerID == "cus_fail" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the customer did not pass verification"}}}, nil, nil
			}
			return nil, map[string]any{"customer_id": a.CustomerID, "verified": true, "method": "otp", "phone": "+91 98765 43210"}, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "issue_refund", Description: "Issue a refund."}, func(ctx context.Context, req *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, any, error) {
			refunds.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded " + a.OrderID}}}, nil, nil
		})
		return s
	}
	eng, st, pol := newEngine(t, "../examples/refund")
	cfg := &gateway.Config{Tenant: tenant, Unlisted: gateway.UnlistedHide, Upstreams: []gateway.Upstream{{Name: "idv", Prefix: "idv."}, {Name: "payments", Prefix: "payments."}}}
	gw, err := newGateway(context.Background(), gateway.Options{Config: cfg, Writ: eng, Tools: pol.Pack.Tools,
		Transport: func(ctx context.Context, u gateway.Upstream) (mcp.Transport, error) {
			ct, stt := mcp.NewInMemoryTransports()
			if _, err := server().Connect(ctx, stt, nil); err != nil {
				return nil, err
			}
			return ct, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	return &fixture{eng: eng, store: st, gw: gw}, refunds
}

// TestGatewayCapturesEvidence: an identity check's result is stored as
// observed evidence, and the session's refund for that customer cites it
// and is allowed; without it (no check, a failed check, another
// customer's check) the refund is refused. (In-memory sessions have no
// id: the gateway takes them for one, as it does stdio's.)
func TestGatewayCapturesEvidence(t *testing.T) {
	refund := func(customer string) map[string]any {
		return map[string]any{"customer_id": customer, "order_id": "ord_881", "amount_inr": 4200, "currency": "INR"}
	}
	for _, tc := range []struct {
		name     string
		identity []string // customers whose identity the session checks first
		customer string   // of the refund
		want     string   // "" allowed, else the reason code
	}{
		{name: "no identity check", customer: "cus_77", want: "missing_identity_verification"},
		{name: "identity checked", identity: []string{"cus_77"}, customer: "cus_77"},
		{name: "another customer checked", identity: []string{"cus_12"}, customer: "cus_77", want: "missing_identity_verification"},
		{name: "check failed", identity: []string{"cus_fail"}, customer: "cus_fail", want: "missing_identity_verification"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newRefundFixture(t)
			cs := f.client(t, protocols[0])
			var idvDecisions []string
			for _, c := range tc.identity {
				res := call(t, cs, "idv.check_identity", map[string]any{"customer_id": c})
				if res.IsError != (c == "cus_fail") {
					t.Fatalf("check_identity(%s) isError = %v: %s", c, res.IsError, text(res))
				}
				id, _ := res.Meta[gateway.MetaDecisionID].(string)
				idvDecisions = append(idvDecisions, id)
			}
			res := call(t, cs, "payments.issue_refund", refund(tc.customer))
			if tc.want != "" {
				if !res.IsError {
					t.Fatalf("refund(%s) allowed: %s; want refused with %s", tc.customer, text(res), tc.want)
				}
				rc := receipt(t, res)
				if rc.SafeToExecute || len(rc.Reasons) == 0 || rc.Reasons[0].Code != tc.want {
					t.Fatalf("refund(%s) = safe %v, reasons %v; want refused with %s", tc.customer, rc.SafeToExecute, rc.Reasons, tc.want)
				}
				return
			}
			if res.IsError {
				t.Fatalf("refund(%s) refused: %s", tc.customer, text(res))
			}
			// The refund's record cites the captured item, and the item is
			// observed, from the identity check the gateway allowed.
			id, _ := res.Meta[gateway.MetaRecordID].(string)
			rec, err := f.eng.Record(context.Background(), tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Record.EvidenceRefs) != 1 || !strings.HasPrefix(rec.Record.EvidenceRefs[0], "identity_verification:") {
				t.Fatalf("refund record evidence_refs = %v, want the captured identity_verification item", rec.Record.EvidenceRefs)
			}
			ref := strings.TrimPrefix(rec.Record.EvidenceRefs[0], "identity_verification:")
			itemID, addr, _ := strings.Cut(ref, "#")
			se, err := f.eng.Evidence(context.Background(), tenant, itemID)
			if err != nil {
				t.Fatal(err)
			}
			if se.Provenance != writ.ProvenanceObserved || se.ContentAddress != addr {
				t.Errorf("captured item: provenance %s, address %s; want observed, %s", se.Provenance, se.ContentAddress, addr)
			}
			if o := se.Observation; o == nil || o.Tool != "idv.check_identity" || !slices.Contains(idvDecisions, o.DecisionID) || !strings.HasPrefix(o.ResultDigest, "sha256:") {
				t.Errorf("captured item's observation = %+v, want the identity check's call (decisions %v)", o, idvDecisions)
			}
			wantAttrs := map[string]any{"method": "otp", "verified": true}
			if !reflect.DeepEqual(se.Item.Attributes, wantAttrs) || !slices.Equal(se.Item.SubjectIDs, []string{"customer:cus_77"}) || se.Item.ExpiresAt == nil {
				t.Errorf("captured item = %+v; want attributes %v (the named ones only), subject customer:cus_77, an expiry", se.Item, wantAttrs)
			}
			kinds, _ := story(t, f.eng, se.RecordID)
			if len(kinds) != 1 {
				t.Errorf("the item's evidence record's decision has records %v, want its evidence record alone", kinds)
			}
		})
	}
}
