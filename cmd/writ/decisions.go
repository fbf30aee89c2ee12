package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
)

// decisions carries one decision past its receipt on a running server, as
// the API key in WRIT_API_KEY: its story, its execution report, a resume,
// and the decisions still in flight.
func (m *Main) decisions(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ decisions show|report|resume|in-flight [flags]")
	}
	switch args[0] {
	case "show":
		return m.decisionsShow(ctx, args[1:])
	case "report":
		return m.decisionsReport(ctx, args[1:])
	case "resume":
		return m.decisionsResume(ctx, args[1:])
	case "in-flight":
		return m.decisionsInFlight(ctx, args[1:])
	}
	return usagef("unknown decisions command %q (want show, report, resume or in-flight)", args[0])
}

func (m *Main) decisionsShow(ctx context.Context, args []string) error {
	fs := m.flags("decisions show", "[--server URL] [--json] DECISION_ID")
	sf := m.addServerFlags(fs)
	asJSON := fs.Bool("json", false, "print the whole story as JSON (records as sealed, receipts, approvals)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("decisions show needs exactly one DECISION_ID, after the flags")
	}
	st, err := m.client(sf).Decision(ctx, *sf.tenant, fs.Arg(0))
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(st)
	}
	s := st.State
	fmt.Fprintf(m.Stdout, "decision %s (tenant %s): %s", st.DecisionID, st.TenantID, s.Status)
	if s.Outcome != "" {
		fmt.Fprintf(m.Stdout, ", %s", s.Outcome)
	}
	if s.Execution != "" {
		fmt.Fprintf(m.Stdout, ", executed: %s", s.Execution)
	}
	if s.InFlight {
		fmt.Fprint(m.Stdout, ", in flight: awaiting its execution report")
	}
	fmt.Fprintln(m.Stdout)
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tSTATUS\tRECORD")
	for _, r := range st.Records {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Seal.Seq, r.Timestamp.Format(time.RFC3339), r.Kind, r.Status, r.RecordID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range st.Approvals {
		fmt.Fprintf(m.Stdout, "approval %s at %s: %s\n", a.ApprovalID, a.GateID, a.State)
	}
	return m.showEvidence(ctx, m.client(sf), st)
}

// showEvidence prints each evidence item the story's checks cite, as
// the check's request envelope pins it: the issuer, the provenance, when
// it was observed and whether writ resolved it. Reading envelopes needs
// the approver or auditor role: another key gets a line saying so. An
// envelope that cannot be read or fails its hash is an error.
func (m *Main) showEvidence(ctx context.Context, c *httpapi.Client, st *writ.DecisionStory) error {
	for _, r := range st.Records {
		var rec writ.Record
		if err := json.Unmarshal(r.Record, &rec); err != nil {
			return fmt.Errorf("record %s: %w", r.RecordID, err)
		}
		// A check's envelope is its request, with the evidence as
		// resolved; the other records of the story only repeat its refs.
		if r.Kind != "check" || len(rec.EvidenceRefs) == 0 {
			continue
		}
		body, err := c.Envelope(ctx, st.TenantID, r.RecordID, rec.Replay.ReplayPacketID)
		if writ.ErrorCode(err) == writ.EFORBIDDEN {
			fmt.Fprintf(m.Stdout, "evidence of %s: %d items cited; reading them needs the approver or auditor role\n", r.RecordID, len(rec.EvidenceRefs))
			continue
		}
		if err != nil {
			return fmt.Errorf("evidence of %s: %w", r.RecordID, err)
		}
		var env struct {
			Evidence []writ.Evidence `json:"evidence"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			return fmt.Errorf("evidence of %s: the request envelope: %w", r.RecordID, err)
		}
		fmt.Fprintf(m.Stdout, "evidence of %s:\n", r.RecordID)
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  EVIDENCE\tISSUER\tPROVENANCE\tOBSERVED\tRESOLVED")
		for _, e := range env.Evidence {
			observed := "-"
			if e.ObservedAt != nil {
				observed = e.ObservedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Ref(), orDash(e.Issuer), orDash(string(e.Provenance)), observed, resolvedText(e))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// resolvedText says whether writ resolved a cited item: "yes", "yes,
// revoked …" or "yes, expired …" (as of the check, which then refused
// it), or "no: " and the resolution; an envelope sealed before writ
// resolved evidence has none.
func resolvedText(e writ.Evidence) string {
	switch {
	case e.Resolution == "":
		return "not resolved (sealed before writ resolved evidence)"
	case e.Resolution != writ.ResolutionResolved:
		return "no: " + e.Resolution
	case e.RevokedAt != nil:
		return "yes, revoked " + e.RevokedAt.UTC().Format(time.RFC3339)
	case e.ExpiresAt != nil:
		return "yes, expires " + e.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return "yes"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (m *Main) decisionsReport(ctx context.Context, args []string) error {
	fs := m.flags("decisions report", "--status succeeded|failed|not_executed [flags] DECISION_ID")
	sf := m.addServerFlags(fs)
	var r writ.ExecutionReport
	status := fs.String("status", "", "what happened: succeeded, failed or not_executed (required)")
	fs.StringVar(&r.ToolCallID, "tool-call-id", "", "the call (default: the permit's)")
	fs.StringVar(&r.ToolResultID, "tool-result-id", "", "the tool's id for the result")
	fs.StringVar(&r.ResultDigest, "result-digest", "", "sha256:<64 hex> of the result (never the result itself)")
	fs.StringVar(&r.IdempotencyKey, "idempotency-key", "", "the idempotency key the effect ran under")
	fs.StringVar(&r.ReversalToken, "reversal-token", "", "what undoes the effect")
	errCode := fs.String("error-code", "", "why it failed (with --status failed)")
	errMsg := fs.String("error-message", "", "the failure's message")
	started := fs.String("started-at", "", "when the effect started (RFC 3339)")
	ended := fs.String("ended-at", "", "when it ended (RFC 3339)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("decisions report needs exactly one DECISION_ID, after the flags")
	}
	if *status == "" {
		return usagef("decisions report needs --status (succeeded, failed or not_executed)")
	}
	r.TenantID, r.DecisionID, r.Status = *sf.tenant, fs.Arg(0), writ.ExecutionStatus(*status)
	if *errCode != "" || *errMsg != "" {
		r.Error = &writ.ExecutionError{Code: *errCode, Message: *errMsg}
	}
	for _, t := range []struct {
		flag string
		text string
		at   **time.Time
	}{{"started-at", *started, &r.StartedAt}, {"ended-at", *ended, &r.EndedAt}} {
		if t.text == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.text)
		if err != nil {
			return usagef("--%s %q is not an RFC 3339 time", t.flag, t.text)
		}
		*t.at = &v
	}
	ack, err := m.client(sf).ReportExecution(ctx, &r)
	if err != nil {
		return err
	}
	return m.printJSON(ack)
}

func (m *Main) decisionsResume(ctx context.Context, args []string) error {
	fs := m.flags("decisions resume", "--request FILE [--wait 30s] [--server URL] DECISION_ID")
	sf := m.addServerFlags(fs)
	reqFile := fs.String("request", "", "the check request, as first made, with what changed (a JSON file, - for standard input; required)")
	wait := fs.Duration("wait", 0, fmt.Sprintf("wait up to this long for an approval to be decided (at most %s)", writ.MaxResumeWait))
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *reqFile == "" {
		return usagef("decisions resume needs --request FILE and exactly one DECISION_ID, after the flags")
	}
	var data []byte
	var err error
	if *reqFile == "-" {
		data, err = io.ReadAll(m.Stdin)
	} else {
		data, err = os.ReadFile(*reqFile)
	}
	if err != nil {
		return err
	}
	var req writ.CheckRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("%s: %w", *reqFile, err)
	}
	rc, err := m.client(sf).Resume(ctx, &writ.ResumeRequest{TenantID: *sf.tenant, DecisionID: fs.Arg(0), Request: &req, Wait: *wait})
	if rc != nil {
		if perr := m.printJSON(rc); perr != nil {
			return perr
		}
	}
	return err
}

func (m *Main) decisionsInFlight(ctx context.Context, args []string) error {
	fs := m.flags("decisions in-flight", "[--expired] [--server URL] [--json]")
	sf := m.addServerFlags(fs)
	expired := fs.Bool("expired", false, "only permits past their valid_until")
	var q writ.InFlightQuery
	fs.IntVar(&q.Limit, "limit", 100, "page size (1-1000)")
	fs.StringVar(&q.Cursor, "cursor", "", "continue from a previous page")
	asJSON := fs.Bool("json", false, "print the page as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("decisions in-flight takes no arguments, got %q", fs.Args())
	}
	q.TenantID = *sf.tenant
	if *expired {
		q.ExpiredBy = time.Now()
	}
	page, err := m.client(sf).InFlight(ctx, q)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(page)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DECISION\tDECIDED\tVALID UNTIL\tEXPIRED\tDECISION KEY")
	for _, d := range page.Decisions {
		until := "-"
		if d.ValidUntil != nil {
			until = d.ValidUntil.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", d.DecisionID, d.DecidedAt.Format(time.RFC3339), until, d.Expired, d.DecisionKey)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(m.Stdout, "more: --cursor %s\n", page.NextCursor)
	}
	return nil
}
