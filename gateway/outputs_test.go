package gateway_test

import (
	"context"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

// TestGatewayProposesOutputs drives the refund example through the
// gateway: the refund tool's outputs mapping (tools.yaml outputs) makes
// the call's arguments the check's outputs, which the spec's
// outputs_schema validates. A refund that meets it is allowed on the
// identity check the session made and records those outputs; one whose
// outputs break the schema, or that lacks a mapped argument, is refused
// and never reaches the tool.
func TestGatewayProposesOutputs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   map[string]any
		want   map[string]any // the record's outputs; nil: refused
		refuse string         // what the refusal says
	}{
		{
			name: "outputs the schema accepts",
			args: map[string]any{"customer_id": "cus_77", "order_id": "ord_881", "amount_inr": 4200, "currency": "INR"},
			want: map[string]any{"refund_amount_inr": float64(4200), "currency": "INR", "order_id": "ord_881"},
		},
		{
			name:   "a currency the schema refuses",
			args:   map[string]any{"customer_id": "cus_77", "order_id": "ord_881", "amount_inr": 4200, "currency": "USD"},
			refuse: "outputs.currency",
		},
		{
			name:   "a refund of nothing",
			args:   map[string]any{"customer_id": "cus_77", "order_id": "ord_881", "amount_inr": 0, "currency": "INR"},
			refuse: "outputs.refund_amount_inr",
		},
		{
			name:   "no currency argument",
			args:   map[string]any{"customer_id": "cus_77", "order_id": "ord_881", "amount_inr": 4200},
			refuse: "output currency from argument currency, which the call does not give; the call was not checked or forwarded",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, refunds := newRefundFixture(t)
			cs := f.client(t, protocols[0])
			if res := call(t, cs, "idv.check_identity", map[string]any{"customer_id": "cus_77"}); res.IsError {
				t.Fatalf("check_identity refused: %s", text(res))
			}
			res := call(t, cs, "payments.issue_refund", tc.args)
			if tc.want == nil {
				if !res.IsError || !strings.Contains(text(res), tc.refuse) {
					t.Errorf("issue_refund(%v) = isError %v, %q; want refused, saying %q", tc.args, res.IsError, text(res), tc.refuse)
				}
				if n := refunds.Load(); n != 0 {
					t.Errorf("issue_refund(%v) reached the tool %d times, want never", tc.args, n)
				}
				return
			}
			if res.IsError {
				t.Fatalf("issue_refund(%v) refused: %s", tc.args, text(res))
			}
			id, _ := res.Meta[gateway.MetaRecordID].(string)
			rec, err := f.eng.Record(context.Background(), tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			// The record's outputs are the proposed ones and the outcome.
			want := maps.Clone(tc.want)
			want["outcome"] = string(writ.OutcomeAllow)
			if got := rec.Record.Outputs; !reflect.DeepEqual(got, want) {
				t.Errorf("issue_refund(%v): record outputs %v, want %v", tc.args, got, want)
			}
			if n := refunds.Load(); n != 1 {
				t.Errorf("issue_refund(%v): %d refunds reached the tool, want 1", tc.args, n)
			}
		})
	}
}
