package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
)

// TestDecisionsCommandLine carries the high-value refund through writ
// decisions against the real server: approved, resumed, in flight,
// reported, and shown as one story.
func TestDecisionsCommandLine(t *testing.T) {
	w := newTenantWorld(t)
	ctx := context.Background()
	run := func(token string, args ...string) (string, error) {
		cmd := exec.Command(writBinary, append([]string{"decisions"}, args...)...)
		cmd.Env = append(os.Environ(), "WRIT_API_KEY="+token, "WRIT_SERVER="+w.srv.url)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	a, err := clientFor(w.srv.url, w.tokens["acme/approver"]).DecideApproval(ctx, &writ.DecideApprovalRequest{ApprovalID: w.approvalID, Decision: writ.ApprovalApproved, Reason: "invoice checked"})
	if err != nil {
		t.Fatal(err)
	}
	decision := a.DecisionID
	reqFile := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(reqFile, []byte(mustJSON(t, freshRefund(t, "refund-high-value-human-review"))), 0o600); err != nil {
		t.Fatal(err)
	}
	agent, auditor := w.tokens["acme/agent"], w.tokens["acme/auditor"]

	out, err := run(agent, "resume", "--request", reqFile, "--wait", "5s", decision)
	var rc writ.Receipt
	if err != nil || json.Unmarshal([]byte(out), &rc) != nil || rc.Outcome != writ.OutcomeAllow || rc.DecisionID != decision {
		t.Fatalf("writ decisions resume: %v\n%s", err, out)
	}
	if out, err := run(auditor, "in-flight"); err != nil || !strings.Contains(out, decision) {
		t.Errorf("writ decisions in-flight: %v\n%s; want %s listed", err, out, decision)
	}
	if out, err := run(agent, "report", decision); err == nil || !strings.Contains(out, "--status") {
		t.Errorf("writ decisions report without --status: %v\n%s; want a usage error", err, out)
	}
	out, err = run(agent, "report", "--status", "succeeded", "--tool-result-id", "tr_121", "--reversal-token", "rv_refund_txn_q9", decision)
	var ack writ.ExecutionAck
	if err != nil || json.Unmarshal([]byte(out), &ack) != nil || ack.Status != writ.StatusClosed {
		t.Fatalf("writ decisions report: %v\n%s", err, out)
	}
	if out, err := run(auditor, "in-flight"); err != nil || strings.Contains(out, decision) {
		t.Errorf("writ decisions in-flight after the report: %v\n%s; want %s gone", err, out, decision)
	}
	out, err = run(auditor, "show", decision)
	if err != nil {
		t.Fatalf("writ decisions show: %v\n%s", err, out)
	}
	var kinds []string
	story1, _, _ := strings.Cut(out, "\nevidence of ")
	for _, line := range strings.Split(story1, "\n")[2:] {
		if f := strings.Fields(line); len(f) == 5 && f[0] != "approval" {
			kinds = append(kinds, f[2]+" "+f[3])
		}
	}
	if got := strings.Join(kinds, ", "); got != "check ESCALATED, approval_decision DECIDED, check IN_FLIGHT, execution_report CLOSED" {
		t.Errorf("writ decisions show: the story is %q\n%s", got, out)
	}
	if !strings.Contains(out, "executed: succeeded") || !strings.Contains(out, w.approvalID+" at GATE_FINANCE_APPROVAL: approved") {
		t.Errorf("writ decisions show:\n%s\nwant the execution and the approval stated", out)
	}

	// Each cited evidence item, as the check's stored envelope pins it:
	// issuer, provenance, observed at, and whether it resolved.
	story, err := clientFor(w.srv.url, auditor).Decision(ctx, "", decision)
	if err != nil {
		t.Fatal(err)
	}
	items := 0
	for _, r := range story.Records {
		var rec writ.Record
		if err := json.Unmarshal(r.Record, &rec); err != nil {
			t.Fatal(err)
		}
		if r.Kind != "check" || len(rec.EvidenceRefs) == 0 {
			continue
		}
		body, err := clientFor(w.srv.url, auditor).Envelope(ctx, "", r.RecordID, rec.Replay.ReplayPacketID)
		if err != nil {
			t.Fatalf("Envelope(%s) = %v", r.RecordID, err)
		}
		var env struct{ Evidence []writ.Evidence }
		if err := json.Unmarshal(body, &env); err != nil || len(env.Evidence) != len(rec.EvidenceRefs) {
			t.Fatalf("envelope of %s: %v, %d evidence items for %d refs", r.RecordID, err, len(env.Evidence), len(rec.EvidenceRefs))
		}
		if !strings.Contains(out, "evidence of "+r.RecordID+":\n") {
			t.Errorf("writ decisions show:\n%s\nwant the evidence of %s", out, r.RecordID)
		}
		for _, e := range env.Evidence {
			items++
			if e.Resolution == "" || e.ObservedAt == nil {
				t.Fatalf("envelope of %s: evidence %s has resolution %q, observed at %v; want both set by the check", r.RecordID, e.Ref(), e.Resolution, e.ObservedAt)
			}
			want := []string{e.Ref(), orDash(e.Issuer), orDash(string(e.Provenance)), e.ObservedAt.UTC().Format(time.RFC3339)}
			found := false
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) >= 5 && strings.Join(f[:4], " ") == strings.Join(want, " ") && strings.Join(f[4:], " ") == resolvedText(e) {
					found = true
				}
			}
			if !found {
				t.Errorf("writ decisions show:\n%s\nwant a line %q %q", out, strings.Join(want, " "), resolvedText(e))
			}
		}
	}
	if items == 0 {
		t.Fatalf("the decision's records cite no evidence:\n%s", out)
	}
	// An agent key reads the story, not the envelopes: it is told so.
	if out, err := run(agent, "show", decision); err != nil || !strings.Contains(out, "reading them needs the approver or auditor role") {
		t.Errorf("writ decisions show as the agent: %v\n%s; want the evidence's role named", err, out)
	}
}
