package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/replay"
)

// replay re-runs recorded decisions on their pinned inputs: one record,
// the records of a trace, or every record of a tenant.
func (m *Main) replay(ctx context.Context, args []string) error {
	fs := m.flags("replay", "--tenant T [--data DIR | --store URL] [--pack DIR] [--json] (RECORD_ID | --trace TRACE_ID | --all | --sample RATE) | --record [--server URL] (RECORD_ID | --all | --sample RATE)")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	tenant := fs.String("tenant", "", "tenant (required)")
	trace := fs.String("trace", "", "replay every record of this trace id")
	all := fs.Bool("all", false, "replay every record of the tenant; print the summary and every record that is not replay_equal")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	packDir := fs.String("pack", "", "what-if: replay under this pack instead of the pack each record pins")
	workers := fs.Int("workers", 0, "records replayed at once with --all or --trace (default 4 × GOMAXPROCS)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the replay to this file")
	sample := fs.Float64("sample", 0, "replay the records of the tenant in this sample (0 to 1 of its records, the same records every time; see docs/replay.md)")
	record := fs.Bool("record", false, "have the server at --server replay each record and seal the result as a record (replay.last_status)")
	server := fs.String("server", m.Getenv("WRIT_SERVER"), "with --record: writ server URL (or $WRIT_SERVER); the API key comes from $WRIT_API_KEY")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *sample < 0 || *sample > 1 {
		return usagef("--sample must be from 0 to 1")
	}
	if *record {
		return m.replayRecorded(ctx, *server, *tenant, fs.Args(), *all, *sample)
	}
	modes := 0
	for _, on := range []bool{fs.NArg() == 1, *trace != "", *all, *sample > 0} {
		if on {
			modes++
		}
	}
	if *tenant == "" || fs.NArg() > 1 || modes != 1 || *workers < 0 {
		return usagef("usage: writ replay --tenant T [--data DIR | --store URL] [--pack DIR] [--json] (RECORD_ID | --trace TRACE_ID | --all)")
	}
	opts := replay.Options{Workers: *workers}
	if *packDir != "" {
		pol, err := loadPolicy(*packDir)
		if err != nil {
			return err
		}
		opts.Pack = pol
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	st, err := openExisting(*data, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	rp := replay.New(st, opts)

	var results []*replay.Result
	switch {
	case *all:
		return m.replayTenant(ctx, rp, *tenant, *asJSON, 0)
	case *sample > 0:
		return m.replayTenant(ctx, rp, *tenant, *asJSON, *sample)
	case *trace != "":
		if results, err = rp.Trace(ctx, *tenant, *trace); err != nil {
			return err
		}
	default:
		res, err := rp.Record(ctx, *tenant, fs.Arg(0))
		if err != nil {
			return err
		}
		results = []*replay.Result{res}
	}
	if *asJSON {
		if *trace != "" {
			err = m.printJSON(struct {
				Results []*replay.Result `json:"results"`
			}{results})
		} else {
			err = m.printJSON(results[0])
		}
		if err != nil {
			return err
		}
	} else {
		for _, res := range results {
			printResult(m.Stdout, res)
		}
	}
	var bad int
	for _, res := range results {
		// An erased input is not a finding: the record verifies, and the
		// erasure that removed its input is itself a record.
		if res.Status != replay.StatusEqual && res.Status != replay.StatusInputsErased {
			bad++
		}
	}
	if bad > 0 {
		return &findingsError{bad}
	}
	return nil
}

// replayTenant replays every record of the tenant, printing each that is
// not replay_equal as it comes, then the summary.
func (m *Main) replayTenant(ctx context.Context, rp *replay.Replayer, tenant string, asJSON bool, sample float64) error {
	start := time.Now()
	first := true
	if asJSON {
		fmt.Fprint(m.Stdout, `{"results":[`)
	}
	each := func(res *replay.Result) error {
		if res.Status == replay.StatusEqual {
			return nil
		}
		if !asJSON {
			printResult(m.Stdout, res)
			return nil
		}
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if !first {
			fmt.Fprint(m.Stdout, ",")
		}
		first = false
		_, err = fmt.Fprintf(m.Stdout, "\n%s", b)
		return err
	}
	var sum *replay.Summary
	var err error
	if sample > 0 {
		sum, _, err = rp.Sample(ctx, tenant, sample, 0, each)
	} else {
		sum, err = rp.Tenant(ctx, tenant, each)
	}
	if err != nil {
		if asJSON {
			fmt.Fprintln(m.Stdout, "]}")
		}
		return err
	}
	took := time.Since(start)
	rate := float64(sum.Records) / took.Seconds()
	if asJSON {
		b, err := json.Marshal(struct {
			*replay.Summary
			TookMS           int64   `json:"took_ms"`
			RecordsPerSecond float64 `json:"records_per_second"`
		}{sum, took.Milliseconds(), rate})
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "\n],\"summary\":%s}\n", b)
	} else {
		erased := ""
		if sum.InputsErased > 0 {
			erased = fmt.Sprintf(", %d inputs_erased", sum.InputsErased)
		}
		fmt.Fprintf(m.Stdout, "replayed %s of tenant %s in %s (%.0f records/s): %d replay_equal, %d diff, %d error%s\n",
			count(sum.Records, "record"), tenant, took.Round(time.Millisecond), rate, sum.Equal, sum.Diff, sum.Errors, erased)
		if len(sum.Classes) > 0 {
			fmt.Fprintf(m.Stdout, "records by class of difference: %s\n", classCounts(sum.Classes))
		}
	}
	if bad := sum.Diff + sum.Errors; bad > 0 {
		return &findingsError{int(bad)}
	}
	return nil
}

// printResult prints one replay result: a line for the record, then one
// line per difference.
func printResult(w io.Writer, res *replay.Result) {
	what := res.Kind
	if res.DecisionKey != "" {
		what += " " + res.DecisionKey
	}
	if res.Seq > 0 {
		what += fmt.Sprintf(", seq %d", res.Seq)
	}
	id := res.RecordID
	if id == "" {
		id = "(unreadable record)"
	}
	line := fmt.Sprintf("%s (%s): %s", id, strings.TrimSpace(what), res.Status)
	if len(res.Classes) > 0 {
		line += " [" + strings.Join(res.Classes, ", ") + "]"
	}
	fmt.Fprintln(w, line)
	for _, d := range res.Differences {
		where := d.Path
		if d.Input != "" {
			if where != "" {
				where += " "
			}
			where += "(" + d.Input + ")"
		}
		text := d.Detail
		if d.Recorded != nil || d.Replayed != nil {
			change := fmt.Sprintf("%s → %s", orAbsent(d.Recorded), orAbsent(d.Replayed))
			if text == "" {
				text = change
			} else {
				text = change + ": " + text
			}
		}
		fmt.Fprintf(w, "  %-24s %s: %s\n", d.Class, where, text)
	}
	for _, ref := range res.Erased {
		fmt.Fprintf(w, "  erased input %s\n", ref)
	}
	if res.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", res.Error)
	}
}

// orAbsent shows a JSON value, shortened, or "(absent)".
func orAbsent(v json.RawMessage) string {
	if v == nil {
		return "(absent)"
	}
	if r := []rune(string(v)); len(r) > 120 {
		return string(r[:117]) + "..."
	}
	return string(v)
}

// classCounts lists the records of each class of difference: tampering
// first, then the classes of a changed input, then changed_record, and
// any class this list does not know last, by name.
func classCounts(classes map[string]int64) string {
	order := []string{replay.ClassTamper, replay.ClassPolicy, replay.ClassEvidence, replay.ClassToolTranscript,
		replay.ClassCompiledContext, replay.ClassScorecard, replay.ClassHistory, replay.ClassRecord}
	for _, c := range slices.Sorted(maps.Keys(classes)) {
		if !slices.Contains(order, c) {
			order = append(order, c)
		}
	}
	var parts []string
	for _, c := range order {
		if n := classes[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return strings.Join(parts, ", ")
}

// replayRecorded has the server replay records of the tenant and seal
// each result as a record: one record, every record (--all) or a sample
// of them (--sample, the same sample replay.Sampled draws). A replay
// result's own record is never replayed this way.
func (m *Main) replayRecorded(ctx context.Context, server, tenant string, args []string, all bool, sample float64) error {
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	if (len(args) == 1) == (all || sample > 0) || len(args) > 1 || all && sample > 0 {
		return usagef("usage: writ replay --record [--server URL] [--tenant T] (RECORD_ID | --all | --sample RATE)")
	}
	cl := m.client(serverFlags{server: &server, tenant: &tenant})
	var ids []string
	if len(args) == 1 {
		ids = args
	} else {
		q := writ.RecordQuery{TenantID: tenant, Limit: 1000}
		for {
			page, err := cl.Records(ctx, q)
			if err != nil {
				return err
			}
			for _, r := range page.Records {
				if replay.KindOf(r.Record.DecisionKey) == replay.KindReplayResult || sample > 0 && !replay.Sampled(r.Record.RecordID, sample) {
					continue
				}
				ids = append(ids, r.Record.RecordID)
			}
			if page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
	}
	counts := map[string]int{}
	for _, id := range ids {
		ack, err := cl.RecordReplay(ctx, &writ.ReplayResult{TenantID: tenant, RecordID: id})
		if err != nil {
			return fmt.Errorf("record %s: %w", id, err)
		}
		counts[ack.Outcome]++
		if ack.Outcome != replay.StatusEqual {
			fmt.Fprintf(m.Stdout, "%s: %s (recorded as %s)\n", id, ack.Outcome, ack.RecordID)
		}
	}
	fmt.Fprintf(m.Stdout, "replayed and recorded %s: %d replay_equal, %d diff, %d error\n", count(int64(len(ids)), "record"),
		counts[replay.StatusEqual], counts[replay.StatusDiff], counts[replay.StatusError])
	if bad := counts[replay.StatusDiff] + counts[replay.StatusError]; bad > 0 {
		return &findingsError{bad}
	}
	return nil
}
