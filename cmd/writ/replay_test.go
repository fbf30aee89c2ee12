package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/replay"
)

// refundRequest writes the refund-allow example with another amount.
// fileIDVOffline puts on file in the local ledger in data, as of the
// refund examples' morning, the identity verifications they cite:
// idv_771, observed 21 minutes before they decide, and idv_770, two days
// old (writ evidence submit --data).
func fileIDVOffline(t *testing.T, data string) {
	t.Helper()
	for _, item := range [][2]string{{"idv_771", "2026-05-09T09:10:00Z"}, {"idv_770", "2026-05-07T08:00:00Z"}} {
		if _, stderr, code := runLedgerCmd(t, "evidence", "submit", "--data", data, "--pack", "../../examples/refund", "--now", "2026-05-09T09:20:00Z",
			"--tenant", "acme", "--issuer", "idv.acme.example", "--kind", "identity_verification", "--id", item[0], "--subject", "customer:cus_77",
			"--attr", "method=otp", "--observed-at", item[1]); code != 0 {
			t.Fatalf("writ evidence submit --data %s: exit %d: %s", item[0], code, stderr)
		}
	}
}

func refundRequest(t *testing.T, dir string, amount float64) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/refund/requests/refund-allow.json")
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	req["arguments"].(map[string]any)["amount_inr"] = amount
	req["outputs"].(map[string]any)["refund_amount_inr"] = amount
	delete(req, "idempotency_key")
	b, _ := json.Marshal(req)
	path := filepath.Join(dir, "refund.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplayCommand records every refund example with writ check and
// replays the ledger, one record and all of it; a changed byte makes
// replay exit 3 and say tamper_detected.
func TestReplayCommand(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	fileIDVOffline(t, data)
	reqs, _ := filepath.Glob("../../examples/refund/requests/*.json")
	for _, r := range reqs {
		if _, stderr, code := runLedgerCmd(t, "check", "--request", r, "--data", data, "--now", "2026-05-09T09:31:42Z"); code != 0 {
			t.Fatalf("writ check %s: exit %d: %s", r, code, stderr)
		}
	}
	stdout, stderr, code := runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "--all")
	if code != 0 || !strings.Contains(stdout, "replayed 13 records of tenant acme") || !strings.Contains(stdout, "13 replay_equal, 0 diff, 0 error") {
		t.Fatalf("writ replay --all: exit %d\n%s%s", code, stdout, stderr)
	}
	list, _, _ := runLedgerCmd(t, "records", "list", "--data", data, "--tenant", "acme", "--json")
	// --outcome keeps the records of that outcome, and only those.
	outcomesSeen := 0
	for _, outcome := range writ.Outcomes {
		out, stderr, code := runLedgerCmd(t, "records", "list", "--data", data, "--tenant", "acme", "--json", "--outcome", string(outcome))
		var want, got []string
		for line := range strings.Lines(list) {
			var r writ.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			if r.Outputs["outcome"] == string(outcome) {
				want = append(want, line)
			}
		}
		got = slices.Collect(strings.Lines(out))
		if len(want) > 0 {
			outcomesSeen++
		}
		if code != 0 || !slices.Equal(got, want) {
			t.Errorf("writ records list --outcome %s: exit %d, %d records, want %d%s", outcome, code, len(got), len(want), stderr)
		}
	}
	if outcomesSeen < 2 {
		t.Errorf("the refund examples recorded %d outcomes; --outcome is not exercised", outcomesSeen)
	}
	// The seed's other query keys keep the records that hold them, and
	// --newest serves the same records the other way round.
	var listed []writ.Record
	for line := range strings.Lines(list) {
		var r writ.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		listed = append(listed, r)
	}
	last := listed[len(listed)-1]
	for _, tc := range []struct {
		flags []string
		match func(r writ.Record) bool
	}{
		{[]string{"--policy-decision", last.PolicyDecisions[0].PolicyDecisionID}, func(r writ.Record) bool {
			return slices.ContainsFunc(r.PolicyDecisions, func(p writ.PolicyDecision) bool {
				return p.PolicyDecisionID == last.PolicyDecisions[0].PolicyDecisionID
			})
		}},
		{[]string{"--approval-mode", string(last.ApprovalModeEffective)}, func(r writ.Record) bool { return r.ApprovalModeEffective == last.ApprovalModeEffective }},
		{[]string{"--approver", "user:nobody"}, func(writ.Record) bool { return false }},
		{[]string{"--decision-key-prefix", last.DecisionKey[:3], "--newest"}, func(r writ.Record) bool { return strings.HasPrefix(r.DecisionKey, last.DecisionKey[:3]) }},
	} {
		out, stderr, code := runLedgerCmd(t, append([]string{"records", "list", "--data", data, "--tenant", "acme", "--json"}, tc.flags...)...)
		var want, got []string
		for _, r := range listed {
			if tc.match(r) {
				want = append(want, r.RecordID)
			}
		}
		if slices.Contains(tc.flags, "--newest") {
			slices.Reverse(want)
		}
		for line := range strings.Lines(out) {
			var r writ.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			got = append(got, r.RecordID)
		}
		if code != 0 || !slices.Equal(got, want) {
			t.Errorf("writ records list %v: exit %d, %v, want %v%s", tc.flags, code, got, want, stderr)
		}
	}
	if out, stderr, code := runLedgerCmd(t, "records", "list", "--data", data, "--tenant", "acme", "--approval-mode", "writes"); code != 1 || out != "" || !strings.Contains(stderr, "approval mode") {
		t.Errorf("writ records list --approval-mode writes: exit %d, stdout %q, stderr %q; want exit 1 naming the approval mode", code, out, stderr)
	}
	if out, stderr, code := runLedgerCmd(t, "records", "list", "--data", data, "--tenant", "acme", "--outcome", "permit"); code != 1 || out != "" || !strings.Contains(stderr, "outcome") {
		t.Errorf("writ records list --outcome permit: exit %d, stdout %q, stderr %q; want exit 1 naming the outcome", code, out, stderr)
	}
	var first struct {
		RecordID string `json:"record_id"`
		TraceID  string `json:"trace_id"`
	}
	// The first check: the two records before it put the evidence on file.
	if err := json.Unmarshal([]byte(strings.SplitN(list, "\n", 4)[2]), &first); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "--json", first.RecordID)
	var res replay.Result
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || res.Status != replay.StatusEqual || res.RecordID != first.RecordID {
		t.Errorf("writ replay --json %s: exit %d, %+v (%v)\n%s", first.RecordID, code, res, err, stdout)
	}
	stdout, _, code = runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "--trace", first.TraceID)
	if code != 0 || !strings.Contains(stdout, first.RecordID+" (check support.refund.execute, seq 3): replay_equal") {
		t.Errorf("writ replay --trace: exit %d\n%s", code, stdout)
	}
	// A what-if: under a pack whose threshold is 4,000 INR, the 4,200 INR
	// refund would have needed approval.
	cand := filepath.Join(t.TempDir(), "candidate")
	if err := os.CopyFS(cand, os.DirFS("../../examples/refund")); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(cand, "policies", "returns.yaml")
	b, _ := os.ReadFile(rules)
	if err := os.WriteFile(rules, bytes.Replace(b, []byte("when: args.amount_inr > 10000"), []byte("when: args.amount_inr > 4000"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "--pack", cand, "--all")
	if code != exitFindings || !strings.Contains(stdout, `outputs.outcome: "allow" → "replan_required"`) || !strings.Contains(stdout, "records by class of difference: changed_policy 13") {
		t.Errorf("writ replay --pack: exit %d\n%s", code, stdout)
	}
	for _, args := range [][]string{
		{"replay", "--data", data, first.RecordID},
		{"replay", "--data", data, "--tenant", "acme"},
		{"replay", "--data", data, "--tenant", "acme", "--all", first.RecordID},
	} {
		if _, _, code := runLedgerCmd(t, args...); code != exitUsage {
			t.Errorf("writ %v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if _, _, code := runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "dr_nothing"); code != exitError {
		t.Errorf("writ replay of an unknown record: exit %d, want %d", code, exitError)
	}

	db, err := sql.Open("sqlite", filepath.Join(data, "writ.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw []byte
	if err := db.QueryRow(`SELECT raw FROM records WHERE record_id = ?`, first.RecordID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte(`"currency":"INR"`), []byte(`"currency":"EUR"`), 1)
	for _, q := range []string{`DROP TRIGGER records_no_update`, `UPDATE records SET raw = ? WHERE record_id = ?`} {
		if _, err := db.Exec(q, raw, first.RecordID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	stdout, _, code = runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "--all")
	if code != exitFindings || !strings.Contains(stdout, "diff [tamper_detected]") || !strings.Contains(stdout, `outputs.currency: "EUR" → "INR"`) ||
		!strings.Contains(stdout, "12 replay_equal, 1 diff, 0 error") {
		t.Errorf("writ replay --all of a changed record: exit %d, want %d\n%s", code, exitFindings, stdout)
	}
	stdout, _, code = runLedgerCmd(t, "replay", "--data", data, "--tenant", "acme", "--all", "--json")
	var all struct {
		Results []replay.Result `json:"results"`
		Summary replay.Summary  `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &all); err != nil || code != exitFindings || len(all.Results) != 1 || all.Summary.Diff != 1 || all.Summary.Equal != 12 {
		t.Errorf("writ replay --all --json: exit %d, %+v (%v)\n%s", code, all, err, stdout)
	}
}

// TestGenerateReplayable: a ledger generated with --replayable replays
// equal, record for record.
func TestGenerateReplayable(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if _, stderr, code := runLedgerCmd(t, "ledger", "generate", "--data", data, "--request", "../../examples/wf-2302/requests/wf-2302-allow.json",
		"--records", "500", "--batch", "200", "--replayable"); code != 0 {
		t.Fatalf("writ ledger generate: exit %d: %s", code, stderr)
	}
	stdout, _, code := runLedgerCmd(t, "replay", "--data", data, "--tenant", "tenant-1", "--all")
	if code != 0 || !strings.Contains(stdout, "500 replay_equal, 0 diff, 0 error") {
		t.Errorf("writ replay --all of a generated ledger: exit %d\n%s", code, stdout)
	}
	if stdout, _, code := runLedgerCmd(t, "ledger", "verify", "--data", data); code != 0 {
		t.Errorf("writ ledger verify: exit %d\n%s", code, stdout)
	}
}

// TestBacktestCommand: lowering the refund approval threshold to 5,000
// INR would send the refunds between 5,000 and 10,000 INR to approval.
func TestBacktestCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	fileIDVOffline(t, data)
	for _, amount := range []float64{4200, 6000, 9999, 12000} {
		if _, stderr, code := runLedgerCmd(t, "check", "--request", refundRequest(t, dir, amount), "--pack", "../../examples/refund", "--data", data, "--now", "2026-05-09T09:31:42Z"); code != 0 {
			t.Fatalf("writ check: exit %d: %s", code, stderr)
		}
	}
	cand := filepath.Join(dir, "candidate")
	if err := os.CopyFS(cand, os.DirFS("../../examples/refund")); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(cand, "policies", "returns.yaml")
	b, _ := os.ReadFile(rules)
	if err := os.WriteFile(rules, bytes.Replace(b, []byte("when: args.amount_inr > 10000"), []byte("when: args.amount_inr > 5000"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runLedgerCmd(t, "backtest", "--data", data, "--tenant", "acme", "--pack", cand)
	if code != 0 || !strings.Contains(stdout, "6 records: 4 decided again, 2 with another outcome") ||
		!strings.Contains(stdout, "fires POLICY_RETURNS_V1@1.0.0:R_HIGH_VALUE_REQUIRES_APPROVAL (2)") {
		t.Errorf("writ backtest: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, _, code = runLedgerCmd(t, "backtest", "--data", data, "--tenant", "acme", "--pack", cand, "--json", "--hash-only", "--from", "2026-05-09T00:00:00Z")
	var rep replay.BacktestReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || rep.Changed != 2 || rep.Transitions[0].From != "allow" || rep.Transitions[0].To != "replan_required" {
		t.Errorf("writ backtest --json: exit %d, %+v (%v)\n%s", code, rep, err, stdout)
	}
	if _, _, code := runLedgerCmd(t, "backtest", "--data", data, "--tenant", "acme", "--pack", cand, "--keys", filepath.Join(dir, "nokeys")); code != exitError {
		t.Errorf("writ backtest with an empty key ring: exit %d, want %d", code, exitError)
	}
	if _, _, code := runLedgerCmd(t, "backtest", "--data", data, "--tenant", "acme"); code != exitUsage {
		t.Errorf("writ backtest without --pack: exit %d, want %d", code, exitUsage)
	}
}

// TestClassCounts: --all's summary line names every class a record had,
// changed_history and any class it does not list included.
func TestClassCounts(t *testing.T) {
	got := classCounts(map[string]int64{replay.ClassRecord: 1, replay.ClassHistory: 2, replay.ClassTamper: 3, "changed_future": 4, replay.ClassPolicy: 0})
	if want := "tamper_detected 3, changed_history 2, changed_record 1, changed_future 4"; got != want {
		t.Errorf("classCounts = %q, want %q", got, want)
	}
}
