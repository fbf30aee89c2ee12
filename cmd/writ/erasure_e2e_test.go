package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/record"
)

// classifiedRule is the redaction rule the erasure test adds to the
// refund pack: the customer's financial context is kept in the
// classified store, not in the stored envelope.
const classifiedRule = `  - id: customer_financials
    description: The customer's order total, past refunds and fraud score.
    fields: [order_total_inr, previous_refunds, fraud_score]
    classification: confidential
`

// TestErasureOverHTTP: on each store, a server with the refund pack and
// a classified redaction rule decides two customers' refunds. The stored
// envelopes carry commitments, not the values; both records replay
// replay_equal (on the values put back from the classified store). Then
// `writ records erase` erases one customer, and:
//   - its record replays inputs_erased, naming the erased references, and
//     `writ replay` exits 0 (an erased input is not a finding);
//   - the other customer's record, and the erasure's own record, replay
//     replay_equal;
//   - `writ ledger verify` finds the ledger intact, and an export of it
//     passes `writ ledger verify-bundle --trusted-keys`;
//   - erasing again erases nothing more, and is recorded too;
//   - with the server stopped, `writ records erase --pack` erases the
//     other customer in the local ledger: its record then replays
//     inputs_erased too, and the ledger still verifies.
func TestErasureOverHTTP(t *testing.T) {
	packDir := filepath.Join(t.TempDir(), "refund")
	copyDir(t, "../../examples/refund", packDir)
	controls := filepath.Join(packDir, "controls.yaml")
	b, err := os.ReadFile(controls)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(controls, append(b, classifiedRule...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			data := t.TempDir()
			keys := filepath.Join(data, "keys")
			args := []string{"--data", data, "--pack", packDir}
			storeArgs := []string{"--data", data}
			if store == "postgres" {
				dsn := os.Getenv("WRIT_TEST_POSTGRES")
				if dsn == "" {
					t.Skip("WRIT_TEST_POSTGRES is not set")
				}
				if out, err := exec.Command(writBinary, "ledger", "keys", "generate", "--keys", keys).CombinedOutput(); err != nil {
					t.Fatalf("keys generate: %v\n%s", err, out)
				}
				url := isolatedSchema(t, dsn)
				args = append(args, "--store", url, "--keys", keys)
				storeArgs = []string{"--store", url, "--keys", keys}
			}
			local := append([]string{"--pack", packDir, "--data", data}, storeArgs...)
			if store == "sqlite" {
				local = local[:4]
			}
			testErasure(t, startServerArgs(t, args...), storeArgs, keys, local)
		})
	}
}

func testErasure(t *testing.T, srv *server, storeArgs []string, keys string, local []string) {
	ctx := context.Background()
	c := httpapi.NewClient(srv.url)
	refund := func(customer string, fraud float64) *writ.Receipt {
		req := readExample(t, "../../examples/refund/requests/refund-allow.json")
		req.SubjectIDs = []string{"customer:" + customer, "order:ord_881"}
		req.Context["fraud_score"] = fraud
		rc, err := c.Check(ctx, req)
		if err != nil {
			t.Fatalf("check for %s: %v", customer, err)
		}
		return rc
	}
	erased, kept := refund("cus_77", 0.0731), refund("cus_88", 0.0492)

	// The stored envelope carries a commitment in place of each value.
	for _, rc := range []*writ.Receipt{erased, kept} {
		env := storedEnvelope(t, srv.url, rc.Metadata.RecordID)
		refs, err := record.ClassifiedRefs(env)
		if err != nil || len(refs) != 3 {
			t.Errorf("envelope of %s holds classified references %v (%v), want 3 (order total, previous refunds, fraud score)", rc.Metadata.RecordID, refs, err)
		}
		for _, raw := range []string{"0.0731", "0.0492", "18000"} {
			if strings.Contains(string(env), raw) {
				t.Errorf("the stored envelope of %s holds the classified value %s:\n%s", rc.Metadata.RecordID, raw, env)
			}
		}
	}
	replayed := func(rc *writ.Receipt) *writ.ReplayResult {
		res, err := c.Replay(ctx, "acme", rc.Metadata.RecordID)
		if err != nil {
			t.Fatalf("replay %s: %v\n%s", rc.Metadata.RecordID, err, srv.stderr)
		}
		return res
	}
	for _, rc := range []*writ.Receipt{erased, kept} {
		if res := replayed(rc); res.Status != writ.ReplayEqual {
			t.Fatalf("replay %s before the erasure = %s %+v %s, want replay_equal", rc.Metadata.RecordID, res.Status, res.Differences, res.Error)
		}
	}

	// Bad erasures are refused and write nothing.
	before := recordCount(t, c)
	for _, bad := range []*writ.EraseRequest{
		{TenantID: "acme", SubjectID: "customer:cus_77", By: "human:dpo"},
		{TenantID: "acme", SubjectID: "", By: "human:dpo", Reason: "request"},
		{TenantID: "acme", SubjectID: "customer:cus_77", Reason: "request"},
	} {
		if _, err := c.Erase(ctx, bad); writ.ErrorCode(err) != writ.EINVALID {
			t.Errorf("Erase(%+v) = %v, want EINVALID", bad, err)
		}
	}
	if after := recordCount(t, c); after != before {
		t.Errorf("refused erasures wrote %d records", after-before)
	}

	out, err := exec.Command(writBinary, "records", "erase", "--server", srv.url, "--tenant", "acme", "--subject", "customer:cus_77",
		"--by", "human:dpo", "--reason", "the customer's erasure request").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "erased 3 classified values of customer:cus_77") {
		t.Fatalf("writ records erase: %v\n%s", err, out)
	}
	recordID := strings.TrimSuffix(strings.TrimSpace(string(out))[strings.LastIndex(strings.TrimSpace(string(out)), "record ")+len("record "):], ")")
	xr, err := c.Record(ctx, "acme", recordID)
	if err != nil {
		t.Fatal(err)
	}
	if r := xr.Record; r.DecisionKey != "erasure:support" || r.Actor.ID != "human:dpo" || !slices.Equal(r.SubjectIDs, []string{"customer:cus_77"}) || r.Outputs["erased"] != float64(3) {
		t.Fatalf("erasure record = %s", xr.Raw)
	}

	res := replayed(erased)
	if res.Status != writ.ReplayInputsErased || len(res.Erased) != 3 || len(res.Differences) != 0 {
		t.Errorf("replay of the erased customer's record = %s %v %+v, want inputs_erased naming 3 references and no difference", res.Status, res.Erased, res.Differences)
	}
	for _, ref := range res.Erased {
		if !slices.Contains(xr.Record.Outputs["refs"].([]any), any(ref)) {
			t.Errorf("replay names erased input %s, which the erasure record does not list", ref)
		}
	}
	if res := replayed(kept); res.Status != writ.ReplayEqual {
		t.Errorf("replay of the other customer's record = %s %+v, want replay_equal", res.Status, res.Differences)
	}
	if res, err := c.Replay(ctx, "acme", recordID); err != nil || res.Status != writ.ReplayEqual {
		t.Errorf("replay of the erasure record = %+v, %v; want replay_equal", res, err)
	}

	// Erasing again erases nothing more; it is recorded all the same.
	again, err := c.Erase(ctx, &writ.EraseRequest{TenantID: "acme", SubjectID: "customer:cus_77", By: "human:dpo", Reason: "again"})
	if err != nil || again.Erased != 0 || again.RecordID == "" {
		t.Errorf("second erasure = %+v, %v; want 0 erased, recorded", again, err)
	}
	srv.stop(t)

	// The CLI replays from the store: the erased record is not a finding.
	replayArgs := storeArgs
	if storeArgs[0] == "--store" {
		replayArgs = storeArgs[:2] // replay reads the store; it signs nothing
	}
	cmd := exec.Command(writBinary, append([]string{"replay", "--tenant", "acme", "--all"}, replayArgs...)...)
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 inputs_erased") || !strings.Contains(string(out), erased.Metadata.RecordID+" (check support.refund.execute, seq 1): inputs_erased") {
		t.Errorf("writ replay --all after the erasure: %v\n%s", err, out)
	}
	out, err = exec.Command(writBinary, append([]string{"ledger", "verify", "--json"}, storeArgs...)...).CombinedOutput()
	var rep struct {
		Intact bool `json:"intact"`
	}
	if err != nil || json.Unmarshal(out, &rep) != nil || !rep.Intact {
		t.Errorf("writ ledger verify after the erasure: %v\n%s", err, out)
	}
	dir := t.TempDir()
	trusted, bundle := filepath.Join(dir, "trusted-keys.json"), filepath.Join(dir, "ledger.tar")
	if out, err := exec.Command(writBinary, "ledger", "keys", "publish", "--keys", keys, "--out", trusted).CombinedOutput(); err != nil {
		t.Fatalf("keys publish: %v\n%s", err, out)
	}
	if out, err := exec.Command(writBinary, append([]string{"ledger", "export", "--out", bundle}, storeArgs...)...).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	out, err = exec.Command(writBinary, "ledger", "verify-bundle", "--trusted-keys", trusted, bundle).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ledger intact against the trusted keys") {
		t.Errorf("verify-bundle after the erasure: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "0.0731") {
		t.Errorf("the bundle's verification shows an erased value")
	}

	// The local ledger, without a server: refused without --by, or with
	// --server too; then the other customer is erased.
	base := append([]string{"records", "erase", "--tenant", "acme", "--subject", "customer:cus_88", "--reason", "the customer's erasure request"}, local...)
	for _, bad := range [][]string{base, append(append([]string{}, base...), "--by", "human:dpo", "--server", srv.url)} {
		if out, err := exec.Command(writBinary, bad...).CombinedOutput(); err == nil || !strings.Contains(string(out), "records erase") {
			t.Errorf("writ %s = %v, want a usage error\n%s", strings.Join(bad, " "), err, out)
		}
	}
	out, err = exec.Command(writBinary, append(base, "--by", "human:dpo")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "erased 3 classified values of customer:cus_88") {
		t.Fatalf("writ records erase --pack: %v\n%s", err, out)
	}
	out, err = exec.Command(writBinary, append([]string{"replay", "--tenant", "acme", "--all"}, replayArgs...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 inputs_erased") || !strings.Contains(string(out), kept.Metadata.RecordID+" (check support.refund.execute, seq 2): inputs_erased") {
		t.Errorf("writ replay --all after the local erasure: %v\n%s", err, out)
	}
	out, err = exec.Command(writBinary, append([]string{"ledger", "verify", "--json"}, storeArgs...)...).CombinedOutput()
	if err != nil || json.Unmarshal(out, &rep) != nil || !rep.Intact {
		t.Errorf("writ ledger verify after the local erasure: %v\n%s", err, out)
	}
}

// storedEnvelope gets a record's stored request envelope of tenant acme.
func storedEnvelope(t *testing.T, base, recordID string) []byte {
	t.Helper()
	resp, err := http.Get(base + "/v1/records/" + recordID + "/envelope?tenant_id=acme")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET envelope of %s: %d %v\n%s", recordID, resp.StatusCode, err, b)
	}
	return b
}
