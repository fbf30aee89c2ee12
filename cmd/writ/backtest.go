package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pinned"
	"github.com/writhq/writ/replay"
)

// backtest decides a tenant's recorded checks again under a candidate
// pack and reports how the outcomes would change.
func (m *Main) backtest(ctx context.Context, args []string) error {
	fs := m.flags("backtest", "--pack CANDIDATE_DIR --tenant T [--from TIME] [--to TIME] [--decision-key K] [--json] [--data DIR | --store URL]")
	var lf ledgerFlags
	lf.register(fs)
	packDir := fs.String("pack", "", "candidate pack directory (required)")
	tenant := fs.String("tenant", "", "tenant (required)")
	from := fs.String("from", "", "records at or after this time (RFC 3339)")
	to := fs.String("to", "", "records before this time (RFC 3339)")
	decisionKey := fs.String("decision-key", "", "only records of this decision key")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	hashOnly := fs.Bool("hash-only", false, "verify only hashes, the chain, the tree and checkpoint roots first (no signatures or rules)")
	examples := fs.Int("examples", 3, "example record ids per transition")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *packDir == "" || *tenant == "" || fs.NArg() != 0 || *examples < 1 {
		return usagef("usage: writ backtest --pack CANDIDATE_DIR --tenant T [--from TIME] [--to TIME] [--decision-key K] [--json] [--data DIR | --store URL]")
	}
	opts := replay.BacktestOptions{TenantID: *tenant, DecisionKey: *decisionKey, Examples: *examples}
	if err := parseWindow(*from, *to, &opts.From, &opts.To); err != nil {
		return err
	}
	cand, err := loadPolicy(*packDir)
	if err != nil {
		return err
	}
	opts.Candidate = cand
	st, err := openExisting(lf.data, lf.store)
	if err != nil {
		return err
	}
	defer st.Close()
	opts.Verify.LedgerName = lf.name
	if !*hashOnly {
		ring, err := m.verifyingKeys(lf.keysDir())
		if err != nil {
			return err
		}
		if len(ring.Keys()) == 0 {
			// Every signature would be an unknown key, and no record used.
			return fmt.Errorf("the key ring %s has no keys to verify the ledger with: pass --keys DIR, or --hash-only", lf.keysDir())
		}
		opts.Verify.Keys = ring
		opts.Verify.Rules = verify.NewRules(pinned.NewPacks(st))
	}
	rep, err := replay.Backtest(ctx, st, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := m.printJSON(rep); err != nil {
			return err
		}
	} else if err := printBacktest(m, rep); err != nil {
		return err
	}
	if len(rep.Findings) > 0 {
		return &findingsError{len(rep.Findings)}
	}
	return nil
}

func printBacktest(m *Main, rep *replay.BacktestReport) error {
	w := m.Stdout
	fmt.Fprintf(w, "backtest of %s (%s) over tenant %s", rep.Candidate, rep.CandidateHash, rep.TenantID)
	if rep.DecisionKey != "" {
		fmt.Fprintf(w, ", decision key %s", rep.DecisionKey)
	}
	if rep.From != nil {
		fmt.Fprintf(w, ", from %s", rep.From.Format(time.RFC3339))
	}
	if rep.To != nil {
		fmt.Fprintf(w, ", to %s", rep.To.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	var skipped []string
	for _, k := range slices.Sorted(maps.Keys(rep.Skipped)) {
		skipped = append(skipped, fmt.Sprintf("%d %s", rep.Skipped[k], k))
	}
	fmt.Fprintf(w, "%d records: %d decided again, %d with another outcome; %d not used (failed verification)", rep.Records, rep.Decided, rep.Changed, rep.Excluded)
	if len(skipped) > 0 {
		fmt.Fprintf(w, "; skipped %s (not boundary checks)", strings.Join(skipped, ", "))
	}
	fmt.Fprintln(w)
	if err := printTransitions(w, rep.Transitions, "RECORDED\tCANDIDATE"); err != nil {
		return err
	}
	if len(rep.Findings) > 0 {
		fmt.Fprintf(w, "\n%d verification findings; the records they name were not used:\n", len(rep.Findings))
		for _, f := range rep.Findings {
			where := "tenant " + f.TenantID
			if f.Seq > 0 {
				where += fmt.Sprintf(" seq %d", f.Seq)
			}
			if f.RecordID != "" {
				where += " record " + f.RecordID
			}
			if f.TreeSize > 0 {
				where += fmt.Sprintf(" checkpoint %d", f.TreeSize)
			}
			fmt.Fprintf(w, "%s\t%s: %s\n", f.Kind, where, f.Detail)
		}
	}
	return nil
}

// printTransitions prints a table of outcome transitions (head names the
// two outcome columns) and the errors they hold.
func printTransitions(w io.Writer, ts []*replay.Transition, head string) error {
	if len(ts) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, head+"\tCOUNT\tEXAMPLES\tRULES")
	for _, t := range ts {
		var rules []string
		for _, r := range slices.Sorted(maps.Keys(t.RulesFired)) {
			rules = append(rules, fmt.Sprintf("fires %s (%d)", r, t.RulesFired[r]))
		}
		for _, r := range slices.Sorted(maps.Keys(t.RulesCleared)) {
			rules = append(rules, fmt.Sprintf("no longer fires %s (%d)", r, t.RulesCleared[r]))
		}
		to := t.To
		if !t.Changed() {
			to += " (unchanged)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.From, to, t.Count, strings.Join(t.Examples, " "), strings.Join(rules, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range ts {
		for _, e := range t.Errors {
			fmt.Fprintf(w, "error: %s\n", e)
		}
	}
	return nil
}
