package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
)

func (m *Main) records(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ records list|get|links|retract|feedback|erase [flags]")
	}
	switch args[0] {
	case "list":
		return m.recordsList(ctx, args[1:])
	case "get":
		return m.recordsGet(ctx, args[1:])
	case "links":
		return m.recordsLinks(ctx, args[1:])
	case "retract":
		return m.recordsRetract(ctx, args[1:])
	case "feedback":
		return m.recordsFeedback(ctx, args[1:])
	case "erase":
		return m.recordsErase(ctx, args[1:])
	}
	return usagef("unknown records command %q (want list, get, links, retract, feedback or erase)", args[0])
}

// recordsErase erases a subject's classified values: on a server, as an
// admin's API key (WRIT_API_KEY), or, with --pack, in a local ledger (a
// data directory, or a PostgreSQL store with --store) that no server is
// writing to. Either way the erasure is a sealed record made by an
// engine with the pack pinned, and every record stays verifiable.
func (m *Main) recordsErase(ctx context.Context, args []string) error {
	fs := m.flags("records erase", "--subject ID --reason TEXT [--server URL] [--tenant T] | --pack DIR [--data DIR] [--store URL] [--keys DIR] --tenant T --by WHO")
	sf := m.addServerFlags(fs)
	subject := fs.String("subject", "", "the subject whose classified values to erase, as records name it (customer:cus_77) (required)")
	reason := fs.String("reason", "", "why, for the record (required)")
	by := fs.String("by", "", "who erases (required with --pack; on a server only without keys, otherwise the API key's subject)")
	packDir := fs.String("pack", "", "erase in a local ledger instead of on a server, with this pack pinned (the pack the ledger's server pins)")
	data := fs.String("data", defaultDataDir, "with --pack: data directory (its signing keys and binding key; the ledger unless --store)")
	storeURL := fs.String("store", "", "with --pack: "+storeUsage)
	keysDir := fs.String("keys", "", "with --pack: signing key ring directory (default DATA/keys)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("records erase takes no arguments, got %q", fs.Args())
	}
	if *subject == "" || *reason == "" {
		return usagef("records erase needs --subject and --reason")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	req := &writ.EraseRequest{TenantID: *sf.tenant, SubjectID: *subject, By: *by, Reason: *reason}
	var x *writ.Erasure
	if *packDir == "" {
		for _, local := range []string{"data", "store", "keys"} {
			if set[local] {
				return usagef("records erase --%s erases in a local ledger, which needs --pack DIR", local)
			}
		}
		var err error
		if x, err = m.client(sf).Erase(ctx, req); err != nil {
			return err
		}
	} else {
		if set["server"] {
			return usagef("records erase takes --server or --pack, not both")
		}
		if *sf.tenant == "" || *by == "" {
			return usagef("records erase --pack needs --tenant and --by")
		}
		var err error
		if x, err = m.eraseLocal(ctx, req, *packDir, *data, *storeURL, *keysDir); err != nil {
			return err
		}
	}
	fmt.Fprintf(m.Stdout, "erased %d classified values of %s (record %s)\n", x.Erased, x.SubjectID, x.RecordID)
	return nil
}

// eraseLocal erases in a local ledger, as `writ check --data` decides in
// one: the data directory's writer lock is taken (a running server's
// ledger is refused), and the erasure record is signed with the keys of
// keysDir and bound with the data directory's binding key.
func (m *Main) eraseLocal(ctx context.Context, req *writ.EraseRequest, packDir, data, storeURL, keysDir string) (*writ.Erasure, error) {
	pol, err := loadPolicy(packDir)
	if err != nil {
		return nil, err
	}
	st, err := openExistingWriter(data, storeURL)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if keysDir == "" {
		keysDir = defaultKeysDir(data)
	}
	log, _ := m.logger("error")
	keys, _, err := m.openSigningKeys(keysDir, time.Now(), log)
	if err != nil {
		return nil, err
	}
	eng, err := openEngine(ctx, engine.Config{Policy: pol, Store: st, Logger: log, Keys: keys}, data, "")
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	return eng.Erase(ctx, req)
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
	fs.StringVar(&q.RefersTo, "refers-to", "", "only records about this record: those that supersede or retract it, its feedback and its replay results")
	fs.StringVar(&q.Scorecard, "scorecard", "", "failed: only records whose scorecard failed their spec's pass mark (scorecard_pass)")
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
	if q.Scorecard != "" && q.Scorecard != writ.ScorecardFailedQuery {
		return usagef("--scorecard must be failed")
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

// recordsLinks prints what the ledger holds about a record: what
// supersedes it, whether it is retracted, its feedback and its latest
// recorded replay.
func (m *Main) recordsLinks(ctx context.Context, args []string) error {
	fs := m.flags("records links", "--tenant T [--json] RECORD_ID")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	tenant := fs.String("tenant", "", "tenant (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 1 {
		return usagef("usage: writ records links --tenant T [--json] RECORD_ID")
	}
	st, err := openExisting(*data, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Record(ctx, *tenant, fs.Arg(0)); err != nil {
		return err
	}
	l, err := engine.RecordLinks(ctx, st, *tenant, fs.Arg(0))
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(l)
	}
	fmt.Fprintf(m.Stdout, "record %s (tenant %s)\n", l.RecordID, l.TenantID)
	if l.Retracted {
		fmt.Fprintf(m.Stdout, "retracted by %s\n", l.RetractedBy)
	}
	for _, id := range l.SupersededBy {
		fmt.Fprintf(m.Stdout, "superseded by %s\n", id)
	}
	for _, id := range l.Feedback {
		fmt.Fprintf(m.Stdout, "feedback %s\n", id)
	}
	if r := l.Replay; r != nil {
		fmt.Fprintf(m.Stdout, "last replay %s at %s (%s, %d recorded)\n", r.LastStatus, r.At.Format(time.RFC3339), r.RecordID, r.Replays)
	}
	return nil
}

// recordsRetract retracts a record on a running server.
func (m *Main) recordsRetract(ctx context.Context, args []string) error {
	fs := m.flags("records retract", "--reason TEXT [--by WHO] [--server URL] RECORD_ID")
	sf := m.addServerFlags(fs)
	var r writ.RetractRequest
	fs.StringVar(&r.Reason, "reason", "", "why the record is retracted (required)")
	fs.StringVar(&r.By, "by", "", "who retracts it (default: the API key's subject)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || r.Reason == "" {
		return usagef("usage: writ records retract --reason TEXT [--by WHO] RECORD_ID")
	}
	r.TenantID, r.RecordID = *sf.tenant, fs.Arg(0)
	ack, err := m.client(sf).Retract(ctx, &r)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "record %s retracted by record %s (decision %s)\n", ack.About, ack.RecordID, ack.DecisionID)
	return nil
}

// recordsFeedback gives feedback on a record on a running server.
func (m *Main) recordsFeedback(ctx context.Context, args []string) error {
	fs := m.flags("records feedback", "--label L [--score S] [--comment C] [--rule-change REF] [--author WHO] [--server URL] RECORD_ID")
	sf := m.addServerFlags(fs)
	var r writ.FeedbackRequest
	fs.StringVar(&r.Label, "label", "", "the feedback's label: correct, wrong_outcome, ... (required)")
	score := fs.Float64("score", -1, "a score from 0 to 1")
	fs.StringVar(&r.Comment, "comment", "", "a comment")
	fs.StringVar(&r.RuleChange, "rule-change", "", "the rule change it led to (a pack version, a commit, a ticket)")
	fs.StringVar(&r.Author, "author", "", "who gives it (default: the API key's subject)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || r.Label == "" {
		return usagef("usage: writ records feedback --label L [--score S] [--comment C] [--rule-change REF] RECORD_ID")
	}
	if *score != -1 {
		r.Score = score
	}
	r.TenantID, r.RecordID = *sf.tenant, fs.Arg(0)
	ack, err := m.client(sf).Feedback(ctx, &r)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "feedback %s on record %s: record %s\n", ack.Outcome, ack.About, ack.RecordID)
	return nil
}
