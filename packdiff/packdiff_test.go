package packdiff_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/packdiff"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func load(t *testing.T, dir string) *pack.Pack {
	t.Helper()
	p, err := pack.Load(dir)
	if err != nil {
		t.Fatalf("Load(%s) = %v", dir, err)
	}
	return p
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./packdiff -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./packdiff -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestDiffExamples keeps writ diff's report of two example packs against
// their second versions under testdata: rules added, removed, rewritten
// and strengthened, evidence, budgets and gates moved (refund), and a
// verification contract tightened and loosened (storybook).
func TestDiffExamples(t *testing.T) {
	for _, name := range []string{"refund", "storybook", "messaging"} {
		t.Run(name, func(t *testing.T) {
			d := packdiff.Compare(load(t, "../examples/"+name), load(t, "testdata/"+name+"-v2"))
			// The hashes follow every byte of the example; the golden
			// file keeps the changes, not the hashes.
			d.OldHash, d.NewHash = "sha256:old", "sha256:new"
			var text, js bytes.Buffer
			if err := d.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".txt", text.Bytes())
			enc := json.NewEncoder(&js)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			if err := enc.Encode(d); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".json", js.Bytes())
		})
	}
}

// TestNoChanges: a pack compared with itself has no changes.
func TestNoChanges(t *testing.T) {
	for _, dir := range []string{"../examples/refund", "../examples/storybook", "../examples/wf-2302"} {
		p := load(t, dir)
		if d := packdiff.Compare(p, load(t, dir)); len(d.Changes) != 0 {
			t.Errorf("%s against itself: %+v", dir, d.Changes)
		}
	}
}

// TestDirections checks the direction of the changes the refund fixture
// makes, one by one.
func TestDirections(t *testing.T) {
	d := packdiff.Compare(load(t, "../examples/refund"), load(t, "testdata/refund-v2"))
	want := map[string]string{
		"rule R_GIFT_CARD_REFUND of POLICY_RETURNS_V1 added":                 packdiff.Tightened,
		"rule R_RETURN_NOT_RECEIVED of POLICY_RETURNS_V1 removed":            packdiff.Loosened,
		"rule R_REPEAT_REFUND_WARNING of POLICY_RETURNS_V1 effect":           packdiff.Tightened,
		"rule R_HIGH_VALUE_REQUIRES_APPROVAL of POLICY_RETURNS_V1 condition": "",
		"spec support.refund.execute evidence identity_verification max_age": packdiff.Tightened,
		"spec support.refund.execute budget tool_calls":                      packdiff.Loosened,
		"approval gate GATE_FINANCE_APPROVAL ttl":                            packdiff.Tightened,
		"must_escalate control fraud_signal_high condition":                  "",
		"pack support version":                                               "",
		"history aggregate refunds_per_customer window":                      "",
		"spec support.refund.execute execution valid_for":                    packdiff.Loosened,
	}
	got := map[string]string{}
	for _, c := range d.Changes {
		got[c.Subject+" "+c.What] = c.Direction
	}
	for k, dir := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("no change %q in %v", k, got)
		} else if g != dir {
			t.Errorf("%s: direction %q, want %q", k, g, dir)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d changes, want %d: %v", len(got), len(want), got)
	}
}

// TestCELCostDirection: a lower cost limit tightens, since a condition
// that runs out of it is an evaluation error, and its rule fires.
func TestCELCostDirection(t *testing.T) {
	old := load(t, "../examples/refund")
	for _, tc := range []struct {
		cost uint64
		want string
	}{{old.Limits.CELCost / 2, packdiff.Tightened}, {old.Limits.CELCost * 2, packdiff.Loosened}} {
		lower := *old
		lower.Limits.CELCost = tc.cost
		d := packdiff.Compare(old, &lower)
		if len(d.Changes) != 1 || d.Changes[0].What != "limits.cel_cost" || d.Changes[0].Direction != tc.want {
			t.Errorf("cel_cost %d → %d: changes %+v, want one limits.cel_cost change, %s", old.Limits.CELCost, tc.cost, d.Changes, tc.want)
		}
	}
}

// TestToolGatewayFields: a change to what the MCP gateway makes of a
// tool's calls (subject_ids, outputs, captures) is reported, with no
// direction, from the refund example to a copy that edits each.
func TestToolGatewayFields(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../examples/refund")); err != nil {
		t.Fatal(err)
	}
	tools := "tools:\n" +
		"  - name: payments.issue_refund\n    decision_key: support.refund.execute\n    approval_mode_ceiling: destructive\n" +
		"    subject_ids: [\"customer:{customer_id}\"]\n    outputs: {refund_amount_inr: amount, currency: currency, order_id: order_id}\n" +
		"  - name: idv.check_identity\n    decision_key: support.identity.check\n    approval_mode_ceiling: read_only\n" +
		"    subject_ids: [\"customer:{customer_id}\"]\n    captures: {kind: identity_verification, attributes: [method]}\n"
	if err := os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte(tools), 0o644); err != nil {
		t.Fatal(err)
	}
	d := packdiff.Compare(load(t, "../examples/refund"), load(t, dir))
	want := map[string][2]string{
		"tool payments.issue_refund subject_ids": {"customer:{customer_id}, order:{order_id}", "customer:{customer_id}"},
		"tool payments.issue_refund outputs":     {"currency: currency, order_id: order_id, refund_amount_inr: amount_inr", "currency: currency, order_id: order_id, refund_amount_inr: amount"},
		"tool idv.check_identity captures":       {"identity_verification [method, verified] valid_for 24h", "identity_verification [method]"},
	}
	got := map[string][2]string{}
	for _, c := range d.Changes {
		if c.Direction != "" {
			t.Errorf("%s %s: direction %s, want none", c.Subject, c.What, c.Direction)
		}
		got[c.Subject+" "+c.What] = [2]string{c.Old, c.New}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("Compare: %s = %q, want %q", k, got[k], w)
		}
	}
}
