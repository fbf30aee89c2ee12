package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/httpapi"
)

// approvals is the approver's command line: it talks to a running server,
// as the approver's API key (WRIT_API_KEY), so that every decision goes
// through the one engine that records it.
func (m *Main) approvals(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ approvals list|show|approve|deny|withdraw [flags]")
	}
	switch args[0] {
	case "list":
		return m.approvalsList(ctx, args[1:])
	case "show":
		return m.approvalsShow(ctx, args[1:])
	case "approve":
		return m.approvalsDecide(ctx, writ.ApprovalApproved, args[1:])
	case "deny":
		return m.approvalsDecide(ctx, writ.ApprovalDenied, args[1:])
	case "withdraw":
		return m.approvalsWithdraw(ctx, args[1:])
	}
	return usagef("unknown approvals command %q (want list, show, approve, deny or withdraw)", args[0])
}

// serverFlags are the flags of commands that talk to a server.
type serverFlags struct {
	server, tenant *string
}

func (m *Main) addServerFlags(f *flag.FlagSet) serverFlags {
	def := m.Getenv("WRIT_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	return serverFlags{
		server: f.String("server", def, "writ server URL (or $WRIT_SERVER); the API key comes from $WRIT_API_KEY"),
		tenant: f.String("tenant", "", "tenant (default: the API key's; required on a development server without keys)"),
	}
}

func (m *Main) client(sf serverFlags) *httpapi.Client {
	var opts []httpapi.ClientOption
	key := m.Getenv("WRIT_API_KEY")
	if key != "" {
		opts = append(opts, httpapi.WithHeader("Authorization", "Bearer "+key))
	}
	if tok := m.Getenv("WRIT_DELEGATION_TOKEN"); tok != "" {
		// The user the agent acts for, authenticated (docs/trust.md).
		opts = append(opts, httpapi.WithHeader(httpapi.HeaderDelegation, tok))
	}
	m.remote = &remoteUse{tenant: *sf.tenant != "", key: key != ""}
	return httpapi.NewClient(strings.TrimRight(*sf.server, "/"), opts...)
}

func (m *Main) approvalsList(ctx context.Context, args []string) error {
	fs := m.flags("approvals list", "[--state pending] [--gate G] [--decision-key K] [--older-than 1h] [--server URL]")
	sf := m.addServerFlags(fs)
	var q writ.ApprovalQuery
	fs.StringVar(&q.State, "state", writ.ApprovalPending, "pending, approved, denied, withdrawn, expired, or all")
	fs.StringVar(&q.GateID, "gate", "", "only this gate (escalations are escalation:<rule>)")
	fs.StringVar(&q.DecisionKey, "decision-key", "", "only this decision key")
	olderThan := fs.Duration("older-than", 0, "only requests older than this (e.g. 30m, 4h)")
	fs.IntVar(&q.Limit, "limit", 100, "page size (1-1000)")
	fs.StringVar(&q.Cursor, "cursor", "", "continue from a previous page")
	asJSON := fs.Bool("json", false, "print the page as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("approvals list takes no arguments, got %q", fs.Args())
	}
	if q.State == "all" {
		q.State = ""
	}
	if *olderThan < 0 {
		return usagef("--older-than must not be negative")
	}
	if *olderThan > 0 {
		q.CreatedBefore = time.Now().Add(-*olderThan)
	}
	q.TenantID = *sf.tenant
	page, err := m.client(sf).Approvals(ctx, q)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(page)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL\tSTATE\tGATE\tDECISION KEY\tAGE\tTARGET\tREASON")
	now := time.Now()
	for _, a := range page.Approvals {
		reason := ""
		if len(a.Reasons) > 0 {
			reason = a.Reasons[0].Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ApprovalID, a.State, a.GateID, a.Binding.DecisionKey, now.Sub(a.CreatedAt).Round(time.Second), a.TargetHint, reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(m.Stdout, "more: --cursor %s\n", page.NextCursor)
	}
	return nil
}

func (m *Main) approvalsShow(ctx context.Context, args []string) error {
	fs := m.flags("approvals show", "[--server URL] APPROVAL_ID")
	sf := m.addServerFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("approvals show needs exactly one APPROVAL_ID")
	}
	c := m.client(sf)
	a, err := c.Approval(ctx, *sf.tenant, fs.Arg(0))
	if err != nil {
		return err
	}
	return m.printJSON(a)
}

func (m *Main) approvalsDecide(ctx context.Context, decision string, args []string) error {
	name := "approvals approve"
	if decision == writ.ApprovalDenied {
		name = "approvals deny"
	}
	fs := m.flags(name, "--reason TEXT [--server URL] APPROVAL_ID")
	sf := m.addServerFlags(fs)
	reason := fs.String("reason", "", "why, for the record (required)")
	approver := fs.String("approver", "", "who decides (only on a development server without keys; otherwise the API key's subject)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("%s needs exactly one APPROVAL_ID", name)
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("%s needs --reason", name)
	}
	a, err := m.client(sf).DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: *sf.tenant, ApprovalID: fs.Arg(0), Decision: decision, Approver: *approver, Reason: *reason})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "%s %s by %s (record %s)\n", a.ApprovalID, a.State, a.Decision.Approver, a.Decision.RecordID)
	return nil
}

// approvalsWithdraw takes back a pending approval request, as its
// requester (an agent's API key): the requester no longer needs it.
func (m *Main) approvalsWithdraw(ctx context.Context, args []string) error {
	fs := m.flags("approvals withdraw", "[--reason TEXT] [--server URL] APPROVAL_ID")
	sf := m.addServerFlags(fs)
	reason := fs.String("reason", "", "why, for the record (optional)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("approvals withdraw needs exactly one APPROVAL_ID")
	}
	a, err := m.client(sf).WithdrawApproval(ctx, &writ.WithdrawApprovalRequest{TenantID: *sf.tenant, ApprovalID: fs.Arg(0), Reason: *reason})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "%s %s by %s (record %s)\n", a.ApprovalID, a.State, a.Decision.Approver, a.Decision.RecordID)
	return nil
}

// remoteUse is what a command gave the server it talks to: whether it
// named a tenant and presented an API key.
type remoteUse struct{ tenant, key bool }

// hintError tells a server's refusal as the fix the command line offers:
// the flag or the variable to set, not the API's parameter or header.
type hintError struct {
	msg string
	err error
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Unwrap() error { return e.err }

// explain turns the refusals a missing --tenant or $WRIT_API_KEY causes
// into what to do about them; other errors pass unchanged.
func (u *remoteUse) explain(err error) error {
	switch writ.ErrorCode(err) {
	case writ.EINVALID:
		if u.tenant {
			return err
		}
		for _, d := range writ.ErrorDetails(err) {
			if d.Field == "tenant_id" {
				return &hintError{"this server needs to know the tenant: pass --tenant T (a server without API keys cannot take it from a key)", err}
			}
		}
	case writ.EUNAUTHENTICATED:
		if !u.key {
			return &hintError{"this server requires an API key: set $WRIT_API_KEY to one (writ keys create makes them)", err}
		}
		return &hintError{"the API key in $WRIT_API_KEY was refused: " + writ.ErrorMessage(err), err}
	case writ.EFORBIDDEN:
		return &hintError{"the API key in $WRIT_API_KEY was refused: " + writ.ErrorMessage(err), err}
	}
	return err
}
