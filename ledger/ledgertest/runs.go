package ledgertest

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
)

// testRuns starts a run, appends events with records (two in one
// transaction) and reads them back in order; runs are per tenant.
func testRuns(t *testing.T, st ledger.Store) {
	ctx := t.Context()
	at := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	start := &ledger.RunEvent{TenantID: "acme", RunID: "run_1", Kind: ledger.RunStarted, At: at, Data: json.RawMessage(`{"workflow_id":"w"}`)}
	if err := st.StartRun(ctx, start); err != nil {
		t.Fatalf("StartRun = %v", err)
	}
	if err := st.StartRun(ctx, &ledger.RunEvent{TenantID: "acme", RunID: "run_1", Kind: ledger.RunStarted, At: at}); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("StartRun(same run) = %v, want ECONFLICT", err)
	}
	es := entries(records("acme", 1, 2)...)
	for i, e := range es {
		e.RunEvent = &ledger.RunEvent{TenantID: "acme", RunID: "run_1", Kind: ledger.StepAttempt, StepID: "s", At: at.Add(time.Duration(i+1) * time.Second), Data: json.RawMessage(`{"n":` + string(rune('1'+i)) + `}`)}
	}
	mustAppend(t, st, es...)
	evs, err := st.RunEvents(ctx, "acme", "run_1")
	if err != nil {
		t.Fatalf("RunEvents = %v", err)
	}
	if len(evs) != 3 || evs[0].Kind != ledger.RunStarted || evs[1].Seq != 2 || evs[2].Seq != 3 ||
		evs[1].RecordID != es[0].Record.RecordID || evs[2].RecordID != es[1].Record.RecordID ||
		string(evs[2].Data) != `{"n":2}` || evs[2].StepID != "s" || !evs[1].At.Equal(at.Add(time.Second)) {
		t.Errorf("RunEvents = %+v", evs)
	}
	if _, err := st.RunEvents(ctx, "globex", "run_1"); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("RunEvents(another tenant) = %v, want ENOTFOUND", err)
	}
	if _, err := st.RunEvents(ctx, "acme", "run_nope"); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("RunEvents(unknown run) = %v, want ENOTFOUND", err)
	}
	// RunStart: the run's first event alone, as RunEvents has it.
	if first, err := st.RunStart(ctx, "acme", "run_1"); err != nil || !reflect.DeepEqual(*first, evs[0]) {
		t.Errorf("RunStart = %+v, %v; want %+v", first, err, evs[0])
	}
	if _, err := st.RunStart(ctx, "globex", "run_1"); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("RunStart(another tenant) = %v, want ENOTFOUND", err)
	}
	if _, err := st.RunStart(ctx, "acme", "run_nope"); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("RunStart(unknown run) = %v, want ENOTFOUND", err)
	}

	// RunIDs: every run once (not once per event), by id, per tenant,
	// after a run id, at most limit.
	for _, id := range []string{"run_0", "run_b", "run_a"} {
		if err := st.StartRun(ctx, &ledger.RunEvent{TenantID: "acme", RunID: id, Kind: ledger.RunStarted, At: at, Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("StartRun(%s) = %v", id, err)
		}
	}
	if err := st.StartRun(ctx, &ledger.RunEvent{TenantID: "globex", RunID: "run_9", Kind: ledger.RunStarted, At: at, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tenant, after string
		limit         int
		want          []string
	}{
		{"acme", "", 10, []string{"run_0", "run_1", "run_a", "run_b"}},
		{"acme", "", 2, []string{"run_0", "run_1"}},
		{"acme", "run_1", 10, []string{"run_a", "run_b"}},
		{"acme", "run_b", 10, nil},
		{"globex", "", 10, []string{"run_9"}},
		{"umbrella", "", 10, nil},
	} {
		got, err := st.RunIDs(ctx, tt.tenant, tt.after, tt.limit)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("RunIDs(%s, after %q, %d) = %v, %v; want %v", tt.tenant, tt.after, tt.limit, got, err, tt.want)
		}
	}
}
