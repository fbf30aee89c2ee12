package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
)

// TestWithdrawApprovalOverHTTP: on each store, a requester withdraws a
// pending approval over HTTP and with the CLI; the resume that waited on
// it wakes and is denied (approval_withdrawn); withdrawing again, an
// unknown id and approving a withdrawn request are refused and write
// nothing; and the ledger verifies and replays afterwards.
func TestWithdrawApprovalOverHTTP(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			data := t.TempDir()
			args := []string{"--data", data, "--pack", "../../examples/refund"}
			ledgerArgs, replayArgs := []string{"--data", data}, []string{"--data", data}
			if store == "postgres" {
				dsn := os.Getenv("WRIT_TEST_POSTGRES")
				if dsn == "" {
					t.Skip("WRIT_TEST_POSTGRES is not set")
				}
				url := isolatedSchema(t, dsn)
				keys := filepath.Join(data, "keys")
				if out, err := exec.Command(writBinary, "ledger", "keys", "generate", "--keys", keys).CombinedOutput(); err != nil {
					t.Fatalf("keys generate: %v\n%s", err, out)
				}
				args = append(args, "--store", url, "--keys", keys)
				ledgerArgs, replayArgs = []string{"--store", url, "--keys", keys}, []string{"--store", url}
			}
			srv := startServerArgs(t, args...)
			testWithdraw(t, srv, ledgerArgs, replayArgs)
		})
	}
}

func testWithdraw(t *testing.T, srv *server, ledgerArgs, replayArgs []string) {
	ctx := context.Background()
	c := httpapi.NewClient(srv.url)
	fileIDV(t, c, "acme", "idv.acme.example")
	req := freshRefund(t, "refund-high-value-human-review")
	req.TenantID = "acme"
	rc, err := c.Check(ctx, req)
	if err != nil || len(rc.Metadata.ApprovalIDs) != 1 {
		t.Fatalf("check = %+v, %v; want one approval asked", rc, err)
	}
	id := rc.Metadata.ApprovalIDs[0]

	// A resume waits on the approval; the withdrawal wakes it (or, if it
	// comes first, the resume's first read sees it).
	resumed := make(chan *writ.Receipt, 1)
	resumeErr := make(chan error, 1)
	go func() {
		r, err := c.Resume(ctx, &writ.ResumeRequest{TenantID: "acme", DecisionID: rc.DecisionID, Request: req, Wait: writ.MaxResumeWait})
		resumed <- r
		resumeErr <- err
	}()
	before := recordCount(t, c)
	a, err := c.WithdrawApproval(ctx, &writ.WithdrawApprovalRequest{TenantID: "acme", ApprovalID: id, Reason: "the customer cancelled the refund"})
	if err != nil {
		t.Fatalf("withdraw: %v", err)
	}
	if a.State != writ.ApprovalWithdrawn || a.Decision == nil || a.Decision.Decision != writ.ApprovalWithdrawn ||
		a.Decision.Approver != req.Actor.ID || a.Decision.Reason != "the customer cancelled the refund" || a.Decision.RecordID == "" {
		t.Fatalf("withdrawn request = %+v (decision %+v)", a, a.Decision)
	}
	rec, err := c.Record(ctx, "acme", a.Decision.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if r := rec.Record; r.Status != writ.StatusRejected || r.Actor.Type != writ.ActorAgent || r.DecisionID != rc.DecisionID ||
		r.DecisionKey != "approval:"+a.GateID || r.Outputs["outcome"] != writ.ApprovalWithdrawn {
		t.Errorf("withdrawal record = %+v", r)
	}

	r, err := <-resumed, <-resumeErr
	if err != nil {
		t.Fatalf("resume after the withdrawal: %v", err)
	}
	// The resume writes nothing until the request is decided, so there
	// are two new records: the sealed withdrawal and the resumed check.
	if n := recordCount(t, c); n != before+2 {
		t.Errorf("records after the withdrawal and the resume = %d, want %d", n, before+2)
	}
	if r.SafeToExecute || r.Outcome != writ.OutcomeGoalFailTerminal || !slices.ContainsFunc(r.Reasons, func(x writ.Reason) bool { return x.Code == "approval_withdrawn" }) {
		t.Errorf("resume after the withdrawal = %s %s %+v, want goal_fail_terminal with approval_withdrawn", r.Outcome, r.Disposition.Mode, r.Reasons)
	}

	// Refusals write nothing.
	before = recordCount(t, c)
	_, err = c.WithdrawApproval(ctx, &writ.WithdrawApprovalRequest{TenantID: "acme", ApprovalID: id})
	if writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("withdraw twice = %v, want a conflict", err)
	}
	_, err = c.WithdrawApproval(ctx, &writ.WithdrawApprovalRequest{TenantID: "acme", ApprovalID: "apr_00000000000000000000000000"})
	if writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("withdraw an unknown approval = %v, want not found", err)
	}
	_, err = c.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: id, Decision: writ.ApprovalApproved, Approver: "user_finance_lead_77", Reason: "too late"})
	if writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("approve a withdrawn request = %v, want a conflict", err)
	}
	if n := recordCount(t, c); n != before {
		t.Errorf("records after refused withdrawals = %d, want %d", n, before)
	}
	page, err := c.Approvals(ctx, writ.ApprovalQuery{TenantID: "acme", State: writ.ApprovalWithdrawn})
	if err != nil || len(page.Approvals) != 1 || page.Approvals[0].ApprovalID != id {
		t.Errorf("withdrawn approvals = %+v, %v; want %s", page, err, id)
	}

	// The CLI withdraws another action's request.
	other := freshRefund(t, "refund-high-value-human-review")
	other.TenantID = "acme"
	other.Arguments["amount_inr"] = 15001.0
	rc2, err := c.Check(ctx, other)
	if err != nil || len(rc2.Metadata.ApprovalIDs) != 1 || rc2.Metadata.ApprovalIDs[0] == id {
		t.Fatalf("second check = %+v, %v; want a new approval asked", rc2, err)
	}
	out, err := exec.Command(writBinary, "approvals", "withdraw", "--server", srv.url, "--tenant", "acme", "--reason", "not needed", rc2.Metadata.ApprovalIDs[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), rc2.Metadata.ApprovalIDs[0]+" withdrawn by "+other.Actor.ID) {
		t.Errorf("writ approvals withdraw: %v\n%s", err, out)
	}
	out, err = exec.Command(writBinary, "approvals", "withdraw", "--server", srv.url, "--tenant", "acme", rc2.Metadata.ApprovalIDs[0]).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already withdrawn") {
		t.Errorf("writ approvals withdraw twice: %v\n%s; want a non-zero exit saying it is already withdrawn", err, out)
	}

	srv.stop(t)
	if out, err := exec.Command(writBinary, append([]string{"ledger", "verify"}, ledgerArgs...)...).CombinedOutput(); err != nil {
		t.Errorf("writ ledger verify: %v\n%s", err, out)
	}
	if out, err := exec.Command(writBinary, append([]string{"replay", "--tenant", "acme", "--all"}, replayArgs...)...).CombinedOutput(); err != nil {
		t.Errorf("writ replay --all: %v\n%s", err, out)
	}
}

// recordCount counts the tenant acme's records.
func recordCount(t *testing.T, c *httpapi.Client) int {
	t.Helper()
	n := 0
	q := writ.RecordQuery{TenantID: "acme", Limit: 1000}
	for {
		page, err := c.Records(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Records)
		if page.NextCursor == "" {
			return n
		}
		q.Cursor = page.NextCursor
	}
}

// TestWithdrawIsTheRequestersOnly: with API keys, the agent key that
// asked withdraws; another agent's key and an approver's key may not
// (403), and neither writes anything.
func TestWithdrawIsTheRequestersOnly(t *testing.T) {
	w := newTenantWorld(t)
	ctx := context.Background()
	otherAgent, _ := keyFor(t, w.data, "acme", "another_agent", "agent")
	for _, tok := range []string{otherAgent, w.tokens["acme/approver"]} {
		_, err := clientFor(w.srv.url, tok).WithdrawApproval(ctx, &writ.WithdrawApprovalRequest{ApprovalID: w.approvalID})
		if writ.ErrorCode(err) != writ.EFORBIDDEN {
			t.Errorf("withdraw with another key = %v, want forbidden", err)
		}
	}
	a, err := clientFor(w.srv.url, w.tokens["acme/agent"]).WithdrawApproval(ctx, &writ.WithdrawApprovalRequest{ApprovalID: w.approvalID, Reason: "not needed"})
	if err != nil {
		t.Fatalf("withdraw with the requester's key: %v", err)
	}
	if a.State != writ.ApprovalWithdrawn || a.Decision.Approver != "agt_support" || len(a.Events) != 1 {
		t.Errorf("withdrawn = state %s by %+v, events %+v; want withdrawn by agt_support (the key's subject), one event", a.State, a.Decision, a.Events)
	}
}
