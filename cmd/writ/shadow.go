package main

import (
	"context"
	"fmt"
	"time"

	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/replay"
)

// shadow reports what shadow packs (writ serve --shadow-pack) decided,
// compared with what was enforced.
func (m *Main) shadow(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "report" {
		return usagef("usage: writ shadow report --tenant T [--pack-hash H] [--decision-key K] [--from TIME] [--to TIME] [--json] [--data DIR | --store URL]")
	}
	fs := m.flags("shadow report", "--tenant T [--pack-hash H] [--decision-key K] [--from TIME] [--to TIME] [--json] [--data DIR | --store URL]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	var q ledger.ShadowQuery
	fs.StringVar(&q.TenantID, "tenant", "", "tenant (required)")
	fs.StringVar(&q.PackHash, "pack-hash", "", "only this shadow pack (sha256:…)")
	fs.StringVar(&q.DecisionKey, "decision-key", "", "only this decision key")
	from := fs.String("from", "", "decisions at or after this time (RFC 3339)")
	to := fs.String("to", "", "decisions before this time (RFC 3339)")
	examples := fs.Int("examples", 3, "example record ids per transition")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if q.TenantID == "" || fs.NArg() != 0 || *examples < 1 {
		return usagef("usage: writ shadow report --tenant T [--pack-hash H] [--decision-key K] [--from TIME] [--to TIME] [--json]")
	}
	if err := parseWindow(*from, *to, &q.From, &q.To); err != nil {
		return err
	}
	st, err := openExisting(*data, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := replay.Shadow(ctx, st, q, *examples)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(rep)
	}
	w := m.Stdout
	fmt.Fprintf(w, "shadow decisions of tenant %s", rep.TenantID)
	if rep.DecisionKey != "" {
		fmt.Fprintf(w, ", decision key %s", rep.DecisionKey)
	}
	if rep.From != nil {
		fmt.Fprintf(w, ", from %s", rep.From.Format(time.RFC3339))
	}
	if rep.To != nil {
		fmt.Fprintf(w, ", to %s", rep.To.Format(time.RFC3339))
	}
	fmt.Fprintf(w, ": %d, %d with another outcome than enforced\n", rep.Decisions, rep.Changed)
	for _, p := range rep.Packs {
		fmt.Fprintf(w, "  shadow pack %s (%s): %s\n", p.Pack, p.PackHash, count(p.Decisions, "decision"))
	}
	return printTransitions(w, rep.Transitions, "ENFORCED\tSHADOW")
}
