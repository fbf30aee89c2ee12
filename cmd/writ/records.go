package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ"
)

func (m *Main) records(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ records list|get|erase [flags]")
	}
	switch args[0] {
	case "list":
		return m.recordsList(ctx, args[1:])
	case "get":
		return m.recordsGet(ctx, args[1:])
	case "erase":
		return m.recordsErase(ctx, args[1:])
	}
	return usagef("unknown records command %q (want list, get or erase)", args[0])
}

// recordsErase erases a subject's classified values on a server, as an
// admin's API key (WRIT_API_KEY): the erasure is a sealed record made by
// the one engine, and every record stays verifiable.
func (m *Main) recordsErase(ctx context.Context, args []string) error {
	fs := m.flags("records erase", "--subject ID --reason TEXT [--server URL] [--tenant T]")
	sf := m.addServerFlags(fs)
	subject := fs.String("subject", "", "the subject whose classified values to erase, as records name it (customer:cus_77) (required)")
	reason := fs.String("reason", "", "why, for the record (required)")
	by := fs.String("by", "", "who erases (only on a development server without keys; otherwise the API key's subject)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("records erase takes no arguments, got %q", fs.Args())
	}
	if *subject == "" || *reason == "" {
		return usagef("records erase needs --subject and --reason")
	}
	x, err := m.client(sf).Erase(ctx, &writ.EraseRequest{TenantID: *sf.tenant, SubjectID: *subject, By: *by, Reason: *reason})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "erased %d classified values of %s (record %s)\n", x.Erased, x.SubjectID, x.RecordID)
	return nil
}

func (m *Main) recordsList(ctx context.Context, args []string) error {
	fs := m.flags("records list", "--tenant T [filters]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	var q writ.RecordQuery
	fs.StringVar(&q.TenantID, "tenant", "", "tenant (required)")
	fs.StringVar(&q.DecisionKey, "decision-key", "", "only this decision key")
	status := fs.String("status", "", "only this status (DECIDED, DEFERRED, REJECTED, ESCALATED, ...)")
	outcome := fs.String("outcome", "", "only check records with this outcome (allow, allow_with_warning, replan_required, goal_fail_terminal)")
	fs.StringVar(&q.SubjectID, "subject", "", "only records about this subject id")
	fs.StringVar(&q.TraceID, "trace", "", "only this trace id")
	mode := fs.String("approval-mode", "", "only records acted under this approval mode (read_only, local_write, network, delegated, destructive)")
	fs.StringVar(&q.PolicyDecisionID, "policy-decision", "", "only records with this policy_decision_id (a rule with its verdict)")
	fs.StringVar(&q.Approver, "approver", "", "only records with an approval by this approver")
	fs.StringVar(&q.DecisionKeyPrefix, "decision-key-prefix", "", "only records whose decision key begins with this")
	fs.StringVar(&q.SubjectPrefix, "subject-prefix", "", "only records with a subject id that begins with this")
	fs.BoolVar(&q.Newest, "newest", false, "newest first (default: chain order, oldest first)")
	from := fs.String("from", "", "records at or after this time (RFC 3339)")
	to := fs.String("to", "", "records before this time (RFC 3339)")
	fs.IntVar(&q.Limit, "limit", 100, "page size (1-1000)")
	fs.StringVar(&q.Cursor, "cursor", "", "continue from a previous page")
	asJSON := fs.Bool("json", false, "print records as JSON lines, exactly as sealed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if q.TenantID == "" {
		return usagef("records list needs --tenant")
	}
	if q.Limit < 1 || q.Limit > 1000 {
		return usagef("--limit must be 1..1000")
	}
	q.Status = writ.Status(*status)
	q.Outcome = writ.Outcome(*outcome)
	q.ApprovalMode = writ.ApprovalMode(*mode)
	if err := parseWindow(*from, *to, &q.From, &q.To); err != nil {
		return err
	}
	st, err := openExisting(*data, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	page, err := st.Records(ctx, q)
	if err != nil {
		return err
	}
	if *asJSON {
		for _, r := range page.Records {
			fmt.Fprintf(m.Stdout, "%s\n", r.Raw)
		}
	} else {
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tRECORD\tTIME\tDECISION KEY\tSTATUS\tOUTCOME")
		for _, r := range page.Records {
			rec := r.Record
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%v\n", rec.Audit.Seq, rec.RecordID, rec.Timestamp.Format(time.RFC3339), rec.DecisionKey, rec.Status, rec.Outputs["outcome"])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if page.NextCursor != "" {
		fmt.Fprintf(m.Stderr, "more records: --cursor %s\n", page.NextCursor)
	}
	return nil
}

func (m *Main) recordsGet(ctx context.Context, args []string) error {
	fs := m.flags("records get", "--tenant T RECORD_ID")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	tenant := fs.String("tenant", "", "tenant (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 1 {
		return usagef("usage: writ records get --tenant T RECORD_ID")
	}
	st, err := openExisting(*data, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := st.Record(ctx, *tenant, fs.Arg(0))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "%s\n", r.Raw)
	return err
}

// parseWindow parses the --from and --to flags (RFC 3339; empty leaves the
// bound unset) into from and to.
func parseWindow(fromFlag, toFlag string, from, to *time.Time) error {
	for _, t := range []struct {
		flag, in string
		out      *time.Time
	}{{"--from", fromFlag, from}, {"--to", toFlag, to}} {
		if t.in == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.in)
		if err != nil {
			return usagef("bad %s %q: want RFC 3339", t.flag, t.in)
		}
		*t.out = v
	}
	return nil
}
